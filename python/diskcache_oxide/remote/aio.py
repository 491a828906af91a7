"""``AsyncRedisCache``: RedisCache's calls as coroutines on redis-py's asyncio client (issue 21,
D-059).

The calls are RedisCache's operations (``_ops``), awaited on ``redis.asyncio.Redis`` or
``redis.asyncio.cluster.RedisCluster`` instead of run on the blocking client: the methods are
generated from the API table into ``_faces/remote_aio.py`` (``AsyncRedisCacheCalls``), with
AsyncCache's names (``getitem``, ``contains``, ``length``, ...), so code written against an
:class:`~diskcache_oxide.aio.AsyncCache` runs unchanged. No call holds a thread: a blocked
``pull(timeout=)`` is an awaited ``BLPOP``.

``AsyncCache(redis_cache)`` gives one (``aio.cache``): what takes a cache takes either
backend. :func:`asyncio_client` makes the asyncio twin of a blocking client.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import secrets
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.connection
import redis.cluster
import redis.connection

from .. import _payonce as core
from .._faces.remote_aio import AsyncRedisCacheCalls
from ..aio._run import _in_thread, _reshape
from ..claims import Claim, Claims
from . import _ops
from . import claims as claim_ops
from ._io import RECONNECT_FOR, AsyncLink, Op
from ._ops import Namespace
from ._scripts import SCRIPTS
from .cache import RedisCache, _split_url, connect_timeout
from .claims import LINKED

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from typing import Self
    else:
        from typing_extensions import Self

    from ..aio.claims import AsyncClaims

__all__ = ["AsyncRedisCache", "asyncio_client", "blocking_client", "open_async_client"]

T = TypeVar("T")
_Tag = str | int | float | bytes | None
_Side = Literal["front", "back"]

#: The asyncio connection class for each blocking one (the most derived match wins).
_CONNECTIONS: tuple[tuple[type, type], ...] = (
    (
        redis.connection.UnixDomainSocketConnection,
        redis.asyncio.connection.UnixDomainSocketConnection,
    ),
    (redis.connection.SSLConnection, redis.asyncio.connection.SSLConnection),
    (redis.connection.Connection, redis.asyncio.connection.Connection),
)

#: Settings of a blocking connection that are objects of the blocking client (its retry
#: policy, parser, connect hook): the asyncio twin keeps its own defaults for them.
_NOT_CARRIED = frozenset(
    {"retry", "parser_class", "redis_connect_func", "event_dispatcher", "encoder_class"}
)


def _accepted(cls: type) -> set[str]:
    """The keyword arguments ``cls`` and the classes it passes ``**kwargs`` to take."""
    names: set[str] = set()
    for klass in cls.__mro__:
        init = vars(klass).get("__init__")
        if init is not None:
            names.update(inspect.signature(init).parameters)
    return names - {"self", "args", "kwargs"}


def _carried(kwargs: dict[str, Any], cls: type) -> dict[str, Any]:
    wanted = _accepted(cls)
    return {k: v for k, v in kwargs.items() if k in wanted and k not in _NOT_CARRIED}


def _cluster_kwargs(client: Any, ssl_class: type) -> dict[str, Any]:
    kwargs = dict(client.get_connection_kwargs())
    if kwargs.pop("connection_class", None) is ssl_class:
        kwargs["ssl"] = True
    return kwargs


def asyncio_client(client: Any) -> Any:
    """The asyncio twin of a blocking redis-py client: a ``redis.asyncio.Redis`` on the same
    server (TCP, TLS or unix socket, with the same database, credentials, timeouts and TLS
    files), or a ``redis.asyncio.cluster.RedisCluster`` that starts from the same nodes with
    the same connection settings. Settings that are objects of the blocking client (its
    ``retry`` policy, a parser or connect hook) are left at the asyncio client's defaults.
    :func:`blocking_client` goes the other way.

    :raises TypeError: for anything but a ``redis.Redis`` or ``RedisCluster``
    """
    return _twin(client, to_async=True)


def blocking_client(client: Any) -> Any:
    """The blocking twin of an asyncio redis-py client (:func:`asyncio_client` reversed)."""
    return _twin(client, to_async=False)


def _twin(client: Any, to_async: bool) -> Any:
    blocking_side, asyncio_side = 0, 1
    source, target = (blocking_side, asyncio_side) if to_async else (asyncio_side, blocking_side)
    clusters = (redis.cluster.RedisCluster, redis.asyncio.cluster.RedisCluster)
    singles = (redis.Redis, redis.asyncio.Redis)
    ssl_classes = (redis.connection.SSLConnection, redis.asyncio.connection.SSLConnection)
    if isinstance(client, clusters[source]):
        kwargs = _cluster_kwargs(client, ssl_classes[source])
        if to_async:
            found = client.get_nodes()
        else:  # an asyncio cluster knows its startup nodes before it has connected
            found = client.get_nodes() or list(client.nodes_manager.startup_nodes.values())
        if to_async:
            nodes = [redis.asyncio.cluster.ClusterNode(n.host, n.port) for n in found]
            carried = _carried(kwargs, redis.asyncio.cluster.RedisCluster)
            return redis.asyncio.cluster.RedisCluster(startup_nodes=nodes, **carried)
        blocking_nodes = [
            redis.cluster.ClusterNode(n.host, n.port)  # type: ignore[no-untyped-call]
            for n in found
        ]
        carried = {k: v for k, v in kwargs.items() if k not in _NOT_CARRIED}
        return redis.cluster.RedisCluster(startup_nodes=blocking_nodes, **carried)
    if isinstance(client, singles[source]):
        pool = client.connection_pool
        kind = next(
            (
                pair[target]
                for pair in _CONNECTIONS
                if issubclass(pool.connection_class, pair[source])
            ),
            None,
        )
        if kind is None:
            raise TypeError(
                f"cannot make a twin of a client on {pool.connection_class.__name__}; "
                "give AsyncRedisCache an asyncio client or a URL instead"
            )
        carried = _carried(dict(pool.connection_kwargs), kind)
        if to_async:
            apool = redis.asyncio.ConnectionPool(
                connection_class=kind, max_connections=pool.max_connections, **carried
            )
            return redis.asyncio.Redis(connection_pool=apool)
        bpool = redis.ConnectionPool(
            connection_class=kind, max_connections=pool.max_connections, **carried
        )
        return redis.Redis(connection_pool=bpool)
    raise TypeError(
        f"{'asyncio_client' if to_async else 'blocking_client'}() takes a "
        f"{'' if to_async else 'redis.asyncio '}Redis or RedisCluster client, not "
        f"{type(client).__name__}"
    )


def open_async_client(url: str, timeout: float = 60.0) -> Any:
    """An asyncio redis-py client for ``url``, as :func:`~diskcache_oxide.remote.open_client`
    opens a blocking one (``?cluster=1`` opens a ``RedisCluster``)."""
    url, cluster = _split_url(url)
    # redis-py's asyncio client handshakes TLS inside its connect timeout already: bounding
    # that (connect_timeout) is what makes rediss:// to a plain server fail soon (issue 29).
    connect = connect_timeout(timeout)
    if cluster:
        return redis.asyncio.cluster.RedisCluster.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=connect
        )
    return redis.asyncio.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=connect)


_ASYNC_CLIENTS = (redis.asyncio.Redis, redis.asyncio.cluster.RedisCluster)


class AsyncRedisCache(AsyncRedisCacheCalls, Namespace):
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
        if isinstance(source, RedisCache):
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

    async def _claim(self, op: Op[T]) -> T:
        """Await a claims operation (``remote.claims``) on the asyncio client."""
        if self._claims_alink is None:
            self._claims_alink = AsyncLink(
                self._client, self._base, LINKED, **self._alink.settings()
            )
        return await self._claims_alink.run(op)

    async def _storage(self, call: core.Call, op: str, arg: Any) -> Any:
        """One storage operation of the pay-once protocol (``_payonce.storage``), awaited on
        the asyncio client instead of run in a thread."""
        if op is core.GET:
            return await self._claim(claim_ops.get(self, call.key))
        if op is core.ACQUIRE:
            return await self._try_acquire(call.claims, call.key, call.lease)
        if op is core.STORE:
            await self._claim(claim_ops.store(self, call.key, arg, call.expire, call.tag))
            return None
        if op is core.RELEASE:
            return await self._claim(claim_ops.release(self, call.namespace, arg.key, arg.token))
        if op is core.EXTEND:
            return await self._claim(
                claim_ops.extend(self, call.namespace, arg.key, arg.token, arg.lease)
            )
        if op is core.WAIT or op is core.WAIT_FREE:
            wait = claim_ops.wait_for_change(self, call.namespace, call.key, arg, op is core.WAIT)
            await self._claim(wait)
            return None
        raise AssertionError(f"not a storage operation: {op!r}")

    async def _try_acquire(self, claims: Claims, key: Any, lease: float) -> Claim | None:
        """``Claims.try_acquire`` on the asyncio client: the same token, host and pid."""
        token = secrets.token_hex(16)
        host, pid = socket.gethostname(), os.getpid()
        taken = await self._claim(
            claim_ops.try_acquire(self, claims.namespace, key, lease, token, host, pid)
        )
        return Claim(claims, key, token, lease) if taken else None

    def claims(self, namespace: str = "default") -> AsyncClaims:
        """Claims on this cache's keys (:class:`~diskcache_oxide.aio.AsyncClaims`)."""
        from ..aio.claims import AsyncClaims

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
        """:func:`~diskcache_oxide.aio.aget_or_compute` on this cache (as
        :meth:`AsyncCache.get_or_compute <diskcache_oxide.aio.AsyncCache.get_or_compute>`)."""
        from ..aio.turns import aget_or_compute

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


async def _quietly(work: Awaitable[object]) -> None:
    from ..aio._run import _log

    try:
        await work
    except Exception:
        _log.exception("could not give back what a cancelled pull took")
