"""A cache directory's :class:`~diskcache_oxide._store.Store`: what ``Cache._dco_store`` gives
the features."""

from __future__ import annotations

from typing import Any, Literal

from .._store import AsyncStore, ClaimRegistry, JobsBackend
from .claims import DirectoryClaims
from .inspector import DirectoryInspector

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

    @property
    def transactional(self) -> bool:
        """A group of calls can be one SQLite transaction (``Cache.transact``)."""
        return True

    def jobs(self, strict: bool) -> JobsBackend:
        """The binding's ``JobsCore`` of the directory. A directory evicts no job, so
        ``strict`` has nothing to refuse."""
        jobs: JobsBackend = self.cache._jobs
        return jobs

    def asyncio(self) -> AsyncStore | None:
        """None: the engine's calls block, so the asyncio features run them in threads."""
        return None

    def asyncio_jobs(self, jobs: JobsBackend, client: Any) -> None:
        """None: the engine's calls block, so ``AsyncJobQueue`` runs them in threads."""
        return None

    def check_eviction(self, what: Literal["jobs", "claims", "tasks"], strict: bool) -> None:
        """Nothing to check: a directory evicts no job, claim or task record."""

    def claims(self, strict: bool) -> ClaimRegistry:
        """The directory's claims table and entries (:class:`DirectoryClaims`). A directory
        evicts no claim, so ``strict`` has nothing to refuse."""
        return DirectoryClaims(self.cache)

    def inspector(self) -> DirectoryInspector:
        """The operator's reads of the directory (:class:`DirectoryInspector`)."""
        return DirectoryInspector(self.cache)
