"""An operator's view of a cache directory: what the CLI (``diskcache-oxide``) and the web
dashboard (``diskcache-oxide serve``) show, as plain data (D-046).

Everything here reads, except the calls whose names say they change something
(:func:`retry_job`, :func:`bury_job`, :func:`purge_dead`, :func:`release_claim`,
:func:`vacuum`). Open the cache with ``read_only=True`` to look without writing a byte
(:func:`open_cache` does), which also works on a directory another process is using.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

from .claims import ClaimInfo
from .core import DEFAULT_SETTINGS, Cache
from .jobs import JobInfo, JobQueue

__all__ = [
    "ClaimRow",
    "JobRow",
    "QueueRow",
    "bury_job",
    "claims",
    "info",
    "job_queues",
    "jobs",
    "open_cache",
    "purge_dead",
    "queues",
    "release_claim",
    "retry_job",
    "vacuum",
]

JobState = Literal["ready", "scheduled", "leased", "dead"]


def open_cache(
    directory: str | os.PathLike[str], *, write: bool = False, pickle: bool = False
) -> Cache:
    """The cache in ``directory``, read-only unless ``write`` (an operator's command that
    changes something). It must exist: nothing is created.

    :raises FileNotFoundError: if there is no cache there
    """
    path = os.fspath(directory)
    if not os.path.isdir(path) or not os.path.exists(os.path.join(path, "cache.db")):
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
    (``ready``) from one waiting for its delay or retry (``scheduled``)."""

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


def job_queues(cache: Cache) -> list[str]:
    """The names of the job queues in the directory (those holding jobs in any state)."""
    return cache._job_queues()


def _value_text(info: JobInfo, width: int = 60) -> str:
    try:
        text = repr(info.value)
    except Exception as error:  # a value this process cannot decode is still listed
        text = f"<unreadable: {type(error).__name__}>"
    return text if len(text) <= width else text[: width - 1] + "…"


def _job_row(info: JobInfo, now: float) -> JobRow:
    state: JobState
    if info.state == "ready":
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
        value=_value_text(info),
    )


def jobs(
    cache: Cache, queue: str, state: JobState | None = None, *, limit: int = 100, after: int = 0
) -> list[JobRow]:
    """The jobs of ``queue`` (in ``state``, or all), by id, at most ``limit`` after id
    ``after``. ``scheduled`` are the ready jobs not yet due."""
    engine_state: Literal["ready", "leased", "dead"] | None = (
        "ready" if state in ("ready", "scheduled") else state  # type: ignore[assignment]
    )
    now = time.time()
    found: list[JobRow] = []
    cursor = after
    while len(found) < limit:
        batch = cache._job_list(queue, engine_state, cursor, limit)
        if not batch:
            break
        cursor = batch[-1].id
        found.extend(
            row
            for row in (_job_row(info, now) for info in batch)
            if state is None or row.state == state
        )
    return found[:limit]


def retry_job(cache: Cache, job_id: int, *, delay: float = 0.0) -> bool:
    """Put a dead job back in its queue, its attempts reset. False if it is not dead."""
    return JobQueue(cache).requeue(job_id, delay=delay)


def bury_job(cache: Cache, job_id: int, reason: str = "buried by an operator") -> bool:
    """Send a ready or leased job to the dead-letter list. False if it is absent or dead."""
    return cache._job_bury_any(job_id, reason)


def purge_dead(cache: Cache, queue: str) -> int:
    """Delete the dead jobs of ``queue``; how many there were."""
    return cache._job_purge_dead(queue)


def claims(cache: Cache, namespace: str | None = None) -> list[ClaimRow]:
    """The live claims (of ``namespace``, or of every namespace)."""
    now = time.time()
    rows = []
    for ns, key, token, host, pid, acquired, expires in cache._claims_list(namespace):
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


def release_claim(cache: Cache, key: Any, namespace: str = "default") -> bool:
    """Break the live claim on ``key`` whoever holds it (the holder's next renewal fails)."""
    return cache._claim_break(namespace, key)


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
        "claims": len(claims(cache)),
    }
