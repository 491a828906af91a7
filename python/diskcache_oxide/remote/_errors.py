"""The errors a Redis call raises, and the one place a redis-py error becomes one of them
(D-061, issue 29).

- A redis-py connection error or timeout reaches the caller as :class:`ServerConnectionError`
  or :class:`ServerTimeout`: each a :class:`~diskcache_oxide.errors.CacheError` *and* the
  redis-py error it replaces (so ``except redis.ConnectionError`` in a worker loop still
  catches it), whose message says where, whether the call may have run and what to do.
- A TLS handshake that fails (``rediss://`` to a plain server; ``_tls``) raises
  :class:`ServerConnectionError` saying so, within the connect timeout.
- An error reply (``WRONGTYPE``, a Lua error, ``OOM``, ``READONLY``) raises
  :class:`ServerScriptError`; a :class:`WrongTypeError` names the key, which every script's
  ``guard`` (``_tokens``) puts in its error reply. A server that refuses an argument longer
  than its ``proto-max-bulk-len`` raises :class:`~diskcache_oxide.errors.ValueTooLargeError`.
- Fewer replicas than ``replicas`` acknowledging a write raise :class:`NotReplicatedError`
  (the link, ``_io``, raises it where it counts them).

``_mapped`` is the mapping of redis-py's errors. ``_retryable`` and ``_handshake_failure`` are
the tests it shares with the links' retry loop: a lost connection is repeated and, once the
link gives up, worded as one; a failed handshake is neither repeated nor worded as a lost
connection.

Every reply and every error passes through a link (``_io``), which calls ``_mapped``. This
module is below the links, so that the public errors (``diskcache_oxide.remote`` exports them)
and their wording need no link, and the links import them, never the other way.
"""

from __future__ import annotations

import ssl
import time
from typing import Any

import redis.exceptions as rx

from ..errors import CacheError, ValueTooLargeError
from ._members import key_of
from ._replies import excerpt
from ._requests import Command, Request, Script
from ._tls import _HandshakeFailed
from ._tokens import _KEY_IN_ERROR

__all__ = [
    "NotReplicatedError",
    "ServerConnectionError",
    "ServerScriptError",
    "ServerTimeout",
    "WrongTypeError",
]


class ServerConnectionError(CacheError, rx.ConnectionError):
    """The connection to the Redis server failed and repeating the request did not help (or
    was not safe). Also a ``redis.ConnectionError``."""


class ServerTimeout(CacheError, rx.TimeoutError):
    """The Redis server did not answer within the client's socket timeout. Also a
    ``redis.TimeoutError``."""


class NotReplicatedError(CacheError):
    """A write ran on the master, but fewer replicas than ``replicas`` acknowledged it within
    ``replica_timeout``: it may not survive a failover. ``acknowledged`` is how many did,
    ``reply`` the write's own reply."""

    def __init__(self, message: str, acknowledged: int, reply: Any) -> None:
        super().__init__(message)
        self.acknowledged = acknowledged
        self.reply = reply


class ServerScriptError(CacheError, rx.ResponseError):
    """The server answered a call with an error: its script failed (a Lua error, a key of the
    wrong type) or the server refused it (``OOM``, ``READONLY``, ``NOPERM``, ``BUSY``). Also a
    ``redis.ResponseError``. The message names the call and shows the server's words,
    escaped; ``reply`` is the server's error text."""

    def __init__(self, message: str, reply: str = "") -> None:
        super().__init__(message)
        self.reply = reply


class WrongTypeError(ServerScriptError):
    """A key of the namespace holds another type than this package stores there (written by
    something else). ``key`` is that Redis key (bytes), or None when the server did not say."""

    def __init__(self, message: str, reply: str = "", key: bytes | None = None) -> None:
        super().__init__(message, reply)
        self.key = key


def _escaped(text: str, room: int = 300) -> str:
    """A server's message, escaped (repr without its quotes) and cut to ``room``."""
    inner = repr(text[:room])[1:-1]
    return inner + ("..." if len(text) > room else "")


def _settings_of(client: Any) -> dict[str, Any]:
    getter = getattr(client, "get_connection_kwargs", None)
    if getter is not None:
        return dict(getter())
    manager = getattr(client, "nodes_manager", None)
    return dict(getattr(manager, "connection_kwargs", {}) or {})


def _where(client: Any) -> str:
    settings = _settings_of(client)
    if settings.get("path"):
        return f"the Redis server at unix://{settings['path']}"
    if getattr(client, "nodes_manager", None) is not None:
        return "a node of the Redis Cluster"
    return f"the Redis server at {settings.get('host', '?')}:{settings.get('port', '?')}"


