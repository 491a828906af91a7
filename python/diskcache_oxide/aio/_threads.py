"""The asyncio store of a blocking cache: its claims' calls run in a worker thread.

A store whose backend has no asyncio client of its own (a cache directory: the engine's calls
block) is awaited this way: each call of its :class:`~diskcache_oxide._store.ClaimRegistry`
runs in the face's executor. It is written over the seam only, so it serves any such backend;
Redis supplies its own, on redis-py's asyncio client (``remote/store.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

from .._asyncio import _in_thread
from .._store import ClaimRegistry, Record, Stored, store_of

__all__ = ["ThreadedClaims", "ThreadedStore"]

T = TypeVar("T")


class ThreadedClaims:
    """:class:`~diskcache_oxide._store.AsyncClaimBackend` over a blocking
    :class:`~diskcache_oxide._store.ClaimRegistry`: each call in ``executor`` (None: the
    running loop's default executor)."""

    __slots__ = ("_claims", "_executor")

    def __init__(self, claims: ClaimRegistry, executor: Executor | None) -> None:
        self._claims = claims
        self._executor = executor

    async def get(self, key: Any) -> Any:
        return await _in_thread(self._executor, self._claims.get, key)

    async def store(self, key: Any, value: Any, expire: float | None, tag: Any) -> None:
        await _in_thread(self._executor, self._claims.store, key, value, expire, tag)

    async def try_acquire(
        self, namespace: str, key: Any, lease: float, token: str, host: str, pid: int
    ) -> bool:
        take = self._claims.try_acquire
        return await _in_thread(self._executor, take, namespace, key, lease, token, host, pid)

    async def extend(self, namespace: str, key: Any, token: str, lease: float) -> bool:
        return await _in_thread(self._executor, self._claims.extend, namespace, key, token, lease)

    async def release(self, namespace: str, key: Any, token: str) -> bool:
        return await _in_thread(self._executor, self._claims.release, namespace, key, token)

    async def wait_for_change(self, namespace: str, key: Any, seconds: float, value: bool) -> bool:
        # Holds a thread of the executor while it sleeps (D-024): give many concurrent
        # waiters an executor of their own.
        wait = self._claims.wait_for_change
        return await _in_thread(self._executor, wait, namespace, key, seconds, value)

    async def holder(self, namespace: str, key: Any) -> Record | None:
        return await _in_thread(self._executor, self._claims.holder, namespace, key)

    async def claims(self, namespace: str) -> list[tuple[Any, Record]]:
        return await _in_thread(self._executor, self._claims.claims, namespace)


class ThreadedStore:
    """:class:`~diskcache_oxide._store.AsyncStore` of a blocking ``cache`` whose calls run in
    ``executor``: an :class:`~diskcache_oxide.aio.AsyncCache`'s, or a directory's ``Cache``
    given to an asyncio feature as it is."""

    __slots__ = ("_cache", "_executor")

    def __init__(self, cache: Stored, executor: Executor | None = None) -> None:
        self._cache = cache
        self._executor = executor

    @property
    def cache(self) -> Stored:
        return self._cache

    def claims(self) -> ThreadedClaims:
        return ThreadedClaims(store_of(self._cache).claims(False), self._executor)

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        return await _in_thread(self._executor, fn, *args, **kwargs)
