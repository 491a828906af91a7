"""An operator's view of a cache directory or a Redis namespace: what the CLI
(``diskcache-oxide``) and the web dashboard (``diskcache-oxide serve``) show, as plain data
(D-046, D-062), and :func:`copy`, which copies one cache's data into another (a directory's
into Redis).

Everything here reads, except the calls whose names say they change something
(:func:`retry_job`, :func:`bury_job`, :func:`purge_dead`, :func:`release_claim`,
:func:`vacuum`, :func:`copy`). Open a directory with ``read_only=True`` to look without
writing a byte (:func:`open_cache` does), which also works on a directory another process is
using. A Redis namespace (``redis://host:port/db?namespace=NS``, ``rediss://``, ``unix://``,
``?cluster=1``) is read with the backend's read-only operations, which change nothing on the
server (``_admin_redis`` over ``remote._inspect``); its jobs are
``diskcache_oxide.jobs.jobs_of(cache)`` and ``JobQueue(cache, name)``, as a directory's are.
What only a directory has (its volume on disk, its SQLite file, value files, ``size_limit``)
is None there, or raises :class:`NotApplicable`.
"""

from __future__ import annotations

import bisect
import itertools
import math
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias
from urllib.parse import urlsplit

from . import _admin_redis as _redis
from ._open import without_password
from .claims import ClaimInfo
from .core import DEFAULT_SETTINGS, Cache
from .errors import CacheError, DecodeError
from .jobs import JobCounts, JobInfo, JobQueue, JobsBackend, jobs_of

if TYPE_CHECKING:
    from .remote import RedisCache

#: What the operator's calls take: a directory's Cache or a Redis namespace's RedisCache.
AnyCache: TypeAlias = "Cache | RedisCache"

__all__ = [
    "REDIS_SCHEMES",
    "REDIS_TIMEOUT",
    "AnyCache",
    "ClaimRow",
    "CopyReport",
    "CopySkip",
    "JobRow",
    "NotApplicable",
    "QueueItem",
    "QueueRow",
    "Unreadable",
    "bury_job",
    "claim_count",
    "claims",
    "copy",
    "entry",
    "errors",
    "info",
    "is_redis",
    "is_url",
    "job",
    "job_queues",
    "jobs",
    "keys",
    "location",
    "open_cache",
    "preview",
    "purge_dead",
    "queue",
    "queue_items",
    "queues",
    "release_claim",
    "retry_job",
    "server_memory",
    "vacuum",
]

JobState = Literal["ready", "scheduled", "leased", "dead"]

#: Job ids are SQLite rowids: no job has an id above this (nor below 1).
_MAX_JOB_ID = 2**63 - 1


def _no_such_id(job_id: int) -> bool:
    # An id the engine could not even be asked about (it takes 64-bit ids) names no job.
    return not 0 < job_id <= _MAX_JOB_ID


#: The URL schemes that name a Redis namespace (as diskcache_oxide.open takes them).
REDIS_SCHEMES = ("redis", "rediss", "unix")


class NotApplicable(CacheError):
    """A call that only a directory can answer (its SQLite file, value files, volume on disk,
    vacuum, check), made on Redis; the message says what to use instead."""


def is_url(target: object) -> bool:
    """Whether ``target`` is a Redis URL (``redis://``, ``rediss://``, ``unix://``) rather
    than a directory."""
    if not isinstance(target, str) or "://" not in target:
        return False
    return urlsplit(target).scheme.lower() in REDIS_SCHEMES


def is_redis(cache: object) -> bool:
    """Whether ``cache`` is a Redis namespace's RedisCache (redis-py is not imported to tell)."""
    return _redis.is_redis(cache)


def errors() -> tuple[type[BaseException], ...]:
    """The errors of a backend that a tool reports as one line, not a traceback: the cache's
    and the system's, and redis-py's (a server down, a timeout) once redis-py is in use."""
    found: list[type[BaseException]] = [CacheError, OSError]
    redis = sys.modules.get("redis")
    if redis is not None:
        found.append(redis.RedisError)
    return tuple(found)


