"""A Redis namespace's :class:`~diskcache_oxide._store.Store`: what ``RedisCache._dco_store``
gives the features; and its asyncio store (:class:`AsyncRemoteStore`), on redis-py's asyncio
client, for an ``AsyncRedisCache`` or for a ``RedisCache`` given to an asyncio feature."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from .._asyncio import _in_thread
from .._store import AsyncStore, ClaimRegistry, JobsBackend, Stored
from ._clients import asyncio_client
from ._io import AsyncLink
from ._policy import check_eviction
from .claims import LINKED, AsyncRedisClaims, RedisClaims
from .inspector import RemoteInspector

if TYPE_CHECKING:
    from .jobs import AsyncRedisJobs

__all__ = ["AsyncRemoteStore", "RemoteStore"]

T = TypeVar("T")


class RemoteStore:
    """The store of one :class:`~diskcache_oxide.remote.RedisCache` (its namespace)."""

    __slots__ = ("cache",)

    def __init__(self, cache: Any) -> None:
        # Any, not RedisCache: importing the cache's module here would run the import back
        # up into the module that imports this one (tests/api/test_layers.py).
        self.cache = cache

    @property
    def where(self) -> str:
        """The namespace, as a repr shows it."""
        return f"<redis namespace {self.cache.namespace!r}>"

    @property
    def transactional(self) -> bool:
        """No: a group of calls on Redis is not one transaction (D-058)."""
        return False

    def jobs(self, strict: bool) -> JobsBackend:
        """The namespace's job records (:class:`~diskcache_oxide.remote.jobs.RedisJobs`);
        ``strict`` refuses a server whose maxmemory-policy may evict them."""
        from .jobs import RedisJobs

        return RedisJobs(self.cache, strict=strict)

    def claims(self, strict: bool) -> ClaimRegistry:
        """The namespace's claims and values (:class:`~diskcache_oxide.remote.claims.RedisClaims`);
        ``strict`` refuses a server whose maxmemory-policy may evict them."""
        return RedisClaims(self.cache, strict=strict)

    def asyncio_jobs(self, jobs: JobsBackend, client: Any) -> tuple[AsyncRedisJobs, Any]:
        """``jobs`` (a :class:`~diskcache_oxide.remote.jobs.RedisJobs` of this namespace) on
        ``client``, or on an asyncio twin of the cache's client made here (returned second,
        for the caller to close)."""
        from .jobs import AsyncRedisJobs, RedisJobs

        assert isinstance(jobs, RedisJobs), jobs  # this store's own job storage
        made = None
        if client is None:
            client = made = asyncio_client(self.cache.client)
        return AsyncRedisJobs(jobs, client), made

    def check_eviction(self, what: Literal["jobs", "claims", "tasks"], strict: bool) -> None:
        """Warn once per server and process (:class:`~diskcache_oxide.remote.EvictionWarning`),
        or with ``strict`` refuse, if the server's ``maxmemory-policy`` may evict ``what``
        (``remote._policy``)."""
        check_eviction(self.cache, what, strict=strict)

    def asyncio(self) -> AsyncStore | None:
        """The namespace on an asyncio twin of the cache's client, one per running loop (an
        asyncio client belongs to one loop), kept on the cache while the loop lives and made
        the first time an asyncio feature runs on the cache there; outside a loop, a new one
        each time."""
        cache = self.cache
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return self._made()
        made: AsyncStore | None = cache._async_faces.get(loop)
        if made is None:
            made = cache._async_faces[loop] = self._made()
        return made

    def _made(self) -> AsyncRemoteStore:
        cache = self.cache
        link = AsyncLink(
            asyncio_client(cache.client), cache._base, LINKED, **cache._link.settings()
        )
        return AsyncRemoteStore(lambda: cache, AsyncRedisClaims(cache, link), None)

    def inspector(self) -> RemoteInspector:
        """The operator's reads of the namespace, with read commands only
        (:class:`~diskcache_oxide.remote.inspector.RemoteInspector`)."""
        return RemoteInspector(self.cache)


class AsyncRemoteStore:
    """The asyncio store of a Redis namespace (:class:`~diskcache_oxide._store.AsyncStore`):
    its claims awaited on an asyncio client; a plain function runs in ``executor``.

    :param blocking: gives the blocking ``RedisCache`` of the namespace (asked only when a
        feature needs it: an ``AsyncRedisCache`` made from a URL opens one then)
    :param claims: the namespace's claims on the asyncio client
    :param executor: where :meth:`run` runs a plain function (None: the loop's default)
    """

    __slots__ = ("_blocking", "_claims", "_executor")

    def __init__(
        self,
        blocking: Callable[[], Stored],
        claims: AsyncRedisClaims,
        executor: Executor | None,
    ) -> None:
        self._blocking = blocking
        self._claims = claims
        self._executor = executor

    @property
    def cache(self) -> Stored:
        return self._blocking()

    def claims(self) -> AsyncRedisClaims:
        return self._claims

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        return await _in_thread(self._executor, fn, *args, **kwargs)
