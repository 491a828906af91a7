"""Opening redis-py clients: a blocking or an asyncio client for a URL (with the cache's
own query settings taken out and the TLS handshake bounded), and the asyncio twin of a
blocking client or the blocking twin of an asyncio one.

Its own module because both faces (``cache.py``, ``aio.py``) and the asyncio store of a
blocking cache (``store.py``) open clients, and none of them may import the others'
modules back (tests/api/test_layers.py).
"""

from __future__ import annotations

import inspect
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.connection
import redis.cluster
import redis.connection

from ._tls import CONNECT_TIMEOUT, TLSConnection

__all__ = [
    "asyncio_client",
    "blocking_client",
    "connect_timeout",
    "open_async_client",
    "open_client",
]


def _split_url(url: str) -> tuple[str, bool]:
    """``url`` without the cache's own query settings (``cluster``, ``namespace``), and
    whether it asks for a cluster (``?cluster=1``, ``true`` or ``yes``). The rest of the URL
    is kept as written: ``unix:///path/to.sock`` stays so (``urlunsplit`` would write a URL
    with no host part as ``unix:/path/to.sock``, which redis-py refuses). The sync and the
    asyncio client are both opened from what this returns."""
    from urllib.parse import parse_qsl, urlencode, urlsplit

    parts = urlsplit(url)
    query = parse_qsl(parts.query)
    cluster = any(
        name == "cluster" and value.lower() in ("1", "true", "yes") for name, value in query
    )
    kept = [(name, value) for name, value in query if name not in ("cluster", "namespace")]
    # Only the query changes: cut it off the URL as given, then put the kept settings back.
    head = url.split("#", 1)[0].split("?", 1)[0]
    rebuilt = f"{head}?{urlencode(kept)}" if kept else head
    return (f"{rebuilt}#{parts.fragment}" if parts.fragment else rebuilt), cluster


def connect_timeout(timeout: float | None) -> float:
    """The connect timeout of a client opened from a URL with socket timeout ``timeout``: that
    timeout, but no more than ``CONNECT_TIMEOUT`` (10 s). A URL's own
    ``socket_connect_timeout=`` wins."""
    return CONNECT_TIMEOUT if timeout is None else min(timeout, CONNECT_TIMEOUT)


def open_client(url: str, timeout: float = 60.0) -> Any:
    """A redis-py client for ``url``; ``?cluster=1`` (or ``true``) opens a RedisCluster.
    ``namespace=`` in the query is the cache's, not the client's, and is dropped here.

    Connecting, the TLS handshake of ``rediss://`` included, waits at most
    :func:`connect_timeout` (issue 29): a plain server given a TLS hello never answers, and
    that is reported as a failed handshake, not as a stopped server after the socket timeout."""
    url, cluster = _split_url(url)
    if cluster:
        return redis.cluster.RedisCluster.from_url(  # type: ignore[no-untyped-call]
            url, socket_timeout=timeout, socket_connect_timeout=connect_timeout(timeout)
        )
    client = redis.Redis.from_url(
        url, socket_timeout=timeout, socket_connect_timeout=connect_timeout(timeout)
    )
    pool = client.connection_pool
    if pool.connection_class is redis.connection.SSLConnection:
        # Before any connection is made: each is then made with the handshake bounded.
        pool.connection_class = TLSConnection
    return client


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
