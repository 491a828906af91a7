"""Opening the worker's store, and telling a store that can never work from one that is down
(issue 29, D-063).

A store URL that cannot be right (an unparsable port, a host name that does not resolve, a
``rediss://`` URL for a server that speaks plain Redis), or a server that refuses the
credentials or the database, will not get better by waiting: the worker says so in one line
and exits 1, so that its service manager shows the failure at once. A server that is down or
unreachable (connection refused, a timeout, a name server that answers "try again") may come
back: the worker tries again with a backoff, one line per attempt.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

__all__ = ["BACKOFF_MAX", "StoreRefused", "backoff", "check_url", "is_fatal", "reason"]

#: The longest wait between two attempts to reach a store that is down.
BACKOFF_MAX = 30.0

#: How long the checks of a URL wait for a server's answer.
CHECK_TIMEOUT = 5.0

#: The errno values of getaddrinfo for a name that does not exist (as opposed to EAI_AGAIN,
#: a name server that did not answer, which may pass).
_NO_SUCH_NAME = {
    code
    for code in (getattr(socket, "EAI_NONAME", None), getattr(socket, "EAI_NODATA", None))
    if code is not None
}

#: redis-py's errors in which the server refused the client (names, so that redis-py is not
#: imported for a directory): a wrong password or user, a missing ACL permission.
_REFUSALS = ("AuthenticationError", "AuthorizationError", "NoPermissionError")

#: The replies of a server that refuses the client, in a ``ResponseError``.
_REFUSAL_REPLIES = ("NOAUTH", "WRONGPASS", "NOPERM")


class StoreRefused(Exception):
    """The store can never work as given (see the module's docstring): exit 1, one line."""


def _chain(error: BaseException) -> Iterator[BaseException]:
    # The error and its causes and contexts, each once (a chain can loop).
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _refused(link: BaseException) -> bool:
    names = {kind.__name__ for kind in type(link).__mro__}
    if names.intersection(_REFUSALS):
        return True
    return "ResponseError" in names and str(link).startswith(_REFUSAL_REPLIES)


def is_fatal(error: BaseException, *, opening: bool) -> bool:
    """Whether ``error`` means the store can never work as given (True) or may work later
    (False: a server down, a timeout, a locked file).

    Refused credentials are fatal whenever they come (a password changed under a running
    worker). While the worker opens the store (``opening``) so are a URL that cannot be
    parsed, redis-py missing, any error reply (``ERR DB index is out of range``), a host name
    that does not exist and a TLS handshake that fails; once it runs, those are another
    job's or another moment's problem (a ResponseError for a full server's OOM), and the
    worker tries again."""
    for link in _chain(error):
        if isinstance(link, StoreRefused) or _refused(link):
            return True
        if not opening:
            continue
        if isinstance(link, (ValueError, TypeError, ImportError)):
            return True
        if any(kind.__name__ == "ResponseError" for kind in type(link).__mro__):
            return True
        if isinstance(link, socket.gaierror) and link.errno in _NO_SUCH_NAME:
            return True
        ssl = sys.modules.get("ssl")
        if ssl is not None and isinstance(link, ssl.SSLError):
            return True  # a certificate refused, a protocol that is not TLS
    return False


def reason(error: BaseException) -> str:
    """``error`` as one line: its type and message (the message's first line only: the
    backend's connection errors explain at length, and the worker's line says what to do)."""
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    if isinstance(error, StoreRefused):
        return first
    line = f"{type(error).__name__}: {first}".rstrip(": ")
    if any(_refused(link) for link in _chain(error)):
        line += (
            " (the server refused the client: check the user and password in the URL, "
            "redis://[USER]:PASSWORD@HOST:PORT/DB, and the user's ACL)"
        )
    return line


def check_url(target: Any) -> None:
    """Refuse a store URL that cannot be right, without waiting for a timeout: an unparsable
    port, a host name that does not resolve, and ``rediss://`` to a server that answers in
    plain Redis (its TLS handshake would only time out, a minute later).

    :raises StoreRefused: naming the problem and what to do
    """
    if not isinstance(target, str) or "://" not in target:
        return
    parts = urlsplit(target)
    scheme = parts.scheme.lower()
    if scheme not in ("redis", "rediss"):
        return
    try:
        port = parts.port or 6379
    except ValueError:
        raise StoreRefused(
            "the URL's port is not a number: write redis://[:PASSWORD@]HOST:PORT/DB"
        ) from None
    host = parts.hostname or "localhost"
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        if error.errno in _NO_SUCH_NAME:
            raise StoreRefused(
                f"the host name {host!r} does not resolve ({error.strerror}): check the URL"
            ) from None
        return  # the name server did not answer: the probe's retries will tell
    if scheme == "rediss" and _speaks_plain_redis(host, port):
        raise StoreRefused(
            f"the server at {host}:{port} speaks plain Redis, not TLS: use redis:// instead "
            "of rediss://, or turn TLS on at the server"
        )


def _speaks_plain_redis(host: str, port: int) -> bool:
    """Whether the server answers an inline ``PING`` sent in clear text as Redis does
    (``+PONG``, or ``-NOAUTH ...`` when it wants a password). A TLS server takes those bytes
    for a broken handshake and closes the connection or sends an alert; a server that is down
    or slow is not this check's business (False)."""
    try:
        with socket.create_connection((host, port), timeout=CHECK_TIMEOUT) as sock:
            sock.sendall(b"PING\r\n")
            reply = sock.recv(64)
    except OSError:
        return False
    return reply[:1] in (b"+", b"-")


def backoff(attempt: int) -> float:
    """Seconds to wait after the ``attempt``-th failure in a row (1, 2, 4, ... at most
    :data:`BACKOFF_MAX`)."""
    return min(BACKOFF_MAX, 2.0 ** max(0, attempt - 1))
