"""An operator's view of a cache directory or a Redis namespace: what the CLI
(``diskcache-oxide``) and the web dashboard (``diskcache-oxide serve``) show, as plain data
(D-046, D-062), and :func:`copy`, which copies one cache's data into another (a directory's
into Redis; ``_copy.py``).

Everything here reads, except the calls whose names say they change something
(:func:`retry_job`, :func:`bury_job`, :func:`purge_dead`, :func:`release_claim`,
:func:`vacuum`, :func:`copy`). Open a directory with ``read_only=True`` to look without
writing a byte (:func:`open_cache` does), which also works on a directory another process is
using. A Redis namespace (``redis://host:port/db?namespace=NS``, ``rediss://``, ``unix://``,
``?cluster=1``) is read with the backend's read-only operations, which change nothing on the
server. Either way the reads are the cache's store's (``_store.Inspector``: a directory's in
``directory/inspector.py``, a namespace's in ``remote/inspector.py``); its jobs are
``diskcache_oxide.jobs.jobs_of(cache)`` and ``JobQueue(cache, name)``, as a directory's are.
What only a directory has (its volume on disk, its SQLite file, value files, ``size_limit``)
is None there, or raises :class:`NotApplicable`.
"""

from __future__ import annotations

import bisect
import itertools
import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

from ._copy import CopyReport as CopyReport
from ._copy import CopySkip as CopySkip
from ._copy import copy as copy
from ._open import REDIS_SCHEMES as REDIS_SCHEMES
from ._open import REDIS_TIMEOUT as REDIS_TIMEOUT
from ._open import AnyCache as AnyCache
from ._open import errors as errors
from ._open import is_url as is_url
from ._open import location as location
from ._open import open_cache as open_cache
from ._store import Inspector, has_store, store_of
from ._store import Unreadable as Unreadable
from .claims import ClaimInfo
from .errors import CacheError
from .jobs import JobCounts, JobInfo, JobQueue, jobs_of

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


def _look(cache: AnyCache) -> Inspector:
    """The operator's reads of ``cache``, as its store gives them."""
    return store_of(cache).inspector()


class NotApplicable(CacheError):
    """A call that only a directory can answer (its SQLite file, value files, volume on disk,
    vacuum, check), made on Redis; the message says what to use instead."""


def is_redis(cache: object) -> bool:
    """Whether ``cache`` is a Redis namespace's RedisCache (its store says so: redis-py is not
    imported to tell)."""
    return has_store(cache) and _look(cache).backend == "redis"


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


def _age(oldest: float | None, now: float) -> float | None:
    return None if oldest is None else max(0.0, now - oldest)


def queues(cache: AnyCache) -> list[QueueRow]:
    """Every queue in the cache's keys, with its depth and oldest item's age (None on Redis,
    which keeps no time of storing)."""
    found = _look(cache).queues()
    now = time.time()
    return [QueueRow(prefix, depth, _age(oldest, now)) for prefix, depth, oldest in found]


def queue(cache: AnyCache, prefix: str | None) -> QueueRow:
    """The queue of ``prefix`` (None: the int keys' queue); depth 0 if it has no items."""
    depth, oldest = _look(cache).queue(prefix)
    return QueueRow(prefix, depth, _age(oldest, time.time()))


@dataclass(frozen=True)
class QueueItem:
    """An item of a queue on the cache's keys: its key and value (:class:`Unreadable` if
    it cannot be decoded here)."""

    key: str | int
    value: Any


def entry(cache: AnyCache, key: Any) -> tuple[Any, float | None, Any] | None:
    """``(value, expire_time, tag)`` of ``key``, or None if there is none. Reads only: on
    Redis it counts no hit or miss (a directory's read-only handle counts none either).

    :raises DecodeError: for a value this process cannot decode (a pickle: the tools never
        unpickle unless asked)
    """
    return _look(cache).entry(key)


def preview(cache: AnyCache, key: Any, width: int = 60) -> str | None:
    """A preview of the value of ``key``, at most ``width`` characters, or None if absent.
    A directory builds it from the first few KiB of the stored bytes without decoding; on
    Redis the value is decoded (never unpickled) and its repr cut (D-062)."""
    return _look(cache).preview(key, width)


def queue_items(cache: AnyCache, prefix: str | None, *, limit: int = 100) -> list[QueueItem]:
    """The first ``limit`` items of the queue of ``prefix``, front first, without pulling
    them. An item pulled by another process meanwhile is left out."""
    look = _look(cache)
    items: list[QueueItem] = []
    for key in look.queue_keys(prefix):
        if len(items) >= limit:
            break
        try:
            found = look.entry(key)
        except Exception as error:  # listed, as jobs() lists a job it cannot decode
            items.append(QueueItem(key, Unreadable(error)))
            continue
        if found is not None:
            items.append(QueueItem(key, found[0]))
    return items


def keys(cache: AnyCache, *, prefix: str | None = None, limit: int | None = 100) -> list[Any]:
    """The cache's keys in the order the cache iterates them (of the str keys starting with
    ``prefix``, if given), at most ``limit`` (None: all). A key this process cannot decode
    (a pickle on a handle opened without ``pickle=True``, an unregistered type) is listed
    as an :class:`Unreadable` (``<unreadable key: ...>``), and the keys after it follow."""
    return list(itertools.islice(_look(cache).keys(prefix), limit))


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
    rows = []
    for ns, key, held_fields in _look(cache).claims(namespace, limit, offset):
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
    return _look(cache).claim_count(namespace)


def release_claim(cache: AnyCache, key: Any, namespace: str = "default") -> bool:
    """Break the live claim on ``key`` whoever holds it (the holder's next renewal fails)."""
    return store_of(cache).claims(False).break_claim(namespace, key)


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
    return _look(cache).vacuum()


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
    ``jobs_and_claims``: whether that policy keeps jobs and claims (issue 29). Empty for a
    directory."""
    return _look(cache).server_memory()


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
    look = _look(cache)
    # The counters as stored: stats() would switch counting on or off (a write).
    hits, misses = look.counters()
    found: dict[str, Any] = {"backend": look.backend, "location": look.location}
    if look.namespace is not None:
        found["namespace"] = look.namespace
    found["directory"] = look.directory
    found["settings"] = look.settings()
    if look.directory is None:
        found["not_applicable"] = DIRECTORY_ONLY
    found.update(count=len(cache), volume=look.volume(), hits=hits, misses=misses)
    forgotten = look.forgotten_jobs()
    if forgotten is not None:
        # Jobs whose record was gone from the server (evicted, or deleted by another
        # program), forgotten by a take: by queue (issue 29).
        found["jobs_forgotten"] = forgotten
    return {**found, **common}
