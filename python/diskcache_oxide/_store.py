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
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, TypeVar, runtime_checkable

from ._seconds import NONNEGATIVE, seconds

if TYPE_CHECKING:  # only for annotations: the package has no run-time dependencies
    from types import TracebackType

    if sys.version_info >= (3, 11):
        from typing import Self
    else:
        from typing_extensions import Self

T = TypeVar("T")

#: A live claim as a store gives it: ``(token, host, pid, acquired, expires)``.
Record = tuple[str, str, int, float, float]

__all__ = [
    "AsyncClaimBackend",
    "AsyncJobsBackend",
    "AsyncStore",
    "AsyncStored",
    "ClaimBackend",
    "ClaimRegistry",
    "Inspector",
    "Job",
    "JobCounts",
    "JobInfo",
    "JobState",
    "JobsBackend",
    "Record",
    "Store",
    "Stored",
    "Swept",
    "Unreadable",
    "async_store_of",
    "has_async_store",
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

    @property
    def transactional(self) -> bool:
        """Whether a group of calls can be one transaction (``transact()``): a directory's
        can, a Redis namespace's cannot (D-058)."""
        ...

    def jobs(self, strict: bool) -> JobsBackend:
        """The job storage of this cache (:class:`~diskcache_oxide.JobQueue` runs on it). On a
        store whose eviction may lose jobs, ``strict`` refuses where a warning would do."""
        ...

    def claims(self, strict: bool) -> ClaimRegistry:
        """The claims and values of this cache (:class:`~diskcache_oxide.Claims` and
        compute-once run on them). On a store whose eviction may lose claims, ``strict``
        refuses where a warning would do."""
        ...

    def asyncio(self) -> AsyncStore | None:
        """This cache's storage as awaitables on the running loop, where the backend has an
        asyncio client of its own (Redis: one per loop, kept on the cache); None where it has
        none, and the asyncio features run its blocking calls in threads."""
        ...

    def inspector(self) -> Inspector:
        """The operator's reads of this cache (:mod:`diskcache_oxide.admin`, the command line
        and the dashboard): what they show that differs by backend (:class:`Inspector`)."""
        ...

    def asyncio_jobs(self, jobs: JobsBackend, client: Any) -> tuple[AsyncJobsBackend, Any] | None:
        """``jobs`` (this store's job storage) awaited on an asyncio client: ``client`` if
        given, else a twin of the cache's client, made here and returned second for the
        caller to close (None when ``client`` was given). None where the backend has no
        asyncio client: the caller runs the blocking calls in threads."""
        ...

    def check_eviction(self, what: Literal["jobs", "claims", "tasks"], strict: bool) -> None:
        """Warn once (with ``strict``, refuse) if this store may evict ``what`` (``'jobs'``,
        ``'claims'``, ``'tasks'``: records that must not vanish) without an error. A
        directory evicts none of them; a Redis server may, by its ``maxmemory-policy``."""
        ...


class Stored(Protocol):
    """A cache that belongs to a backend (a ``Cache``, a ``RedisCache``): what
    :func:`store_of` accepts, for the features' annotations."""

    def _dco_store(self) -> Store: ...


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


# ---- claims ---------------------------------------------------------------------------------


class ClaimBackend(Protocol):
    """The storage primitives of claims and compute-once: everything the pay-once protocol
    asks of where the values and the claims live.

    Claims are scoped by ``namespace`` and keyed by the value's key; each is owned by a
    random ``token`` and runs out ``lease`` seconds after it was taken or last extended.
    Every method may block (briefly, except :meth:`wait_for_change`); the asyncio driver
    runs them in the cache's executor, so an implementation need not be async.
    ``diskcache_oxide.directory.claims.DirectoryClaims`` implements it for a cache directory,
    ``diskcache_oxide.remote.claims.RedisClaims`` for a Redis namespace.
    """

    def get(self, key: Any) -> Any:
        """The stored value of ``key``, or ``ENOVAL`` if there is none."""

    def store(self, key: Any, value: Any, expire: float | None, tag: Any) -> None:
        """Store ``value`` under ``key`` (expiring after ``expire`` seconds, None: never,
        with ``tag``), and wake the waiters of :meth:`wait_for_change`."""

    def try_acquire(
        self, namespace: str, key: Any, lease: float, token: str, host: str, pid: int
    ) -> bool:
        """Take the claim on ``key`` for ``token`` if it is free or its lease ran out, in one
        atomic step; False (at once) if someone holds it."""

    def extend(self, namespace: str, key: Any, token: str, lease: float) -> bool:
        """Make ``token``'s live claim on ``key`` run out ``lease`` seconds from now; False if
        ``token`` does not hold it, or its lease ran out."""

    def release(self, namespace: str, key: Any, token: str) -> bool:
        """Remove ``token``'s live claim on ``key``; False if ``token`` does not hold it."""

    def wait_for_change(self, namespace: str, key: Any, seconds: float, value: bool) -> bool:
        """Sleep up to ``seconds`` until the claim on ``key`` is released or runs out (or,
        with ``value``, a value is stored under ``key``); True if it was woken by a change.
        Returning early is always allowed: the callers look again."""


class ClaimRegistry(ClaimBackend, Protocol):
    """:class:`ClaimBackend` with the inspection an operator needs: what
    :class:`~diskcache_oxide.claims.Claims` offers besides taking and releasing."""

    def holder(self, namespace: str, key: Any) -> Record | None:
        """``(token, host, pid, acquired, expires)`` of the live claim on ``key``, or None."""

    def break_claim(self, namespace: str, key: Any) -> bool:
        """Remove the claim on ``key`` whoever holds it; False if there was none."""

    def claims(self, namespace: str) -> builtins.list[tuple[Any, Record]]:
        """The live claims of ``namespace``: ``(key, (token, host, pid, acquired, expires))``."""


# ---- asyncio --------------------------------------------------------------------------------


class AsyncClaimBackend(Protocol):
    """:class:`ClaimRegistry`'s calls as awaitables: what
    :class:`~diskcache_oxide.aio.AsyncClaims` and the asyncio pay-once driver
    (``aio/turns.py``) ask. A store with no asyncio client of its own gets one that runs its
    blocking calls in threads (``aio/_threads.py``); Redis awaits them on redis-py's asyncio
    client (``remote/store.py``)."""

    async def get(self, key: Any) -> Any: ...
    async def store(self, key: Any, value: Any, expire: float | None, tag: Any) -> None: ...
    async def try_acquire(
        self, namespace: str, key: Any, lease: float, token: str, host: str, pid: int
    ) -> bool: ...
    async def extend(self, namespace: str, key: Any, token: str, lease: float) -> bool: ...
    async def release(self, namespace: str, key: Any, token: str) -> bool: ...
    async def wait_for_change(
        self, namespace: str, key: Any, seconds: float, value: bool
    ) -> bool: ...
    async def holder(self, namespace: str, key: Any) -> Record | None: ...
    async def claims(self, namespace: str) -> builtins.list[tuple[Any, Record]]: ...


class AsyncStore(Protocol):
    """What an asyncio feature may ask of the store of an asyncio face
    (:func:`async_store_of`): an ``AsyncCache``'s, an ``AsyncRedisCache``'s, or a blocking
    cache's own (:meth:`Store.asyncio`)."""

    @property
    def cache(self) -> Stored:
        """The blocking cache of the same store (its :class:`Store`)."""
        ...

    def claims(self) -> AsyncClaimBackend:
        """The claims and values as awaitables."""
        ...

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in a thread (the face's executor): how a plain function
        given to an asyncio feature runs without blocking the loop."""
        ...


class AsyncStored(Protocol):
    """An asyncio face (an ``AsyncCache``, an ``AsyncRedisCache``): what
    :func:`async_store_of` accepts."""

    def _dco_async_store(self) -> AsyncStore: ...


class AsyncJobsBackend(Protocol):
    """:class:`JobsBackend`'s calls as awaitables on an asyncio client (Redis): what
    :class:`~diskcache_oxide.aio.AsyncJobQueue` awaits where the store has one
    (:meth:`Store.asyncio_jobs`). Arguments arrive checked, as :class:`JobsBackend`'s do."""

    async def put(
        self, queue: str, value: Any, delay: float, unique: str | None, max_attempts: int
    ) -> int: ...
    async def put_many(
        self, queue: str, values: Iterable[Any], delay: float, max_attempts: int
    ) -> builtins.list[int]: ...
    async def take(
        self,
        queues: builtins.list[str],
        lease: float,
        n: int,
        timeout: float | None = None,
        default_lease: float | None = None,
    ) -> tuple[builtins.list[Any], builtins.list[BaseException]]: ...
    def owns(self, job: Any) -> bool:
        """Whether ``job`` (a record as the queue holds it) is settled by these calls."""
        ...

    async def finish(self, job: Any) -> bool: ...
    async def fail(
        self, job: Any, error: str | BaseException | None = "", retry_in: float | None = 0.0
    ) -> Literal["ready", "dead"] | None: ...
    async def extend(self, job: Any, lease: float | None = None) -> bool: ...
    async def release(self, job: Any, delay: float | None = 0.0) -> bool: ...
    async def sweep(self, queue: str | None = None) -> tuple[int, int]: ...
    async def counts(self, queue: str) -> tuple[int, int, int, int]: ...
    async def info(self, id: int) -> JobInfo | None: ...
    async def dead(self, queue: str, after: int, limit: int) -> Sequence[JobInfo]: ...
    async def requeue(self, id: int, delay: float) -> bool: ...
    async def delete(self, id: int) -> bool: ...


def has_async_store(face: object) -> bool:
    """Whether ``face`` is an asyncio face of a backend (an ``AsyncCache``, an
    ``AsyncRedisCache``)."""
    return callable(getattr(type(face), "_dco_async_store", None))


def async_store_of(face: object) -> AsyncStore:
    """The :class:`AsyncStore` of an asyncio face, asked of its class as :func:`store_of`
    asks a cache's; a ``TypeError`` for anything else."""
    supply = getattr(type(face), "_dco_async_store", None)
    if supply is None or not callable(supply):
        raise TypeError(f"expected an AsyncCache or an AsyncRedisCache, not {type(face).__name__}")
    store: AsyncStore = supply(face)
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


# ---- the operator's inspector ---------------------------------------------------------------


class Unreadable:
    """Stands for a stored value or key this process cannot decode (a pickle on a handle
    opened without ``pickle=True``, an unregistered type, a decoder that raises, damaged
    bytes): listed, never raised. ``reason`` is the error's class, ``message`` the error
    itself, ``what`` ``"value"`` or ``"key"``. What an :class:`Inspector` lists for a key it
    cannot decode; ``diskcache_oxide.admin.Unreadable`` is this class."""

    def __init__(self, error: BaseException, what: Literal["value", "key"] = "value") -> None:
        self.reason = type(error).__name__
        self.message = f"{self.reason}: {error}" if str(error) else self.reason
        self.what = what

    def __repr__(self) -> str:
        # A value keeps the form the CLI and the dashboard have always shown.
        if self.what == "key":
            return f"<unreadable key: {self.reason}>"
        return f"<unreadable: {self.reason}>"


class Inspector(Protocol):
    """The operator's reads of one store whose answers differ by backend, and its one write
    (:meth:`vacuum`): what :mod:`diskcache_oxide.admin`, the command line and the dashboard
    ask (:meth:`Store.inspector`). A directory's is ``directory/inspector.py``, a Redis
    namespace's ``remote/inspector.py``.

    The reads change nothing: a directory is read through the handle the tools opened
    (read-only unless a command writes), a Redis namespace with read commands only (no hit or
    miss counted, nothing expired removed, no run-out claim pruned). The jobs and the
    breaking of a claim are the same on both, through :meth:`Store.jobs` and
    :meth:`Store.claims`.
    """

    @property
    def backend(self) -> str:
        """The backend's name, as the tools report it: ``'directory'`` or ``'redis'``."""
        ...

    @property
    def location(self) -> str:
        """Where the cache is, as a tool names it: a directory's path, or a Redis namespace
        as a URL (``redis://host:port/db?namespace=NS``, no password)."""
        ...

    @property
    def directory(self) -> str | None:
        """The cache directory; None where the store has none (and what only a directory
        has does not apply)."""
        ...

    @property
    def namespace(self) -> str | None:
        """The Redis namespace; None for a directory."""
        ...

    def ping(self) -> None:
        """Check that the store answers (a Redis server's PING), raising the backend's error
        if it does not; a directory has nothing to ask."""
        ...

    def counters(self) -> tuple[int, int]:
        """The hit and miss counts as stored (``stats()`` would switch counting: a write)."""
        ...

    def settings(self) -> dict[str, Any]:
        """The settings an operator is shown: a directory's (the names of
        ``DEFAULT_SETTINGS``); a Redis namespace's name and ``statistics``, with its server's
        memory settings (:meth:`server_memory`)."""
        ...

    def server_memory(self) -> dict[str, Any]:
        """A Redis server's ``maxmemory``, ``maxmemory_policy`` (``unknown (why)`` where the
        server refuses ``CONFIG``) and ``jobs_and_claims``: whether that policy keeps them;
        empty for a directory, whose own settings govern its size."""
        ...

    def volume(self) -> int | None:
        """The bytes the cache takes on disk; None where it has no files."""
        ...

    def vacuum(self) -> int:
        """Rebuild the database without its free pages; the bytes this gave back. An
        ``UnsupportedError`` where there is no database file."""
        ...

    def forgotten_jobs(self) -> dict[str, int] | None:
        """By job queue, the ids forgotten because their record was gone (evicted from a
        Redis server, or deleted by another program); None where no job is ever forgotten."""
        ...

    def entry(self, key: Any) -> tuple[Any, float | None, Any] | None:
        """``(value, expire_time, tag)`` of ``key``, or None if there is none; counts no hit
        or miss. Raises the decode error for a value this process cannot decode."""
        ...

    def preview(self, key: Any, width: int) -> str | None:
        """A preview of the value of ``key``, at most ``width`` characters, or None if it is
        absent: from the stored bytes without decoding (a directory), or the decoded value's
        repr cut (Redis; never unpickled unless the handle was opened with ``pickle``)."""
        ...

    def keys(self, prefix: str | None = None, ordered: bool = False) -> Iterable[Any]:
        """Every key, an :class:`Unreadable` for one this process cannot decode (the keys
        after it follow): in the order the cache iterates them, or with ``ordered`` in the
        order they were first stored; with ``prefix``, the str keys that start with it."""
        ...

    def queues(self) -> builtins.list[tuple[str | None, int, float | None]]:
        """Every queue on the keys (D-054) as ``(prefix, depth, oldest)``: the int keys'
        queue (prefix None) first, then by prefix; ``oldest`` is when its oldest item was
        stored (None when empty, or where the store keeps no time of storing)."""
        ...

    def queue(self, prefix: str | None) -> tuple[int, float | None]:
        """``(depth, oldest)`` of the queue of ``prefix``, as :meth:`queues` gives it;
        ``(0, None)`` if it has no items."""
        ...

    def queue_keys(self, prefix: str | None) -> Iterable[Any]:
        """The keys of the queue of ``prefix``, front first."""
        ...

    def queue_front(self, prefix: str | None, width: int, lookups: int) -> str | None:
        """A :meth:`preview` of the front item of the queue of ``prefix``, or None if it is
        not among the first ``lookups`` keys looked at: what a dashboard poll may cost."""
        ...

    def claims(
        self, namespace: str | None, limit: int | None, offset: int
    ) -> builtins.list[tuple[str, Any, Record]]:
        """The live claims (of ``namespace``, or of every namespace) as ``(namespace, key,
        (token, host, pid, acquired, expires))``, by namespace, then by key (a directory) or
        by when they run out (Redis); with ``limit``, at most that many after the first
        ``offset``, and only those are read."""
        ...

    def claim_count(self, namespace: str | None) -> int:
        """How many live claims there are (of ``namespace``, or of every namespace)."""
        ...
