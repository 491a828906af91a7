"""asyncio faces for the cache, the leased jobs, claims and compute-once.

Every engine call blocks (on SQLite, on a value file, or waiting for a queue item), so each
one runs in a worker thread (the loop's default executor, or the ``executor`` given) and
the event loop never blocks. The binding releases the GIL around engine calls, so these
threads run in parallel with the loop. See docs/decisions/D-024-asyncio-api.md.

Cancellation: a thread cannot be interrupted, so a call that was cancelled still finishes in
its thread. The calls that *take* something (``pull``, ``pull_many``, ``take``,
``take_many``, acquiring a claim) give it back when their caller was cancelled, so nothing
is lost. :func:`aget_or_compute` goes further: once a caller holds the claim, the
computation runs in a shielded task that is kept alive until it has stored its result.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import os
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from types import TracebackType
from typing import Any, Generic, Literal, ParamSpec, Protocol, TypeVar, cast

from ._docs import mirror_docs
from .claims import (
    Claim,
    ClaimInfo,
    Claims,
    ClaimTimeout,
    _release_after_turn,
    _ttl,
    _wait,
    backoff,
)
from .core import ENOVAL, Cache, args_to_key, full_name
from .jobs import Job, JobCounts, JobInfo, JobQueue, Swept

__all__ = [
    "AsyncCache",
    "AsyncClaim",
    "AsyncClaims",
    "AsyncJobQueue",
    "acompute_once",
    "aget_or_compute",
    "drain_turns",
    "pending_turns",
]

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")

_log = logging.getLogger("diskcache_oxide")
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
        _log.exception("could not %s after a cancelled call", what)


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


def _reshape(item: Any, expire_time: bool, tag: bool) -> Any:
    """A ``(pair, expire_time, tag)`` item shaped as a pull with these flags returns it."""
    pair, expires, item_tag = item
    if expire_time and tag:
        return (pair, expires, item_tag)
    if expire_time:
        return (pair, expires)
    if tag:
        return (pair, item_tag)
    return pair


class AsyncCache:
    """The whole :class:`~diskcache_oxide.Cache` API as coroutines.

    :param cache: a :class:`Cache`, or a directory to open one in (``None``: a temporary
        directory); ``settings`` are passed to ``Cache`` then
    :param executor: where the blocking calls run (default: the running loop's default
        executor). Blocking waits (``pull(timeout=...)``) hold a thread for their duration,
        so give many concurrent waiters an executor of their own

    Method names and arguments are the cache's. Python's protocols that cannot be awaited
    are methods here: ``contains(key)``, ``length()``, ``getitem(key)``, ``setitem``,
    ``delitem``, ``keys()``. ``transact()`` is an ``async with`` block whose calls all run
    on one thread that holds the transaction.
    """

    def __init__(
        self,
        cache: Cache | str | os.PathLike[str] | None = None,
        *,
        executor: Executor | None = None,
        **settings: Any,
    ) -> None:
        if isinstance(cache, Cache):
            if settings:
                raise TypeError("settings are only accepted with a directory, not a Cache")
            self._cache = cache
        else:
            self._cache = Cache(cache, **settings)
        self._executor = executor
        self._in_transaction = False

    @property
    def cache(self) -> Cache:
        """The synchronous cache underneath."""
        return self._cache

    @property
    def directory(self) -> str:
        return self._cache.directory

    @property
    def executor(self) -> Executor | None:
        """Where the blocking calls run; None: the running loop's default executor."""
        return self._executor

    def __repr__(self) -> str:
        return f"AsyncCache({self._cache.directory!r})"

    async def _run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        return await _in_thread(self._executor, fn, *args, **kwargs)

    async def __aenter__(self) -> AsyncCache:
        return self

    async def __aexit__(self, *exception: object) -> None:
        await self.close()

    # ---- writes ---------------------------------------------------------------------------

    async def set(
        self,
        key: Any,
        value: Any,
        expire: float | None = None,
        read: bool = False,
        tag: _Tag = None,
        retry: bool = False,
    ) -> bool:
        return await self._run(self._cache.set, key, value, expire, read, tag, retry)

    async def setitem(self, key: Any, value: Any) -> None:
        await self._run(self._cache.__setitem__, key, value)

    async def add(
        self,
        key: Any,
        value: Any,
        expire: float | None = None,
        read: bool = False,
        tag: _Tag = None,
        retry: bool = False,
    ) -> bool:
        return await self._run(self._cache.add, key, value, expire, read, tag, retry)

    async def touch(self, key: Any, expire: float | None = None, retry: bool = False) -> bool:
        return await self._run(self._cache.touch, key, expire, retry)

    async def incr(self, key: Any, delta: Any = 1, default: Any = 0, retry: bool = False) -> Any:
        return await self._run(self._cache.incr, key, delta, default, retry)

    async def decr(self, key: Any, delta: Any = 1, default: Any = 0, retry: bool = False) -> Any:
        return await self._run(self._cache.decr, key, delta, default, retry)

    async def set_many(
        self,
        mapping: Mapping[Any, Any] | Iterable[tuple[Any, Any]],
        expire: float | None = None,
        tag: _Tag = None,
        retry: bool = False,
    ) -> None:
        await self._run(self._cache.set_many, mapping, expire, tag, retry)

    # ---- reads ----------------------------------------------------------------------------

    async def get(
        self,
        key: Any,
        default: Any = None,
        read: bool = False,
        expire_time: bool = False,
        tag: bool = False,
        retry: bool = False,
    ) -> Any:
        return await self._run(self._cache.get, key, default, read, expire_time, tag, retry)

    async def getitem(self, key: Any) -> Any:
        return await self._run(self._cache.__getitem__, key)

    async def read(self, key: Any, retry: bool = False) -> Any:
        return await self._run(self._cache.read, key, retry)

    async def contains(self, key: Any) -> bool:
        return await self._run(self._cache.__contains__, key)

    async def get_many(self, keys: Iterable[Any], default: Any = None, retry: bool = False) -> Any:
        return await self._run(self._cache.get_many, list(keys), default, retry)

    async def peekitem(
        self, last: bool = True, expire_time: bool = False, tag: bool = False, retry: bool = False
    ) -> Any:
        return await self._run(self._cache.peekitem, last, expire_time, tag, retry)

    async def length(self) -> int:
        return await self._run(self._cache.__len__)

    async def keys(self, reverse: bool = False, prefix: str | None = None) -> list[Any]:
        """Every key (or those under a queue ``prefix``), in order, as a list."""
        return await self._run(lambda: list(self._cache.iterkeys(reverse=reverse, prefix=prefix)))

    async def volume(self) -> int:
        return await self._run(self._cache.volume)

    async def stats(self, enable: bool = True, reset: bool = False) -> tuple[int, int]:
        return await self._run(self._cache.stats, enable, reset)

    # ---- removal --------------------------------------------------------------------------

    async def pop(
        self,
        key: Any,
        default: Any = None,
        expire_time: bool = False,
        tag: bool = False,
        retry: bool = False,
    ) -> Any:
        return await self._run(self._cache.pop, key, default, expire_time, tag, retry)

    async def delete(self, key: Any, retry: bool = False) -> bool:
        return await self._run(self._cache.delete, key, retry)

    async def delitem(self, key: Any) -> None:
        await self._run(self._cache.__delitem__, key)

    async def delete_many(self, keys: Iterable[Any], retry: bool = False) -> int:
        return await self._run(self._cache.delete_many, list(keys), retry)

    async def expire(self, now: float | None = None, retry: bool = False) -> int:
        return await self._run(self._cache.expire, now, retry)

    async def evict(self, tag: _Tag, retry: bool = False) -> int:
        return await self._run(self._cache.evict, tag, retry)

    async def clear(self, retry: bool = False) -> int:
        return await self._run(self._cache.clear, retry)

    async def cull(self, retry: bool = False) -> int:
        return await self._run(self._cache.cull, retry)

    # ---- settings and maintenance ---------------------------------------------------------

    async def check(self, fix: bool = False, retry: bool = False) -> list[warnings.WarningMessage]:
        return await self._run(self._cache.check, fix, retry)

    async def reset(self, key: str, value: Any = ENOVAL, update: bool = True) -> Any:
        return await self._run(self._cache.reset, key, value, update)

    async def create_tag_index(self) -> None:
        await self._run(self._cache.create_tag_index)

    async def drop_tag_index(self) -> None:
        await self._run(self._cache.drop_tag_index)

    async def close(self) -> None:
        await self._run(self._cache.close)

    # ---- transactions ---------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def transact(self, retry: bool = False) -> AsyncIterator[AsyncCache]:
        """``async with acache.transact() as tx:`` -- the calls made through ``tx`` form one
        transaction, committed at the end of the block and rolled back by an exception.

        A transaction belongs to a thread, so ``tx`` runs every call on one thread of its
        own. Calls made through another handle inside the block wait for the transaction
        like any other writer; keep the block short, since it holds the write lock across
        its awaits.
        """
        if self._in_transaction:
            yield self  # nested: join the outer transaction
            return
        loop = asyncio.get_running_loop()
        pool = ThreadPoolExecutor(1, thread_name_prefix="diskcache-oxide-transact")
        begin = loop.run_in_executor(pool, self._cache._begin, retry)
        try:
            await asyncio.shield(begin)
        except BaseException:
            # Runs after begin on the same thread: rolls back if begin got through.
            pool.submit(_quietly, "roll back", self._cache._end, False)
            pool.shutdown(wait=False)
            raise
        tx = AsyncCache(self._cache, executor=pool)
        tx._in_transaction = True
        commit = False
        try:
            yield tx
            commit = True
        finally:
            end = pool.submit(self._cache._end, commit)
            pool.shutdown(wait=False)
            await asyncio.shield(asyncio.wrap_future(end))

    # ---- queue ----------------------------------------------------------------------------

    async def push(
        self,
        value: Any,
        prefix: str | None = None,
        side: _Side = "back",
        expire: float | None = None,
        read: bool = False,
        tag: _Tag = None,
        retry: bool = False,
    ) -> Any:
        return await self._run(self._cache.push, value, prefix, side, expire, read, tag, retry)

    async def push_many(
        self,
        values: Iterable[Any],
        prefix: str | None = None,
        side: _Side = "back",
        expire: float | None = None,
        tag: _Tag = None,
        retry: bool = False,
    ) -> list[Any]:
        return await self._run(
            self._cache.push_many, list(values), prefix, side, expire, tag, retry
        )

    def _give_back(self, items: list[Any], prefix: str | None, side: _Side) -> None:
        # Items come as ((key, value), expire_time, tag); put them back at the end they
        # were taken from, nearest last, so their order is kept (their keys change).
        now = time.time()
        for (_key, value), expires, tag in reversed(items):
            if expires is not None and expires <= now:
                continue
            remaining = None if expires is None else expires - now
            self._cache.push(value, prefix, side, remaining, False, tag, True)

    async def pull(
        self,
        prefix: str | None = None,
        default: Any = (None, None),
        side: _Side = "front",
        expire_time: bool = False,
        tag: bool = False,
        retry: bool = False,
        timeout: float | None = None,
    ) -> Any:
        """``Cache.pull``; waiting with ``timeout`` holds a thread, not the loop. If the
        caller is cancelled, an item pulled after all is pushed back at the same end."""
        missing = object()

        def pull() -> Any:
            return self._cache.pull(prefix, missing, side, True, True, retry, timeout)

        def give_back(item: Any) -> None:
            if item[0] is not missing:
                self._give_back([item], prefix, side)

        item = await _taking(self._executor, pull, give_back)
        if item[0] is missing:
            return _reshape((default, None, None), expire_time, tag)
        return _reshape(item, expire_time, tag)

    async def pull_many(
        self,
        n: int,
        prefix: str | None = None,
        side: _Side = "front",
        expire_time: bool = False,
        tag: bool = False,
        retry: bool = False,
        timeout: float | None = None,
    ) -> list[Any]:
        """``Cache.pull_many``; a cancelled caller's items are pushed back."""

        def pull() -> list[Any]:
            return self._cache.pull_many(n, prefix, side, True, True, retry, timeout)

        def give_back(items: list[Any]) -> None:
            self._give_back(items, prefix, side)

        items = await _taking(self._executor, pull, give_back)
        return [_reshape(item, expire_time, tag) for item in items]

    async def peek(
        self,
        prefix: str | None = None,
        default: Any = (None, None),
        side: _Side = "front",
        expire_time: bool = False,
        tag: bool = False,
        retry: bool = False,
    ) -> Any:
        return await self._run(self._cache.peek, prefix, default, side, expire_time, tag, retry)

    # ---- claims and compute-once ----------------------------------------------------------

    def claims(self, namespace: str = "default") -> AsyncClaims:
        """Claims on this cache's keys (see :class:`AsyncClaims`)."""
        return AsyncClaims(self, namespace)

    async def get_or_compute(
        self,
        key: Any,
        fn: Callable[[], Awaitable[R]],
        *,
        ttl: float = 60.0,
        wait: float | None = None,
        expire: float | None = None,
        tag: _Tag = None,
        namespace: str = "default",
    ) -> R:
        """:func:`aget_or_compute` on this cache."""
        return await aget_or_compute(
            self, key, fn, ttl=ttl, wait=wait, expire=expire, tag=tag, namespace=namespace
        )


