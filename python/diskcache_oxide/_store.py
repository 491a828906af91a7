"""The seam between the features and the backends (issue 31): what a feature may ask of the
store a cache belongs to, and :func:`store_of`, the one place a backend is recognised.

A feature (the job queue here; the claims, the operator's tools and the async faces to
follow) holds a cache, asks ``store_of(cache)`` for its :class:`Store` and calls only what the
protocols below declare; it never imports a backend or asks for a backend's type. A backend
(the directory: ``Cache`` with ``directory/``; Redis: ``remote/``) supplies a ``Store`` through
its cache class's ``_dco_store`` method, and imports only the ground floor, this module and its
own folder. A third backend would supply the same protocols (docs/architecture.md).

The jobs' contract lives here whole: :class:`Job` and :class:`JobInfo` (``isinstance`` holds
for either backend's records), :class:`JobCounts`, :class:`Swept`, the storage calls
(:class:`JobsBackend`) and the argument checks both backends make the same way.
``diskcache_oxide.jobs`` still exports the public names.
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, runtime_checkable

from ._seconds import NONNEGATIVE, seconds

if TYPE_CHECKING:  # only for annotations: the package has no run-time dependencies
    from types import TracebackType

    if sys.version_info >= (3, 11):
        from typing import Self
    else:
        from typing_extensions import Self

__all__ = [
    "Job",
    "JobCounts",
    "JobInfo",
    "JobState",
    "JobsBackend",
    "Store",
    "Swept",
    "has_store",
    "store_of",
]


# ---- the store ------------------------------------------------------------------------------


class Store(Protocol):
    """What a feature may ask of the backend a cache belongs to (given by :func:`store_of`)."""

    @property
    def where(self) -> str:
        """Where the cache lives, as a repr shows it: ``'/path/to/dir'`` for a directory,
        ``<redis namespace 'name'>`` for Redis."""
        ...

    def jobs(self, strict: bool) -> JobsBackend:
        """The job storage of this cache (:class:`~diskcache_oxide.JobQueue` runs on it). On a
        store whose eviction may lose jobs, ``strict`` refuses where a warning would do."""
        ...


def has_store(cache: object) -> bool:
    """Whether ``cache`` belongs to a backend (a ``Cache``, a ``RedisCache``)."""
    return callable(getattr(type(cache), "_dco_store", None))


def store_of(cache: object) -> Store:
    """The :class:`Store` of ``cache``, whichever backend it is: the only place a backend is
    recognised. It asks the object (its class's ``_dco_store``), never its type, so that a
    backend that is not loaded is never imported to find out. Anything else is a
    ``TypeError``."""
    supply = getattr(type(cache), "_dco_store", None)
    if supply is None or not callable(supply):
        raise TypeError(f"cache must be a Cache or a RedisCache, not {type(cache).__name__}")
    store: Store = supply(cache)
    return store


# ---- jobs -----------------------------------------------------------------------------------

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