def _shown_url(url: str) -> str:
    # The URL as it may be printed: without a password (either form redis-py reads).
    return without_password(url)


def location(target: Any) -> str:
    """A cache as a tool names it: a directory's path, or a Redis namespace as a URL
    (``redis://host:port/db?namespace=NS``, its password left out)."""
    if isinstance(target, (str, os.PathLike)):
        text = os.fspath(target)
        return _shown_url(text) if is_url(text) else text
    if isinstance(target, Cache):
        return target.directory
    return _redis_location(target)


def _redis_location(cache: Any) -> str:
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
    return f"{scheme}://{kwargs.get('host')}:{kwargs.get('port')}/{kwargs.get('db', 0)}?{query}"


#: The socket timeout of the Redis handles the tools open (seconds): long enough for any read
#: an operator's command makes, short enough that a server that stops answering (paused,
#: partitioned) is reported instead of hanging the command or the dashboard's polls.
REDIS_TIMEOUT = 10.0


def open_cache(
    target: str | os.PathLike[str],
    *,
    write: bool = False,
    pickle: bool = False,
    timeout: float = REDIS_TIMEOUT,
) -> AnyCache:
    """The cache at ``target``: a directory, read-only unless ``write`` (an operator's
    command that changes something), which must exist (nothing is created); or a Redis URL
    (``redis://host:port/db?namespace=NS``, ``rediss://``, ``unix://``, ``?cluster=1``),
    opened through :func:`diskcache_oxide.open` with a socket ``timeout`` in seconds, and
    checked to answer (a PING). Redis has no read-only handle: the reading calls here use
    read commands only, whatever ``write``.

    :raises FileNotFoundError: if there is no cache in the directory
    :raises CacheError: if the Redis server does not answer, or redis-py is not installed
    """
    if is_url(target):
        remote: AnyCache = _open_redis(str(target), pickle, timeout)
        return remote
    path = os.fspath(target)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"no directory {path!r}")
    if not os.path.exists(os.path.join(path, "cache.db")):
        if os.path.exists(os.path.join(path, "000", "cache.db")):
            raise FileNotFoundError(
                f"{path!r} holds the shards of a FanoutCache (000, 001, ...), not a cache: "
                f"give one shard's directory, such as {os.path.join(path, '000')!r}"
            )
        raise FileNotFoundError(f"no diskcache_oxide cache in {path!r} (no cache.db there)")
    if write:
        return Cache(path, pickle=pickle)
    return Cache(path, read_only=True, pickle=pickle)


def _open_redis(url: str, pickle: bool, timeout: float = REDIS_TIMEOUT) -> Any:
    from ._open import open as open_any

    shown = _shown_url(url)
    try:
        cache = open_any(url, pickle=pickle, timeout=timeout)
    except ImportError as error:
        raise CacheError(str(error)) from None
    except ValueError as error:  # a bad namespace, a URL redis-py cannot read
        raise CacheError(f"cannot open {shown}: {error}") from None
    try:
        cache.client.ping()
    except Exception as error:
        cache.close()
        if isinstance(error, errors()):
            raise CacheError(
                f"cannot reach the Redis server of {shown}: {error} (is it running, and is the "
                "URL right?)"
            ) from None
        raise
    return cache


@dataclass(frozen=True)
class QueueRow:
    """A queue on the cache's keys: its prefix (None: the int keys' queue), depth, and the
    age in seconds of its oldest item (None when empty)."""

    prefix: str | None
    depth: int
    oldest_age: float | None


@dataclass(frozen=True)
class JobRow:
    """A job as an operator sees it. ``state`` tells a ready job that may run now
    (``ready``) from one waiting for its delay or retry (``scheduled``). ``value`` is text:
    in a listing, a preview built from the stored bytes without decoding them (D-046); from
    :func:`job`, the decoded value's repr in full."""

    id: int
    queue: str
    state: JobState
    attempts: int
    max_attempts: int
    age: float
    due_in: float | None
    lease_age: float | None
    error: str | None
    unique: str | None
    value: str


@dataclass(frozen=True)
class ClaimRow:
    """A live claim: its namespace, key (as its repr), holder and lease left in seconds."""

    namespace: str
    key: str
    token: str
    host: str
    pid: int
    held_for: float
    lease_left: float


