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
import logging
import os
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, runtime_checkable

from . import _core
from ._seconds import NONNEGATIVE, seconds
from .core import Cache

if TYPE_CHECKING:  # only for annotations: the package has no run-time dependencies
    from types import TracebackType

    from .remote.cache import RedisCache

    if sys.version_info >= (3, 11):
        from typing import Self
    else:
        from typing_extensions import Self

__all__ = ["Job", "JobCounts", "JobInfo", "JobQueue", "JobState", "JobsBackend", "Swept"]

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


# ---- argument checks (one place, for both backends) -----------------------------------------


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


def _error_text(error: object) -> str:
    """What a failed attempt records: a str as it is, an exception as its repr (the binding's
    rule, for a job held on Redis)."""
    if error is None:
        return ""
    if isinstance(error, BaseException):
        return repr(error)
    if isinstance(error, str):
        return error
    raise TypeError(f"error must be a str or an exception, not {_type_name(error)}")


def _optional_seconds(name: str, value: object) -> float:
    """A job method's delay (``retry_in``, ``delay``): None is 0, as the binding reads it."""
    return 0.0 if value is None else _seconds(name, value)


def pass_delay(attempts: int, lease: float) -> float:
    """How long a job passed over for the ``attempts``-th time waits before a take offers it
    again (D-047): 1 s, doubling with every attempt it has used, at most one lease and never
    under 1 s (the engine's ``pass_delay``)."""
    doubling = 2.0 ** min(max(attempts - 1, 0), 30)
    return min(doubling, max(lease, 1.0))


# ---- records --------------------------------------------------------------------------------


@runtime_checkable
class Job(Protocol):
    """A job a worker holds: one lease of one job, taken by :meth:`JobQueue.take`.

    Read-only, except that :meth:`extend` moves ``lease_deadline``. ``attempts`` counts the
    takes so far, this one included (a :meth:`release` gives one back). The lease is fenced
    by a number that every take raises and nothing lowers: :meth:`finish`, :meth:`fail`,
    :meth:`extend` and :meth:`release` act only while this take still holds it. Once one of
    them has settled the job (or found the lease lost), the others do nothing and report a
    lost lease.

    As a context manager, the job is finished on a clean exit and failed (with the
    exception's repr) when an ``Exception`` leaves the block, which is then re-raised; a
    ``KeyboardInterrupt``, ``SystemExit`` or other ``BaseException`` releases it instead
    (the worker stopped; the job did not fail), without counting the attempt.

    A protocol (D-060): a directory's jobs are the binding's ``_core.Job`` and a Redis
    namespace's are :class:`~diskcache_oxide.remote.jobs.RedisJob`; ``isinstance(job, Job)``
    is true of both.
    """

    @property
    def id(self) -> int:
        """The job's lasting id."""
        ...

    @property
    def queue(self) -> str:
        """The queue it was taken from."""
        ...

    @property
    def value(self) -> Any:
        """The value it was put with."""
        ...

    @property
    def attempts(self) -> int:
        """Takes so far, this one included."""
        ...

    @property
    def max_attempts(self) -> int:
        """Takes after which a failure sends it to the dead-letter list (0: no limit)."""
        ...

    @property
    def lease_deadline(self) -> float:
        """When the lease ends unless extended, in seconds since the epoch."""
        ...

    @property
    def created(self) -> float:
        """When it was put, in seconds since the epoch."""
        ...

    @property
    def error(self) -> str | None:
        """Why the previous attempt failed, if it did."""
        ...

    def finish(self) -> bool:
        """Done: delete the job. False if the lease was lost (it expired and the job was
        taken again, or the job was already settled)."""
        ...

    def fail(
        self, error: str | BaseException | None = "", retry_in: float | None = 0.0
    ) -> Literal["ready", "dead"] | None:
        """This attempt failed; ``error`` (a str, or an exception, stored as its repr) is kept
        with the job. Returns ``'ready'`` if it will be retried after ``retry_in`` seconds,
        ``'dead'`` if it used its attempts and went to the dead-letter list, None if the
        lease was lost."""
        ...

    def extend(self, lease: float | None = None) -> bool:
        """Heartbeat: the lease now ends ``lease`` seconds from now (default: the queue's
        lease); updates ``lease_deadline``. False if the lease was lost."""
        ...

    def release(self, delay: float | None = 0.0) -> bool:
        """Give the job back, ready again after ``delay`` seconds; the attempt is not
        counted. False if the lease was lost."""
        ...

    def __enter__(self) -> Self:
        """The job itself: ``with job:`` finishes, fails or releases it at the end."""
        ...

    def __exit__(
        self,
        _exc_type: type[BaseException] | None,
        exc: BaseException | None,
        _traceback: TracebackType | None,
    ) -> bool:
        """Finish on a clean exit, fail on an ``Exception`` (re-raised), release on any other
        ``BaseException``; nothing if the job was settled inside the block."""
        ...


