"""The TLS connection that ``rediss://`` URLs are opened on (issue 29, D-061): the handshake
bounded by the connect timeout, and a failed one reported as what it is.

redis-py runs the TLS handshake under the socket timeout, so ``rediss://`` to a server that does
not speak TLS (it never answers the hello) waited the socket timeout (60 s by default) and then
looked like a stopped server. A client opened from a URL connects within at most
:data:`CONNECT_TIMEOUT` (``cache.connect_timeout``), and :class:`TLSConnection` runs the
handshake within that connect timeout too and raises ``_HandshakeFailed`` when it fails, which
``_errors`` reports as a :class:`~._errors.ServerConnectionError` saying so and the links never
repeat.

Its own module: ``cache.open_client`` opens URLs on it without the links, and ``_errors``
imports ``_HandshakeFailed`` from it to tell a failed handshake from a lost connection.
"""

from __future__ import annotations

from typing import Any

import redis.connection
import redis.exceptions as rx

__all__ = ["CONNECT_TIMEOUT", "TLSConnection"]


#: How long (seconds) a client opened from a URL waits to connect, the TLS handshake included,
#: when its socket timeout is longer: a plain server given a TLS hello never answers it, and
#: that should not take the socket timeout (60 s by default) to say.
CONNECT_TIMEOUT = 10.0


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
    """Raised by :class:`TLSConnection`; mapped by ``_errors._mapped`` (never repeated)."""

    def __init__(self, message: str, timeout: float | None) -> None:
        super().__init__(message)
        self.timeout = timeout