def queues(cache: AnyCache) -> list[QueueRow]:
    """Every queue in the cache's keys, with its depth and oldest item's age (None on Redis,
    which keeps no time of storing)."""
    if not isinstance(cache, Cache):
        return [QueueRow(prefix, depth, None) for prefix, depth, _ in _redis.queues(cache)]
    now = time.time()
    return [
        QueueRow(prefix, depth, None if oldest is None else max(0.0, now - oldest))
        for prefix, depth, oldest in cache._queues()
    ]


def queue(cache: AnyCache, prefix: str | None) -> QueueRow:
    """The queue of ``prefix`` (None: the int keys' queue); depth 0 if it has no items."""
    if not isinstance(cache, Cache):
        return QueueRow(prefix, _redis.queue_depth(cache, prefix), None)
    for row in queues(cache):
        if row.prefix == prefix:
            return row
    return QueueRow(prefix, 0, None)


class Unreadable:
    """Stands for a stored value or key this process cannot decode (a pickle on a handle
    opened without ``pickle=True``, an unregistered type, a decoder that raises, damaged
    bytes): listed, never raised. ``reason`` is the error's class, ``message`` the error
    itself, ``what`` ``"value"`` or ``"key"``."""

    def __init__(self, error: BaseException, what: Literal["value", "key"] = "value") -> None:
        self.reason = type(error).__name__
        self.message = f"{self.reason}: {error}" if str(error) else self.reason
        self.what = what

    def __repr__(self) -> str:
        # A value keeps the form the CLI and the dashboard have always shown.
        if self.what == "key":
            return f"<unreadable key: {self.reason}>"
        return f"<unreadable: {self.reason}>"


@dataclass(frozen=True)
class QueueItem:
    """An item of a queue on the cache's keys: its key and value (:class:`Unreadable` if
    it cannot be decoded here)."""

    key: str | int
    value: Any


#: The largest key of the int keys' queue (python-diskcache's queue range).
_INT_QUEUE_MAX = 999_999_999_999_999


def _readable_keys(cache: Cache, keys: Iterator[Any]) -> Iterator[Any]:
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


def _queue_keys(cache: Cache, prefix: str | None) -> list[str | int]:
    # The keys of the queue's shape (a full scan of the keys, as queues() is), in queue order.
    # A key this process cannot decode is in no queue (a queue's keys are ints and strs).
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


def entry(cache: AnyCache, key: Any) -> tuple[Any, float | None, Any] | None:
    """``(value, expire_time, tag)`` of ``key``, or None if there is none. Reads only: on
    Redis it counts no hit or miss (a directory's read-only handle counts none either).

    :raises DecodeError: for a value this process cannot decode (a pickle: the tools never
        unpickle unless asked)
    """
    if not isinstance(cache, Cache):
        return _redis.entry(cache, key)
    missing = object()
    value, expire_time, tag = cache.get(key, default=missing, expire_time=True, tag=True)
    return None if value is missing else (value, expire_time, tag)


def preview(cache: AnyCache, key: Any, width: int = 60) -> str | None:
    """A preview of the value of ``key``, at most ``width`` characters, or None if absent.
    A directory builds it from the first few KiB of the stored bytes without decoding; on
    Redis the value is decoded (never unpickled) and its repr cut (D-062)."""
    if not isinstance(cache, Cache):
        return _redis.preview(cache, key, width)
    return cache._preview(key, width)


def _queue_order(cache: AnyCache, prefix: str | None) -> Iterator[Any]:
    # The queue's keys, front first: on Redis from the queue's own set of numbers, a page at
    # a time after the last number seen (a long queue is not read whole for its first few
    # items, and a pull meanwhile makes no page skip an item).
    if isinstance(cache, Cache):
        yield from _queue_keys(cache, prefix)
        return
    after: int | None = None
    while True:
        page = _redis.queue_numbers(cache, prefix, after=after)
        if not page:
            return
        yield from (_redis.item_key(prefix, number) for number in page)
        after = page[-1]


