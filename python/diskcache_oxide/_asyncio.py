"""What every asyncio face and feature shares (the faces of both backends, and the asyncio
claims, turns and jobs): running a blocking call in a worker thread, and giving back what a
cancelled call took. On the seam's floor, so that a backend may use it without importing a
feature (tests/api/test_layers.py)."""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any, Literal, ParamSpec, TypeVar

from ._log import log
from ._misses import shaped

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")

_Tag = str | int | float | bytes | None
_Side = Literal["front", "back"]


async def _in_thread(
    executor: Executor | None, fn: Callable[..., T], /, *args: Any, **kw: Any
) -> T:
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()
    call = functools.partial(ctx.run, fn, *args, **kw)
    return await loop.run_in_executor(executor, call)


def _quietly(what: str, fn: Callable[..., object], *args: Any) -> None:
    try:
        fn(*args)
    except Exception:
        log().exception("could not %s after a cancelled call", what)


async def _taking(
    executor: Executor | None,
    fn: Callable[[], T],
    give_back: Callable[[T], object],
) -> T:
    """Run ``fn`` in a thread; if the caller is cancelled, hand what ``fn`` took to
    ``give_back`` (in a thread) once it finishes, instead of dropping it."""
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()
    inner = loop.run_in_executor(executor, functools.partial(ctx.run, fn))
    try:
        return await asyncio.shield(inner)
    except asyncio.CancelledError:

        def orphaned(done: asyncio.Future[T]) -> None:
            if done.cancelled() or done.exception() is not None:
                return
            loop.run_in_executor(executor, _quietly, "give back", give_back, done.result())

        inner.add_done_callback(orphaned)
        raise


async def _taken_or_given_back(
    take: Awaitable[T], give_back: Callable[[T], Awaitable[object]]
) -> T:
    """Await ``take`` in a task of its own; if the caller is cancelled meanwhile, what it took
    is handed to ``give_back`` once it ends, instead of being dropped (:func:`_taking`'s
    twin for an awaitable)."""
    loop = asyncio.get_running_loop()
    task = loop.create_task(_awaited(take))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:

        def orphaned(done: asyncio.Task[T]) -> None:
            _giving_back.discard(done)
            if done.cancelled() or done.exception() is not None:
                return
            back = loop.create_task(_awaited(give_back(done.result())))
            _giving_back.add(back)
            back.add_done_callback(_giving_back.discard)

        _giving_back.add(task)
        task.add_done_callback(orphaned)
        raise


#: Strong references to the takes of cancelled callers and their give-backs, until they end.
_giving_back: set[asyncio.Task[Any]] = set()


async def _awaited(work: Awaitable[T]) -> T:
    return await work


def _reshape(item: Any, expire_time: bool, tag: bool) -> Any:
    """A ``(pair, expire_time, tag)`` item shaped as a pull with these flags returns it."""
    pair, expires, item_tag = item
    return shaped(pair, expires, item_tag, expire_time, tag)
