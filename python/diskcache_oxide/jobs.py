"""Leased jobs: a work queue with lasting ids, leases, retries and a dead-letter list.

:class:`JobQueue` is the Python face of the engine's job table (D-014): a job taken by a
worker is leased, not removed, so a worker that dies mid-job loses nothing; the job runs
again once its lease expires. See docs/decisions/D-015-job-queue-api.md for the shape of
this API, and docs/queue-api-spec.md for the contract.

It runs on either backend (D-060), through one storage object with the calls of the binding's
``JobsCore`` (:class:`JobsBackend`): a directory's ``Cache._jobs``, whose calls run with the
GIL released and whose :class:`Job` and :class:`JobInfo` are Rust classes of the binding, or
a :class:`~diskcache_oxide.remote.RedisCache` namespace's
:class:`~diskcache_oxide.remote.jobs.RedisJobs`, whose jobs are Python records with the same
fields and methods. This module names the queues, checks the arguments of every call for
both backends and reports what a take could not decode.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Iterable, Sequence
from typing import Any, Generic, TypeVar, cast, overload

from ._log import log
from ._open import open_directory
from ._store import (
    Job,
    JobCounts,
    JobInfo,
    JobsBackend,
    JobState,
    Stored,
    Swept,
    _count,
    _job_id,
    _max_attempts,
    _queue_name,
    _seconds,
    _timeout,
    _type_name,
    has_store,
    store_of,
)

__all__ = ["Job", "JobCounts", "JobInfo", "JobQueue", "JobState", "JobsBackend", "Swept"]


#: The cache a queue's jobs live in: a Cache, a RedisCache (anything with a store).
C = TypeVar("C", bound=Stored)

#: The record types already found to be :class:`Job` s (the backends' few classes).
_JOB_TYPES: set[type] = set()


def jobs_of(cache: Stored, *, strict: bool = False) -> JobsBackend:
    """The job storage of ``cache``, whichever backend it is (a directory's ``Cache._jobs``, or
    a :class:`~diskcache_oxide.remote.RedisCache` namespace's
    :class:`~diskcache_oxide.remote.jobs.RedisJobs`), asked of its store (``_store``). The
    operator's tools list, bury and purge jobs through it. On Redis, ``strict`` refuses a
    server whose maxmemory-policy may evict jobs (else: a warning)."""
    return store_of(cache).jobs(strict)


# ---- the queue ------------------------------------------------------------------------------


class JobQueue(Generic[C]):
    """Leased jobs in a cache directory or a Redis namespace, served from one or more named
    queues.

    :param cache_or_directory: a :class:`~diskcache_oxide.Cache`, a directory to open one in
        (with ``eviction_policy='none'``), or a :class:`~diskcache_oxide.remote.RedisCache`
        (D-060: the same calls and rules, on the server)
    :param queues: a queue name, or names in priority order (the first is the most urgent);
        :meth:`take` serves them in that order and :meth:`put` adds to the first
    :param lease: seconds a taken job stays leased before another worker may take it
        (default 60); :meth:`Job.extend` renews it
    :param max_attempts: takes after which a failed or abandoned job goes to the dead-letter
        list (default 3; 0 means no limit)
    :param strict: on Redis, refuse (``remote.UnsupportedError``) a server whose
        ``maxmemory-policy`` may evict jobs (``allkeys-*``), which would lose them without an
        error; without it such a server gets one ``remote.EvictionWarning`` per namespace and
        process (issue 29, D-060). A directory never evicts jobs: it ignores ``strict``

    Jobs live apart from the cache's keys: the cache's eviction, ``clear()`` and ``len()``
    never touch them. Delivery is at least once: make the work safe to repeat.
    """

    # A cache gives a JobQueue of its own type (``.cache`` is that cache); a path opens a
    # directory's Cache, named here by no type (features import no backend, issue 31).
    @overload
    def __init__(
        self: JobQueue[C],
        cache_or_directory: C,
        queues: str | Sequence[str] = ...,
        *,
        lease: float = ...,
        max_attempts: int = ...,
        strict: bool = ...,
    ) -> None: ...

    @overload
    def __init__(
        self: JobQueue[Any],
        cache_or_directory: str | os.PathLike[str],
        queues: str | Sequence[str] = ...,
        *,
        lease: float = ...,
        max_attempts: int = ...,
        strict: bool = ...,
    ) -> None: ...

    def __init__(
        self,
        cache_or_directory: Any,
        queues: str | Sequence[str] = "default",
        *,
        lease: float = 60.0,
        max_attempts: int = 3,
        strict: bool = False,
    ) -> None:
        cache: Any
        if has_store(cache_or_directory):
            cache = cache_or_directory
        elif isinstance(cache_or_directory, (str, os.PathLike)):
            cache = open_directory(
                os.fspath(cache_or_directory), opener="JobQueue", eviction_policy="none"
            )
        else:
            raise TypeError(
                "cache_or_directory must be a Cache, a RedisCache or a directory path, "
                f"not {_type_name(cache_or_directory)}"
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
        self._cache: C = cache
        self._queues = names
        self._lease = _seconds("lease", lease)
        self._max_attempts = _max_attempts(max_attempts)
        self._core: JobsBackend = jobs_of(cache, strict=strict)

    @property
    def cache(self) -> C:
        """The cache whose directory (or Redis namespace) holds the jobs."""
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
        where = store_of(self._cache).where
        return (
            f"JobQueue({where}, queues={list(self._queues)!r}, "
            f"lease={self._lease!r}, max_attempts={self._max_attempts!r})"
        )

    def _queue(self, queue: str | None) -> str:
        return self._queues[0] if queue is None else _queue_name("queue", queue)

    # The checked arguments of each storage call, for this face and the asyncio one (the
    # checks live here once, for both backends).

    def _put_args(
        self, queue: str | None, delay: float, unique: str | None, max_attempts: int | None
    ) -> tuple[str, float, str | None, int]:
        if unique is not None and not isinstance(unique, str):
            raise TypeError(f"unique must be a str or None, not {_type_name(unique)}")
        attempts = self._max_attempts if max_attempts is None else _max_attempts(max_attempts)
        return self._queue(queue), _seconds("delay", delay), unique, attempts

    def _take_args(
        self, n: int, timeout: float | None, lease: float | None
    ) -> tuple[list[str], float, int, float | None, float]:
        count = _count("n", n)
        length = self._lease if lease is None else _seconds("lease", lease)
        return list(self._queues), length, count, _timeout(timeout), self._lease

    def _names(self, queue: str | None) -> tuple[str, ...]:
        return self._queues if queue is None else (_queue_name("queue", queue),)

    @staticmethod
    def _report(errors: Iterable[BaseException]) -> None:
        for err in errors:
            log().warning("%s", err)

    @staticmethod
    def _oldest(found: builtins.list[JobInfo], limit: int) -> builtins.list[JobInfo]:
        found.sort(key=lambda info: info.id)
        return found[:limit]

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
        name, wait, key, attempts = self._put_args(queue, delay, unique, max_attempts)
        return self._core.put(name, value, wait, key, attempts)

    def put_many(
        self,
        values: Iterable[Any],
        *,
        queue: str | None = None,
        delay: float = 0.0,
        max_attempts: int | None = None,
    ) -> list[int]:
        """Add several jobs in one transaction; returns their ids, in order."""
        name, wait, _, attempts = self._put_args(queue, delay, None, max_attempts)
        return self._core.put_many(name, values, wait, attempts)

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
        taken, errors = self._core.take(*self._take_args(n, timeout, lease))
        self._report(errors)
        return taken

    # ---- settling a job -------------------------------------------------------------------

    @staticmethod
    def _held(job: object) -> Job:
        # A type seen before costs one set lookup, not the protocol's member-by-member check
        # (whichever backend's record it is: the seam names none).
        kind = type(job)
        if kind in _JOB_TYPES:
            return cast(Job, job)
        if not isinstance(job, Job):
            raise TypeError(f"job must be a Job returned by take(), not {_type_name(job)}")
        _JOB_TYPES.add(kind)
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
        """Requeue the expired leases of every queue in the directory or Redis namespace (or
        move them to the dead-letter list once out of attempts). :meth:`take` already does
        this for the queues it serves, so no sweeper process is needed."""
        requeued, dead = self._core.sweep(None)
        return Swept(requeued, dead)

    def dead(self, *, queue: str | None = None, limit: int = 100) -> list[JobInfo]:
        """Dead jobs, oldest first: of ``queue``, or of all this queue's names."""
        count = _count("limit", limit)
        found: list[JobInfo] = []
        for name in self._names(queue):
            found.extend(self._core.dead(name, 0, count))
        return self._oldest(found, count)

    def requeue(self, job_id: int, *, delay: float = 0.0) -> bool:
        """Put a dead job back in its queue with its attempts reset. False if it is not
        dead."""
        return self._core.requeue(_job_id(job_id), _seconds("delay", delay))

    def delete(self, job_id: int) -> bool:
        """Delete a job in any state. False if there was none."""
        return self._core.delete(_job_id(job_id))

    def get(self, job_id: int) -> JobInfo | None:
        """A job by id, in any state; None if there is none."""
        found: JobInfo | None = self._core.info(_job_id(job_id))
        return found

    def counts(self, queue: str | None = None) -> JobCounts:
        """Jobs by state: of ``queue``, or summed over this queue's names."""
        totals = [0, 0, 0, 0]
        for name in self._names(queue):
            for index, n in enumerate(self._core.counts(name)):
                totals[index] += n
        return JobCounts(*totals)

    def __len__(self) -> int:
        """Ready, scheduled and leased jobs over this queue's names (dead ones not counted)."""
        counts = self.counts()
        return counts.ready + counts.scheduled + counts.leased