def queue_items(cache: AnyCache, prefix: str | None, *, limit: int = 100) -> list[QueueItem]:
    """The first ``limit`` items of the queue of ``prefix``, front first, without pulling
    them. An item pulled by another process meanwhile is left out."""
    items: list[QueueItem] = []
    for key in _queue_order(cache, prefix):
        if len(items) >= limit:
            break
        try:
            found = entry(cache, key)
        except Exception as error:  # listed, as jobs() lists a job it cannot decode
            items.append(QueueItem(key, Unreadable(error)))
            continue
        if found is not None:
            items.append(QueueItem(key, found[0]))
    return items


def _all_keys(
    cache: AnyCache, prefix: str | None = None, *, ordered: bool = False
) -> Iterator[Any]:
    # Every key (an Unreadable for one that cannot be decoded here): a directory's in key
    # order, or in insertion order with ``ordered`` (what a copy keeps); Redis's in insertion
    # order (with ``prefix``: the str keys, sorted).
    if not isinstance(cache, Cache):
        for key, error in _redis.keys(cache, prefix):
            yield key if error is None else Unreadable(error, "key")
        return
    found = iter(cache) if ordered and prefix is None else cache.iterkeys(prefix=prefix)
    yield from _readable_keys(cache, found)


def keys(cache: AnyCache, *, prefix: str | None = None, limit: int | None = 100) -> list[Any]:
    """The cache's keys in the order the cache iterates them (of the str keys starting with
    ``prefix``, if given), at most ``limit`` (None: all). A key this process cannot decode
    (a pickle on a handle opened without ``pickle=True``, an unregistered type) is listed
    as an :class:`Unreadable` (``<unreadable key: ...>``), and the keys after it follow."""
    return list(itertools.islice(_all_keys(cache, prefix), limit))


def job_queues(cache: AnyCache, *, after: str | None = None, limit: int | None = None) -> list[str]:
    """The names of the job queues in the cache (those holding jobs in any state), sorted:
    those after ``after``, at most ``limit`` (None: all)."""
    names: list[str] = list(jobs_of(cache).queues())
    if after is not None:
        names = names[bisect.bisect_right(names, after) :]
    return names if limit is None else names[:limit]


def job_counts(cache: AnyCache, queue: str) -> JobCounts:
    """The jobs of ``queue`` by state."""
    return JobQueue(cache, queue).counts()


def _value_text(info: JobInfo, width: int | None = 60) -> str:
    try:
        text = repr(info.value)
    except Exception as error:  # a value this process cannot decode is still listed
        text = repr(Unreadable(error))
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


def _job_row(
    info: JobInfo, now: float, width: int | None = 60, listed: JobState | None = None
) -> JobRow:
    state: JobState
    if listed is not None:  # the engine chose it, at its own clock's now
        state = listed
    elif info.state == "ready":
        state = "ready" if info.due <= now else "scheduled"
    else:
        state = info.state
    # A record without a preview (one a Redis JobQueue built, say) shows its value's repr.
    given = getattr(info, "preview", None)
    return JobRow(
        id=info.id,
        queue=info.queue,
        state=state,
        attempts=info.attempts,
        max_attempts=info.max_attempts,
        age=max(0.0, now - info.created),
        due_in=None if info.state == "dead" else info.due - now,
        lease_age=None if info.taken is None else max(0.0, now - info.taken),
        error=info.error,
        unique=info.unique,
        value=given if given is not None else _value_text(info, width),
    )


def jobs(
    cache: AnyCache,
    queue: str,
    state: JobState | None = None,
    *,
    limit: int = 100,
    after: int = 0,
    width: int = 60,
) -> list[JobRow]:
    """The jobs of ``queue`` (in ``state``, or all), by id, at most ``limit`` after id
    ``after``. ``scheduled`` are the ready jobs not yet due. Each value is a preview at most
    ``width`` characters wide, built from the first few KiB of its stored bytes: nothing is
    decoded or unpickled, whatever the value's size. One engine call, the state chosen in
    SQL: the cost is the page's, not the queue's."""
    if after >= _MAX_JOB_ID:
        return []
    now = time.time()
    found = jobs_of(cache).list(queue, state, max(0, after), limit, preview=width)
    return [_job_row(info, now, listed=state) for info in found]


