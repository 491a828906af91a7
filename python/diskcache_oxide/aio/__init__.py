"""asyncio faces for the cache, the leased jobs, claims and compute-once.

Every engine call blocks (on SQLite, on a value file, or waiting for a queue item), so each
one runs in a worker thread (the loop's default executor, or the ``executor`` given) and
the event loop never blocks. The binding releases the GIL around engine calls, so these
threads run in parallel with the loop. See docs/decisions/D-024-asyncio-api.md.

``AsyncCache(redis_cache)`` is the Redis backend's asyncio face instead
(:class:`~diskcache_oxide.remote.AsyncRedisCache`): the same calls on redis-py's asyncio
client, holding no thread, and claims and compute-once on a Redis cache await that client too
(D-059).

Cancellation: a thread cannot be interrupted, so a call that was cancelled still finishes in
its thread. The calls that *take* something (``pull``, ``pull_many``, ``take``,
``take_many``, acquiring a claim) give it back when their caller was cancelled, so nothing
is lost. :func:`aget_or_compute` goes further: once a caller holds the claim, the
computation runs in a shielded task that is kept alive until it has stored its result.
"""

from .cache import AsyncCache
from .claims import AsyncClaim, AsyncClaims
from .jobs import AsyncJobQueue
from .turns import (
    acompute_once,
    aget_or_compute,
    drain_turns,
    keep_turns,
    pending_turns,
    turns_lifespan,
)

__all__ = [
    "AsyncCache",
    "AsyncClaim",
    "AsyncClaims",
    "AsyncJobQueue",
    "acompute_once",
    "aget_or_compute",
    "drain_turns",
    "keep_turns",
    "pending_turns",
    "turns_lifespan",
]