#: How the awaitable forms of Python's protocols read (``await acache.getitem(key)`` is
#: ``cache[key]``).
_PROTOCOLS = {
    "__getitem__": "``cache[key]``",
    "__setitem__": "``cache[key] = value``",
    "__delitem__": "``del cache[key]``",
    "__contains__": "``key in cache``",
    "__len__": "``len(cache)``",
}


def _cache_lead(name: str) -> str:
    if name == "directory":
        return "`Cache.directory` of the cache underneath."
    spelled = f" ({_PROTOCOLS[name]})" if name in _PROTOCOLS else ""
    return f"Awaitable `Cache.{name}`{spelled}: runs it in the cache's executor."


mirror_docs(
    AsyncCache,
    Cache,
    lead=_cache_lead,
    renamed={
        "getitem": "__getitem__",
        "setitem": "__setitem__",
        "delitem": "__delitem__",
        "contains": "__contains__",
        "length": "__len__",
        "keys": "iterkeys",
    },
)


# ---- claims ---------------------------------------------------------------------------------


class AsyncClaims:
    """:class:`~diskcache_oxide.claims.Claims` as coroutines; waits poll with
    ``asyncio.sleep``. A caller cancelled while its claim was being taken releases it."""

    def __init__(self, cache: Cache | AsyncCache, namespace: str = "default") -> None:
        acache = cache if isinstance(cache, AsyncCache) else AsyncCache(cache)
        self._acache = acache
        self._claims = Claims(acache.cache, namespace)

    @property
    def claims(self) -> Claims:
        """The synchronous claims underneath."""
        return self._claims

    async def try_acquire(self, key: Any, ttl: float) -> AsyncClaim | None:
        seconds = _ttl(ttl)

        def give_back(claim: Claim | None) -> None:
            if claim is not None:
                claim.release()

        claim = await _taking(
            self._acache.executor, lambda: self._claims.try_acquire(key, seconds), give_back
        )
        return None if claim is None else AsyncClaim(self, claim)

    async def acquire(self, key: Any, ttl: float, *, wait: float = 0.0) -> AsyncClaim | None:
        deadline = time.monotonic() + _wait(wait)
        pauses = backoff()
        while True:
            claim = await self.try_acquire(key, ttl)
            if claim is not None:
                return claim
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            await asyncio.sleep(min(next(pauses), remaining))

    async def hold(self, key: Any, ttl: float, *, wait: float = 0.0) -> AsyncClaim:
        claim = await self.acquire(key, ttl, wait=wait)
        if claim is None:
            raise ClaimTimeout(f"the claim on {key!r} is held by another owner (waited {wait} s)")
        return claim

    async def holder(self, key: Any) -> ClaimInfo | None:
        return await self._acache._run(self._claims.holder, key)

    async def release(self, key: Any, token: str) -> bool:
        return await self._acache._run(self._claims.release, key, token)

    async def extend(self, key: Any, token: str, ttl: float) -> bool:
        return await self._acache._run(self._claims.extend, key, token, ttl)