def job(cache: AnyCache, job_id: int) -> JobRow | None:
    """One job by id, in any state, its value's text in full; None if there is none (an id
    out of range included)."""
    if _no_such_id(job_id):
        return None
    found = JobQueue(cache).get(job_id)
    return None if found is None else _job_row(found, time.time(), width=None)


def retry_job(cache: AnyCache, job_id: int, *, delay: float = 0.0) -> bool:
    """Put a dead job back in its queue, its attempts reset. False if it is not dead."""
    if _no_such_id(job_id):
        return False
    return JobQueue(cache).requeue(job_id, delay=delay)


def bury_job(cache: AnyCache, job_id: int, reason: str = "buried by an operator") -> bool:
    """Send a ready or leased job to the dead-letter list. False if it is absent or dead."""
    if _no_such_id(job_id):
        return False
    return bool(jobs_of(cache).bury_any(job_id, reason))


def purge_dead(cache: AnyCache, queue: str) -> int:
    """Delete the dead jobs of ``queue``; how many there were."""
    return int(jobs_of(cache).purge_dead(queue))


def claims(
    cache: AnyCache,
    namespace: str | None = None,
    *,
    limit: int | None = None,
    offset: int = 0,
) -> list[ClaimRow]:
    """The live claims (of ``namespace``, or of every namespace), by namespace and key (on
    Redis, by namespace and when their lease ends): with ``limit``, at most that many after
    the first ``offset`` (only those are read)."""
    now = time.time()
    found: Iterable[tuple[Any, ...]]
    if isinstance(cache, Cache):
        found = (
            (ns, key, tuple(held))
            for ns, key, *held in cache._claims.list(namespace, limit, offset)
        )
    else:
        found = _redis.claims(cache, namespace, limit=limit, offset=offset)
    rows = []
    for ns, key, held_fields in found:
        held = ClaimInfo(*held_fields)
        rows.append(
            ClaimRow(
                namespace=ns,
                key=repr(key),
                token=held.token,
                host=held.host,
                pid=held.pid,
                held_for=max(0.0, now - held.acquired),
                lease_left=max(0.0, held.expires - now),
            )
        )
    return rows


def claim_count(cache: AnyCache, namespace: str | None = None) -> int:
    """How many live claims there are (of ``namespace``, or of every namespace)."""
    if not isinstance(cache, Cache):
        return _redis.claim_count(cache, namespace)
    return cache._claims.count(namespace)


def release_claim(cache: AnyCache, key: Any, namespace: str = "default") -> bool:
    """Break the live claim on ``key`` whoever holds it (the holder's next renewal fails)."""
    if not isinstance(cache, Cache):
        return _redis.release_claim(cache, key, namespace)
    return cache._claims.break_claim(namespace, key)


def not_applicable(target: Any, what: str) -> None:
    """Raise :class:`NotApplicable` if ``target`` (a cache, a path or a URL) is a Redis
    namespace: ``what`` (a command, such as ``check``) needs a directory."""
    if is_url(target) or is_redis(target):
        raise NotApplicable(
            f"{what} applies to a directory only: a Redis namespace has no SQLite file or "
            "value files (the server's own tools look after its memory and persistence: "
            "INFO, MEMORY DOCTOR, BGREWRITEAOF)"
        )


def vacuum(cache: AnyCache) -> int:
    """Rebuild the database without its free pages; the bytes this gave back.

    :raises NotApplicable: on Redis
    """
    not_applicable(cache, "vacuum")
    assert isinstance(cache, Cache)
    before = cache.volume()
    cache._vacuum()
    return max(0, before - cache.volume())


#: What only a directory has, and what Redis has instead (``info`` lists them on Redis).
DIRECTORY_ONLY = {
    "volume": "no files: the server's memory (INFO memory, MEMORY USAGE)",
    "size_limit": "the server's maxmemory",
    "cull_limit": "the server's maxmemory-policy",
    "eviction_policy": "the server's maxmemory-policy",
    "sqlite_*": "no SQLite file",
    "disk_*": "no value files: every value is one string in memory",
}


