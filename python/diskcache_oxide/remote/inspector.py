"""The operator's reads of a Redis namespace: the :class:`~diskcache_oxide._store.Inspector`
that ``RemoteStore.inspector`` gives :mod:`diskcache_oxide.admin`, the command line and the
dashboard (D-062).

A directory is looked at through a read-only handle; Redis has none, and the cache's scripts
write as they read (``get`` counts a hit or a miss while statistics are on, a write first
removes expired entries, listing the claims prunes the run-out ones). So the reads here run
the backend's read-only operations (:mod:`._inspect`: plain read commands, no statistics
counted, nothing cleaned up) on the cache's own link, and decode what they return. The key
layout lives in those operations: nothing here names a key.

What changes something goes through the backend's own scripts, as on a directory: the jobs'
retry, bury and purge are the store's job storage, and an operator's release of a claim its
claims (``RemoteStore.jobs``, ``RemoteStore.claims``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from .. import _core
from .._store import Record, Unreadable
from ..errors import UnsupportedError
from . import _inspect as ops
from . import _policy

__all__ = ["RemoteInspector", "item_key"]


def item_key(prefix: str | None, number: int) -> Any:
    """The key of item ``number`` of the queue of ``prefix`` (D-054)."""
    return number if prefix is None else f"{prefix}-{number:015d}"


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data


def _now_ms() -> int:
    # This machine's clock, as the directory's claims listing uses its own.
    return int(time.time() * 1000)


class RemoteInspector:
    """The operator's view of one :class:`~diskcache_oxide.remote.RedisCache` (its
    namespace), read with read commands only."""

    __slots__ = ("cache",)

    def __init__(self, cache: Any) -> None:
        # Any, not RedisCache: the cache's module reaches this one through its store
        # (remote/store.py), so importing it here would close a cycle.
        self.cache = cache

    def _run(self, op: Any) -> Any:
        """``op`` run on the cache's own link (read commands: no token, no WAIT)."""
        return self.cache._link.run(op)

    # ---- where, and what the namespace and its server say of themselves ----

    @property
    def backend(self) -> str:
        return "redis"

    @property
    def location(self) -> str:
        cache = self.cache
        client = cache.client
        query = f"namespace={cache.namespace}"
        nodes = getattr(client, "get_nodes", None)
        if callable(nodes):  # a RedisCluster
            node = client.get_default_node()
            return f"redis://{node.host}:{node.port}?cluster=1&{query}"
        kwargs = client.get_connection_kwargs()
        if kwargs.get("path"):
            return f"unix://{kwargs['path']}?db={kwargs.get('db', 0)}&{query}"
        pool = getattr(client, "connection_pool", None)
        scheme = "redis"
        if pool is not None and "SSL" in getattr(pool.connection_class, "__name__", ""):
            scheme = "rediss"
        host, port, db = kwargs.get("host"), kwargs.get("port"), kwargs.get("db", 0)
        return f"{scheme}://{host}:{port}/{db}?{query}"

    @property
    def directory(self) -> str | None:
        return None

    @property
    def namespace(self) -> str | None:
        namespace: str = self.cache.namespace
        return namespace

    def ping(self) -> None:
        self.cache.client.ping()

    def _statistics(self) -> tuple[int, int, bool]:
        found: tuple[int, int, bool] = self._run(ops.statistics(self.cache))
        return found

    def counters(self) -> tuple[int, int]:
        hits, misses, _on = self._statistics()
        return hits, misses

    def settings(self) -> dict[str, Any]:
        return {
            "namespace": self.cache.namespace,
            "statistics": int(self._statistics()[2]),
            **self.server_memory(),
        }

    def server_memory(self) -> dict[str, Any]:
        found: dict[str, Any] = _policy.describe(self.cache.client)
        return found

    def volume(self) -> int | None:
        return None  # no files: the server's memory

    def vacuum(self) -> int:
        raise UnsupportedError(
            "vacuum applies to a directory only: a Redis namespace has no SQLite file"
        )

    def forgotten_jobs(self) -> dict[str, int] | None:
        found: dict[str, int] = self._run(ops.forgotten_jobs(self.cache._base))
        return found

    # ---- entries and keys ----

    def _entry_of(self, key: Any) -> tuple[bytes, float | None, bytes] | None:
        """The stored frame, expiry (seconds since the epoch) and tag frame of ``key``, or
        None if it is absent (an expired entry is absent)."""
        found: tuple[bytes, float | None, bytes] | None
        found = self._run(ops.entry(self.cache, self.cache._member(key)))
        return found

    def entry(self, key: Any) -> tuple[Any, float | None, Any] | None:
        found = self._entry_of(key)
        if found is None:
            return None
        data, expires, tag = found
        value = _core.decode_value(data, pickle=self.cache._pickle)
        return value, expires, None if not tag else _core.decode_key(tag)

    def frame(self, key: Any) -> bytes | None:
        """The stored frame of ``key`` (the engine's bytes, not decoded), or None."""
        found = self._entry_of(key)
        return None if found is None else found[0]

    def preview(self, key: Any, width: int) -> str | None:
        # The binding has no call that previews a frame's bytes without decoding them (a
        # directory's ``Cache._preview``), so the value is decoded (never unpickled: the
        # handle has pickle off unless asked) and its repr cut.
        found = self._entry_of(key)
        if found is None:
            return None
        try:
            text = repr(_core.decode_value(found[0], pickle=self.cache._pickle))
        except Exception as error:  # listed, as a directory's preview lists it
            text = f"<unreadable: {type(error).__name__}>"
        return text if len(text) <= width else text[: width - 1] + "…"

    def _members(self) -> Iterator[bytes]:
        """Every member of the namespace's index in insertion order, a page at a time."""
        after: str | None = None
        while True:
            members, after = self._run(ops.index_page(self.cache, False, after))
            yield from members
            if after is None:
                return

    def keys(self, prefix: str | None = None, ordered: bool = False) -> Iterator[Any]:
        # Insertion order, whatever ``ordered``. With ``prefix``, only the str keys starting
        # with it, sorted by their UTF-8 bytes as RedisCache.iterkeys gives them (an
        # undecodable key is no str key, so it is left out).
        cache = self.cache
        if prefix is None:
            for member in self._members():
                try:
                    yield cache._key(member)
                except Exception as error:
                    yield Unreadable(error, "key")
            return
        found = []
        for member in self._members():
            try:
                key = cache._key(member)
            except Exception:
                continue
            if type(key) is str and key.startswith(prefix):
                found.append(key)
        found.sort(key=lambda key: key.encode("utf-8", "surrogatepass"))
        yield from found

    # ---- queues ----

    def queues(self) -> list[tuple[str | None, int, float | None]]:
        # One ZSCAN of the index; the int keys' queue first, then by prefix. The oldest
        # item's time is None: Redis keeps no time of storing.
        found: list[tuple[str | None, int]] = self._run(ops.queues(self.cache))
        rows: list[tuple[str | None, int, float | None]] = [
            (prefix, depth, None) for prefix, depth in found
        ]
        rows.sort(key=lambda row: (row[0] is not None, row[0] or ""))
        return rows

    def queue(self, prefix: str | None) -> tuple[int, float | None]:
        depth: int = self._run(ops.queue_depth(self.cache, prefix))
        return depth, None

    def _numbers(self, prefix: str | None, after: int | None, count: int) -> list[int]:
        """Up to ``count`` item numbers of the queue of ``prefix``, front first, after the
        number ``after`` (None: from the front)."""
        numbers: list[int] = self._run(ops.queue_numbers(self.cache, prefix, after, count))
        return numbers

    def queue_keys(self, prefix: str | None) -> Iterator[Any]:
        # From the queue's own set of numbers, a page at a time after the last number seen
        # (a long queue is not read whole for its first few items, and a pull meanwhile makes
        # no page skip an item).
        after: int | None = None
        while True:
            page = self._numbers(prefix, after, ops.PAGE)
            if not page:
                return
            yield from (item_key(prefix, number) for number in page)
            after = page[-1]

    def queue_front(self, prefix: str | None, width: int, lookups: int) -> str | None:
        # The queue's first few numbers, and the value of the first item still there.
        for number in self._numbers(prefix, None, lookups):
            shown = self.preview(item_key(prefix, number), width)
            if shown is not None:
                return shown
        return None

    # ---- claims ----

    def claims(
        self, namespace: str | None, limit: int | None, offset: int
    ) -> list[tuple[str, Any, Record]]:
        # Times by the server's clock; read-only: a run-out claim is skipped, not pruned.
        cache = self.cache
        found = self._run(ops.claims(cache, namespace, _now_ms(), limit, offset))
        rows: list[tuple[str, Any, Record]] = []
        for name, member, held in found:
            try:
                key = cache._key(member)
            except Exception as error:
                key = Unreadable(error, "key")
            token, host, pid, acquired, expires = held
            record = (
                _text(token),
                _text(host),
                int(pid),
                int(acquired) / 1000,
                int(expires) / 1000,
            )
            rows.append((name, key, record))
        return rows

    def claim_count(self, namespace: str | None) -> int:
        # The claims namespaces are one read of the set the claim scripts keep (no SCAN).
        count: int = self._run(ops.count_claims(self.cache, namespace, _now_ms()))
        return count
