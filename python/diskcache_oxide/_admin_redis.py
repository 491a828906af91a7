"""The operator's view of a Redis namespace: what :mod:`diskcache_oxide.admin` does on a
:class:`~diskcache_oxide.remote.RedisCache` (D-062).

A directory is looked at through a read-only handle; Redis has none, and the cache's scripts
write as they read (``get`` counts a hit or a miss while statistics are on, a write first
removes expired entries, listing the claims prunes the run-out ones). So the reads here run
the backend's read-only operations (``remote._inspect``: plain read commands, no statistics
counted, nothing cleaned up) on the cache's own link, and decode what they return. The key
layout lives in ``remote/`` only: nothing here names a key.

The calls that change something (an operator's release of a claim, the jobs' retry, bury and
purge) go through the backend's own scripts, as they would on a directory; the jobs are
``diskcache_oxide.jobs.jobs_of(cache)``, as for a directory.

This module imports redis-py only when one of its calls runs (on a RedisCache, which needs
it), so admin imports it whether or not the redis extra is installed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from . import _core

__all__ = [
    "claim_count",
    "claims",
    "entry",
    "eviction",
    "forgotten_jobs",
    "frame",
    "hits_misses",
    "is_redis",
    "item_key",
    "keys",
    "preview",
    "queue_depth",
    "queue_keys",
    "queue_numbers",
    "queues",
    "release_claim",
    "statistics_on",
]


def is_redis(cache: object) -> bool:
    """Whether ``cache`` is a RedisCache (tested by module, so redis-py is not imported)."""
    return type(cache).__module__.startswith("diskcache_oxide.remote")


def _inspect_ops() -> Any:
    # Imported on first use: it needs redis-py, which a RedisCache has already loaded.
    from .remote import _inspect as ops

    return ops


def _run(cache: Any, op: Any) -> Any:
    """``op`` run on the cache's own link (read commands: no token, no WAIT)."""
    return cache._link.run(op)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data


# ---- entries --------------------------------------------------------------------------------


def _entry_of(cache: Any, member: bytes) -> tuple[bytes, float | None, bytes] | None:
    """The stored frame, expiry (seconds since the epoch) and tag frame of one member, or None
    if it is absent (an expired entry is absent)."""
    found: tuple[bytes, float | None, bytes] | None
    found = _run(cache, _inspect_ops().entry(cache, member))
    return found


def entry(cache: Any, key: Any) -> tuple[Any, float | None, Any] | None:
    """``(value, expire_time, tag)`` of ``key``, decoded with the handle's pickle setting, or
    None if there is no such entry; counts no hit or miss and removes nothing.

    :raises DecodeError: for a value this process cannot decode (as a directory's get does)
    """
    found = _entry_of(cache, cache._member(key))
    if found is None:
        return None
    data, expires, tag = found
    value = _core.decode_value(data, pickle=cache._pickle)
    return value, expires, None if not tag else _core.decode_key(tag)


def frame(cache: Any, key: Any) -> bytes | None:
    """The stored frame of ``key`` (the engine's bytes, not decoded), or None."""
    found = _entry_of(cache, cache._member(key))
    return None if found is None else found[0]


def preview(cache: Any, key: Any, width: int) -> str | None:
    """A preview of the value of ``key``, at most ``width`` characters, or None if it is
    absent. The binding has no call that previews a frame's bytes without decoding them (a
    directory's ``Cache._preview``), so the value is decoded (never unpickled: the handle
    has pickle off unless asked) and its repr cut."""
    found = _entry_of(cache, cache._member(key))
    if found is None:
        return None
    try:
        text = repr(_core.decode_value(found[0], pickle=cache._pickle))
    except Exception as error:  # listed, as a directory's preview lists it
        text = f"<unreadable: {type(error).__name__}>"
    return text if len(text) <= width else text[: width - 1] + "…"


# ---- the index: keys and queues --------------------------------------------------------------


def _members(cache: Any, reverse: bool = False) -> Iterator[bytes]:
    """Every member of the namespace's index in insertion order, a page at a time."""
    ops = _inspect_ops()
    after: str | None = None
    while True:
        members, after = _run(cache, ops.index_page(cache, reverse, after))
        yield from members
        if after is None:
            return


def keys(cache: Any, prefix: str | None = None) -> Iterator[tuple[Any, BaseException | None]]:
    """The namespace's keys in insertion order, each as ``(key, None)``, or ``(None, error)``
    for one this process cannot decode (the listing goes on after it). With ``prefix``, only
    the str keys starting with it, sorted by their UTF-8 bytes, as RedisCache.iterkeys gives
    them (an undecodable key is no str key, so it is left out)."""
    if prefix is None:
        for member in _members(cache):
            try:
                yield cache._key(member), None
            except Exception as error:
                yield None, error
        return
    found = []
    for member in _members(cache):
        try:
            key = cache._key(member)
        except Exception:
            continue
        if type(key) is str and key.startswith(prefix):
            found.append(key)
    found.sort(key=lambda key: key.encode("utf-8", "surrogatepass"))
    for key in found:
        yield key, None