def _tls_client(client: Any) -> bool:
    """Whether ``client`` connects with TLS (a blocking or asyncio client, or a cluster)."""
    settings = _settings_of(client)
    if settings.get("ssl"):
        return True
    pool = getattr(client, "connection_pool", None)
    kind = getattr(pool, "connection_class", None) or settings.get("connection_class")
    return isinstance(kind, type) and "SSL" in kind.__name__


def _handshake_failure(client: Any, exc: BaseException) -> bool:
    """Whether ``exc`` is a TLS handshake that failed (or never finished) while connecting:
    never repeated, and reported as what it is. Only errors raised while connecting count
    (redis-py says "connecting to"), so a TLS connection dropped later is repeated as any."""
    if isinstance(exc, _HandshakeFailed):
        return True
    text = str(exc)
    if isinstance(exc, rx.ConnectionError) and "connecting to" in text:
        context = exc.__cause__ or exc.__context__
        return isinstance(context, ssl.SSLError) or "SSL" in text
    # The asyncio client handshakes inside its connect timeout, as does a blocking client's
    # plain SSLConnection inside its socket timeout, and each then says only this.
    return isinstance(exc, rx.TimeoutError) and "Timeout connecting" in text and _tls_client(client)


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, rx.ConnectionError) and not isinstance(
        exc,
        (
            rx.AuthenticationError,
            rx.AuthorizationError,
            rx.MaxConnectionsError,
            ServerConnectionError,
            _HandshakeFailed,
        ),
    )


def _what(request: Request | None, call: str) -> str:
    """The call and request an error is about: "the 'add' call's 'set' script"."""
    head = f"the {call!r} call's " if call else "the "
    if isinstance(request, Script):
        return f"{head}{request.name!r} script"
    if isinstance(request, Command) and request.args:
        name = request.args[0]
        shown = name.decode("ascii", "replace") if isinstance(name, bytes) else str(name)
        return f"{head}{_escaped(shown, 40)} command"
    return f"{head}request"


#: What each part of a namespace is, by what follows the prefix (remote/_scripts.py's layout).
_PARTS = (
    (b"e:", "the entry of"),
    (b"g:", "the set of the members with a tag"),
    (b"Q:", "a queue's index"),
    (b"w:", "a queue's wake-up list"),
    (b"o:", "the reply kept for a repeated write"),
    (b"c:", "a claim"),
    (b"C:", "a claims namespace's index"),
    (b"W:", "a key's waiters' wake-up list"),
    (b"n:", "a key's waiter count"),
    (b"i", "the namespace's index"),
    (b"x", "the index of expiries"),
    (b"t", "the tags"),
    (b"r", "the revision counter"),
    (b"s", "the statistics"),
    (b"K", "the claims namespaces"),
)


def _key_named(key: bytes, base: bytes) -> str:
    """A Redis key of the namespace in words, escaped: what it is and, for an entry, the
    cache key it holds."""
    shown = excerpt(key, 120)
    if not key.startswith(base):
        return f"the key {shown}"
    rest = key[len(base) :]
    for part, words in _PARTS:
        if rest == part or (part.endswith(b":") and rest.startswith(part)):
            if part == b"e:":
                try:
                    return (
                        f"the key {shown} ({words} the cache key {excerpt(key_of(rest[2:]), 80)})"
                    )
                except Exception:  # noqa: BLE001 - a member this build cannot read: the raw key
                    return f"the key {shown} ({words} a cache key)"
            return f"the key {shown} ({words})"
    return f"the key {shown}"