def _job_counts(cache: AnyCache) -> dict[str, dict[str, int]]:
    return {name: job_counts(cache, name)._asdict() for name in job_queues(cache)}


def server_memory(cache: Any) -> dict[str, Any]:
    """The Redis server's ``maxmemory`` and ``maxmemory_policy``, which govern a namespace's
    size where a directory has ``size_limit`` (each master's on a cluster; ``unknown (why)``
    if the server does not let a client read them: a managed service may refuse CONFIG), and
    ``jobs_and_claims``: whether that policy keeps jobs and claims (issue 29)."""
    return _redis.eviction(cache)


def info(cache: AnyCache) -> dict[str, Any]:
    """The cache's settings, counts, volume, queues, job queues and claims, as plain data
    (what ``diskcache-oxide info --json`` prints). On Redis: ``directory`` and ``volume``
    are None, ``settings`` holds the namespace's and the server's memory settings, and
    ``not_applicable`` names what only a directory has."""
    common = {
        "queues": [asdict(row) for row in queues(cache)],
        "jobs": _job_counts(cache),
        "claims": claim_count(cache),
    }
    if not isinstance(cache, Cache):
        hits, misses = _redis.hits_misses(cache)
        return {
            "backend": "redis",
            "location": location(cache),
            "namespace": cache.namespace,
            "directory": None,
            "settings": {
                "namespace": cache.namespace,
                "statistics": int(_redis.statistics_on(cache)),
                **server_memory(cache),
            },
            "not_applicable": DIRECTORY_ONLY,
            "count": len(cache),
            "volume": None,
            "hits": hits,
            "misses": misses,
            # Jobs whose record was gone from the server (evicted, or deleted by another
            # program), forgotten by a take: by queue (issue 29).
            "jobs_forgotten": _redis.forgotten_jobs(cache),
            **common,
        }
    # The counters as stored: stats() would switch counting on or off (a write).
    hits, misses = cache.reset("hits"), cache.reset("misses")
    return {
        "backend": "directory",
        "location": cache.directory,
        "directory": cache.directory,
        "settings": {name: getattr(cache, name) for name in DEFAULT_SETTINGS},
        "count": len(cache),
        "volume": cache.volume(),
        "hits": hits,
        "misses": misses,
        **common,
    }


# ---- copying one cache into another (a directory into Redis) -------------------------------


@dataclass(frozen=True)
class CopySkip:
    """Something :func:`copy` did not copy: an entry (``key``, its key, or an
    :class:`Unreadable` for a key it could not decode) or a job (``key``, its id in the
    source), and why."""

    what: Literal["entry", "job"]
    key: Any
    reason: str


@dataclass
class CopyReport:
    """What :func:`copy` did. ``entries`` counts the entries written, ``queue_items`` those of
    them that are items of a queue (keys of the D-054 shape, which keep their queue and place
    in it); ``expired``, those that expired or were removed before they could be read (not
    copied); ``jobs``, the jobs written, and ``jobs_note`` why some or all were not; ``claims``
    the live claims of the source, which are never copied; ``skipped`` the rest, each with
    its reason."""

    src: str
    dst: str
    entries: int = 0
    queue_items: int = 0
    expired: int = 0
    jobs: int = 0
    jobs_leased: int = 0
    jobs_note: str | None = None
    claims: int = 0
    skipped: list[CopySkip] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        """The report as lines for a person."""
        lines = [f"copied {self.src} -> {self.dst} in {self.seconds:.2f} s"]
        lines.append(
            f"entries  {self.entries} written ({self.queue_items} of them queue items, each in "
            "its queue at its place)"
        )
        if self.expired:
            lines.append(
                f"expired  {self.expired} expired or removed before being read: not copied"
            )
        jobs = f"jobs     {self.jobs} written"
        if self.jobs_leased:
            jobs += f" ({self.jobs_leased} leased in the source, copied as ready)"
        lines.append(jobs)
        if self.jobs_note:
            lines.append(f"         {self.jobs_note}")
        if self.claims:
            lines.append(
                f"claims   {self.claims} live claims not copied: a claim belongs to a running "
                "process, which takes it again where it now runs"
            )
        if self.skipped:
            lines.append(f"skipped  {len(self.skipped)}:")
            for skip in self.skipped:
                name = repr(skip.key) if skip.what == "entry" else f"job {skip.key}"
                lines.append(f"  {name}: {skip.reason}")
        return "\n".join(lines)


