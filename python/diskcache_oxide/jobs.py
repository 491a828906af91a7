"""Leased jobs: a work queue with lasting ids, leases, retries and a dead-letter list.

:class:`JobQueue` is the Python face of the engine's job table (D-014): a job taken by a
worker is leased, not removed, so a worker that dies mid-job loses nothing; the job runs
again once its lease expires. See docs/decisions/D-015-job-queue-api.md for the shape of
this API, and docs/queue-api-spec.md for the contract.

The binding (``CacheCore._job_*``) does the storage calls with the GIL released; this module
validates arguments, shapes results and handles jobs whose value this process cannot read.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any, Literal, NamedTuple

from .core import Cache
from .errors import CorruptValueError

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
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {_type_name(value)}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{name} must be a finite number of seconds >= 0, not {value!r}")
    return seconds


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


def _error_text(error: object) -> str:
    if isinstance(error, BaseException):
        return repr(error)
    if isinstance(error, str):
        return error
    raise TypeError(f"error must be a str or an exception, not {_type_name(error)}")


def _frozen(obj: object, name: str) -> dataclasses.FrozenInstanceError:
    return dataclasses.FrozenInstanceError(
        f"cannot assign to field {name!r}: {type(obj).__name__} is read-only"
    )


# ---- records --------------------------------------------------------------------------------


class JobInfo:
    """A job as :meth:`JobQueue.get` and :meth:`JobQueue.dead` report it (read-only).

    ``due`` is, for a ready job, when it may be taken; for a leased one, its lease deadline;
    for a dead one, when it died. Reading ``value`` raises the
    :class:`~diskcache_oxide.DecodeError` if this process cannot decode it (the other fields
    stay readable, so such a job can still be listed, requeued or deleted).
    """

    __slots__ = (
        "_problem",
        "_value",
        "attempts",
        "created",
        "due",
        "error",
        "id",
        "max_attempts",
        "queue",
        "state",
        "unique",
    )

    id: int
    queue: str
    state: JobState
    due: float
    attempts: int
    max_attempts: int
    created: float
    error: str | None
    unique: str | None
    _value: Any
    _problem: BaseException | None

    def __init__(
        self,
        id: int,
        queue: str,
        state: JobState,
        due: float,
        attempts: int,
        max_attempts: int,
        created: float,
        error: str | None,
        unique: str | None,
        value: Any,
        problem: BaseException | None = None,
    ) -> None:
        fields = {
            "id": id,
            "queue": queue,
            "state": state,
            "due": due,
            "attempts": attempts,
            "max_attempts": max_attempts,
            "created": created,
            "error": error,
            "unique": unique,
            "_value": value,
            "_problem": problem,
        }
        for name, field_value in fields.items():
            object.__setattr__(self, name, field_value)

    @property
    def value(self) -> Any:
        """The job's value; raises the decode error if this process cannot read it."""
        if self._problem is not None:
            raise self._problem
        return self._value

    def __setattr__(self, name: str, value: Any) -> None:
        raise _frozen(self, name)

    def __delattr__(self, name: str) -> None:
        raise _frozen(self, name)

    def _fields(self) -> tuple[Any, ...]:
        value = self._value if self._problem is None else self._problem
        return (
            self.id,
            self.queue,
            self.state,
            self.due,
            self.attempts,
            self.max_attempts,
            self.created,
            self.error,
            self.unique,
            value,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, JobInfo):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        value = (
            repr(self._value)
            if self._problem is None
            else f"<unreadable: {type(self._problem).__name__}>"
        )
        return (
            f"JobInfo(id={self.id!r}, queue={self.queue!r}, state={self.state!r}, "
            f"due={self.due!r}, attempts={self.attempts!r}, "
            f"max_attempts={self.max_attempts!r}, created={self.created!r}, "
            f"error={self.error!r}, unique={self.unique!r}, value={value})"
        )


