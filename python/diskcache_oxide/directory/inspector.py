"""The operator's reads of a cache directory: the :class:`~diskcache_oxide._store.Inspector`
that ``DirectoryStore.inspector`` gives :mod:`diskcache_oxide.admin`, the command line and the
dashboard (D-046).

The tools look through the handle they opened, read-only unless a command changes something
(``admin.open_cache``), so nothing here writes but :meth:`DirectoryInspector.vacuum`. A value
is previewed from the first few KiB of its stored bytes, never decoded (``Cache._preview``),
and the counters are read as stored (``stats()`` would switch counting on or off: a write).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

from .._store import Record, Unreadable
from ..errors import CacheError, DecodeError
from .settings import DEFAULT_SETTINGS

__all__ = ["SETTINGS", "DirectoryInspector"]

#: The settings a directory keeps, in the order ``info`` lists them.
SETTINGS = tuple(DEFAULT_SETTINGS)

#: The largest key of the int keys' queue (python-diskcache's queue range, the engine's
#: QUEUE_MAX).
_INT_QUEUE_MAX = 999_999_999_999_999


def _readable_keys(cache: Any, keys: Iterator[Any]) -> Iterator[Any]:
    # The keys of the binding's key iterator, an Unreadable(key) for each it cannot decode.
    # The iterator takes a key off its page before decoding it, so after a decode error
    # the next call goes on with the following key (crates/binding/src/iter.rs; tests/cli
    # covers it). An error of the database itself (a CacheError other than a DecodeError)
    # comes from reading a page and is raised: the next call would fail the same way.
    raised = 0  # errors in a row that are neither
    bound: int | None = None
    while True:
        try:
            key = next(keys)
        except StopIteration:
            return
        except DecodeError as error:
            yield Unreadable(error, "key")
        except CacheError:
            raise
        except Exception as error:  # a registered type's decoder raised: listed too
            # Each such error used one key up, so more in a row than the cache holds
            # would mean that something else fails, and would fail for ever.
            raised += 1
            if bound is None:
                bound = len(cache) + 100
            if raised > bound:
                raise
            yield Unreadable(error, "key")
        else:
            raised = 0
            yield key


class DirectoryInspector:
    """The operator's view of one :class:`~diskcache_oxide.Cache` (its directory)."""

    __slots__ = ("cache",)

    def __init__(self, cache: Any) -> None:
        # Any, not Cache: core.py imports this folder (tests/api/test_layers.py).
        self.cache = cache

    # ---- where, and what the directory says of itself ----

    @property
    def backend(self) -> str:
        return "directory"

    @property
    def location(self) -> str:
        directory: str = self.cache.directory
        return directory

    @property
    def directory(self) -> str | None:
        directory: str = self.cache.directory
        return directory

    @property
    def namespace(self) -> str | None:
        return None

    def ping(self) -> None:
        """Nothing to ask: the handle opened the directory's database."""

    def counters(self) -> tuple[int, int]:
        return self.cache.reset("hits"), self.cache.reset("misses")

    def settings(self) -> dict[str, Any]:
        return {name: getattr(self.cache, name) for name in SETTINGS}

    def server_memory(self) -> dict[str, Any]:
        return {}

    def volume(self) -> int | None:
        volume: int = self.cache.volume()
        return volume

    def vacuum(self) -> int:
        before: int = self.cache.volume()
        self.cache._vacuum()
        after: int = self.cache.volume()
        return max(0, before - after)

    def forgotten_jobs(self) -> dict[str, int] | None:
        return None  # the engine forgets no job

    # ---- entries and keys ----

    def entry(self, key: Any) -> tuple[Any, float | None, Any] | None:
        missing = object()
        value, expire_time, tag = self.cache.get(key, default=missing, expire_time=True, tag=True)
        return None if value is missing else (value, expire_time, tag)

    def preview(self, key: Any, width: int) -> str | None:
        shown: str | None = self.cache._preview(key, width)
        return shown

    def keys(self, prefix: str | None = None, ordered: bool = False) -> Iterator[Any]:
        cache = self.cache
        found = iter(cache) if ordered and prefix is None else cache.iterkeys(prefix=prefix)
        return _readable_keys(cache, found)

    # ---- queues ----

    def queues(self) -> list[tuple[str | None, int, float | None]]:
        found: list[tuple[str | None, int, float | None]] = self.cache._queues()
        return found

    def queue(self, prefix: str | None) -> tuple[int, float | None]:
        for name, depth, oldest in self.queues():
            if name == prefix:
                return depth, oldest
        return 0, None

    def queue_keys(self, prefix: str | None) -> list[Any]:
        # The keys of the queue's shape (a full scan of the keys, as queues() is), in queue
        # order. A key this process cannot decode is in no queue (a queue's keys are ints and
        # strs).
        cache = self.cache
        if prefix is None:
            return sorted(
                key
                for key in _readable_keys(cache, cache.iterkeys())
                if type(key) is int and 0 <= key <= _INT_QUEUE_MAX
            )
        shape = re.compile(re.escape(prefix) + r"-[0-9]{15}")
        return sorted(
            key
            for key in _readable_keys(cache, cache.iterkeys(prefix=prefix))
            if type(key) is str and shape.fullmatch(key)
        )

    def queue_front(self, prefix: str | None, width: int, lookups: int) -> str | None:
        cache = self.cache
        if prefix is None:
            # Numbers sort first; the queue's are the ints of its range, after the negative
            # ones.
            for key in itertools.islice(cache.iterkeys(), lookups):
                if type(key) is int and 0 <= key <= _INT_QUEUE_MAX:
                    return self.preview(key, width)
                if not isinstance(key, (int, float)) or key > _INT_QUEUE_MAX:
                    return None
            return None
        shape = re.compile(re.escape(prefix) + r"-[0-9]{15}")
        for key in itertools.islice(cache.iterkeys(prefix=f"{prefix}-"), lookups):
            if type(key) is str and shape.fullmatch(key):
                return self.preview(key, width)
        return None

    # ---- claims ----

    def claims(
        self, namespace: str | None, limit: int | None, offset: int
    ) -> list[tuple[str, Any, Record]]:
        return [
            (name, key, (token, host, pid, acquired, expires))
            for name, key, token, host, pid, acquired, expires in self.cache._claims.list(
                namespace, limit, offset
            )
        ]

    def claim_count(self, namespace: str | None) -> int:
        count: int = self.cache._claims.count(namespace)
        return count