class AsyncClaim:
    """A claim held through :class:`AsyncClaims`; ``async with`` releases it at the end."""

    def __init__(self, claims: AsyncClaims, claim: Claim) -> None:
        self._claims = claims
        self.claim = claim

    @property
    def key(self) -> Any:
        return self.claim.key

    @property
    def token(self) -> str:
        return self.claim.token

    def __repr__(self) -> str:
        return f"Async{self.claim!r}"

    async def release(self) -> bool:
        return await self._claims.release(self.claim.key, self.claim.token)

    async def extend(self, ttl: float | None = None) -> bool:
        seconds = self.claim.ttl if ttl is None else ttl
        return await self._claims.extend(self.claim.key, self.claim.token, seconds)

    async def held(self) -> bool:
        return await self._claims._acache._run(self.claim.held)

    async def __aenter__(self) -> AsyncClaim:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not await asyncio.shield(self.release()):
            _log.warning("claim on %r was lost before its release (TTL passed?)", self.key)


def _claims_lead(name: str) -> str:
    if name == "try_acquire":
        return (
            "Awaitable `Claims.try_acquire`, giving an :class:`AsyncClaim`: runs it in the "
            "cache's executor; a caller cancelled meanwhile releases the claim it took."
        )
    if name in ("acquire", "hold"):
        return (
            f"Awaitable `Claims.{name}`, giving an :class:`AsyncClaim` (for ``async with``): "
            "waits poll with ``asyncio.sleep``."
        )
    return f"Awaitable `Claims.{name}`: runs it in the cache's executor."