#: The socket timeout of a copy's Redis handles (seconds): RedisCache's own.
_COPY_TIMEOUT = 60.0

#: How many entries without an expiry one write of a copy carries (one script on Redis).
_COPY_BATCH = 200

#: A dead job is put this far in the future, then buried, so no worker of the destination
#: can take it in between (seconds: ten years).
_NOT_BEFORE_BURIAL = 10 * 365 * 86400.0


def _is_queue_key(key: Any) -> bool:
    if type(key) is int:
        return 0 <= key <= _INT_QUEUE_MAX
    return type(key) is str and re.fullmatch(r".*-[0-9]{15}", key, re.DOTALL) is not None


def _open_destination(dst: str | os.PathLike[str], source: AnyCache, pickle: bool) -> AnyCache:
    if is_url(dst):
        remote: AnyCache = _open_redis(str(dst), pickle, _COPY_TIMEOUT)
        return remote
    path = os.fspath(dst)
    if os.path.exists(path) and not os.path.isdir(path):
        raise FileExistsError(f"{path!r} is a file, not a directory: give a directory or a URL")
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, "cache.db")):
        if any(os.scandir(path)):
            raise FileExistsError(
                f"{path!r} holds files but no diskcache_oxide cache: copy into a new or empty "
                "directory"
            )
    fresh = not os.path.exists(os.path.join(path, "cache.db"))
    settings: dict[str, Any] = {}
    if fresh and isinstance(source, Cache):  # a new directory gets the source's settings
        settings = {name: getattr(source, name) for name in DEFAULT_SETTINGS}
    elif fresh:  # from Redis: nothing is culled while the copy writes
        settings = {"eviction_policy": "none"}
    return Cache(path, pickle=pickle, **settings)


