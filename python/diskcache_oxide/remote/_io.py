"""A Redis operation written once and run on either client (issue 21, D-058, after D-052),
with the faults of a real server handled in one place (D-061).

An *operation* is a generator that performs no I/O: it yields each request it needs, a
:class:`Script` of the namespace or one plain :class:`Command`, and is sent the reply (or has
the error thrown into it, so it can handle one where it means something). What it returns is
the call's result. :class:`Link` runs operations on a blocking redis-py client (``Redis`` or
``RedisCluster``); :class:`AsyncLink` runs the same operations on redis-py's asyncio client.
So the encoding, the decoding, the retries after a lost race and every error message live
once, in the operation, and the two faces differ only in ``link.run(op)`` and
``await alink.run(op)``.

A script is registered once per link (redis-py sends it by its SHA and loads it again on a
``NOSCRIPT`` reply). Every script of a namespace gets the namespace's index as its only key,
so that a cluster routes it to the namespace's slot (every key the script touches carries the
same hash tag), and the namespace's prefix as its first argument.

**Faults (D-061).** A request whose reply is lost may or may not have run on the server, and
repeating a script that pushes, takes, replaces or acquires would do it twice. So:

- A *write* script (every script not in :data:`READ_SCRIPTS`, or those named in ``writes``)
  carries a request token, ``<session>:<sequence>``, as its last argument. The link wraps the
  script's source so that, atomically with the write, it keeps its reply under
  ``<prefix>o:<session>`` (one key per concurrent caller, the last reply only, for
  :data:`REPLAY_MS`); the same token sent again returns the kept reply and writes nothing. So
  a write is safe to repeat, whoever repeats it: this link, redis-py's own ``Retry`` on a
  user's client, or ``RedisCluster``'s retries while it follows a failover. The wrapper takes
  the token off ``ARGV`` before the script's own code runs, which sees what it always saw.
- The link repeats a request after a ``ConnectionError`` (the connection dropped, was refused or
  the server is loading its data) for up to ``reconnect_for`` seconds (:data:`RECONNECT_FOR`),
  the pauses doubling from 50 ms to 1 s: reads and tokened writes always, a plain
  :class:`Command` only if it says it is ``idempotent``. It never repeats after a timeout: a
  server that does not answer within the socket timeout gets no second wait.
- A redis-py connection error or timeout reaches the caller as :class:`ServerConnectionError`
  or :class:`ServerTimeout`: each a :class:`~diskcache_oxide.errors.CacheError` *and* the
  redis-py error it replaces (so ``except redis.ConnectionError`` in a worker loop still
  catches it), whose message says where, whether the call may have run and what to do.
- ``replicas=n`` sends ``WAIT n replica_timeout`` after every write script, on the connection
  that ran it (the script and the ``WAIT`` in one pipeline, on the master of the namespace's
  slot), so that a write that returns has reached ``n`` replicas; fewer raise
  :class:`NotReplicatedError`, except for a write that hands data to the caller
  (:data:`CONSUMING_SCRIPTS`), which returns it with a warning. Reads send no ``WAIT``.

**Clear errors (issue 29, D-061).** Every reply and every error passes through here, so it is
here that they are checked and named: a reply of the wrong shape for its request (each
script's and command's :class:`Shape` is declared beside it) raises
:class:`~diskcache_oxide.errors.UnexpectedReplyError`; an argument longer than the server's
``proto-max-bulk-len`` raises :class:`~diskcache_oxide.errors.ValueTooLargeError` before it
is sent; a TLS handshake that fails (``rediss://`` to a plain server) raises
:class:`ServerConnectionError` saying so, within the connect timeout; an error reply
(``WRONGTYPE``, a Lua error, ``OOM``, ``READONLY``) raises :class:`ServerScriptError` (a
``WrongTypeError`` names the key). A write whose reply was large keeps only a marker once
the reply has arrived (:data:`KEEP_LIMIT`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import ssl
import threading
import time
from collections.abc import Callable, Collection, Generator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import redis.connection
import redis.exceptions as rx

from ..errors import CacheError, UnexpectedReplyError, ValueTooLargeError
from ._members import key_of

__all__ = [
    "CONNECT_TIMEOUT",
    "KEEP_LIMIT",
    "RECONNECT_FOR",
    "REPLAY_MS",
    "READ_SCRIPTS",
    "CONSUMING_SCRIPTS",
    "AsyncLink",
    "Command",
    "Link",
    "NotReplicatedError",
    "Op",
    "Request",
    "Script",
    "ServerConnectionError",
    "ServerScriptError",
    "ServerTimeout",
    "Shape",
    "TLSConnection",
    "WrongTypeError",
    "excerpt",
]

R = TypeVar("R")

log = logging.getLogger("diskcache_oxide.remote")

Arg = bytes | str | int | float

#: How long (seconds) a link goes on repeating a request after ConnectionErrors, by default:
#: long enough for a server restarted with its AOF, or a cluster failing over with a short
#: node timeout, to answer again. The pauses double from 50 ms up to 1 s.
RECONNECT_FOR = 10.0

#: How long (ms) a write's reply is kept for a repeat of the same request token: longer than any
#: retry window (this link's, redis-py's backoff, a cluster's failover); the key is one per
#: concurrent caller and holds only its last reply.
REPLAY_MS = 120_000

#: How long (seconds) a client opened from a URL waits to connect, the TLS handshake included,
#: when its socket timeout is longer: a plain server given a TLS hello never answers it, and
#: that should not take the socket timeout (60 s by default) to say.
CONNECT_TIMEOUT = 10.0

#: A write's reply longer than this (bytes of strings in it) is kept on the server only until
#: it has arrived: the link then replaces the kept reply with a marker, so a popped 100 MB
#: value does not stay on the server for REPLAY_MS after its caller has it (issue 29).
KEEP_LIMIT = 16 * 1024

#: The least ``proto-max-bulk-len`` a server accepts (1 MiB): an argument no longer than this
#: always fits, so only a longer one makes the link ask the server for its limit.
_MIN_BULK_LIMIT = 1024 * 1024

#: The scripts that only read (of ``_scripts.SCRIPTS`` and ``CLAIM_SCRIPTS``): sent as they
#: are, repeated freely, never followed by ``WAIT``. Every other script is a *write*: it carries
#: a request token and, with ``replicas``, is followed by ``WAIT``, so a script added later is
#: safe to repeat unless it is named here. (``get`` counts statistics and ``peekitem``/``list``
#: remove expired entries: repeating those is harmless, and they need no replica.)
READ_SCRIPTS = frozenset(
    {
        # the cache's (remote._scripts.SCRIPTS)
        *("get", "get_many", "get_revision", "peek", "peekitem"),
        # the claims' (remote.claims.LINKED)
        *("claim_holder", "claim_list"),
        # the jobs' (remote._job_scripts.JOB_SCRIPTS)
        *("counts", "info", "list", "queues"),
    }
)


#: The writes that remove data and hand it to the caller (a pull, a pull's take, a pop). When fewer
#: replicas than asked acknowledge one, the link returns its reply with a warning instead of
#: raising: the removal has happened on the master, and raising would lose the item for the
#: caller; if a failover undoes the removal, the item is delivered again (twice, never lost).
CONSUMING_SCRIPTS = frozenset({"pull", "take", "pop"})


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


# ---- what a reply must look like -----------------------------------------------------------


class Shape:
    """What the reply to one request must look like: ``test(reply, args)`` (``args`` the
    request's arguments, for a length that depends on them); ``text`` says it in words for the
    error. Declared beside each script (``_scripts.REPLIES``) and command (``_ops``)."""

    __slots__ = ("test", "text")

    def __init__(self, test: Callable[[Any, tuple[Any, ...]], bool], text: str) -> None:
        self.test = test
        self.text = text

    def __repr__(self) -> str:
        return f"Shape({self.text})"


def _matches(pattern: bytes) -> Callable[[Any, tuple[Any, ...]], bool]:
    compiled = re.compile(pattern)
    return lambda reply, args: type(reply) is bytes and compiled.fullmatch(reply) is not None


def _array(reply: Any) -> bool:
    return type(reply) is list or type(reply) is tuple


#: An integer reply; one that is 0 or more; 0 or 1.
INT = Shape(lambda reply, args: type(reply) is int, "an integer")
COUNT = Shape(lambda reply, args: type(reply) is int and reply >= 0, "an integer >= 0")
FLAG = Shape(lambda reply, args: type(reply) is int and reply in (0, 1), "0 or 1")
#: A bulk string; one of decimal digits; '' or digits (an expiry in ms); a queue item number.
BULK = Shape(lambda reply, args: type(reply) is bytes, "a string")
DIGITS = Shape(_matches(rb"-?[0-9]+"), "a decimal number")
MS = Shape(_matches(rb"(-?[0-9]+)?"), "'' or a decimal number")
NUMBER = Shape(_matches(rb"[0-9]{15}"), "a 15-digit number")


def nil_or(shape: Shape) -> Shape:
    """``shape``, or nil (None)."""
    return Shape(
        lambda reply, args: reply is None or shape.test(reply, args), f"nil or {shape.text}"
    )


def array(*shapes: Shape) -> Shape:
    """An array of exactly ``len(shapes)`` elements, each of its shape."""

    def test(reply: Any, args: tuple[Any, ...]) -> bool:
        return (
            _array(reply)
            and len(reply) == len(shapes)
            and all(shape.test(item, args) for shape, item in zip(shapes, reply, strict=True))
        )

    return Shape(test, f"an array of {len(shapes)} ({', '.join(shape.text for shape in shapes)})")


def array_of(
    shape: Shape, length: Callable[[tuple[Any, ...]], int] | None = None, multiple: int = 1
) -> Shape:
    """An array whose elements are each ``shape``: ``length(args)`` of them if given, else a
    multiple of ``multiple``."""

    def test(reply: Any, args: tuple[Any, ...]) -> bool:
        if not _array(reply):
            return False
        if length is not None and len(reply) != length(args):
            return False
        return len(reply) % multiple == 0 and all(shape.test(item, args) for item in reply)

    many = "as many as asked for" if length is not None else "any number"
    if multiple > 1:
        many = f"a multiple of {multiple}"
    return Shape(test, f"an array of {many} of {shape.text}")


def rows(head: tuple[Shape, ...], row: tuple[Shape, ...]) -> Shape:
    """An array of ``head``'s elements, then any number of rows of ``row``'s (a reply that
    lists records after a few fixed fields, as the jobs' take, info and list do)."""

    def test(reply: Any, args: tuple[Any, ...]) -> bool:
        if not _array(reply) or len(reply) < len(head):
            return False
        if (len(reply) - len(head)) % len(row):
            return False
        if not all(shape.test(item, args) for shape, item in zip(head, reply, strict=False)):
            return False
        rest = reply[len(head) :]
        return all(row[i % len(row)].test(item, args) for i, item in enumerate(rest))

    return Shape(
        test,
        f"an array of {len(head)} ({', '.join(shape.text for shape in head)}) then rows of "
        f"{len(row)} ({', '.join(shape.text for shape in row)})",
    )


def excerpt(value: Any, room: int = 160) -> str:
    """A short, escaped rendering of what a server sent, for an error message or a log: strings
    cut to 48 characters (their repr, so control characters and terminal escapes show as
    ``\\x1b``), arrays to 6 elements and 3 levels, the whole to ``room`` characters."""

    def shown(item: Any, depth: int) -> str:
        if isinstance(item, (bytes, bytearray, str)):
            head = item[:48]
            text = repr(bytes(head) if isinstance(head, bytearray) else head)
            return text + (f"...({len(item)} long)" if len(item) > 48 else "")
        if _array(item):
            if depth >= 3:
                return "[...]"
            inner = ", ".join(shown(part, depth + 1) for part in item[:6])
            more = f", ...({len(item)} items)" if len(item) > 6 else ""
            return f"[{inner}{more}]"
        if isinstance(item, BaseException):
            return f"{type(item).__name__}({shown(str(item), depth)})"
        return repr(item)[:48]

    text = shown(value, 0)
    return text if len(text) <= room else text[: room - 3] + "..."


def _escaped(text: str, room: int = 300) -> str:
    """A server's message, escaped (repr without its quotes) and cut to ``room``."""
    inner = repr(text[:room])[1:-1]
    return inner + ("..." if len(text) > room else "")


@dataclass(frozen=True, slots=True)
class Script:
    """Run the Lua script registered as ``name`` on the namespace: ``KEYS`` is the namespace's
    index, ``ARGV`` its prefix and then ``args`` (and, for a write, the request token)."""

    name: str
    args: tuple[Arg, ...] = ()


@dataclass(frozen=True, slots=True)
class Command:
    """Run one plain command, as ``client.execute_command(*args)``; every key it names must
    carry the namespace's hash tag. The reply is redis-py's raw reply for it (for ``BLPOP``,
    ``[key, value]`` or None). ``idempotent``: safe to send again after a lost reply (a read),
    so the link repeats it after a connection error. ``reply``: the reply's :class:`Shape`,
    checked before the operation sees it."""

    args: tuple[Arg, ...]
    idempotent: bool = False
    #: What its reply must look like (None: not checked; a command of this package names one).
    reply: Shape | None = None


Request = Script | Command

#: An operation returning ``R``: yields requests, is sent their replies.
Op = Generator[Request, Any, R]


def _base_keys(base: bytes) -> list[bytes]:
    return [base + b"i"]


# ---- request tokens ------------------------------------------------------------------------

_ONCE_HEAD = """\
local __token = table.remove(ARGV)
local __session, __seq = string.match(__token, '^(.+):(%d+)$')
local __done = ARGV[1] .. 'o:' .. __session
local __kept = redis.call('GET', __done)
if __kept then
  if string.sub(__kept, 1, 1) == 'd' then
    -- 'd' .. sequence: that request's (large) reply reached its caller, who replaced it with
    -- this marker; the same token again would be a bug, never a lost reply: run nothing
    if string.sub(__kept, 2) == __seq then
      return redis.error_reply('DCO_DELIVERED')
    end
  else
    local __was, __reply = cmsgpack.unpack(__kept)
    if __was == __seq then
      -- a repeat: the reply it already had, and one write, so that a WAIT on this connection
      -- covers the first run's writes too (they precede it in the replication stream)
      redis.call('PEXPIRE', __done, {ttl})
      return __reply
    end
  end
end
local function __op()
"""

_ONCE_TAIL = """
end
local __reply = __op()
redis.call('SET', __done, cmsgpack.pack(__seq, __reply), 'PX', {ttl})
return __reply
"""


def once(source: str) -> str:
    """``source`` made safe to repeat: its last ``ARGV`` is a request token
    ``<session>:<sequence>``, and a token seen before returns the reply it had (D-061)."""
    ttl = str(REPLAY_MS)
    return _ONCE_HEAD.replace("{ttl}", ttl) + source + _ONCE_TAIL.replace("{ttl}", ttl)


#: Every ``redis.call`` of a script goes through this (``guard``): an error reply of a command
#: (WRONGTYPE above all) is raised with the key it was about, hex-encoded (a key may hold any
#: byte, an error reply may not), so that the caller's error can name it.
_GUARD = """\
local function __dco_call(...)
  local __r = redis.pcall(...)
  if type(__r) == 'table' and __r.err then
    local __k = select(2, ...)
    if type(__k) == 'string' then
      local __hex = string.gsub(string.sub(__k, 1, 512), '.', function(c)
        return string.format('%02x', string.byte(c))
      end)
      error({err = __r.err .. ' (DCO_KEY ' .. __hex .. ')'})
    end
    error(__r)
  end
  return __r
end
"""

#: The key a guarded script's error reply names (hex), and the rest of the reply.
_KEY_IN_ERROR = re.compile(r" \(DCO_KEY ([0-9a-f]*)\)")


def guard(source: str) -> str:
    """``source`` with each ``redis.call`` made to name its key in an error reply."""
    return _GUARD + source.replace("redis.call(", "__dco_call(")


#: The shape of each script's reply, by the script's source text (so the same script linked
#: under another name, as ``remote.claims`` links the claims' scripts, is checked the same).
_REPLIES: dict[str, Shape] = {}


def expect(sources: Mapping[str, str], replies: Mapping[str, Shape]) -> None:
    """Declare the shape of the reply of each script of ``sources`` named in ``replies``: every
    link checks those replies before an operation sees them."""
    for name, shape in replies.items():
        _REPLIES[sources[name]] = shape


class _Session:
    __slots__ = ("name", "seq")

    def __init__(self) -> None:
        self.name = os.urandom(9).hex()
        self.seq = 0

    def token(self) -> str:
        self.seq += 1
        return f"{self.name}:{self.seq}"


class _Sessions:
    """Request-token sessions, one per concurrent caller: a call takes a free one and gives it
    back, so each session's calls are sequential and its kept reply is only ever the last."""

    __slots__ = ("_free", "_lock")

    def __init__(self) -> None:
        self._free: list[_Session] = []
        self._lock = threading.Lock()

    def take(self) -> _Session:
        with self._lock:
            return self._free.pop() if self._free else _Session()

    def give(self, session: _Session) -> None:
        with self._lock:
            self._free.append(session)


# ---- errors --------------------------------------------------------------------------------


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


class TLSConnection(redis.connection.SSLConnection):
    """redis-py's TLS connection, with the handshake bounded by the *connect* timeout (redis-py
    runs it under the socket timeout, so ``rediss://`` to a plain server waited 60 s and then
    looked like a stopped server) and a failed handshake reported as one. ``open_client``
    opens ``rediss://`` URLs on it."""

    def _connect(self) -> Any:
        # The TCP connection, under the connect timeout; then the handshake under it too.
        sock = redis.connection.Connection._connect(self)  # type: ignore[no-untyped-call]
        sock.settimeout(self.socket_connect_timeout)
        try:
            wrapped = self._wrap_socket_with_ssl(sock)  # type: ignore[no-untyped-call]
        except (OSError, rx.RedisError) as error:
            sock.close()
            raise _HandshakeFailed(
                f"{type(error).__name__}: {error}", self.socket_connect_timeout
            ) from error
        wrapped.settimeout(self.socket_timeout)
        return wrapped


class _HandshakeFailed(rx.ConnectionError):
    """Raised by :class:`TLSConnection`; mapped by ``_mapped`` (never repeated)."""

    def __init__(self, message: str, timeout: float | None) -> None:
        super().__init__(message)
        self.timeout = timeout


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


def _delay(tries: int, began: float, budget: float) -> float | None:
    """The pause before repeat number ``tries``, or None when the budget is spent."""
    delay = min(1.0, 0.05 * 2 ** (tries - 1))
    return None if time.monotonic() - began + delay > budget else delay


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


def _refused_as_long(exc: BaseException) -> bool:
    """Whether ``exc`` may be a server refusing a too long argument: it replies "invalid bulk
    length" and closes the connection, which the client may see first."""
    return isinstance(exc, rx.ConnectionError) or "invalid bulk length" in str(exc)


def _longest(args: tuple[Any, ...]) -> int:
    """The length of the longest string argument."""
    return max((len(arg) for arg in args if isinstance(arg, (bytes, str))), default=0)


def _limit_of(reply: Any) -> int:
    """``proto-max-bulk-len`` from a CONFIG GET reply (a dict, or a flat list); 0 if absent."""
    values = list(reply.values()) if isinstance(reply, dict) else list(reply or [])[1::2]
    for value in values:
        if isinstance(value, dict):  # a cluster's reply per node
            found = _limit_of(value)
            if found:
                return found
        try:
            return int(value)
        except (TypeError, ValueError):
            continue
    return 0


def _reply_size(reply: Any, limit: int = KEEP_LIMIT) -> int:
    """How many bytes of strings ``reply`` holds, counted until it passes ``limit``."""
    if isinstance(reply, (bytes, str)):
        return len(reply)
    total = 0
    if _array(reply):
        for item in reply:
            total += _reply_size(item, limit - total)
            if total > limit:
                break
    return total


# ---- the links -----------------------------------------------------------------------------


def _call_name(op: Any) -> str:
    """The name of the operation a generator runs (``add``, ``getitem``): errors name it."""
    return str(getattr(op, "__name__", "") or "")


class _Base:
    __slots__ = (
        "base",
        "client",
        "keys",
        "reconnect_for",
        "replica_timeout",
        "replicas",
        "_cluster",
        "_consumes",
        "_limit",
        "_scripts",
        "_sessions",
        "_shapes",
        "_writes",
    )

    def __init__(
        self,
        client: Any,
        base: bytes,
        sources: Mapping[str, str],
        *,
        writes: Collection[str] | None = None,
        replicas: int = 0,
        replica_timeout: float = 1.0,
        reconnect_for: float = RECONNECT_FOR,
    ) -> None:
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
            raise ValueError(f"replicas must be an int >= 0, not {replicas!r}")
        if not isinstance(replica_timeout, (int, float)) or not replica_timeout > 0:
            raise ValueError(
                f"replica_timeout must be a number of seconds > 0, not {replica_timeout!r}"
            )
        self.client = client
        self.base = base
        self.keys = _base_keys(base)
        self.replicas = replicas
        self.replica_timeout = float(replica_timeout)
        self.reconnect_for = float(reconnect_for)
        self._cluster = getattr(client, "nodes_manager", None) is not None or hasattr(
            client, "get_node_from_key"
        )
        self._writes = frozenset(sources) - READ_SCRIPTS if writes is None else frozenset(writes)
        self._consumes = CONSUMING_SCRIPTS & self._writes
        self._sessions = _Sessions()
        self._scripts = {
            name: client.register_script(guard(once(text) if name in self._writes else text))
            for name, text in sources.items()
        }
        self._shapes = {name: _REPLIES[text] for name, text in sources.items() if text in _REPLIES}
        #: The server's proto-max-bulk-len: None until a long argument asks, 0 if it won't say.
        self._limit: int | None = None

    def settings(self) -> dict[str, Any]:
        """The promises this link keeps (``replicas``, ``replica_timeout``,
        ``reconnect_for``), as keyword arguments: every other link of the same namespace, for
        other scripts or on the other client, is made with them, so the cache's settings hold
        for its claims and jobs too."""
        return {
            "replicas": self.replicas,
            "replica_timeout": self.replica_timeout,
            "reconnect_for": self.reconnect_for,
        }

    def _replicated(self, acknowledged: Any, reply: Any, name: str) -> Any:
        """``reply`` if ``acknowledged`` replicas are enough (or the write hands its data to the
        caller: then a warning), else a :class:`NotReplicatedError`."""
        if isinstance(acknowledged, BaseException):
            raise acknowledged
        if int(acknowledged) >= self.replicas:
            return reply
        if name in self._consumes:
            log.warning(
                "diskcache_oxide: the %r ran on the master but only %d of %d replicas "
                "acknowledged it within %s s; returning its result anyway (raising would lose "
                "it): if that master fails over now, the item may be delivered again",
                name,
                int(acknowledged),
                self.replicas,
                self.replica_timeout,
            )
            return reply
        raise NotReplicatedError(
            f"the {name!r} write ran on the master but only {acknowledged} of the {self.replicas} "
            f"replicas asked for (replicas={self.replicas}) acknowledged it within "
            f"replica_timeout={self.replica_timeout} s: it may not survive a failover of that "
            "master. Calling again writes it again (a push would be pushed twice); check the "
            "replicas (INFO replication), or lower replicas= or raise replica_timeout=.",
            int(acknowledged),
            reply,
        )

    def _checked(self, request: Request, reply: Any, call: str) -> Any:
        """``reply`` if it has the shape its request's replies have, else an
        :class:`UnexpectedReplyError` naming the call and showing an excerpt of it."""
        shape = request.reply if isinstance(request, Command) else self._shapes.get(request.name)
        if shape is None or shape.test(reply, request.args):
            return reply
        raise UnexpectedReplyError(
            f"{_where(self.client)} answered {_what(request, call)} with {excerpt(reply)}, "
            f"where Redis answers with {shape.text}. The server (or a proxy in front of it) "
            "does not speak to this client as Redis does; nothing was decoded from the reply, "
            "and a write may or may not have been applied. Check that the URL points at a "
            "Redis or Valkey server (redis-cli -h ... INFO server), with nothing between that "
            "rewrites replies."
        )

    def _too_large(self, request: Request, call: str, longest: int, limit: int) -> Exception:
        return ValueTooLargeError(
            f"{_what(request, call)} would send {longest:,} bytes in one argument (a value's "
            f"frame), more than {_where(self.client)} accepts in one (its proto-max-bulk-len "
            f"is {limit:,} bytes). Nothing was written and the call was not repeated. Store a "
            "smaller value (split it, or keep large blobs in a directory Cache or an object "
            "store and their names here), or raise the server's limit: CONFIG SET "
            f"proto-max-bulk-len {max(longest + 1024, 2 * limit)}."
        )

    def _limit_request(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """CONFIG GET's arguments, sent to the namespace's node of a cluster."""
        if not self._cluster:
            return ("proto-max-bulk-len",), {}
        node = self.client.get_node_from_key(self.keys[0])
        return ("proto-max-bulk-len",), {"target_nodes": node}

    def _marker(self, session: _Session) -> tuple[Any, ...]:
        """The command that replaces a delivered reply kept for ``session`` by a marker."""
        done = self.base + b"o:" + session.name.encode()
        return ("SET", done, f"d{session.seq}", "XX", "PX", REPLAY_MS)

    def _pipeline_parts(self, request: Script, token: str) -> tuple[Any, list[Any]]:
        script = self._scripts[request.name]
        args = [self.base, *request.args, token]
        evalsha = ["EVALSHA", script.sha, len(self.keys), *self.keys, *args]
        wait = ["WAIT", self.replicas, max(1, int(self.replica_timeout * 1000))]
        return script, [evalsha, wait]


_REROUTE = (rx.MovedError, rx.ClusterDownError, rx.TryAgainError)


class Link(_Base):
    """A namespace on a blocking redis-py client: runs operations, one request at a time.

    :param writes: the names of the scripts that write (default: every one not in
        :data:`READ_SCRIPTS`): they carry a request token and, with ``replicas``, are followed
        by ``WAIT``
    :param replicas: after each write, wait until this many replicas acknowledged it
    :param replica_timeout: the longest that wait, in seconds
    :param reconnect_for: how long to go on repeating a request after connection errors
    """

    __slots__ = ()

    def send(self, request: Request, call: str = "") -> Any:
        """One request's reply, checked, repeated after a connection error where that is safe.
        ``call`` names the operation in errors.

        :raises ServerConnectionError: the connection failed and repeating did not help (or
            the TLS handshake failed)
        :raises ServerTimeout: the server did not answer within the socket timeout
        :raises NotReplicatedError: fewer than ``replicas`` acknowledged a write
        :raises ValueTooLargeError: an argument is longer than the server accepts
        :raises UnexpectedReplyError: the reply is not of the request's shape
        :raises ServerScriptError: the server answered with an error
        """
        longest = _longest(request.args)
        if longest > _MIN_BULK_LIMIT:
            limit = self._bulk_limit()
            if limit and longest > limit:
                raise self._too_large(request, call, longest, limit)
        if isinstance(request, Command):
            reply = self._retrying(
                lambda: self.client.execute_command(*request.args),
                request.idempotent,
                None,
                request,
                call,
            )
            return self._checked(request, reply, call)
        if request.name not in self._writes:
            script = self._scripts[request.name]
            reply = self._retrying(
                lambda: script(keys=self.keys, args=[self.base, *request.args]),
                True,
                False,
                request,
                call,
            )
            return self._checked(request, reply, call)
        session = self._sessions.take()
        token = session.token()
        try:
            if self.replicas:
                reply = self._retrying(
                    lambda: self._write_and_wait(request, token), True, True, request, call
                )
            else:
                script = self._scripts[request.name]
                args = [self.base, *request.args, token]
                reply = self._retrying(
                    lambda: script(keys=self.keys, args=args), True, True, request, call
                )
            self._checked(request, reply, call)
            if _reply_size(reply) > KEEP_LIMIT:
                self._forget(session)
            return reply
        finally:
            self._sessions.give(session)

    def _forget(self, session: _Session) -> None:
        """The reply has arrived: replace what the server keeps of it by a marker (one try;
        if it fails, the kept reply merely lasts its REPLAY_MS)."""
        try:
            self.client.execute_command(*self._marker(session))
        except rx.RedisError as error:
            log.debug("diskcache_oxide: could not drop a delivered reply: %s", error)

    def _bulk_limit(self, fresh: bool = False) -> int:
        """The server's proto-max-bulk-len (asked once, or again with ``fresh``); 0 if it does
        not say (CONFIG refused, as managed services do)."""
        if self._limit is None or fresh:
            self._limit = 0
            try:
                args, kwargs = self._limit_request()
            except Exception:  # noqa: BLE001 - no limit known: the request itself will say
                return self._limit
            # Twice: a server that refused a long argument closed that connection, and the
            # pool may hand it out once more (the failure drops it).
            for _ in range(2):
                try:
                    self._limit = _limit_of(self.client.config_get(*args, **kwargs))
                    break
                except rx.ConnectionError:
                    continue
                except (rx.RedisError, TypeError, ValueError, AttributeError):
                    break
        return self._limit

    def _retrying(
        self,
        send: Callable[[], Any],
        safe: bool,
        write: bool | None,
        request: Request | None = None,
        call: str = "",
    ) -> Any:
        tries, began = 0, time.monotonic()
        while True:
            tries += 1
            try:
                return send()
            except (rx.ConnectionError, rx.TimeoutError, rx.ResponseError) as exc:
                if _refused_as_long(exc) and request is not None:
                    # A server closes the connection on an argument longer than its
                    # proto-max-bulk-len (and the limit may have changed): say that, at once.
                    longest = _longest(request.args)
                    if longest > _MIN_BULK_LIMIT:
                        limit = self._bulk_limit(fresh=True)
                        if limit and longest > limit:
                            raise self._too_large(request, call, longest, limit) from exc
                delay = _delay(tries, began, self.reconnect_for)
                if (
                    safe
                    and _retryable(exc)
                    and not _handshake_failure(self.client, exc)
                    and delay is not None
                ):
                    time.sleep(delay)
                    continue
                raise _mapped(
                    self.client, exc, write, tries, began, request, call, self.base
                ) from exc

    def _node_client(self) -> Any:
        if not self._cluster:
            return self.client
        node = self.client.get_node_from_key(self.keys[0])
        return self.client.get_redis_connection(node)

    def _refresh(self) -> None:
        if self._cluster:
            try:
                self.client.nodes_manager.initialize()
            except Exception:  # noqa: BLE001 - the next try reports what is wrong
                pass

    def _write_and_wait(self, request: Script, token: str) -> Any:
        """The write script and ``WAIT`` in one pipeline, on one connection to the master of
        the namespace's slot (``WAIT`` counts that connection's writes only)."""
        script, (evalsha, wait) = self._pipeline_parts(request, token)
        for attempt in range(8):
            try:
                node = self._node_client()
            except rx.SlotNotCoveredError:  # the slot's master failed and none took over yet
                time.sleep(0.05 * attempt)
                self._refresh()
                continue
            pipe = node.pipeline(transaction=False)
            pipe.execute_command(*evalsha)
            pipe.execute_command(*wait)
            try:
                reply, acknowledged = pipe.execute(raise_on_error=False)
            except rx.ConnectionError:
                self._refresh()
                raise
            if isinstance(reply, rx.NoScriptError):
                node.script_load(script.script)
                continue
            if self._cluster and isinstance(reply, _REROUTE):
                time.sleep(0.05 * attempt)
                self._refresh()
                continue
            if isinstance(reply, BaseException):
                raise reply
            return self._replicated(acknowledged, reply, request.name)
        raise ServerConnectionError(
            f"the {request.name!r} write could not reach the master of its slot (redirected or "
            "told the cluster is down 8 times); the cluster may be failing over: try again later"
        )

    def run(self, op: Op[R]) -> R:
        """Drive ``op`` to its end and return its result. An error of a request is thrown
        into the operation; one it does not catch propagates from here."""
        call = _call_name(op)
        reply: Any = None
        error: BaseException | None = None
        while True:
            try:
                request = op.send(reply) if error is None else op.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            error = None
            try:
                reply = self.send(request, call)
            except Exception as exc:
                reply, error = None, exc


class AsyncLink(_Base):
    """A namespace on redis-py's asyncio client: runs the same operations as :class:`Link`,
    awaiting each request, with the same tokens, repeats, errors and ``WAIT`` (``replicas``
    on an asyncio ``RedisCluster`` is not done yet: a ``NotImplementedError`` says so)."""

    __slots__ = ()

    def __init__(
        self,
        client: Any,
        base: bytes,
        sources: Mapping[str, str],
        *,
        writes: Collection[str] | None = None,
        replicas: int = 0,
        replica_timeout: float = 1.0,
        reconnect_for: float = RECONNECT_FOR,
    ) -> None:
        super().__init__(
            client,
            base,
            sources,
            writes=writes,
            replicas=replicas,
            replica_timeout=replica_timeout,
            reconnect_for=reconnect_for,
        )
        if self.replicas and self._cluster:
            raise NotImplementedError(
                "replicas= on redis-py's asyncio RedisCluster is not done yet (D-061): use the "
                "blocking RedisCluster client, or replicas=0"
            )

    async def send(self, request: Request, call: str = "") -> Any:
        """One request's reply (see :meth:`Link.send`)."""
        longest = _longest(request.args)
        if longest > _MIN_BULK_LIMIT:
            limit = await self._bulk_limit()
            if limit and longest > limit:
                raise self._too_large(request, call, longest, limit)
        if isinstance(request, Command):
            command = request.args
            reply = await self._retrying(
                lambda: self.client.execute_command(*command),
                request.idempotent,
                None,
                request,
                call,
            )
            return self._checked(request, reply, call)
        if request.name not in self._writes:
            script = self._scripts[request.name]
            reply = await self._retrying(
                lambda: script(keys=self.keys, args=[self.base, *request.args]),
                True,
                False,
                request,
                call,
            )
            return self._checked(request, reply, call)
        session = self._sessions.take()
        token = session.token()
        try:
            if self.replicas:
                reply = await self._retrying(
                    lambda: self._write_and_wait(request, token), True, True, request, call
                )
            else:
                script = self._scripts[request.name]
                args = [self.base, *request.args, token]
                reply = await self._retrying(
                    lambda: script(keys=self.keys, args=args), True, True, request, call
                )
            self._checked(request, reply, call)
            if _reply_size(reply) > KEEP_LIMIT:
                await self._forget(session)
            return reply
        finally:
            self._sessions.give(session)

    async def _forget(self, session: _Session) -> None:
        """See :meth:`Link._forget`."""
        try:
            await self.client.execute_command(*self._marker(session))
        except rx.RedisError as error:
            log.debug("diskcache_oxide: could not drop a delivered reply: %s", error)

    async def _bulk_limit(self, fresh: bool = False) -> int:
        """See :meth:`Link._bulk_limit`."""
        if self._limit is None or fresh:
            self._limit = 0
            try:
                if self._cluster:  # an asyncio cluster learns its nodes on its first command
                    await self.client.initialize()
                args, kwargs = self._limit_request()
            except Exception:  # noqa: BLE001 - no limit known: the request itself will say
                return self._limit
            for _ in range(2):
                try:
                    self._limit = _limit_of(await self.client.config_get(*args, **kwargs))
                    break
                except rx.ConnectionError:
                    continue
                except (rx.RedisError, TypeError, ValueError, AttributeError):
                    break
        return self._limit

    async def _retrying(
        self,
        send: Callable[[], Any],
        safe: bool,
        write: bool | None,
        request: Request | None = None,
        call: str = "",
    ) -> Any:
        tries, began = 0, time.monotonic()
        while True:
            tries += 1
            try:
                return await send()
            except (rx.ConnectionError, rx.TimeoutError, rx.ResponseError) as exc:
                if _refused_as_long(exc) and request is not None:
                    longest = _longest(request.args)
                    if longest > _MIN_BULK_LIMIT:
                        limit = await self._bulk_limit(fresh=True)
                        if limit and longest > limit:
                            raise self._too_large(request, call, longest, limit) from exc
                delay = _delay(tries, began, self.reconnect_for)
                if (
                    safe
                    and _retryable(exc)
                    and not _handshake_failure(self.client, exc)
                    and delay is not None
                ):
                    await asyncio.sleep(delay)
                    continue
                raise _mapped(
                    self.client, exc, write, tries, began, request, call, self.base
                ) from exc

    async def _write_and_wait(self, request: Script, token: str) -> Any:
        script, (evalsha, wait) = self._pipeline_parts(request, token)
        for _ in range(2):
            pipe = self.client.pipeline(transaction=False)
            pipe.execute_command(*evalsha)
            pipe.execute_command(*wait)
            reply, acknowledged = await pipe.execute(raise_on_error=False)
            if isinstance(reply, rx.NoScriptError):
                await self.client.script_load(script.script)
                continue
            if isinstance(reply, BaseException):
                raise reply
            return self._replicated(acknowledged, reply, request.name)
        raise rx.NoScriptError(f"the {request.name!r} script could not be loaded")

    async def run(self, op: Op[R]) -> R:
        """Drive ``op`` to its end and return its result (see :meth:`Link.run`)."""
        call = _call_name(op)
        reply: Any = None
        error: BaseException | None = None
        while True:
            try:
                request = op.send(reply) if error is None else op.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            error = None
            try:
                reply = await self.send(request, call)
            except Exception as exc:
                reply, error = None, exc