def _reply_error(
    client: Any,
    exc: rx.ResponseError,
    write: bool | None,
    request: Request | None,
    call: str,
    base: bytes,
) -> BaseException:
    """Our error for an error reply: the call, the key for WRONGTYPE, the server's words."""
    text = str(exc)
    if text.startswith("DCO_DELIVERED"):
        return ServerScriptError(
            f"{_what(request, call)} was sent again with a request token whose reply had "
            "already been delivered (D-061); it was not run again. This is a bug of the "
            "client: please report it.",
            text,
        )
    if text.startswith("DCO_"):  # a script's own refusal, which its operation handles
        return exc
    if "invalid bulk length" in text or "invalid multibulk length" in text:
        return ValueTooLargeError(
            f"{_where(client)} refused {_what(request, call)}: an argument (a value) is longer "
            f"than it accepts (proto-max-bulk-len; the server said {_escaped(text, 120)!r}). "
            "Nothing was written and the call was not repeated. Store smaller values, or "
            "raise the server's limit (CONFIG SET proto-max-bulk-len)."
        )
    found = _KEY_IN_ERROR.search(text)
    key: bytes | None = None
    if found is not None:
        key = bytes.fromhex(found.group(1))
        text = text[: found.start()] + text[found.end() :]
    elif isinstance(request, Command) and len(request.args) > 1:
        arg = request.args[1]
        key = arg if isinstance(arg, bytes) else str(arg).encode()
    partial = (
        " A script stopped by an error keeps the writes it made before the error (Redis does "
        "not roll back), so the namespace may be partly changed."
        if write or isinstance(request, Command)
        else ""
    )
    said = _escaped(text)
    if text.startswith("WRONGTYPE"):
        named = "a key" if key is None else _key_named(key, base)
        return WrongTypeError(
            f"{_what(request, call)} on {_where(client)} met {named}, which holds another type "
            "of value than diskcache_oxide stores there (WRONGTYPE): something else wrote "
            f"under the namespace's prefix {excerpt(base, 80)}.{partial} Remove that key "
            "(redis-cli TYPE and DEL it) or give this cache another namespace. "
            f"(the server said: {said})",
            text,
            key,
        )
    hints = {
        "OOM": "the server is at its maxmemory: raise it, delete what is no longer needed, "
        "or move the cache to a server of its own whose maxmemory-policy may evict (jobs, "
        "claims, queues and schedules need noeviction: docs/guide-outgrowing.md)",
        "READONLY": "this server is a read-only replica: connect to its master",
        "NOPERM": "the client's ACL user lacks a permission this package needs (EVALSHA, "
        "SCRIPT LOAD and the commands of its scripts on the namespace's keys)",
        "BUSY": "another script is running on the server: wait, or SCRIPT KILL it",
        "NOSCRIPT": "the server forgot the script while it was sent; call again",
        "MISCONF": "the server cannot write its snapshot and refuses writes: see its log",
    }
    hint = next(
        (words for prefix, words in hints.items() if text.startswith(prefix)),
        "the server's data under the namespace may have been changed by something else than "
        "this package, or the server is not one this package supports; its log may say more",
    )
    where = "" if key is None else f" (about {_key_named(key, base)})"
    return ServerScriptError(
        f"{_what(request, call)} failed on {_where(client)}{where}: {said}.{partial} What to "
        f"do: {hint}.",
        text,
    )


def _mapped(
    client: Any,
    exc: BaseException,
    write: bool | None,
    tries: int,
    began: float,
    request: Request | None = None,
    call: str = "",
    base: bytes = b"",
) -> BaseException:
    """Our error for a redis-py error (``exc`` itself for any other): the one place a
    connection error, a timeout, a failed TLS handshake or an error reply becomes the caller's
    error."""
    if isinstance(exc, (ServerTimeout, ServerConnectionError, ServerScriptError, CacheError)):
        return exc
    where = _where(client)
    if isinstance(exc, rx.ResponseError):
        return _reply_error(client, exc, write, request, call, base)
    if _handshake_failure(client, exc):
        settings = _settings_of(client)
        timeout = getattr(exc, "timeout", None) or settings.get("socket_connect_timeout")
        happened = (
            f"the TLS handshake with {where} failed"
            if not isinstance(exc, rx.TimeoutError)
            else f"connecting to {where} over TLS did not finish (the TLS handshake got no "
            "answer, or the server is unreachable)"
        )
        return ServerConnectionError(
            f"{happened} within the connect timeout ({timeout} s; socket_connect_timeout): "
            f"{_escaped(str(exc), 200)}. A server that does not speak TLS never answers a TLS "
            "hello, so check the URL: rediss:// is for a TLS port (tls-port), redis:// for a "
            "plain one; else check the certificates (ssl_ca_certs=..., ssl_cert_reqs=...). "
            "Nothing was sent and the call was not repeated."
        )
    if write is None:
        effect = "The command may or may not have run on the server."
    elif write:
        effect = (
            "The write may or may not have been applied; calling again is a new write (a push "
            "would be pushed twice), so check before repeating one that must not be doubled."
        )
    else:
        effect = "It only read, so it is safe to call again."
    if isinstance(exc, rx.TimeoutError):
        timeout = _settings_of(client).get("socket_timeout")
        return ServerTimeout(
            f"{where} did not answer within the client's socket timeout ({timeout} s: "
            "RedisCache(timeout=...) or the client's socket_timeout) and the call was not "
            "repeated. The server may be stopped (SIGSTOP), overloaded, running a long script "
            f"or cut off by the network. {effect} A write sent before the timeout can still be "
            "applied when the server resumes. Check the server (redis-cli -h ... PING, its "
            f"log), or raise the timeout if it is merely slow. ({exc})"
        )
    if _retryable(exc):
        took = time.monotonic() - began
        repeated = (
            f"after {tries} tries in {took:.1f} s (reconnect_for) "
            if tries > 1
            else "(not repeated) "
        )
        return ServerConnectionError(
            f"lost the connection to {where} {repeated}({exc}). {effect} Check that the server "
            "is running and reachable; a worker loop should catch redis.ConnectionError, wait "
            "and go on."
        )
    return exc