def queues(cache: Any) -> list[tuple[str | None, int, float | None]]:
    """Every queue on the namespace's keys as ``(prefix, depth, None)``, the int keys' queue
    first, then by prefix (one ``ZSCAN`` of the index). The oldest item's age is None: Redis
    keeps no time of storing."""
    found: list[tuple[str | None, int]] = _run(cache, _inspect_ops().queues(cache))
    rows: list[tuple[str | None, int, float | None]] = [
        (prefix, depth, None) for prefix, depth in found
    ]
    rows.sort(key=lambda row: (row[0] is not None, row[0] or ""))
    return rows


def queue_depth(cache: Any, prefix: str | None) -> int:
    """How many items the queue of ``prefix`` holds."""
    depth: int = _run(cache, _inspect_ops().queue_depth(cache, prefix))
    return depth


def queue_numbers(
    cache: Any, prefix: str | None, *, after: int | None = None, count: int | None = None
) -> list[int]:
    """Up to ``count`` (default: a page) item numbers of the queue of ``prefix``, front first,
    after the number ``after`` (None: from the front)."""
    ops = _inspect_ops()
    numbers: list[int] = _run(
        cache, ops.queue_numbers(cache, prefix, after, ops.PAGE if count is None else count)
    )
    return numbers


def item_key(prefix: str | None, number: int) -> Any:
    """The key of item ``number`` of the queue of ``prefix`` (D-054)."""
    return number if prefix is None else f"{prefix}-{number:015d}"


def queue_keys(cache: Any, prefix: str | None, *, count: int | None = None) -> list[Any]:
    """The keys of the first ``count`` (default: a page) items of the queue of ``prefix``,
    front first."""
    return [item_key(prefix, number) for number in queue_numbers(cache, prefix, count=count)]


# ---- statistics -----------------------------------------------------------------------------


def _statistics(cache: Any) -> tuple[int, int, bool]:
    found: tuple[int, int, bool] = _run(cache, _inspect_ops().statistics(cache))
    return found


def hits_misses(cache: Any) -> tuple[int, int]:
    """The namespace's hit and miss counts as stored (``stats()`` would switch counting)."""
    hits, misses, _on = _statistics(cache)
    return hits, misses


def statistics_on(cache: Any) -> bool:
    """Whether the namespace counts hits and misses."""
    return _statistics(cache)[2]


# ---- the server's eviction and the jobs it cost ---------------------------------------------


def eviction(cache: Any) -> dict[str, Any]:
    """The server's ``maxmemory``, ``maxmemory_policy`` (each master's on a cluster; ``unknown
    (why)`` where a managed server refuses ``CONFIG``) and ``jobs_and_claims``: whether that
    policy keeps the namespace's jobs and claims or may evict them (issue 29)."""
    from .remote import _policy

    found: dict[str, Any] = _policy.describe(cache.client)
    return found


def forgotten_jobs(cache: Any) -> dict[str, int]:
    """How many ids of each job queue were forgotten because their record was gone from the
    server (evicted, or deleted or overwritten by another program), by queue."""
    found: dict[str, int] = _run(cache, _inspect_ops().forgotten_jobs(cache._base))
    return found


# ---- claims ---------------------------------------------------------------------------------


def _now_ms() -> int:
    # This machine's clock, as the directory's claims listing uses its own.
    return int(time.time() * 1000)


def claim_count(cache: Any, namespace: str | None = None) -> int:
    """How many live claims there are (of ``namespace``, or of every claims namespace): those
    whose lease ends after now, by this machine's clock. The claims namespaces are one read
    of the set the claim scripts keep (no ``SCAN``)."""
    count: int = _run(cache, _inspect_ops().count_claims(cache, namespace, _now_ms()))
    return count


def claims(
    cache: Any,
    namespace: str | None = None,
    *,
    limit: int | None = None,
    offset: int = 0,
) -> list[tuple[str, Any, tuple[Any, ...]]]:
    """The live claims (of ``namespace``, or of every claims namespace), by namespace and then
    by when they run out: ``(namespace, key, (token, host, pid, acquired, expires))``, times
    in seconds since the epoch by the server's clock; with ``limit``, at most that many after
    the first ``offset``, and only those are read. Read-only: a run-out claim is skipped, not
    pruned."""
    found = _run(cache, _inspect_ops().claims(cache, namespace, _now_ms(), limit, offset))
    rows = []
    for name, member, held in found:
        try:
            key = cache._key(member)
        except Exception as error:
            key = _Unnamed(error)
        token, host, pid, acquired, expires = held
        record = (_text(token), _text(host), int(pid), int(acquired) / 1000, int(expires) / 1000)
        rows.append((name, key, record))
    return rows


class _Unnamed:
    """A claimed key this process cannot decode, listed by its error."""

    def __init__(self, error: BaseException) -> None:
        self.reason = type(error).__name__

    def __repr__(self) -> str:
        return f"<unreadable key: {self.reason}>"


def release_claim(cache: Any, key: Any, namespace: str) -> bool:
    """Break the live claim on ``key`` whoever holds it (the backend's own script)."""
    from .remote.claims import RedisClaims

    return RedisClaims(cache).break_claim(namespace, key)
