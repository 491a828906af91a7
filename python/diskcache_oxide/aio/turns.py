"""Compute-once from asyncio: `aget_or_compute`, `acompute_once`, and the shielded turns
that finish and store their result even when every caller was cancelled (D-023, D-024).

A *turn* is the task that holds the claim, computes the value and stores it. It is shielded
from its caller and kept alive by a strong reference until it ends, so a caller that goes
away loses the view, not the work. What can still cancel a turn is the end of its event
loop: ``asyncio.run`` cancels the tasks left when its coroutine returns. :func:`keep_turns`
(an ``async with`` block) and :func:`turns_lifespan` (for an ASGI app) wait for the pending
turns before the loop ends; a turn cancelled anyway logs a warning.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from typing import Any, Generic, Literal, Protocol, cast

from ..claims import (
    _WAIT_SLICE,
    COMPUTING,
    HEARTBEAT_FRACTION,
    LEASE,
    Claim,
    Claims,
    ClaimTimeout,
    _if_computing,
    _lease,
    _release_after_turn,
    _timeout,
    stable_name,
)
from ..core import ENOVAL, Cache, args_to_key
from ._run import P, R, _log, _Tag
from .cache import AsyncCache

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


@contextlib.asynccontextmanager
async def keep_turns(timeout: float | None = None) -> AsyncIterator[None]:
    """``async with keep_turns():`` around an app's main coroutine: at the end of the block
    (also when it raises), wait up to ``timeout`` seconds (default: as long as they take)
    for the turns still running, so the end of the loop does not cancel paid work::

        async def main():
            async with keep_turns():
                await serve()

        asyncio.run(main())
    """
    try:
        yield
    finally:
        await drain_turns(timeout)


@contextlib.asynccontextmanager
async def turns_lifespan(app: Any = None, *, timeout: float | None = None) -> AsyncIterator[None]:
    """An ASGI lifespan that waits for the pending turns at shutdown: pass it as Starlette's
    or FastAPI's ``lifespan=`` (``Starlette(routes=..., lifespan=turns_lifespan)``), or enter
    it inside your own lifespan. ``uvicorn`` then finishes paid work before the loop ends."""
    async with keep_turns(timeout):
        yield


class _AsyncHeartbeat:
    """Renews ``claim`` every ``HEARTBEAT_FRACTION`` of its lease, in a task, while the turn
    computes; a holder that dies stops renewing, so its claim runs out one lease later."""

    def __init__(self, claim: Claim, run: Callable[..., Awaitable[Any]]) -> None:
        self._claim = claim
        self._run = run
        self._task: asyncio.Task[None] | None = None

    async def _beat(self) -> None:
        interval = self._claim.lease * HEARTBEAT_FRACTION
        while True:
            await asyncio.sleep(interval)
            try:
                if not await self._run(self._claim.extend):
                    _log.warning(
                        "the claim on %r was lost; stopping its heartbeat", self._claim.key
                    )
                    return
            except Exception as error:  # a locked or full disk: try again next beat
                _log.warning("could not renew the claim on %r: %s", self._claim.key, error)

    async def __aenter__(self) -> _AsyncHeartbeat:
        self._task = asyncio.get_running_loop().create_task(self._beat())
        return self

    async def __aexit__(self, *exception: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def _computation(
    fn: object, args: tuple[Any, ...], kwargs: dict[str, Any], run: Callable[..., Awaitable[Any]]
) -> Callable[[], Awaitable[Any]]:
    """``fn(*args, **kwargs)`` as something to await: a coroutine function is awaited on the
    loop, a plain function runs in the executor (and if it returns an awaitable, that is
    awaited too)."""
    if not callable(fn):
        raise TypeError(
            f"fn must be a function or coroutine function that computes the value, not "
            f"{type(fn).__name__}"
        )
    if inspect.iscoroutinefunction(fn):
        return lambda: cast(Awaitable[Any], fn(*args, **kwargs))

    async def in_thread() -> Any:
        result = await run(fn, *args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result

    return in_thread


async def aget_or_compute(
    cache: Cache | AsyncCache,
    key: Any,
    fn: Callable[..., Any],
    /,
    *args: Any,
    lease: float = LEASE,
    timeout: float | None = None,
    expire: float | None = None,
    tag: _Tag = None,
    namespace: str = "default",
    if_computing: Literal["wait", "skip"] = "wait",
    **kwargs: Any,
) -> Any:
    """:func:`~diskcache_oxide.get_or_compute` from asyncio: ``fn(*args, **kwargs)`` runs
    once across loops, threads and processes. ``fn`` may be a coroutine function (awaited on
    the loop) or a plain function (run in the cache's executor).

    Taking the claim, computing (with a heartbeat renewing the claim) and storing run in one
    task, shielded from the caller's cancellation and strongly referenced until it ends: a
    cancelled caller loses the view, not the work, and the value is cached for the next
    caller. Waiters sleep in the executor until the value is stored or the claim is released
    or runs out. ``fn`` failing releases the claim and raises in the caller whose turn it
    was; the waiters try the claim again.

    :raises ClaimTimeout: if ``timeout`` (default: none) passed without a value
    """
    acache = cache if isinstance(cache, AsyncCache) else AsyncCache(cache)
    run = acache._run
    compute = _computation(fn, args, kwargs, run)
    seconds = _lease(lease)
    limit = None if timeout is None else _timeout(timeout)
    mode = _if_computing(if_computing)
    claims = Claims(acache.cache, namespace)
    loop = asyncio.get_running_loop()

    async def turn() -> Any:
        claim = await run(claims.try_acquire, key, seconds)
        if claim is None:
            return _NOT_CLAIMED
        try:
            value = await run(acache.cache.get, key, ENOVAL, retry=True)
            if value is not ENOVAL:
                return value
            async with _AsyncHeartbeat(claim, run):
                result = await compute()
            await run(acache.cache.set, key, result, expire, tag=tag, retry=True)
            return result
        except asyncio.CancelledError:
            _log.warning(
                "a turn computing %r was cancelled before it stored its value (its event loop "
                "ended?); the work is lost. Run the app inside `async with keep_turns():` or "
                "with turns_lifespan so that pending turns finish first",
                key,
            )
            raise
        finally:
            await asyncio.shield(run(_release_after_turn, claim))

    deadline = None if limit is None else time.monotonic() + limit
    while True:
        value = await run(acache.cache.get, key, ENOVAL, retry=True)
        if value is not ENOVAL:
            return value
        task = loop.create_task(turn())
        _shielded.add(task)
        task.add_done_callback(_shielded.discard)
        outcome = await asyncio.shield(task)
        if outcome is not _NOT_CLAIMED:
            return outcome
        if mode == "skip":
            return COMPUTING
        remaining = _WAIT_SLICE if deadline is None else deadline - time.monotonic()
        if remaining <= 0:
            raise ClaimTimeout(f"no value for {key!r} appeared within {limit} s")
        await run(acache.cache._claims.wait, namespace, key, min(remaining, _WAIT_SLICE))


class AsyncComputeOnce(Protocol, Generic[P, R]):
    """A coroutine function wrapped by :func:`acompute_once`."""

    __wrapped__: Callable[P, Awaitable[R]]

    async def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...

    def __cache_key__(self, *args: P.args, **kwargs: P.kwargs) -> tuple[Any, ...]: ...


def acompute_once(
    cache: Cache | AsyncCache,
    *,
    lease: float = LEASE,
    timeout: float | None = None,
    expire: float | None = None,
    tag: _Tag = None,
    name: str | None = None,
    typed: bool = False,
    ignore: Collection[int | str] = (),
) -> Callable[[Callable[P, Awaitable[R]]], AsyncComputeOnce[P, R]]:
    """Decorator for coroutine functions: each result computed once, through
    :func:`aget_or_compute`, under the keys of :func:`~diskcache_oxide.compute_once`."""
    seconds = _lease(lease)

    def decorator(func: Callable[P, Awaitable[R]]) -> AsyncComputeOnce[P, R]:
        base = (stable_name(func),) if name is None else (name,)

        def cache_key(*args: P.args, **kwargs: P.kwargs) -> tuple[Any, ...]:
            return args_to_key(base, args, kwargs, typed, ignore)

        @functools.wraps(func)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            return cast(
                R,
                await aget_or_compute(
                    cache,
                    cache_key(*args, **kwargs),
                    functools.partial(func, *args, **kwargs),
                    lease=seconds,
                    timeout=timeout,
                    expire=expire,
                    tag=tag,
                ),
            )

        wrapper.__cache_key__ = cache_key  # type: ignore[attr-defined]
        return cast(AsyncComputeOnce[P, R], wrapper)

    return decorator
