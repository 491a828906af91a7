"""Compute-once from asyncio: `aget_or_compute`, `acompute_once`, and the shielded turns
that finish and store their result even when every caller was cancelled (D-023, D-024)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Generic, Protocol, cast

from ..claims import (
    Claims,
    ClaimTimeout,
    _release_after_turn,
    _ttl,
    _wait,
    backoff,
)
from ..core import ENOVAL, Cache, args_to_key, full_name
from ._run import P, R, _Tag
from .cache import AsyncCache

# ---- compute-once ---------------------------------------------------------------------------

#: Strong references to the running turns, so a turn whose callers were all cancelled is not
#: garbage-collected mid-way (the event loop only keeps weak references to tasks).
_shielded: set[asyncio.Task[Any]] = set()

_NOT_CLAIMED: Any = object()


def pending_turns() -> int:
    """How many shielded turns (of every loop) are still running."""
    return len(_shielded)


async def drain_turns(timeout: float | None = None) -> None:
    """Wait for the shielded turns of the running loop to finish (before closing the loop:
    ``asyncio.run`` cancels the tasks left at its end)."""
    loop = asyncio.get_running_loop()
    mine = [task for task in list(_shielded) if task.get_loop() is loop]
    if mine:
        await asyncio.wait(mine, timeout=timeout)


async def aget_or_compute(
    cache: Cache | AsyncCache,
    key: Any,
    fn: Callable[[], Awaitable[R]],
    *,
    ttl: float = 60.0,
    wait: float | None = None,
    expire: float | None = None,
    tag: _Tag = None,
    namespace: str = "default",
) -> R:
    """:func:`~diskcache_oxide.get_or_compute` for coroutines: ``await fn()`` runs once
    across loops, threads and processes.

    Taking the claim, computing and storing run in one task, shielded from the caller's
    cancellation and strongly referenced until it ends: a cancelled caller loses the view,
    not the work, and the value is cached for the next caller. Waiters poll with
    ``asyncio.sleep``; ``fn`` failing releases the claim and raises in the caller whose turn
    it was, and waiters retry the claim.

    :raises ClaimTimeout: if ``wait`` (default ``2 * ttl``) passed without a value
    """
    acache = cache if isinstance(cache, AsyncCache) else AsyncCache(cache)
    seconds = _ttl(ttl)
    limit = 2 * seconds if wait is None else _wait(wait)
    claims = Claims(acache.cache, namespace)
    run = acache._run
    loop = asyncio.get_running_loop()

    async def turn() -> Any:
        claim = await run(claims.try_acquire, key, seconds)
        if claim is None:
            return _NOT_CLAIMED
        try:
            value = await run(acache.cache.get, key, ENOVAL, retry=True)
            if value is not ENOVAL:
                return value
            result = await fn()
            await run(acache.cache.set, key, result, expire, tag=tag, retry=True)
            return result
        finally:
            await run(_release_after_turn, claim)

    deadline = time.monotonic() + limit
    pauses = backoff()
    while True:
        value = await run(acache.cache.get, key, ENOVAL, retry=True)
        if value is not ENOVAL:
            return cast(R, value)
        task = loop.create_task(turn())
        _shielded.add(task)
        task.add_done_callback(_shielded.discard)
        outcome = await asyncio.shield(task)
        if outcome is not _NOT_CLAIMED:
            return cast(R, outcome)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ClaimTimeout(f"no value for {key!r} appeared within {limit} s")
        await asyncio.sleep(min(next(pauses), remaining))


class AsyncComputeOnce(Protocol, Generic[P, R]):
    """A coroutine function wrapped by :func:`acompute_once`."""

    __wrapped__: Callable[P, Awaitable[R]]

    async def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...

    def __cache_key__(self, *args: P.args, **kwargs: P.kwargs) -> tuple[Any, ...]: ...


def acompute_once(
    cache: Cache | AsyncCache,
    *,
    ttl: float = 60.0,
    wait: float | None = None,
    expire: float | None = None,
    tag: _Tag = None,
    name: str | None = None,
    typed: bool = False,
    ignore: Collection[int | str] = (),
) -> Callable[[Callable[P, Awaitable[R]]], AsyncComputeOnce[P, R]]:
    """Decorator for coroutine functions: each result computed once, through
    :func:`aget_or_compute`, under the keys :meth:`Cache.memoize` would use."""
    seconds = _ttl(ttl)

    def decorator(func: Callable[P, Awaitable[R]]) -> AsyncComputeOnce[P, R]:
        base = (full_name(func),) if name is None else (name,)

        def cache_key(*args: P.args, **kwargs: P.kwargs) -> tuple[Any, ...]:
            return args_to_key(base, args, kwargs, typed, ignore)

        @functools.wraps(func)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            return await aget_or_compute(
                cache,
                cache_key(*args, **kwargs),
                lambda: func(*args, **kwargs),
                ttl=seconds,
                wait=wait,
                expire=expire,
                tag=tag,
            )

        wrapper.__cache_key__ = cache_key  # type: ignore[attr-defined]
        return cast(AsyncComputeOnce[P, R], wrapper)

    return decorator