class Job:
    """A job a worker holds: one lease of one job, taken by :meth:`JobQueue.take`.

    Read-only, except that :meth:`extend` moves ``lease_deadline``. ``attempts`` counts the
    takes so far, this one included (a ``release`` gives one back). The lease itself is
    fenced by a number every take raises and nothing lowers: ``finish``, ``fail``, ``extend``
    and ``release`` act only while this take still holds it. Once one of them has settled
    the job (or found the lease lost), the others do nothing and report a lost lease.

    As a context manager, the job is finished on a clean exit and failed (with the
    exception's repr) when an ``Exception`` leaves the block, which is then re-raised; a
    ``KeyboardInterrupt``, ``SystemExit`` or other ``BaseException`` releases it instead
    (the worker stopped; the job did not fail), without counting the attempt.
    """

    __slots__ = (
        "_jobs",
        "_lease",
        "_settled",
        "attempts",
        "created",
        "error",
        "id",
        "lease_deadline",
        "max_attempts",
        "queue",
        "value",
    )

    id: int
    queue: str
    value: Any
    attempts: int
    max_attempts: int
    lease_deadline: float
    created: float
    error: str | None
    _jobs: JobQueue
    _lease: int
    _settled: bool

    def __init__(
        self,
        jobs: JobQueue,
        id: int,
        queue: str,
        value: Any,
        attempts: int,
        max_attempts: int,
        lease_deadline: float,
        created: float,
        error: str | None,
        lease: int,
    ) -> None:
        fields = {
            "_jobs": jobs,
            "_lease": lease,
            "_settled": False,
            "id": id,
            "queue": queue,
            "value": value,
            "attempts": attempts,
            "max_attempts": max_attempts,
            "lease_deadline": lease_deadline,
            "created": created,
            "error": error,
        }
        for name, field_value in fields.items():
            object.__setattr__(self, name, field_value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise _frozen(self, name)

    def __delattr__(self, name: str) -> None:
        raise _frozen(self, name)

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Job):
            return NotImplemented
        return (self.id, self._lease) == (other.id, other._lease)

    def __hash__(self) -> int:
        return hash((self.id, self._lease))

    def __repr__(self) -> str:
        return (
            f"Job(id={self.id!r}, queue={self.queue!r}, value={self.value!r}, "
            f"attempts={self.attempts!r}, max_attempts={self.max_attempts!r}, "
            f"lease_deadline={self.lease_deadline!r}, created={self.created!r}, "
            f"error={self.error!r})"
        )

    def finish(self) -> bool:
        """Done: delete the job. False if the lease was lost."""
        return self._jobs.finish(self)

    def fail(self, error: str | BaseException = "", retry_in: float = 0.0) -> str | None:
        """This attempt failed: ``'ready'`` (retried after ``retry_in`` seconds), ``'dead'``
        (out of attempts), or None if the lease was lost."""
        return self._jobs.fail(self, error, retry_in=retry_in)

    def extend(self, lease: float | None = None) -> bool:
        """Heartbeat: the lease now ends ``lease`` seconds from now (default: the queue's)."""
        return self._jobs.extend(self, lease)

    def release(self, delay: float = 0.0) -> bool:
        """Give the job back, ready again after ``delay`` seconds; the attempt is not counted."""
        return self._jobs.release(self, delay=delay)

    def __enter__(self) -> Job:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._settled:
            return
        if exc is None:
            self.finish()
        elif isinstance(exc, Exception):
            self.fail(exc)
        else:
            self.release()


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
        return self._cache._job_put(
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
        return self._cache._job_put_many(
            self._queue(queue), values, _seconds("delay", delay), attempts
        )

    # ---- taking ---------------------------------------------------------------------------

    def take(self, *, timeout: float | None = None, lease: float | None = None) -> Job | None:
        """Lease the next due job, trying the queues in priority order.

        :param timeout: seconds to wait for a job if none is due (default: do not wait)
        :param lease: this lease's length in seconds (default: the queue's)
        :return: the job, or None if there was none
        :raises DecodeError: if the job's value cannot be decoded here: an unsafe value or an
            unregistered type is released back (the attempt is not counted); a damaged one
            is moved to the dead-letter list (:class:`CorruptValueError`)
        """
        jobs = self.take_many(1, timeout=timeout, lease=lease)
        return jobs[0] if jobs else None

    def take_many(
        self, n: int, *, timeout: float | None = None, lease: float | None = None
    ) -> list[Job]:
        """Lease up to ``n`` due jobs in one transaction (waiting, with ``timeout``, only
        while there are none).

        A job whose value cannot be decoded here is handled as in :meth:`take`. Its error is
        raised if no other job could be returned; otherwise the jobs that decoded are returned
        and the error is logged on the ``diskcache_oxide`` logger.
        """
        count = _count("n", n)
        length = self._lease if lease is None else _seconds("lease", lease)
        rows = self._cache._job_take(list(self._queues), length, count, _timeout(timeout))
        taken: list[Job] = []
        errors: list[BaseException] = []
        for row in rows:
            (
                job_id,
                queue,
                attempts,
                max_attempts,
                deadline,
                created,
                error,
                value,
                problem,
                lease,
            ) = row
            if problem is not None:
                errors.append(self._unreadable(job_id, queue, lease, problem))
                continue
            job = Job(
                self, job_id, queue, value, attempts, max_attempts, deadline, created, error, lease
            )
            taken.append(job)
        if errors and not taken:
            for err in errors[1:]:
                _log.warning("could not take a job: %s", err)
            raise errors[0]
        for err in errors:
            _log.warning("could not take a job: %s", err)
        return taken

    def _unreadable(
        self, job_id: int, queue: str, lease: int, problem: BaseException
    ) -> BaseException:
        """Put back (or bury) a job this process cannot decode; the error to report."""
        if isinstance(problem, CorruptValueError):
            self._cache._job_bury(job_id, lease, f"damaged value: {problem}")
            err = CorruptValueError(
                f"job {job_id} of queue {queue!r} has a damaged value that no build can read; "
                "it was moved to the dead-letter list, where dead() lists it and delete() "
                "removes it"
            )
            err.__cause__ = problem
            return err
        self._cache._job_release(job_id, lease, 0.0)
        return problem

    # ---- settling a job -------------------------------------------------------------------

    @staticmethod
    def _held(job: object) -> Job:
        if not isinstance(job, Job):
            raise TypeError(f"job must be a Job returned by take(), not {_type_name(job)}")
        return job

    def finish(self, job: Job) -> bool:
        """Done: delete the job. False if the lease was lost (it expired and the job was
        taken again, or the job was already settled)."""
        held = self._held(job)
        if held._settled:
            return False
        done = self._cache._job_finish(held.id, held._lease)
        held._set("_settled", True)
        return done

    def fail(
        self, job: Job, error: str | BaseException = "", *, retry_in: float = 0.0
    ) -> str | None:
        """This attempt failed; ``error`` (a str, or an exception, stored as its repr) is kept
        with the job.

        :param retry_in: seconds before the retry may be taken
        :return: ``'ready'`` if it will be retried, ``'dead'`` if it used its attempts and went
            to the dead-letter list, None if the lease was lost
        """
        held = self._held(job)
        text = _error_text(error)
        delay = _seconds("retry_in", retry_in)
        if held._settled:
            return None
        state = self._cache._job_fail(held.id, held._lease, text, delay)
        held._set("_settled", True)
        return state

    def extend(self, job: Job, lease: float | None = None) -> bool:
        """Heartbeat: the lease now ends ``lease`` seconds from now (default: the queue's
        lease); updates ``job.lease_deadline``. False if the lease was lost."""
        held = self._held(job)
        length = self._lease if lease is None else _seconds("lease", lease)
        if held._settled:
            return False
        deadline = self._cache._job_extend(held.id, held._lease, length)
        if deadline is None:
            held._set("_settled", True)
            return False
        held._set("lease_deadline", deadline)
        return True

    def release(self, job: Job, *, delay: float = 0.0) -> bool:
        """Give the job back, ready again after ``delay`` seconds; the attempt is not
        counted. False if the lease was lost."""
        held = self._held(job)
        seconds = _seconds("delay", delay)
        if held._settled:
            return False
        released = self._cache._job_release(held.id, held._lease, seconds)
        held._set("_settled", True)
        return released

    # ---- maintenance and inspection -------------------------------------------------------

    def sweep(self) -> Swept:
        """Requeue the expired leases of every queue in the directory (or move them to the
        dead-letter list once out of attempts). :meth:`take` already does this for the
        queues it serves."""
        requeued, dead = self._cache._job_sweep(None)
        return Swept(requeued, dead)

    def dead(self, *, queue: str | None = None, limit: int = 100) -> list[JobInfo]:
        """Dead jobs, oldest first: of ``queue``, or of all this queue's names."""
        count = _count("limit", limit)
        names = self._queues if queue is None else (_queue_name("queue", queue),)
        found: list[JobInfo] = []
        for name in names:
            found.extend(JobInfo(*row) for row in self._cache._job_dead(name, 0, count))
        found.sort(key=lambda info: info.id)
        return found[:count]

    def requeue(self, job_id: int, *, delay: float = 0.0) -> bool:
        """Put a dead job back in its queue with its attempts reset. False if it is not
        dead."""
        return self._cache._job_requeue(_job_id(job_id), _seconds("delay", delay))

    def delete(self, job_id: int) -> bool:
        """Delete a job in any state. False if there was none."""
        return self._cache._job_delete(_job_id(job_id))

    def get(self, job_id: int) -> JobInfo | None:
        """A job by id, in any state; None if there is none."""
        row = self._cache._job_info(_job_id(job_id))
        return None if row is None else JobInfo(*row)

    def counts(self, queue: str | None = None) -> JobCounts:
        """Jobs by state: of ``queue``, or summed over this queue's names."""
        names = self._queues if queue is None else (_queue_name("queue", queue),)
        totals = [0, 0, 0, 0]
        for name in names:
            for index, n in enumerate(self._cache._job_counts(name)):
                totals[index] += n
        return JobCounts(*totals)

    def __len__(self) -> int:
        """Ready, scheduled and leased jobs over this queue's names (dead ones not counted)."""
        counts = self.counts()
        return counts.ready + counts.scheduled + counts.leased
