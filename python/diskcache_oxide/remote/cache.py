"""``RedisCache``: python-diskcache's Cache calls and the queue on a Redis, Valkey or Redis
Cluster server (issue 21, D-058, D-059).

Each call is an operation of ``_ops`` (a generator of Lua scripts and commands, each script
run atomically on the server, on the keys of one namespace only), run here on the blocking
redis-py client; the methods are generated from the API table into ``remote/_face.py``
(``RedisCacheCalls``). Values and keys are stored as the engine's frames
(``_core.encode_value`` and ``encode_key``), the same bytes a directory holds, so nothing is
pickled unless ``pickle=True``.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

try:
    import redis
    import redis.cluster
    import redis.connection
except ImportError as error:  # the extra is not installed: say how to get it
    raise ImportError(
        f"diskcache_oxide.remote needs redis-py ({error}): pip install 'diskcache_oxide[redis]'"
    ) from error

if TYPE_CHECKING:  # only for annotations: the package has no run-time dependencies
    if sys.version_info >= (3, 11):
        from typing import Self
    else:
        from typing_extensions import Self

from .._keying import Memoized, memoize_on
from ..claims import PayOnceCalls
from ..errors import UnsupportedError
from . import _ops
from ._clients import open_client
from ._face import RedisCacheCalls
from ._io import Link
from ._ops import Namespace
from ._scripts import SCRIPTS
from .store import RemoteStore

__all__ = ["RedisCache", "UnsupportedError"]

P = ParamSpec("P")
R = TypeVar("R")

_Tag = str | int | float | bytes | None


class RedisCache(RedisCacheCalls, PayOnceCalls, Namespace):
    """A cache and queue in one namespace of a Redis server (D-058).

    :param client_or_url: a ``redis://``, ``rediss://`` or ``unix://`` URL (``?cluster=1``
        opens a ``RedisCluster``), or a configured ``redis.Redis``/``RedisCluster`` client
        (made with ``decode_responses=False``)
    :param namespace: every key this cache writes starts with ``dco:{namespace}:``; the braces
        are a hash tag, so a namespace lives in one cluster slot
    :param pickle: read and write pickles for values the safe format cannot express
    :param on_decode_error: ``'raise'`` or ``'miss'`` (an undecodable value reads as a miss)
    :param timeout: the socket timeout of a client opened from a URL, in seconds
    :param replicas: after each write, ``WAIT`` until this many replicas acknowledged it, or
        raise :class:`~diskcache_oxide.remote.NotReplicatedError` (D-061); 0: no wait
    :param replica_timeout: the longest that wait, in seconds
    :param reconnect_for: after a connection error, how long to go on repeating a call that is
        safe to repeat (every call: writes carry a request token, D-061) before raising
        :class:`~diskcache_oxide.remote.ServerConnectionError`
    :param settings: a directory's settings; those Redis cannot honour raise
        :class:`UnsupportedError` (``size_limit`` and culling: use the server's
        ``maxmemory``)

    Every call of Cache that Redis carries is generated from the API table
    (``remote/_face.py``): it runs its operation of ``remote/_ops.py`` on this client.
    """

    def __init__(
        self,
        client_or_url: Any,
        namespace: str = "default",
        pickle: bool = False,
        on_decode_error: str = "raise",
        timeout: float = 60.0,
        replicas: int = 0,
        replica_timeout: float = 1.0,
        reconnect_for: float = 10.0,
        **settings: Any,
    ) -> None:
        self._configure("RedisCache", namespace, pickle, on_decode_error, settings)
        self._owned = isinstance(client_or_url, str)
        if isinstance(client_or_url, str):
            client_or_url = open_client(client_or_url, timeout)
        if not isinstance(client_or_url, (redis.Redis, redis.cluster.RedisCluster)):
            raise TypeError(
                "RedisCache() takes a redis:// URL or a redis.Redis or RedisCluster client, "
                f"not {type(client_or_url).__name__}"
            )
        client: Any = client_or_url
        kwargs: dict[str, Any] = getattr(client, "get_connection_kwargs", dict)()
        if kwargs.get("decode_responses"):
            raise ValueError("RedisCache needs a client made with decode_responses=False")
        self._client: Any = client
        self._fit_slice(kwargs)
        self._link = Link(
            client,
            self._base,
            SCRIPTS,
            replicas=replicas,
            replica_timeout=replica_timeout,
            reconnect_for=reconnect_for,
        )
        self._keys = self._link.keys
        #: The asyncio face the async pay-once drivers use, per event loop (aio.claims).
        self._async_faces: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        if settings.get("statistics"):
            self.stats(enable=True)

    # ----- handle ----------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """The redis-py client."""
        return self._client

    def _dco_store(self) -> RemoteStore:
        """This namespace's answers to the features (the seam, ``_store.store_of``)."""
        return RemoteStore(self)

    def close(self) -> None:
        """Close the client's connections if this cache opened it from a URL; as a directory's
        handle does, the cache opens new ones on its next call."""
        if not self._owned:
            return
        if isinstance(self._client, redis.cluster.RedisCluster):
            # RedisCluster.close() forgets the cluster's nodes, and its next call fails with
            # an AttributeError; dropping the connections keeps it usable.
            self._client.disconnect_connection_pools()  # type: ignore[no-untyped-call]
        else:
            self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exception: object) -> None:
        self.close()

    # ----- keys: lazy, a page at a time ------------------------------------------------------

    def iterkeys(self, reverse: bool = False, prefix: str | None = None) -> Iterator[Any]:
        """The keys in a directory's sorted order (largest first with ``reverse``): numbers,
        then str keys by their UTF-8 bytes, then bytes keys, then the other keys by their
        frame; with ``prefix``, only the str keys that start with it. The keys are read
        first, from the index (paged by score), and sorted here; iterate the cache itself
        for the order they were first stored."""
        return iter(_ops.sorted_keys(self._keys_in_order(False), prefix, reverse))

    def _keys_in_order(self, reverse: bool) -> Iterator[Any]:
        after: str | None = None
        while True:
            keys, after = self._link.run(_ops.keys_page(self, reverse, after))
            yield from keys
            if after is None:
                return

    def __iter__(self) -> Iterator[Any]:
        """The keys in the order they were first stored, as a directory's cache iterates."""
        return self._keys_in_order(False)

    def __reversed__(self) -> Iterator[Any]:
        return self._keys_in_order(True)

    # ----- memoize ---------------------------------------------------------------------------

    def memoize(
        self,
        name: str | None = None,
        typed: bool = False,
        expire: float | None = None,
        tag: _Tag = None,
        ignore: Collection[int | str] = (),
    ) -> Callable[[Callable[P, R]], Memoized[P, R]]:
        """Decorator caching a function's results by its arguments (:meth:`Cache.memoize`)."""
        return memoize_on(self, name, typed, expire, tag, ignore)