def _claim_lead(name: str) -> str:
    if name in ("key", "token"):
        return f"The `Claim.{name}` of the claim underneath."
    return f"Awaitable `Claim.{name}`: runs it in the cache's executor."


mirror_docs(AsyncClaims, Claims, lead=_claims_lead)
mirror_docs(AsyncClaim, Claim, lead=_claim_lead)


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


# ---- leased jobs ----------------------------------------------------------------------------


class AsyncJobQueue:
    """:class:`~diskcache_oxide.JobQueue` as coroutines.

    :param jobs: a :class:`JobQueue`
    :param executor: where the blocking calls run (default: the loop's default executor)

    A ``take`` whose caller is cancelled releases the jobs it got (the attempt is not
    counted). ``async with ajobs.settle(job):`` finishes the job on a clean exit, fails it
    on an ``Exception`` and releases it on cancellation.
    """

    def __init__(self, jobs: JobQueue, *, executor: Executor | None = None) -> None:
        if not isinstance(jobs, JobQueue):
            raise TypeError(f"jobs must be a JobQueue, not {type(jobs).__name__}")
        self._jobs = jobs
        self._executor = executor

    @property
    def jobs(self) -> JobQueue:
        """The synchronous queue underneath."""
        return self._jobs

    def __repr__(self) -> str:
        return f"Async{self._jobs!r}"

    async def _run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        return await _in_thread(self._executor, fn, *args, **kwargs)

    async def put(
        self,
        value: Any,
        *,
        queue: str | None = None,
        delay: float = 0.0,
        unique: str | None = None,
        max_attempts: int | None = None,
    ) -> int:
        return await self._run(
            self._jobs.put,
            value,
            queue=queue,
            delay=delay,
            unique=unique,
            max_attempts=max_attempts,
        )

    async def put_many(
        self,
        values: Iterable[Any],
        *,
        queue: str | None = None,
        delay: float = 0.0,
        max_attempts: int | None = None,
    ) -> list[int]:
        return await self._run(
            self._jobs.put_many, list(values), queue=queue, delay=delay, max_attempts=max_attempts
        )

    async def take(self, *, timeout: float | None = None, lease: float | None = None) -> Job | None:
        jobs = await self.take_many(1, timeout=timeout, lease=lease)
        return jobs[0] if jobs else None

    async def take_many(
        self, n: int, *, timeout: float | None = None, lease: float | None = None
    ) -> list[Job]:
        def give_back(jobs: list[Job]) -> None:
            for job in jobs:
                job.release()

        return await _taking(
            self._executor,
            lambda: self._jobs.take_many(n, timeout=timeout, lease=lease),
            give_back,
        )

    async def finish(self, job: Job) -> bool:
        return await self._run(self._jobs.finish, job)

    async def fail(
        self, job: Job, error: str | BaseException = "", *, retry_in: float = 0.0
    ) -> str | None:
        return await self._run(self._jobs.fail, job, error, retry_in=retry_in)

    async def extend(self, job: Job, lease: float | None = None) -> bool:
        return await self._run(self._jobs.extend, job, lease)

    async def release(self, job: Job, *, delay: float = 0.0) -> bool:
        return await self._run(self._jobs.release, job, delay=delay)

    @contextlib.asynccontextmanager
    async def settle(self, job: Job) -> AsyncIterator[Job]:
        """Finish ``job`` on a clean exit, fail it on an ``Exception`` (re-raised), release
        it on cancellation or another ``BaseException``."""
        try:
            yield job
        except Exception as exc:
            await asyncio.shield(self.fail(job, exc))
            raise
        except BaseException:
            await asyncio.shield(self.release(job))
            raise
        await asyncio.shield(self.finish(job))

    async def sweep(self) -> Swept:
        return await self._run(self._jobs.sweep)

    async def dead(self, *, queue: str | None = None, limit: int = 100) -> list[JobInfo]:
        return await self._run(self._jobs.dead, queue=queue, limit=limit)

    async def requeue(self, job_id: int, *, delay: float = 0.0) -> bool:
        return await self._run(self._jobs.requeue, job_id, delay=delay)

    async def delete(self, job_id: int) -> bool:
        return await self._run(self._jobs.delete, job_id)

    async def get(self, job_id: int) -> JobInfo | None:
        return await self._run(self._jobs.get, job_id)

    async def counts(self, queue: str | None = None) -> JobCounts:
        return await self._run(self._jobs.counts, queue)

    async def length(self) -> int:
        return await self._run(self._jobs.__len__)


def _jobs_lead(name: str) -> str:
    if name in ("take", "take_many"):
        return (
            f"Awaitable `JobQueue.{name}`: runs it in the queue's executor; a caller "
            "cancelled meanwhile releases the jobs it got (the attempt is not counted)."
        )
    spelled = " (``len(jobs)``)" if name == "__len__" else ""
    return f"Awaitable `JobQueue.{name}`{spelled}: runs it in the queue's executor."


mirror_docs(AsyncJobQueue, JobQueue, lead=_jobs_lead, renamed={"length": "__len__"})
