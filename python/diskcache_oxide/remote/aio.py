"""``AsyncRedisCache``: RedisCache's calls as coroutines on redis-py's asyncio client (issue 21,
D-059).

The calls are RedisCache's operations (``_ops``), awaited on ``redis.asyncio.Redis`` or
``redis.asyncio.cluster.RedisCluster`` instead of run on the blocking client: the methods are
generated from the API table into ``remote/_face_aio.py`` (``AsyncRedisCacheCalls``), with
AsyncCache's names (``getitem``, ``contains``, ``length``, ...), so code written against an
:class:`~diskcache_oxide.aio.AsyncCache` runs unchanged. No call holds a thread: a blocked
``pull(timeout=)`` is an awaited ``BLPOP``.

``AsyncCache(redis_cache)`` gives one (``aio.cache``): what takes a cache takes either
backend. :func:`asyncio_client` makes the asyncio twin of a blocking client.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from .._asyncio import _in_thread, _reshape
from .._store import has_store, store_of
from ..aio.turns import AsyncPayOnceCalls
from . import _ops
from ._clients import _ASYNC_CLIENTS, open_async_client
from ._clients import asyncio_client as asyncio_client
from ._clients import blocking_client as blocking_client
from ._face_aio import AsyncRedisCacheCalls
from ._io import AsyncLink
from ._ops import Namespace
from ._requests import Op
from ._retry import RECONNECT_FOR
from ._scripts import SCRIPTS
from .cache import RedisCache
from .claims import LINKED, AsyncRedisClaims
from .store import AsyncRemoteStore, RemoteStore

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from typing import Self
    else:
        from typing_extensions import Self


__all__ = ["AsyncRedisCache", "asyncio_client", "blocking_client", "open_async_client"]

T = TypeVar("T")
_Tag = str | int | float | bytes | None
_Side = Literal["front", "back"]


class AsyncRedisCache(AsyncRedisCacheCalls, AsyncPayOnceCalls, Namespace):
    """RedisCache's calls as coroutines on redis-py's asyncio client (D-059).

    :param source: a :class:`RedisCache` (its namespace and settings, on the asyncio twin of
        its client: :func:`asyncio_client`), a ``redis://``, ``rediss://`` or ``unix://`` URL
        (``?cluster=1``: a cluster), or a ``redis.asyncio.Redis``/``RedisCluster`` client
        (made with ``decode_responses=False``)
    :param namespace, pickle, on_decode_error, timeout, settings: as :class:`RedisCache`'s
        (with a RedisCache, its own are used and these must be left out)
    :param executor: where a plain function given to ``get_or_compute`` runs (default: the
        loop's default executor); no call of the cache holds a thread
    :param replicas, replica_timeout, reconnect_for: as :class:`RedisCache`'s (D-061); with a
        RedisCache, its own

    The names are :class:`~diskcache_oxide.aio.AsyncCache`'s: ``await acache.get(key)``,
    ``contains(key)``, ``length()``, ``getitem(key)``, ``keys()``. ``AsyncCache(redis_cache)``
    returns one of these.
    """

    def __init__(
        self,
        source: Any,
        namespace: str = "default",
        pickle: bool = False,
        on_decode_error: str = "raise",
        timeout: float = 60.0,
        *,
        executor: Executor | None = None,
        replicas: int = 0,
        replica_timeout: float = 1.0,
        reconnect_for: float = RECONNECT_FOR,
        **settings: Any,
    ) -> None:
        self._cache: RedisCache | None = None
        self._cache_owned = False
        self._url = source if isinstance(source, str) else None
        self._timeout = timeout
        # A blocking cache of this backend (its store says so, as for any feature): this face
        # adopts it, with its namespace and settings.
        store = store_of(source) if has_store(source) else None
        if isinstance(store, RemoteStore):
            source = store.cache
            defaults = ("default", False, "raise", 60.0)
            if (namespace, pickle, on_decode_error, timeout) != defaults or settings:
                raise TypeError(
                    "AsyncRedisCache(redis_cache) takes the RedisCache's namespace and "
                    "settings; pass them to RedisCache, or give a URL or client instead"
                )
            self._cache = source
            namespace, pickle = source.namespace, source.pickle
            on_decode_error = source.on_decode_error
            # The same promises as the blocking face: WAIT for as many replicas, and as long
            # a reconnect (D-061).
            waits = source._link.settings()
            replicas, replica_timeout = waits["replicas"], waits["replica_timeout"]
            reconnect_for = waits["reconnect_for"]
        if settings.get("statistics"):
            raise ValueError(
                "statistics=True would need a call to the server while constructing; "
                "use `await acache.stats(enable=True)` instead"
            )
        self._configure("AsyncRedisCache", namespace, pickle, on_decode_error, settings)
        self._owned = not isinstance(source, _ASYNC_CLIENTS)
        client: Any
        if self._cache is not None:
            client = asyncio_client(self._cache.client)
        elif isinstance(source, str):
            client = open_async_client(source, timeout)
        elif isinstance(source, _ASYNC_CLIENTS):
            client = source
        else:
            raise TypeError(
                "AsyncRedisCache() takes a RedisCache, a redis:// URL or a redis.asyncio "
                f"Redis or RedisCluster client, not {type(source).__name__}"
            )
        kwargs: dict[str, Any] = getattr(client, "get_connection_kwargs", dict)()
        if kwargs.get("decode_responses"):
            raise ValueError("AsyncRedisCache needs a client made with decode_responses=False")
        self._client: Any = client
        self._fit_slice(kwargs)
        self._alink = AsyncLink(
            client,
            self._base,
            SCRIPTS,
            replicas=replicas,
            replica_timeout=replica_timeout,
            reconnect_for=reconnect_for,
        )
        self._claims_alink: AsyncLink | None = None
        self._executor = executor
        #: The takes of cancelled pulls still running and their give-backs, until they end.
        self._giving_back: set[asyncio.Task[Any]] = set()

    def __repr__(self) -> str:
        return f"AsyncRedisCache(namespace={self._namespace!r})"

    # ----- handle ----------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """The asyncio redis-py client."""
        return self._client

    @property
    def cache(self) -> RedisCache:
        """The blocking :class:`RedisCache` of the same namespace: the one this was made from,
        else one made the first time it is asked for (on the URL, or on the blocking twin of
        the asyncio client: :func:`blocking_client`) and closed with this one. The claims of
        ``claims()`` and ``get_or_compute`` run on the asyncio client; this is where a plain
        function given its claim (``pass_claim=True``) renews it from its thread."""
        if self._cache is None:
            client: Any = self._url if self._url is not None else blocking_client(self._client)
            self._cache = RedisCache(
                client, self._namespace, self._pickle, self._on_decode_error, self._timeout
            )
            self._cache_owned = True
        return self._cache

    @property
    def executor(self) -> Executor | None:
        """Where a plain function given to ``get_or_compute`` runs (None: the loop's default
        executor)."""
        return self._executor

    async def _run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        return await _in_thread(self._executor, fn, *args, **kwargs)

    async def close(self) -> None:
        """Close the asyncio client if this cache opened it (from a URL, or as the twin of a
        RedisCache's client); the RedisCache's own client is left open. Waits first for what
        cancelled pulls took to be given back."""
        await self._settle()
        if self._owned:
            await self._client.aclose()
        if self._cache_owned and self._cache is not None:
            if self._url is None:
                self._cache.client.close()  # the blocking twin this cache made
            else:
                self._cache.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exception: object) -> None:
        await self.close()

    # ----- keys ------------------------------------------------------------------------------

    async def keys(self, reverse: bool = False, prefix: str | None = None) -> list[Any]:
        """Every key (or the str keys under ``prefix``) in a directory's sorted order, as a
        list: ``RedisCache.iterkeys``, awaited."""
        found: list[Any] = []
        async for key in self._in_order(False):
            found.append(key)
        return _ops.sorted_keys(found, prefix, reverse)

    async def _in_order(self, reverse: bool) -> AsyncIterator[Any]:
        """The keys in the order they were first stored, a page of the index at a time."""
        after: str | None = None
        while True:
            page, after = await self._alink.run(_ops.keys_page(self, reverse, after))
            for key in page:
                yield key
            if after is None:
                return

    async def iterkeys(
        self, reverse: bool = False, prefix: str | None = None
    ) -> AsyncIterator[Any]:
        """The keys of :meth:`keys`, for ``async for`` (read and sorted first, as
        ``RedisCache.iterkeys`` does)."""
        for key in await self.keys(reverse, prefix):
            yield key

    def __aiter__(self) -> AsyncIterator[Any]:
        """The keys in the order they were first stored, as iterating a cache gives them."""
        return self._in_order(False)

    # ----- the queue: a cancelled caller loses no item ---------------------------------------

    async def _taking(self, op: Op[T], give_back: Callable[[T], Awaitable[object]]) -> T:
        """Run ``op``, which takes items, so that cancelling the caller loses none: the
        operation runs in a task of its own; a caller cancelled while it waits (BLPOP, which
        takes nothing) cancels it there; one cancelled while a script runs lets the script
        answer, and what it took is given back with ``give_back``."""
        state = {"waiting": False, "stop": False}
        alink = self._alink
        call = str(getattr(op, "__name__", ""))  # named in errors, as AsyncLink.run names it

        async def drive() -> T:
            reply: Any = None
            error: BaseException | None = None
            while True:
                try:
                    request = op.send(reply) if error is None else op.throw(error)
                except StopIteration as done:
                    return done.value  # type: ignore[no-any-return]
                waits = _ops.is_wait(request)
                if waits and state["stop"]:
                    op.close()
                    raise asyncio.CancelledError
                error = None
                state["waiting"] = waits
                try:
                    reply = await alink.send(request, call)
                except Exception as exc:
                    reply, error = None, exc
                finally:
                    state["waiting"] = False

        task = asyncio.get_running_loop().create_task(drive())
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            state["stop"] = True
            if state["waiting"]:
                task.cancel()
            # Kept (and awaited by close()) until it and its give-back end.
            self._giving_back.add(task)
            task.add_done_callback(self._orphaned(give_back))
            raise

    def _orphaned(
        self, give_back: Callable[[T], Awaitable[object]]
    ) -> Callable[[asyncio.Task[T]], None]:
        def orphaned(done: asyncio.Task[T]) -> None:
            self._giving_back.discard(done)
            if done.cancelled() or done.exception() is not None:
                return
            back = asyncio.get_running_loop().create_task(_quietly(give_back(done.result())))
            self._giving_back.add(back)
            back.add_done_callback(self._giving_back.discard)

        return orphaned

    async def _settle(self) -> None:
        """Wait for the takes of cancelled callers and their give-backs to end."""
        while self._giving_back:
            await asyncio.gather(*self._giving_back, return_exceptions=True)

    async def _give_back(self, items: list[Any], prefix: str | None, side: _Side) -> None:
        # Items come as ((key, value), expire_time, tag); put them back at the end they were
        # taken from, nearest last, so their order is kept (their keys change).
        now = time.time()
        for (_key, value), expires, tag in reversed(items):
            if expires is not None and expires <= now:
                continue
            remaining = None if expires is None else expires - now
            await self._alink.run(_ops.push(self, value, prefix, side, remaining, False, tag))

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
        """``RedisCache.pull`` awaited: a wait with ``timeout`` is a BLPOP on the asyncio
        client, holding no thread. If the caller is cancelled, an item taken after all is
        pushed back at the same end."""
        missing = object()

        async def give_back(item: Any) -> None:
            if item[0] is not missing:
                await self._give_back([item], prefix, side)

        op = _ops.pull(self, prefix, missing, side, True, True, retry, timeout)
        item = await self._taking(op, give_back)
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
        """``RedisCache.pull_many`` awaited; a cancelled caller's items are pushed back."""

        async def give_back(items: list[Any]) -> None:
            await self._give_back(items, prefix, side)

        op = _ops.pull_many(self, n, prefix, side, True, True, retry, timeout)
        items = await self._taking(op, give_back)
        return [_reshape(item, expire_time, tag) for item in items]

    # ----- claims and compute-once: the operations of remote.claims on the asyncio client -----

    def _dco_async_store(self) -> AsyncRemoteStore:
        """The seam's asyncio store (``_store.async_store_of``): the claims on this face's
        asyncio client; a plain function in its executor."""
        if self._claims_alink is None:
            self._claims_alink = AsyncLink(
                self._client, self._base, LINKED, **self._alink.settings()
            )
        claims = AsyncRedisClaims(self, self._claims_alink)
        return AsyncRemoteStore(lambda: self.cache, claims, self._executor)


async def _quietly(work: Awaitable[object]) -> None:
    from .._log import log

    try:
        await work
    except Exception:
        log().exception("could not give back what a cancelled pull took")
