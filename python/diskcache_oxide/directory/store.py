"""A cache directory's :class:`~diskcache_oxide._store.Store`: what ``Cache._dco_store`` gives
the features."""

from __future__ import annotations

from typing import Any

from .._store import JobsBackend

__all__ = ["DirectoryStore"]


class DirectoryStore:
    """The store of one :class:`~diskcache_oxide.Cache` (its directory)."""

    __slots__ = ("cache",)

    def __init__(self, cache: Any) -> None:
        # Any, not Cache: importing core here would run the import back up into the cache
        # module that imports this one (tests/api/test_layers.py).
        self.cache = cache

    @property
    def where(self) -> str:
        """The directory's path, as a repr shows it."""
        return repr(self.cache.directory)

    def jobs(self, strict: bool) -> JobsBackend:
        """The binding's ``JobsCore`` of the directory. A directory evicts no job, so
        ``strict`` has nothing to refuse."""
        jobs: JobsBackend = self.cache._jobs
        return jobs