def _skip_reason(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    if type(error).__name__ == "UnsafeValueError":
        text += (
            "; the copy never unpickles unless asked: run it with pickle=True (--pickle) only "
            "if every process that wrote SRC is trusted"
        )
    return text


def copy(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    pickle: bool = False,
    merge: bool = False,
    jobs: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> CopyReport:
    """Copy every entry of the cache ``src`` into ``dst``: a directory into a Redis namespace
    (``redis://host:port/db?namespace=NS``), or any of the two into the other.

    Each entry keeps its value, tag and expiry (the time it expires, not its length: an entry
    that expires while the copy runs is not copied). A key of the queue shape (D-054) is an
    item of its queue in ``dst`` at the same place, so queues keep their order. Values are
    the engine's frames on both sides; the binding has no call that hands over a directory's
    stored frame, so each value is decoded and encoded again by the same codec, with
    ``pickle`` as given (never unpickled unless ``pickle=True``; a pickle is skipped and
    reported otherwise). ``src`` is only read.

    Jobs (JobQueue) are copied with ``jobs=True`` when both sides have a job queue: each keeps
    its queue, value, ``unique`` key, ``max_attempts`` and remaining delay; a leased job is
    copied as ready (its lease belongs to a worker of the source), a dead one stays dead with
    its error; ids are new and attempts start again. Jobs are never copied into a ``dst`` that
    already holds jobs (a second copy would add them twice). Live claims and the hit and miss
    counts are not copied.

    :param merge: copy into a ``dst`` that already holds entries, writing over those with the
        same keys (the others stay). Without it a ``dst`` that is not empty is refused, so
        nothing is mixed by mistake; with it, running the copy again gives the same entries.
    :param progress: called as ``progress(done, total)`` while entries are copied
    :raises CacheError: if ``dst`` is not empty and not ``merge``, or is ``src`` itself
    """
    started = time.monotonic()
    # A copy moves whole values, which may be large: the backend's own socket timeout.
    source = open_cache(src, pickle=pickle, timeout=_COPY_TIMEOUT)
    try:
        destination = _open_destination(dst, source, pickle)
    except BaseException:
        source.close()
        raise
    report = CopyReport(location(src), location(dst))
    try:
        if location(source) == location(destination):
            raise CacheError(f"{report.src} and {report.dst} are the same cache: nothing to copy")
        held = len(destination)
        if held and not merge:
            raise CacheError(
                f"{report.dst} is not empty ({held} entries): a copy does not mix two caches' "
                "data by mistake. Copy into an empty namespace (?namespace=NEW) or a new "
                "directory, clear it first, or pass merge=True (--merge) to write over the "
                "entries with the same keys"
            )
        _copy_entries(source, destination, report, progress)
        if jobs:
            _copy_jobs(source, destination, report)
        else:
            report.jobs_note = "jobs not copied (asked not to)"
        report.claims = claim_count(source)
    finally:
        destination.close()
        source.close()
    report.seconds = time.monotonic() - started
    return report


def _copy_entries(
    source: AnyCache,
    destination: AnyCache,
    report: CopyReport,
    progress: Callable[[int, int], None] | None,
) -> None:
    total = len(source)
    batch: list[tuple[Any, Any]] = []
    batch_tag: Any = None

    def flush() -> None:
        if batch:
            destination.set_many(batch, tag=batch_tag)
            batch.clear()

    done = 0
    for key in _all_keys(source, ordered=True):
        done += 1
        if progress is not None and done % 100 == 0:
            progress(min(done, total), max(total, done))
        if isinstance(key, Unreadable):
            report.skipped.append(
                CopySkip("entry", key, f"its key cannot be decoded here: {key.message}")
            )
            continue
        try:
            found = entry(source, key)
        except Exception as error:  # a pickle, an unregistered type, a damaged frame
            report.skipped.append(CopySkip("entry", key, _skip_reason(error)))
            continue
        if found is None:
            report.expired += 1
            continue
        value, expire_time, tag = found
        left: float | None = None
        if expire_time is not None and not math.isinf(expire_time):
            left = expire_time - time.time()
            if left <= 0:
                report.expired += 1
                continue
        if left is None:
            if batch and (tag != batch_tag or type(tag) is not type(batch_tag)):
                flush()
            batch_tag = tag
            batch.append((key, value))
            if len(batch) >= _COPY_BATCH:
                flush()
        else:
            flush()
            destination.set(key, value, expire=left, tag=tag)
        report.entries += 1
        report.queue_items += _is_queue_key(key)
    flush()
    if progress is not None:
        progress(done, max(total, done))


def _copy_jobs(source: AnyCache, destination: AnyCache, report: CopyReport) -> None:
    names = job_queues(source)
    if not names:
        return
    there = job_queues(destination)
    if there:
        waiting = sum(sum(job_counts(source, name)) for name in names)
        report.jobs_note = (
            f"{waiting} jobs not copied: {report.dst} already holds jobs (in "
            f"{', '.join(repr(n) for n in there)}), and a second copy would add them twice"
        )
        return
    core: JobsBackend = jobs_of(source)
    target: JobsBackend = jobs_of(destination)
    now = time.time()
    for name in names:
        queue = JobQueue(destination, name)
        after = 0
        while True:
            page = core.list(name, None, after, 500, preview=None)
            if not page:
                break
            after = page[-1].id
            for info in page:
                try:
                    value = info.value
                except Exception as error:
                    report.skipped.append(CopySkip("job", info.id, _skip_reason(error)))
                    continue
                if info.state == "dead":
                    # Not before a far time, then buried: no worker can take it in between. A
                    # dead job's unique key is dropped: it would name a live job of that key.
                    new = queue.put(value, delay=_NOT_BEFORE_BURIAL, max_attempts=info.max_attempts)
                    target.bury_any(new, info.error or "dead in the source")
                else:
                    delay = max(0.0, info.due - now) if info.state == "ready" else 0.0
                    queue.put(
                        value, delay=delay, unique=info.unique, max_attempts=info.max_attempts
                    )
                    report.jobs_leased += info.state == "leased"
                report.jobs += 1
