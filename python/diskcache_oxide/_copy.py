"""Copying one cache's data into another (a directory's into a Redis namespace, or back):
:func:`copy`, with what it reports (:class:`CopyReport`, :class:`CopySkip`). Exported as
``diskcache_oxide.admin.copy`` (``diskcache-oxide copy SRC DST``).

Both caches are opened as the operator's tools open them (``_open.open_cache``); the entries
are read through the source's inspector (``_store.Inspector``), so a pickle is never unpickled
unless asked, and the jobs through its job storage, as ``JobQueue`` stores them.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ._open import AnyCache, is_url, location, open_cache, open_directory, open_redis
from ._store import Unreadable, store_of
from .errors import CacheError
from .jobs import JobQueue, JobsBackend, jobs_of

__all__ = ["CopyReport", "CopySkip", "copy"]


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

#: The largest key of the int keys' queue (python-diskcache's queue range).
_INT_QUEUE_MAX = 999_999_999_999_999


def _is_queue_key(key: Any) -> bool:
    if type(key) is int:
        return 0 <= key <= _INT_QUEUE_MAX
    return type(key) is str and re.fullmatch(r".*-[0-9]{15}", key, re.DOTALL) is not None


def _open_destination(dst: str | os.PathLike[str], source: AnyCache, pickle: bool) -> AnyCache:
    if is_url(dst):
        return open_redis(str(dst), pickle, _COPY_TIMEOUT)
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
    origin = store_of(source).inspector()
    if fresh and origin.directory is not None:  # a new directory gets the source's settings
        settings = origin.settings()
    elif fresh:  # from Redis: nothing is culled while the copy writes
        settings = {"eviction_policy": "none"}
    return open_directory(path, pickle=pickle, **settings)


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
        report.claims = store_of(source).inspector().claim_count(None)
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
    origin = store_of(source).inspector()
    total = len(source)
    batch: list[tuple[Any, Any]] = []
    batch_tag: Any = None

    def flush() -> None:
        if batch:
            destination.set_many(batch, tag=batch_tag)
            batch.clear()

    done = 0
    for key in origin.keys(ordered=True):
        done += 1
        if progress is not None and done % 100 == 0:
            progress(min(done, total), max(total, done))
        if isinstance(key, Unreadable):
            report.skipped.append(
                CopySkip("entry", key, f"its key cannot be decoded here: {key.message}")
            )
            continue
        try:
            found = origin.entry(key)
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
    core: JobsBackend = jobs_of(source)
    names = list(core.queues())
    if not names:
        return
    target: JobsBackend = jobs_of(destination)
    there = list(target.queues())
    if there:
        waiting = sum(sum(JobQueue(source, name).counts()) for name in names)
        report.jobs_note = (
            f"{waiting} jobs not copied: {report.dst} already holds jobs (in "
            f"{', '.join(repr(n) for n in there)}), and a second copy would add them twice"
        )
        return
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