@runtime_checkable
class JobInfo(Protocol):
    """A job as :meth:`JobQueue.get` and :meth:`JobQueue.dead` report it (read-only).

    ``due`` is, for a ready job, when it may be taken; for a leased one, its lease deadline;
    for a dead one, when it died. Reading ``value`` raises the ``DecodeError`` if this
    process cannot decode it (the other fields stay readable, so such a job can still be
    listed, requeued or deleted).

    A protocol (D-060): the binding's ``_core.JobInfo`` for a directory,
    :class:`~diskcache_oxide.remote.jobs.RedisJobInfo` for Redis; ``isinstance(info,
    JobInfo)`` is true of both.
    """

    @property
    def id(self) -> int:
        """The job's lasting id."""
        ...

    @property
    def queue(self) -> str:
        """Its queue."""
        ...

    @property
    def state(self) -> JobState:
        """``'ready'``, ``'leased'`` or ``'dead'``."""
        ...

    @property
    def due(self) -> float:
        """Ready: when it may be taken; leased: the lease deadline; dead: when it died."""
        ...

    @property
    def attempts(self) -> int:
        """Takes so far."""
        ...

    @property
    def max_attempts(self) -> int:
        """Takes after which a failure sends it to the dead-letter list (0: no limit)."""
        ...

    @property
    def created(self) -> float:
        """When it was put."""
        ...

    @property
    def error(self) -> str | None:
        """Why its last attempt failed, if it did."""
        ...

    @property
    def unique(self) -> str | None:
        """Its unique key, if it was put with one."""
        ...

    @property
    def taken(self) -> float | None:
        """For a leased job as an operator's listing reports it: when its current lease was
        taken; otherwise None."""
        ...

    @property
    def preview(self) -> str | None:
        """For a job listed with a preview: a short repr-like text of its value; otherwise
        None."""
        ...

    # ``value`` is a member for the type checker only: a runtime isinstance() check reads
    # every member of a protocol with hasattr() (Python 3.11), and this one raises for a value
    # this process cannot decode, which must not make isinstance() raise.
    if TYPE_CHECKING:

        @property
        def value(self) -> Any:
            """The decoded value; raises the decode error if this process cannot read it."""
            ...


# ---- storage --------------------------------------------------------------------------------


class JobsBackend(Protocol):
    """The storage calls behind :class:`JobQueue`: the binding's ``JobsCore`` for a directory
    (``Cache._jobs``), :class:`~diskcache_oxide.remote.jobs.RedisJobs` for Redis. Arguments
    arrive checked (this module checks them, for both). What the command line and the
    dashboard use too (:func:`jobs_of`)."""

    def put(
        self, queue: str, value: Any, delay: float, unique: str | None, max_attempts: int
    ) -> int: ...
    def put_many(
        self, queue: str, values: Iterable[Any], delay: float, max_attempts: int
    ) -> builtins.list[int]: ...
    def take(
        self,
        queues: list[str],
        lease: float,
        n: int,
        timeout: float | None = None,
        default_lease: float | None = None,
    ) -> tuple[builtins.list[Any], builtins.list[BaseException]]: ...
    def sweep(self, queue: str | None = None) -> tuple[int, int]: ...
    def counts(self, queue: str) -> tuple[int, int, int, int]: ...
    def info(self, id: int) -> Any: ...
    def dead(self, queue: str, after: int, limit: int) -> builtins.list[Any]: ...
    def queues(self) -> builtins.list[str]: ...
    def list(
        self,
        queue: str,
        state: Literal["ready", "scheduled", "leased", "dead"] | None = None,
        after: int = 0,
        limit: int = 100,
        preview: int | None = None,
    ) -> builtins.list[Any]: ...
    def bury_any(self, id: int, error: str) -> bool: ...
    def purge_dead(self, queue: str) -> int: ...
    def requeue(self, id: int, delay: float) -> bool: ...
    def delete(self, id: int) -> bool: ...


def _redis_cache_type() -> type | None:
    """``RedisCache`` if the Redis backend is loaded (it is, if a RedisCache exists)."""
    remote = sys.modules.get("diskcache_oxide.remote.cache")
    return None if remote is None else remote.RedisCache


def jobs_of(cache: Cache | RedisCache, *, strict: bool = False) -> JobsBackend:
    """The job storage of ``cache``: its directory's (``Cache._jobs``), or a
    :class:`~diskcache_oxide.remote.RedisCache` namespace's
    (:class:`~diskcache_oxide.remote.jobs.RedisJobs`, imported only then, so the package works
    without redis-py). The operator's tools list, bury and purge jobs through it. On Redis,
    ``strict`` refuses a server whose maxmemory-policy may evict jobs (else: a warning)."""
    if isinstance(cache, Cache):
        return cache._jobs
    redis_cache = _redis_cache_type()
    if redis_cache is not None and isinstance(cache, redis_cache):
        from .remote.jobs import RedisJobs

        return RedisJobs(cache, strict=strict)
    raise TypeError(f"cache must be a Cache or a RedisCache, not {_type_name(cache)}")


# ---- the queue ------------------------------------------------------------------------------


class JobQueue:
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

    def __init__(
        self,
        cache_or_directory: Cache | RedisCache | str | os.PathLike[str],
        queues: str | Sequence[str] = "default",
        *,
        lease: float = 60.0,
        max_attempts: int = 3,
        strict: bool = False,
    ) -> None:
        cache: Cache | RedisCache
        if isinstance(cache_or_directory, Cache):
            cache = cache_or_directory
        elif isinstance(cache_or_directory, (str, os.PathLike)):
            cache = Cache(os.fspath(cache_or_directory), eviction_policy="none")
        else:
            redis_cache = _redis_cache_type()
            if redis_cache is None or not isinstance(cache_or_directory, redis_cache):
                raise TypeError(
                    "cache_or_directory must be a Cache, a RedisCache or a directory path, "
                    f"not {_type_name(cache_or_directory)}"
                )
            cache = cache_or_directory
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
        self._core: JobsBackend = jobs_of(cache, strict=strict)

    @property
    def cache(self) -> Cache | RedisCache:
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
        cache = self._cache
        if isinstance(cache, Cache):
            where = repr(cache.directory)
        else:
            where = f"<redis namespace {cache.namespace!r}>"
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
            _log.warning("%s", err)

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
        # A directory's job first: one type test, not the protocol's member-by-member check.
        if type(job) is _core.Job:
            return job
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
