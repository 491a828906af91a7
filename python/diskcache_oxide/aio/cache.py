"""`AsyncCache`: the cache's calls as awaitables (D-024)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, cast

from .._asyncio import T, _in_thread, _quietly, _reshape, _Side, _taking
from .._docs import mirror_docs
from .._faces.aio import AsyncCacheCalls
from .._open import asyncio_face_of
from .._store import has_store
from ..core import Cache
from ._threads import ThreadedStore
from .turns import AsyncPayOnceCalls

if TYPE_CHECKING:
    from ..remote.cache import RedisCache


class AsyncCache(AsyncCacheCalls, AsyncPayOnceCalls):
    """The whole :class:`~diskcache_oxide.Cache` API as coroutines.

    :param cache: a :class:`Cache`, or a directory to open one in (``None``: a temporary
        directory); ``settings`` are passed to ``Cache`` then. A
        :class:`~diskcache_oxide.remote.RedisCache` gives its asyncio face instead, an
        :class:`~diskcache_oxide.remote.AsyncRedisCache` with the same names, whose calls
        run on redis-py's asyncio client and hold no thread (D-059)
    :param executor: where the blocking calls run (default: the running loop's default
        executor). Blocking waits (``pull(timeout=...)``) hold a thread for their duration,
        so give many concurrent waiters an executor of their own

    Method names and arguments are the cache's. Python's protocols that cannot be awaited
    are methods here: ``contains(key)``, ``length()``, ``getitem(key)``, ``setitem``,
    ``delitem``, ``keys()``. ``transact()`` is an ``async with`` block whose calls all run
    on one thread that holds the transaction.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> AsyncCache:
        # What takes a cache takes either backend: a RedisCache's awaitables are its asyncio
        # face, the same operations on redis-py's asyncio client (D-059), not this class's
        # calls in a thread. Python skips __init__ for an object that is not an AsyncCache.
        # (*args: a subclass's __init__ may take other arguments; object.__new__ takes none.)
        cache = args[0] if args else kwargs.get("cache")
        face = asyncio_face_of(cache) if cls is AsyncCache else None
        if face is not None:
            kwargs.pop("cache", None)
            made: AsyncCache = face(cache, *args[1:], **kwargs)
            return made
        return super().__new__(cls)

    def __init__(
        self,
        cache: Cache | RedisCache | str | os.PathLike[str] | None = None,
        *,
        executor: Executor | None = None,
        **settings: Any,
    ) -> None:
        if has_store(cache) and asyncio_face_of(cache) is None:  # a directory's Cache
            if settings:
                raise TypeError("settings are only accepted with a directory, not a Cache")
            self._cache = cast("Cache", cache)
        elif cache is None or isinstance(cache, (str, os.PathLike)):
            self._cache = Cache(cache, **settings)
        else:
            raise TypeError(
                "AsyncCache() takes a Cache, a RedisCache or a directory, not "
                f"{type(cache).__name__}"
            )
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

    def _dco_async_store(self) -> ThreadedStore:
        """The seam's asyncio store (``_store.async_store_of``): the cache's calls in this
        face's executor."""
        return ThreadedStore(self._cache, self._executor)

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
