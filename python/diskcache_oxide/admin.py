"""An operator's view of a cache directory: what the CLI (``diskcache-oxide``) and the web
dashboard (``diskcache-oxide serve``) show, as plain data (D-046).

Everything here reads, except the calls whose names say they change something
(:func:`retry_job`, :func:`bury_job`, :func:`purge_dead`, :func:`release_claim`,
:func:`vacuum`). Open the cache with ``read_only=True`` to look without writing a byte
(:func:`open_cache` does), which also works on a directory another process is using.
"""

from __future__ import annotations

import bisect
import itertools
import os
import re
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any, Literal

from .claims import ClaimInfo
from .core import DEFAULT_SETTINGS, Cache
from .errors import CacheError, DecodeError
from .jobs import JobInfo, JobQueue

__all__ = [
    "ClaimRow",
    "JobRow",
    "QueueItem",
    "QueueRow",
    "Unreadable",
    "bury_job",
    "claim_count",
    "claims",
    "info",
    "job",
    "job_queues",
    "jobs",
    "keys",
    "open_cache",
    "purge_dead",
    "queue",
    "queue_items",
    "queues",
    "release_claim",
    "retry_job",
    "vacuum",
]

JobState = Literal["ready", "scheduled", "leased", "dead"]

#: Job ids are SQLite rowids: no job has an id above this (nor below 1).
_MAX_JOB_ID = 2**63 - 1


def _no_such_id(job_id: int) -> bool:
    # An id the engine could not even be asked about (it takes 64-bit ids) names no job.
    return not 0 < job_id <= _MAX_JOB_ID


def open_cache(
    directory: str | os.PathLike[str], *, write: bool = False, pickle: bool = False
) -> Cache:
    """The cache in ``directory``, read-only unless ``write`` (an operator's command that
    changes something). It must exist: nothing is created.

    :raises FileNotFoundError: if there is no cache there
    """
    path = os.fspath(directory)
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


def queues(cache: Cache) -> list[QueueRow]:
    """Every queue in the cache's keys, with its depth and oldest item's age."""
    now = time.time()
    return [
        QueueRow(prefix, depth, None if oldest is None else max(0.0, now - oldest))
        for prefix, depth, oldest in cache._queues()
    ]


def queue(cache: Cache, prefix: str | None) -> QueueRow:
    """The queue of ``prefix`` (None: the int keys' queue); depth 0 if it has no items."""
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


def queue_items(cache: Cache, prefix: str | None, *, limit: int = 100) -> list[QueueItem]:
    """The first ``limit`` items of the queue of ``prefix``, front first, without pulling
    them. An item pulled by another process meanwhile is left out."""
    missing = object()
    items: list[QueueItem] = []
    for key in _queue_keys(cache, prefix):
        if len(items) >= limit:
            break
        try:
            value = cache.get(key, default=missing)
        except Exception as error:  # listed, as jobs() lists a job it cannot decode
            value = Unreadable(error)
        if value is not missing:
            items.append(QueueItem(key, value))
    return items


def keys(cache: Cache, *, prefix: str | None = None, limit: int | None = 100) -> list[Any]:
    """The cache's keys in the order the cache iterates them (of the str keys starting with
    ``prefix``, if given), at most ``limit`` (None: all). A key this process cannot decode
    (a pickle on a handle opened without ``pickle=True``, an unregistered type) is listed
    as an :class:`Unreadable` (``<unreadable key: ...>``), and the keys after it follow."""
    return list(itertools.islice(_readable_keys(cache, cache.iterkeys(prefix=prefix)), limit))


def job_queues(cache: Cache, *, after: str | None = None, limit: int | None = None) -> list[str]:
    """The names of the job queues in the directory (those holding jobs in any state),
    sorted: those after ``after``, at most ``limit`` (None: all)."""
    names = cache._jobs.queues()
    if after is not None:
        names = names[bisect.bisect_right(names, after) :]
    return names if limit is None else names[:limit]


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
        value=info.preview if info.preview is not None else _value_text(info, width),
    )


def jobs(
    cache: Cache,
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
    found = cache._jobs.list(queue, state, max(0, after), limit, preview=width)
    return [_job_row(info, now, listed=state) for info in found]


def job(cache: Cache, job_id: int) -> JobRow | None:
    """One job by id, in any state, its value's text in full; None if there is none (an id
    out of range included)."""
    if _no_such_id(job_id):
        return None
    found = JobQueue(cache).get(job_id)
    return None if found is None else _job_row(found, time.time(), width=None)


def retry_job(cache: Cache, job_id: int, *, delay: float = 0.0) -> bool:
    """Put a dead job back in its queue, its attempts reset. False if it is not dead."""
    if _no_such_id(job_id):
        return False
    return JobQueue(cache).requeue(job_id, delay=delay)


def bury_job(cache: Cache, job_id: int, reason: str = "buried by an operator") -> bool:
    """Send a ready or leased job to the dead-letter list. False if it is absent or dead."""
    if _no_such_id(job_id):
        return False
    return cache._jobs.bury_any(job_id, reason)


def purge_dead(cache: Cache, queue: str) -> int:
    """Delete the dead jobs of ``queue``; how many there were."""
    return cache._jobs.purge_dead(queue)


def claims(
    cache: Cache, namespace: str | None = None, *, limit: int | None = None, offset: int = 0
) -> list[ClaimRow]:
    """The live claims (of ``namespace``, or of every namespace), by namespace and key: with
    ``limit``, at most that many after the first ``offset`` (only those are read)."""
    now = time.time()
    rows = []
    for ns, key, token, host, pid, acquired, expires in cache._claims.list(
        namespace, limit, offset
    ):
        held = ClaimInfo(token, host, pid, acquired, expires)
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


def claim_count(cache: Cache, namespace: str | None = None) -> int:
    """How many live claims there are (of ``namespace``, or of every namespace)."""
    return cache._claims.count(namespace)


def release_claim(cache: Cache, key: Any, namespace: str = "default") -> bool:
    """Break the live claim on ``key`` whoever holds it (the holder's next renewal fails)."""
    return cache._claims.break_claim(namespace, key)


def vacuum(cache: Cache) -> int:
    """Rebuild the database without its free pages; the bytes this gave back."""
    before = cache.volume()
    cache._vacuum()
    return max(0, before - cache.volume())


def info(cache: Cache) -> dict[str, Any]:
    """The cache's settings, counts, volume, queues, job queues and claims, as plain data
    (what ``diskcache-oxide info --json`` prints)."""
    # The counters as stored: stats() would switch counting on or off (a write).
    hits, misses = cache.reset("hits"), cache.reset("misses")
    job_counts = {}
    for name in job_queues(cache):
        counts = JobQueue(cache, name).counts()
        job_counts[name] = counts._asdict()
    return {
        "directory": cache.directory,
        "settings": {name: getattr(cache, name) for name in DEFAULT_SETTINGS},
        "count": len(cache),
        "volume": cache.volume(),
        "hits": hits,
        "misses": misses,
        "queues": [asdict(row) for row in queues(cache)],
        "jobs": job_counts,
        "claims": claim_count(cache),
    }
