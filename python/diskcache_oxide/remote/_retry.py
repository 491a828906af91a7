"""When a link sends a request again (D-061), and the one failure it tells apart first: an
argument longer than the server accepts.

A link repeats a request after a ``ConnectionError`` (the connection dropped, was refused or
the server is loading its data) for up to ``reconnect_for`` seconds (:data:`RECONNECT_FOR` by
default), the pauses doubling from 50 ms to 1 s (``_delay``), and never after a timeout. Which
errors count as a lost connection is ``_errors._retryable``, beside the message that words one.

A server closes the connection on an argument longer than its ``proto-max-bulk-len``, which
looks like a lost connection (``_refused_as_long``): the link then asks the server for its
limit (``_limit_of`` reads the ``CONFIG GET`` reply) and raises ``ValueTooLargeError`` rather
than repeating. An argument no longer than ``_MIN_BULK_LIMIT`` always fits, so only a longer
one (``_longest``) makes the link ask, before it sends the request as after a failure.

Its own module, below the links (``_io``): the defaults and tests of the retry loop, which both
links run.
"""

from __future__ import annotations

import time
from typing import Any

import redis.exceptions as rx

__all__ = ["RECONNECT_FOR"]


#: How long (seconds) a link goes on repeating a request after ConnectionErrors, by default:
#: long enough for a server restarted with its AOF, or a cluster failing over with a short
#: node timeout, to answer again. The pauses double from 50 ms up to 1 s.
RECONNECT_FOR = 10.0


#: The least ``proto-max-bulk-len`` a server accepts (1 MiB): an argument no longer than this
#: always fits, so only a longer one makes the link ask the server for its limit.
_MIN_BULK_LIMIT = 1024 * 1024


def _delay(tries: int, began: float, budget: float) -> float | None:
    """The pause before repeat number ``tries``, or None when the budget is spent."""
    delay = min(1.0, 0.05 * 2 ** (tries - 1))
    return None if time.monotonic() - began + delay > budget else delay


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
