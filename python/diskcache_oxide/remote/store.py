"""A Redis namespace's :class:`~diskcache_oxide._store.Store`: what ``RedisCache._dco_store``
gives the features."""

from __future__ import annotations

from typing import Any

from .._store import JobsBackend

__all__ = ["RemoteStore"]


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

    def jobs(self, strict: bool) -> JobsBackend:
        """The namespace's job records (:class:`~diskcache_oxide.remote.jobs.RedisJobs`);
        ``strict`` refuses a server whose maxmemory-policy may evict them."""
        from .jobs import RedisJobs

        return RedisJobs(self.cache, strict=strict)
