"""`AsyncCache`: the cache's calls as awaitables (D-024)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal

from .._docs import mirror_docs
from .._faces.aio import AsyncCacheCalls
from ..core import Cache
from ._run import T, _in_thread, _quietly, _reshape, _Side, _Tag, _taking

if TYPE_CHECKING:
    from .claims import AsyncClaims


class AsyncCache(AsyncCacheCalls):
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
            remote = sys.modules.get("diskcache_oxide.remote.cache")  # loaded if there is one
            if remote is not None and isinstance(cache, remote.RedisCache):
                # Cache() would take str() of it as a directory's path, and the async calls
                # would silently run on that new directory instead of the server.
                raise remote.UnsupportedError(
                    "AsyncCache over a RedisCache is not done yet (D-058): use "
                    "aget_or_compute(redis_cache, ...) and AsyncClaims(redis_cache), or run "
                    "the RedisCache's calls in an executor"
                )
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

    # Each call of the API table with an ``aio`` name (_api.CALLS: get, set, getitem, ...)
    # is generated into _faces/aio.py (AsyncCacheCalls): an awaitable with Cache's signature
    # that runs the call in the executor. Written out here: what is more than a forward.

    async def keys(self, reverse: bool = False, prefix: str | None = None) -> list[Any]:
        """Every key (or those under a queue ``prefix``), in order, as a list."""
        return await self._run(lambda: list(self._cache.iterkeys(reverse=reverse, prefix=prefix)))

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

    # ---- claims and compute-once ----------------------------------------------------------

    def claims(self, namespace: str = "default") -> AsyncClaims:
        """Claims on this cache's keys (see :class:`AsyncClaims`)."""
        from .claims import AsyncClaims  # claims.py builds on this module

        return AsyncClaims(self, namespace)

    async def get_or_compute(
        self,
        key: Any,
        fn: Callable[..., Any],
        /,
        *args: Any,
        lease: float = 60.0,
        timeout: float | None = None,
        expire: float | None = None,
        tag: _Tag = None,
        namespace: str = "default",
        if_computing: Literal["wait", "skip"] = "wait",
        outcome: bool = False,
        pass_claim: bool = False,
        **kwargs: Any,
    ) -> Any:
        """:func:`aget_or_compute` on this cache: the value of ``key``, computed by
        ``fn(*args, **kwargs)`` once across loops, threads and processes; ``fn`` may be a
        coroutine function or a plain function (run in the executor). The options are
        :meth:`Cache.get_or_compute`'s: ``outcome=True`` returns ``(value, Outcome)``, and
        ``pass_claim=True`` hands ``fn`` its claim as ``claim=`` (an :class:`AsyncClaim` for
        a coroutine function, a :class:`~diskcache_oxide.Claim` for a plain one)."""
        from .turns import aget_or_compute  # turns.py builds on this module

        return await aget_or_compute(
            self,
            key,
            fn,
            *args,
            lease=lease,
            timeout=timeout,
            expire=expire,
            tag=tag,
            namespace=namespace,
            if_computing=if_computing,
            outcome=outcome,
            pass_claim=pass_claim,
            **kwargs,
        )


def _cache_lead(name: str) -> str:
    if name == "directory":
        return "`Cache.directory` of the cache underneath."
    return f"Awaitable `Cache.{name}`: runs it in the cache's executor."


mirror_docs(
    AsyncCache,
    Cache,
    ["directory", "keys", "pull", "pull_many"],
    lead=_cache_lead,
    renamed={"keys": "iterkeys"},
)
