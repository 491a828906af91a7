"""The operator's view of a Redis namespace: what :mod:`diskcache_oxide.admin` does on a
:class:`~diskcache_oxide.remote.RedisCache` (D-062).

A directory is looked at through a read-only handle; Redis has none, and the cache's scripts
write as they read (``get`` counts a hit or a miss while statistics are on, a write first
removes expired entries, listing the claims prunes the run-out ones). So the reads here go
straight to the namespace's keys as D-058 lays them out, with plain read commands (``HMGET``,
``ZRANGE``, ``ZSCAN``, ``ZCARD``), and change nothing on the server. Every key they name
carries the namespace's hash tag, so on a cluster each goes to the namespace's one slot;
only listing the claims of every claims namespace visits the other masters (a ``SCAN`` whose
pattern names this namespace's claim sets).

The calls that change something (an operator's release of a claim, the jobs' retry, bury and
purge) go through the backend's own scripts, as they would on a directory.

Nothing here imports redis-py: every call works through the RedisCache's own client, so admin
imports this module whether or not the redis extra is installed.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

from . import _core
from .errors import CacheError

__all__ = [
    "CLAIM_SETS_TTL",
    "JOBS_MISSING",
    "JobsUnavailable",
    "claim_count",
    "claims",
    "entry",
    "frame",
    "hits_misses",
    "is_redis",
    "item_key",
    "job_queue",
    "jobs_core",
    "keys",
    "preview",
    "queue_depth",
    "queue_keys",
    "queue_numbers",
    "queues",
    "release_claim",
    "statistics_on",
]

#: What the tools say while JobQueue on Redis is not in this build.
JOBS_MISSING = (
    "JobQueue on Redis is not in this build of diskcache_oxide (diskcache_oxide.remote.jobs): "
    "the jobs commands and the dashboard's job queues work on a directory only until it is"
)

#: How many members one page of the namespace's index holds.
_PAGE = 500


class JobsUnavailable(CacheError):
    """The jobs of a Redis namespace cannot be read here (no JobQueue on Redis in this build,
    or one without the operator's calls); the message says which."""


def is_redis(cache: object) -> bool:
    """Whether ``cache`` is a RedisCache (tested by module, so redis-py is not imported)."""
    return type(cache).__module__.startswith("diskcache_oxide.remote")


def _base(cache: Any) -> bytes:
    base: bytes = cache._base
    return base


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data


# ---- entries --------------------------------------------------------------------------------


def _entry_of(cache: Any, member: bytes) -> tuple[bytes, float | None, bytes] | None:
    """The stored frame, expiry (seconds since the epoch) and tag frame of one member, or None
    if it is absent. An expired entry is absent: its HASH has a PEXPIREAT, and Redis hides a
    key past its expiry from every read."""
    client = cache.client
    base = _base(cache)
    value, expires = client.hmget(base + b"e:" + member, [b"v", b"e"])
    if value is None:
        return None
    tag = client.hget(base + b"t", member) or b""
    return value, None if not expires else int(expires) / 1000.0, tag


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
    """Every member of the namespace's index in insertion order (pages by score, as
    RedisCache.iterkeys does, so a write meanwhile neither repeats nor skips one)."""
    client = cache.client
    index = _base(cache) + b"i"
    last = "+inf" if reverse else "-inf"
    while True:
        if reverse:
            page = client.zrevrangebyscore(index, last, "-inf", start=0, num=_PAGE, withscores=True)
        else:
            page = client.zrangebyscore(index, last, "+inf", start=0, num=_PAGE, withscores=True)
        if not page:
            return
        for member, _ in page:
            yield member
        last = f"({int(page[-1][1])}"


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


def _qid_prefix(qid: bytes) -> str | None:
    return None if qid == b"i" else qid[1:].decode("utf-8", "surrogatepass")


def queues(cache: Any) -> list[tuple[str | None, int, float | None]]:
    """Every queue on the namespace's keys as ``(prefix, depth, None)``, the int keys' queue
    first, then by prefix. One ``ZSCAN`` of the index for the queue-shaped members (a directory
    scans its keys likewise). The oldest item's age is None: Redis keeps no time of storing."""
    depths: dict[bytes, set[bytes]] = {}
    for member, _ in cache.client.zscan_iter(_base(cache) + b"i", match=b"q:*", count=1000):
        qid, _sep, number = member[2:].rpartition(b":")
        if len(number) == 15 and number.isdigit() and qid:
            depths.setdefault(qid, set()).add(number)
    rows: list[tuple[str | None, int, float | None]] = [
        (_qid_prefix(qid), len(numbers), None) for qid, numbers in depths.items()
    ]
    rows.sort(key=lambda row: (row[0] is not None, row[0] or ""))
    return rows


def _qid(prefix: str | None) -> bytes:
    return b"i" if prefix is None else b"s" + prefix.encode("utf-8", "surrogatepass")


def queue_depth(cache: Any, prefix: str | None) -> int:
    """How many items the queue of ``prefix`` holds (``ZCARD`` of its numbers)."""
    return int(cache.client.zcard(_base(cache) + b"Q:" + _qid(prefix)))


def queue_numbers(
    cache: Any, prefix: str | None, *, after: int | None = None, count: int = _PAGE
) -> list[int]:
    """Up to ``count`` item numbers of the queue of ``prefix``, front first, after the number
    ``after`` (None: from the front): a page of the queue's number set, by score."""
    low = "-inf" if after is None else f"({after}"
    numbers = cache.client.zrangebyscore(
        _base(cache) + b"Q:" + _qid(prefix), low, "+inf", start=0, num=count
    )
    return [int(number) for number in numbers]


def item_key(prefix: str | None, number: int) -> Any:
    """The key of item ``number`` of the queue of ``prefix`` (D-054)."""
    return number if prefix is None else f"{prefix}-{number:015d}"


def queue_keys(cache: Any, prefix: str | None, *, count: int = _PAGE) -> list[Any]:
    """The keys of the first ``count`` items of the queue of ``prefix``, front first."""
    return [item_key(prefix, number) for number in queue_numbers(cache, prefix, count=count)]


# ---- statistics -----------------------------------------------------------------------------


def hits_misses(cache: Any) -> tuple[int, int]:
    """The namespace's hit and miss counts as stored (``stats()`` would switch counting)."""
    hits, misses = cache.client.hmget(_base(cache) + b"s", [b"hits", b"misses"])
    return int(hits or 0), int(misses or 0)


def statistics_on(cache: Any) -> bool:
    """Whether the namespace counts hits and misses."""
    return bool(cache.client.hget(_base(cache) + b"s", b"on") == b"1")


# ---- claims ---------------------------------------------------------------------------------

_GLOB = re.compile(rb"([*?\[\]\\])")


def _cid(namespace: str) -> bytes:
    name = namespace.encode("utf-8", "surrogatepass")
    return str(len(name)).encode() + b":" + name


#: How long a dashboard reuses the list of claims namespaces it found (seconds): finding them
#: is a SCAN, whose cost is the server's whole keyspace, so a poll every second does not
#: repeat it (a new claims namespace shows within this long).
CLAIM_SETS_TTL = 10.0

_claim_sets_seen: dict[tuple[int, bytes], tuple[float, list[tuple[str, bytes]]]] = {}


def _claim_sets(cache: Any, fresh_for: float = 0.0) -> list[tuple[str, bytes]]:
    """Every claims namespace with a claim set in this cache's namespace: ``(name, cid)``,
    sorted. A SCAN whose pattern names this namespace's claim sets (on a cluster, of every
    master); with ``fresh_for``, a list found that many seconds ago or less is reused."""
    seen_key = (id(cache.client), _base(cache))
    seen = _claim_sets_seen.get(seen_key)
    now = time.monotonic()
    if seen is not None and now - seen[0] <= fresh_for:
        return seen[1]
    pattern = _GLOB.sub(rb"\\\1", _base(cache) + b"C:") + b"*"
    found = set()
    for key in cache.client.scan_iter(match=pattern, count=1000):
        cid = key[len(_base(cache)) + 2 :]
        length, _sep, name = cid.partition(b":")
        if length.isdigit() and int(length) == len(name):
            found.add((name.decode("utf-8", "surrogatepass"), cid))
    listed = sorted(found)
    _claim_sets_seen[seen_key] = (now, listed)
    return listed


def _sets(cache: Any, namespace: str | None, fresh_for: float) -> list[tuple[str, bytes]]:
    if namespace is not None:
        return [(namespace, _cid(namespace))]
    return _claim_sets(cache, fresh_for)


def claim_count(cache: Any, namespace: str | None = None, *, fresh_for: float = 0.0) -> int:
    """How many live claims there are (of ``namespace``, or of every claims namespace): the
    members of each claim set whose lease ends after now (``ZCOUNT``, by this machine's
    clock)."""
    client = cache.client
    base = _base(cache)
    now = int(time.time() * 1000)
    return sum(
        int(client.zcount(base + b"C:" + cid, now, "+inf"))
        for _name, cid in _sets(cache, namespace, fresh_for)
    )


def claims(
    cache: Any,
    namespace: str | None = None,
    *,
    limit: int | None = None,
    offset: int = 0,
    fresh_for: float = 0.0,
) -> list[tuple[str, Any, tuple[Any, ...]]]:
    """The live claims (of ``namespace``, or of every claims namespace), by namespace and then
    by when they run out: ``(namespace, key, (token, host, pid, acquired, expires))``, times
    in seconds since the epoch by the server's clock; with ``limit``, at most that many after
    the first ``offset``, and only those are read. Read-only: a run-out claim is skipped, not
    pruned."""
    client = cache.client
    base = _base(cache)
    now = int(time.time() * 1000)
    wanted: list[tuple[str, bytes, bytes]] = []
    skip = offset
    for name, cid in _sets(cache, namespace, fresh_for):
        left = None if limit is None else limit - len(wanted)
        if left is not None and left <= 0:
            break
        claimed = base + b"C:" + cid
        if skip:
            there = int(client.zcount(claimed, now, "+inf"))
            if skip >= there:
                skip -= there
                continue
        members = client.zrangebyscore(
            claimed, now, "+inf", start=skip, num=-1 if left is None else left
        )
        skip = 0
        wanted.extend((name, cid, member) for member in members)
    # The HASH of each, which expires with the lease, is the truth (the set may name a claim
    # released meanwhile): one pipeline for the page, each command on the namespace's slot.
    pipe = client.pipeline(transaction=False)
    for _name, cid, member in wanted:
        pipe.hmget(base + b"c:" + cid + b":" + member, [b"t", b"h", b"p", b"a", b"e"])
    rows = []
    for (name, _, member), held in zip(wanted, pipe.execute() if wanted else [], strict=True):
        if held[0] is None:
            continue
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


# ---- jobs -----------------------------------------------------------------------------------


def job_queue(cache: Any, name: str = "default", **settings: Any) -> Any:
    """``JobQueue(cache, name)`` on Redis.

    :raises JobsUnavailable: when this build has no JobQueue on Redis
    """
    import importlib

    try:
        remote_jobs = importlib.import_module("diskcache_oxide.remote.jobs")
    except ModuleNotFoundError as error:
        if error.name != "diskcache_oxide.remote.jobs":
            raise
        raise JobsUnavailable(JOBS_MISSING) from None
    return remote_jobs.JobQueue(cache, name, **settings)


def jobs_core(cache: Any) -> Any:
    """The operator's calls on the namespace's jobs, in the shape of a directory's
    ``Cache._jobs`` (``queues()``, ``list()``, ``counts()``, ``info()``, ``requeue()``,
    ``delete()``, ``bury_any()``, ``purge_dead()``), which admin uses on either backend: the
    Redis JobQueue's own core if it has one of that shape, else :class:`_FaceJobs` over its
    public and operator calls.

    :raises JobsUnavailable: when this build has no JobQueue on Redis
    """
    queue = job_queue(cache)
    for name in ("_jobs", "_core"):
        core = getattr(queue, name, None)
        if core is not None and all(
            callable(getattr(core, call, None)) for call in ("queues", "list", "bury_any")
        ):
            return core
    return _FaceJobs(queue)


class _FaceJobs:
    """A directory's ``Cache._jobs`` calls, made with a Redis ``JobQueue``'s calls: the public
    ones a directory's JobQueue has (``counts``, ``get``, ``requeue``, ``delete``, ``dead``) and
    the operator's (``queues()`` listing every job queue's name, ``list(queue, state, after,
    limit, preview)``, ``bury(job_id, reason)``). A call it lacks raises
    :class:`JobsUnavailable` naming it."""

    def __init__(self, queue: Any) -> None:
        self._queue = queue

    def _call(self, name: str) -> Any:
        call = getattr(self._queue, name, None)
        if not callable(call):
            raise JobsUnavailable(
                f"JobQueue on Redis has no {name}() call, which the operator's tools use on its "
                "jobs; update diskcache_oxide, or look at the jobs from Python"
            )
        return call

    def queues(self) -> list[str]:
        return sorted(self._call("queues")())

    def list(
        self,
        queue: str,
        state: str | None = None,
        after: int = 0,
        limit: int = 100,
        preview: int | None = None,
    ) -> list[Any]:
        found: list[Any] = self._call("list")(
            queue, state=state, after=after, limit=limit, preview=preview
        )
        return found

    def counts(self, queue: str) -> tuple[int, int, int, int]:
        ready, scheduled, leased, dead = self._call("counts")(queue)
        return int(ready), int(scheduled), int(leased), int(dead)

    def info(self, job_id: int) -> Any:
        return self._call("get")(job_id)

    def requeue(self, job_id: int, delay: float) -> bool:
        return bool(self._call("requeue")(job_id, delay=delay))

    def delete(self, job_id: int) -> bool:
        return bool(self._call("delete")(job_id))

    def bury_any(self, job_id: int, error: str) -> bool:
        return bool(self._call("bury")(job_id, error))

    def purge_dead(self, queue: str) -> int:
        purged = 0
        while True:
            dead = self._call("dead")(queue=queue, limit=500)
            if not dead:
                return purged
            deleted = sum(bool(self._call("delete")(info.id)) for info in dead)
            if not deleted:  # deleted by someone else meanwhile, and listed again: stop
                return purged
            purged += deleted
