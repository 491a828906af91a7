"""Leased jobs: a work queue with lasting ids, leases, retries and a dead-letter list.

:class:`JobQueue` is the Python face of the engine's job table (D-014): a job taken by a
worker is leased, not removed, so a worker that dies mid-job loses nothing; the job runs
again once its lease expires. See docs/decisions/D-015-job-queue-api.md for the shape of
this API, and docs/queue-api-spec.md for the contract.

The binding does the storage calls with the GIL released: ``Cache._jobs`` (a ``JobsCore``), and
the :class:`Job` and :class:`JobInfo` classes (a take decides what to do with a job this process
cannot decode inside its own transaction). This module names the queues, checks the
arguments of its own calls and reports what a take could not decode.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from typing import Any, Literal, NamedTuple

from . import _core
from ._seconds import NONNEGATIVE, seconds
from .core import Cache

__all__ = ["Job", "JobCounts", "JobInfo", "JobQueue", "JobState", "Swept"]

_log = logging.getLogger("diskcache_oxide")

#: The states a job can be in.
JobState = Literal["ready", "leased", "dead"]

_MAX_ATTEMPTS_LIMIT = 2**32 - 1


class JobCounts(NamedTuple):
    """Jobs by state: ready now, scheduled for later (delayed or waiting to retry), leased,
    and dead (in the dead-letter list)."""

    ready: int
    scheduled: int
    leased: int
    dead: int


class Swept(NamedTuple):
    """What :meth:`JobQueue.sweep` did with expired leases: requeued, or sent to the
    dead-letter list because the job had used its attempts."""

    requeued: int
    dead: int


# ---- argument checks ------------------------------------------------------------------------


def _type_name(value: object) -> str:
    return type(value).__name__


def _seconds(name: str, value: object) -> float:
    return seconds(value, name, NONNEGATIVE)  # type: ignore[return-value]


def _timeout(value: object) -> float | None:
    return None if value is None else _seconds("timeout", value)


def _count(name: str, value: object, limit: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {_type_name(value)}")
    if value < 0 or (limit is not None and value > limit):
        bound = f" and <= {limit}" if limit is not None else ""
        raise ValueError(f"{name} must be >= 0{bound}, not {value}")
    return value


def _max_attempts(value: object) -> int:
    return _count("max_attempts", value, _MAX_ATTEMPTS_LIMIT)


def _queue_name(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {_type_name(value)}")
    if not value or "\0" in value:
        raise ValueError(f"{name} must be a non-empty str without NUL characters, not {value!r}")
    return value


def _job_id(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"job_id must be an int, not {_type_name(value)}")
    return value


# ---- records --------------------------------------------------------------------------------

#: A job a worker holds (one lease of one job) and a job's record: Rust classes of the
#: binding, which settle themselves through the handle that took them (see their docstrings).
Job = _core.Job
JobInfo = _core.JobInfo


# ---- the queue ------------------------------------------------------------------------------


class JobQueue:
    """Leased jobs in a cache directory, served from one or more named queues.

    :param cache_or_directory: a :class:`~diskcache_oxide.Cache`, or a directory to open one
        in (with ``eviction_policy='none'``)
    :param queues: a queue name, or names in priority order (the first is the most urgent);
        :meth:`take` serves them in that order and :meth:`put` adds to the first
    :param lease: seconds a taken job stays leased before another worker may take it
        (default 60); :meth:`Job.extend` renews it
    :param max_attempts: takes after which a failed or abandoned job goes to the dead-letter
        list (default 3; 0 means no limit)

    Jobs live in their own table: the cache's eviction, ``clear()`` and ``len()`` never touch
    them. Delivery is at least once: make the work safe to repeat.
    """

    def __init__(
        self,
        cache_or_directory: Cache | str | os.PathLike[str],
        queues: str | Sequence[str] = "default",
        *,
        lease: float = 60.0,
        max_attempts: int = 3,
    ) -> None:
        if isinstance(cache_or_directory, Cache):
            cache = cache_or_directory
        elif isinstance(cache_or_directory, (str, os.PathLike)):
            cache = Cache(os.fspath(cache_or_directory), eviction_policy="none")
        else:
            raise TypeError(
                "cache_or_directory must be a Cache or a directory path, not "
                f"{_type_name(cache_or_directory)}"
            )
        if isinstance(queues, str):
            names: tuple[str, ...] = (_queue_name("queues", queues),)
        elif isinstance(queues, (bytes, bytearray)) or not isinstance(queues, Iterable):
            raise TypeError(f"queues must be a str or a sequence of str, not {_type_name(queues)}")
        else:
            names = tuple(_queue_name("queues", q) for q in queues)
        if not names:
            raise ValueError("queues must name at least one queue")
        if len(set(names)) != len(names):
            raise ValueError(f"queues must not repeat a name: {list(names)!r}")
        self._cache = cache
        self._queues = names
        self._lease = _seconds("lease", lease)
        self._max_attempts = _max_attempts(max_attempts)

    @property
    def cache(self) -> Cache:
        """The cache whose directory holds the jobs."""
        return self._cache

    @property
    def queues(self) -> tuple[str, ...]:
        """The queue names, most urgent first."""
        return self._queues

    @property
    def lease(self) -> float:
        """The default lease, in seconds."""
        return self._lease

    @property
    def max_attempts(self) -> int:
        """The default ``max_attempts`` of new jobs (0: no limit)."""
        return self._max_attempts

    def __repr__(self) -> str:
        return (
            f"JobQueue({self._cache.directory!r}, queues={list(self._queues)!r}, "
            f"lease={self._lease!r}, max_attempts={self._max_attempts!r})"
        )

    def _queue(self, queue: str | None) -> str:
        return self._queues[0] if queue is None else _queue_name("queue", queue)

    # ---- adding ---------------------------------------------------------------------------

    def put(
        self,
        value: Any,
        *,
        queue: str | None = None,
        delay: float = 0.0,
        unique: str | None = None,
        max_attempts: int | None = None,
    ) -> int:
        """Add a job; returns its id, which is never reused.

        :param queue: where to add it (default: the first of this queue's names)
        :param delay: seconds before it may be taken
        :param unique: at most one ready or leased job per queue has this key; a second put
            adds nothing and returns the first job's id
        :param max_attempts: this job's limit (default: the queue's)
        """
        if unique is not None and not isinstance(unique, str):
            raise TypeError(f"unique must be a str or None, not {_type_name(unique)}")
        attempts = self._max_attempts if max_attempts is None else _max_attempts(max_attempts)
        return self._cache._jobs.put(
            self._queue(queue), value, _seconds("delay", delay), unique, attempts
        )

    def put_many(
        self,
        values: Iterable[Any],
        *,
        queue: str | None = None,
        delay: float = 0.0,
        max_attempts: int | None = None,
    ) -> list[int]:
        """Add several jobs in one transaction; returns their ids, in order."""
        attempts = self._max_attempts if max_attempts is None else _max_attempts(max_attempts)
        return self._cache._jobs.put_many(
            self._queue(queue), values, _seconds("delay", delay), attempts
        )

    # ---- taking ---------------------------------------------------------------------------

    def take(self, *, timeout: float | None = None, lease: float | None = None) -> Job | None:
        """Lease the next due job, trying the queues in priority order.

        A job this process cannot decode never holds up the jobs behind it (D-047). One whose
        value is unsafe here (a pickle on a ``pickle=False`` cache), of an unregistered type,
        or whose decoder raised is passed over: the pass counts as an attempt, its reason is
        kept as the job's ``error`` (see :meth:`get`), and the job is offered again after a
        short delay (1 s, doubling with each attempt, at most a lease), to a worker that can
        read it; once it has used its ``max_attempts`` it goes to the dead-letter list. A job
        whose value is damaged goes to the dead-letter list at once. Either way the take goes
        on to the next due job, and logs what it passed over on the ``diskcache_oxide``
        logger.

        :param timeout: seconds to wait for a job if none is due (default: do not wait)
        :param lease: this lease's length in seconds (default: the queue's)
        :return: the job, or None if there was none it could take
        """
        jobs = self.take_many(1, timeout=timeout, lease=lease)
        return jobs[0] if jobs else None

    def take_many(
        self, n: int, *, timeout: float | None = None, lease: float | None = None
    ) -> list[Job]:
        """Lease up to ``n`` due jobs in one transaction (waiting, with ``timeout``, only
        while there are none).

        Jobs this process cannot decode are passed over or buried as in :meth:`take`, and
        do not count towards ``n``: the take returns the due jobs behind them.
        """
        count = _count("n", n)
        length = self._lease if lease is None else _seconds("lease", lease)
        taken, errors = self._cache._jobs.take(
            list(self._queues), length, count, _timeout(timeout), self._lease
        )
        for err in errors:
            _log.warning("%s", err)
        return taken

    # ---- settling a job -------------------------------------------------------------------

    @staticmethod
    def _held(job: object) -> Job:
        if not isinstance(job, Job):
            raise TypeError(f"job must be a Job returned by take(), not {_type_name(job)}")
        return job

    def finish(self, job: Job) -> bool:
        """Done: delete the job (:meth:`Job.finish`). False if the lease was lost (it expired
        and the job was taken again, or the job was already settled)."""
        return self._held(job).finish()

    def fail(
        self, job: Job, error: str | BaseException = "", *, retry_in: float = 0.0
    ) -> str | None:
        """This attempt failed (:meth:`Job.fail`); ``error`` (a str, or an exception, stored as
        its repr) is kept with the job.

        :param retry_in: seconds before the retry may be taken
        :return: ``'ready'`` if it will be retried, ``'dead'`` if it used its attempts and went
            to the dead-letter list, None if the lease was lost
        """
        return self._held(job).fail(error, retry_in)

    def extend(self, job: Job, lease: float | None = None) -> bool:
        """Heartbeat (:meth:`Job.extend`): the lease now ends ``lease`` seconds from now
        (default: the queue's lease); updates ``job.lease_deadline``. False if the lease was
        lost."""
        return self._held(job).extend(lease)

    def release(self, job: Job, *, delay: float = 0.0) -> bool:
        """Give the job back (:meth:`Job.release`), ready again after ``delay`` seconds; the
        attempt is not counted. False if the lease was lost."""
        return self._held(job).release(delay)

    # ---- maintenance and inspection -------------------------------------------------------

    def sweep(self) -> Swept:
        """Requeue the expired leases of every queue in the directory (or move them to the
        dead-letter list once out of attempts). :meth:`take` already does this for the
        queues it serves."""
        requeued, dead = self._cache._jobs.sweep(None)
        return Swept(requeued, dead)

    def dead(self, *, queue: str | None = None, limit: int = 100) -> list[JobInfo]:
        """Dead jobs, oldest first: of ``queue``, or of all this queue's names."""
        count = _count("limit", limit)
        names = self._queues if queue is None else (_queue_name("queue", queue),)
        found: list[JobInfo] = []
        for name in names:
            found.extend(self._cache._jobs.dead(name, 0, count))
        found.sort(key=lambda info: info.id)
        return found[:count]

    def requeue(self, job_id: int, *, delay: float = 0.0) -> bool:
        """Put a dead job back in its queue with its attempts reset. False if it is not
        dead."""
        return self._cache._jobs.requeue(_job_id(job_id), _seconds("delay", delay))

    def delete(self, job_id: int) -> bool:
        """Delete a job in any state. False if there was none."""
        return self._cache._jobs.delete(_job_id(job_id))

    def get(self, job_id: int) -> JobInfo | None:
        """A job by id, in any state; None if there is none."""
        return self._cache._jobs.info(_job_id(job_id))

    def counts(self, queue: str | None = None) -> JobCounts:
        """Jobs by state: of ``queue``, or summed over this queue's names."""
        names = self._queues if queue is None else (_queue_name("queue", queue),)
        totals = [0, 0, 0, 0]
        for name in names:
            for index, n in enumerate(self._cache._jobs.counts(name)):
                totals[index] += n
        return JobCounts(*totals)

    def __len__(self) -> int:
        """Ready, scheduled and leased jobs over this queue's names (dead ones not counted)."""
        counts = self.counts()
        return counts.ready + counts.scheduled + counts.leased
