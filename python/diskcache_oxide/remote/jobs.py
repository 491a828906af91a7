"""Leased jobs on Redis (issue 21, D-060): the storage behind ``JobQueue(redis_cache, ...)``.

:class:`RedisJobs` has the calls of the binding's ``JobsCore`` (a directory's ``Cache._jobs``),
so :class:`~diskcache_oxide.JobQueue` runs on it unchanged, argument checks included; the
command line and the dashboard can list, bury and purge through it too
(``diskcache_oxide.jobs.jobs_of``). Each call is a Lua script of ``_job_scripts`` (a large
batch, a few), atomic on the namespace's slot, with the server's clock for every time: a take
moves the expired leases of the queues it serves first, so a lease that runs out puts its job
back with no sweeper process; every settling script checks the job's id and lease number (the
fencing token, raised by every take and never lowered).

The operations are written once as generators of requests (``_io``'s sans-IO shape), in
``_job_ops``: :class:`RedisJobs` runs them on a blocking
:class:`~diskcache_oxide.remote._io.Link`; :class:`AsyncRedisJobs` awaits the very same
operations on an :class:`~diskcache_oxide.remote._io.AsyncLink` over a ``redis.asyncio``
client. This module holds the records a worker and an operator see, and the storage.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .. import _core
from .._store import _error_text, _optional_seconds, _seconds
from . import _inspect
from ._io import AsyncLink, Link
from ._job_ops import (
    _STATES,
    Taken,
    _b,
    _leases,
    _opt,
    _s,
    _seconds_of,
    _State,
    bury_any_op,
    counts_op,
    delete_op,
    extend_op,
    fail_op,
    finish_op,
    info_op,
    list_op,
    purge_dead_op,
    put_many_op,
    put_op,
    queues_op,
    release_op,
    requeue_op,
    sweep_op,
    take_op,
)

# The tests import these two from here, as before the operations moved to _job_ops.
from ._job_ops import _call as _call
from ._job_ops import _member as _member
from ._job_scripts import JOB_SCRIPTS
from ._policy import check_eviction
from ._requests import Command, Op, Request, Script

if TYPE_CHECKING:
    import sys

    if sys.version_info >= (3, 11):
        from typing import Self
    else:
        from typing_extensions import Self

__all__ = ["AsyncRedisJobs", "RedisJob", "RedisJobInfo", "RedisJobs"]


# ---- records --------------------------------------------------------------------------------


class RedisJob:
    """A job a worker holds on Redis: one lease of one job, as the binding's ``Job`` is for a
    directory (the same fields, methods and rules; see :class:`diskcache_oxide.Job`).

    Read-only, except that :meth:`extend` moves ``lease_deadline`` (the server's clock).
    Settling calls name the job's id and this take's lease number; once one has settled the
    job (or found the lease lost), the others return False/None without a server call.
    """

    __slots__ = (
        "_attempts",
        "_created",
        "_deadline",
        "_default_lease",
        "_error",
        "_id",
        "_jobs",
        "_lease",
        "_max_attempts",
        "_queue",
        "_settled",
        "_value",
    )

    def __init__(self, jobs: RedisJobs, taken: Taken, default_lease: float) -> None:
        (
            self._id,
            self._queue,
            self._value,
            self._attempts,
            self._lease,
            self._max_attempts,
            self._deadline,
            self._created,
            self._error,
        ) = taken
        self._jobs = jobs
        self._default_lease = default_lease
        self._settled = False

    @property
    def id(self) -> int:
        """The job's lasting id."""
        return self._id

    @property
    def queue(self) -> str:
        """The queue it was taken from."""
        return self._queue

    @property
    def value(self) -> Any:
        """The value it was put with."""
        return self._value

    @property
    def attempts(self) -> int:
        """Takes so far, this one included."""
        return self._attempts

    @property
    def max_attempts(self) -> int:
        """Takes after which a failure sends it to the dead-letter list (0: no limit)."""
        return self._max_attempts

    @property
    def lease_deadline(self) -> float:
        """When the lease ends unless extended, in seconds since the epoch (server clock)."""
        return self._deadline

    @property
    def created(self) -> float:
        """When it was put, in seconds since the epoch (server clock)."""
        return self._created

    @property
    def error(self) -> str | None:
        """Why the previous attempt failed, if it did."""
        return self._error

    # Each settling call is an operation, run here on the blocking link, or awaited by
    # AsyncRedisJobs on an asyncio one; these say what to run and record what it did.

    def _finish_op(self) -> Op[bool] | None:
        return None if self._settled else finish_op(self._id, self._lease)

    def _fail_op(self, error: object, retry_in: object) -> Op[str | None] | None:
        text = _error_text(error)
        delay = _optional_seconds("retry_in", retry_in)
        return None if self._settled else fail_op(self._id, self._lease, text, delay)

    def _extend_op(self, lease: object) -> Op[float | None] | None:
        length = self._default_lease if lease is None else _seconds("lease", lease)
        return None if self._settled else extend_op(self._id, self._lease, length)

    def _release_op(self, delay: object) -> Op[bool] | None:
        seconds = _optional_seconds("delay", delay)
        return None if self._settled else release_op(self._id, self._lease, seconds)

    def _settled_by(self, result: Any) -> Any:
        """What a settling call returned; the job is settled from now on."""
        self._settled = True
        return result

    def _extended_by(self, deadline: float | None) -> bool:
        """What an extend returned: the new deadline, or None if the lease was lost."""
        if deadline is None:
            self._settled = True
            return False
        self._deadline = deadline
        return True

    def finish(self) -> bool:
        """Done: delete the job. False if the lease was lost (it expired and the job was
        taken again, or the job was already settled)."""
        op = self._finish_op()
        return False if op is None else bool(self._settled_by(self._jobs._link.run(op)))

    def fail(
        self, error: str | BaseException | None = "", retry_in: float | None = 0.0
    ) -> Literal["ready", "dead"] | None:
        """This attempt failed; ``error`` (a str, or an exception, stored as its repr) is kept
        with the job. Returns ``'ready'`` if it will be retried after ``retry_in`` seconds,
        ``'dead'`` if it used its attempts and went to the dead-letter list, None if the
        lease was lost."""
        op = self._fail_op(error, retry_in)
        if op is None:
            return None
        state: Literal["ready", "dead"] | None = self._settled_by(self._jobs._link.run(op))
        return state

    def extend(self, lease: float | None = None) -> bool:
        """Heartbeat: the lease now ends ``lease`` seconds from now (default: the queue's
        lease); updates ``lease_deadline``. False if the lease was lost."""
        op = self._extend_op(lease)
        return False if op is None else self._extended_by(self._jobs._link.run(op))

    def release(self, delay: float | None = 0.0) -> bool:
        """Give the job back, ready again after ``delay`` seconds; the attempt is not
        counted. False if the lease was lost."""
        op = self._release_op(delay)
        return False if op is None else bool(self._settled_by(self._jobs._link.run(op)))

    def __enter__(self) -> Self:
        """The job itself: ``with job:`` finishes, fails or releases it at the end."""
        return self

    def __exit__(
        self,
        _exc_type: type[BaseException] | None,
        exc: BaseException | None,
        _traceback: TracebackType | None,
    ) -> Literal[False]:
        """Finish on a clean exit, fail on an ``Exception`` (re-raised), release on any other
        ``BaseException``; nothing if the job was settled inside the block."""
        if self._settled:
            return False
        if exc is None:
            self.finish()
        elif isinstance(exc, Exception):
            self.fail(exc)
        else:
            self.release()
        return False

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RedisJob):
            return NotImplemented
        return (self._id, self._lease) == (other._id, other._lease)

    def __hash__(self) -> int:
        return hash((self._id, self._lease))

    def __repr__(self) -> str:
        return (
            f"Job(id={self._id}, queue={self._queue!r}, value={self._value!r}, "
            f"attempts={self._attempts}, max_attempts={self._max_attempts}, "
            f"lease_deadline={self._deadline!r}, created={self._created!r}, "
            f"error={self._error!r})"
        )


_NOT_READ = (
    "this JobInfo was listed with a preview, so its value was not read: read the job by its "
    "id (JobQueue.get) for its value, or use its preview"
)


class RedisJobInfo:
    """A job on Redis as :meth:`JobQueue.get`, :meth:`JobQueue.dead` and the operator's
    listing report it (read-only; the fields of :class:`diskcache_oxide.JobInfo`)."""

    __slots__ = (
        "_attempts",
        "_created",
        "_due",
        "_error",
        "_id",
        "_max_attempts",
        "_preview",
        "_problem",
        "_queue",
        "_state",
        "_taken",
        "_unique",
        "_value",
    )

    def __init__(
        self,
        fields: list[Any],
        pickle: bool,
        *,
        listed: bool = False,
        preview: int | None = None,
    ) -> None:
        m, q, s, d, a, most, c, e, u, t, v = fields
        self._id = int(m)
        self._queue = _s(q)
        self._state = _STATES[s]
        self._due = _seconds_of(d)
        self._attempts = int(a)
        self._max_attempts = int(most)
        self._created = _seconds_of(c)
        self._error = _opt(e)
        self._unique = _opt(u)
        # When its current lease was taken: an operator's listing reports it for a leased
        # job only, as the binding does.
        self._taken = _seconds_of(t) if listed and s == b"1" and t is not None else None
        self._preview: str | None = None
        self._value: Any = None
        self._problem: BaseException | None = None
        if preview is not None:
            self._preview = _preview(v, preview)
            self._problem = ValueError(_NOT_READ)
            return
        try:
            self._value = _core.decode_value(v, pickle=pickle)
        except Exception as problem:
            self._problem = problem

    @property
    def id(self) -> int:
        """The job's lasting id."""
        return self._id

    @property
    def queue(self) -> str:
        """Its queue."""
        return self._queue

    @property
    def state(self) -> _State:
        """``'ready'``, ``'leased'`` or ``'dead'``."""
        return self._state

    @property
    def due(self) -> float:
        """Ready: when it may be taken; leased: the lease deadline; dead: when it died."""
        return self._due

    @property
    def attempts(self) -> int:
        """Takes so far."""
        return self._attempts

    @property
    def max_attempts(self) -> int:
        """Takes after which a failure sends it to the dead-letter list (0: no limit)."""
        return self._max_attempts

    @property
    def created(self) -> float:
        """When it was put."""
        return self._created

    @property
    def error(self) -> str | None:
        """Why its last attempt failed, if it did."""
        return self._error

    @property
    def unique(self) -> str | None:
        """Its unique key, if it was put with one."""
        return self._unique

    @property
    def taken(self) -> float | None:
        """For a leased job as an operator's listing reports it: when its current lease was
        taken; otherwise None."""
        return self._taken

    @property
    def preview(self) -> str | None:
        """For a job listed with a preview: a short repr-like text of its value; otherwise
        None."""
        return self._preview

    @property
    def value(self) -> Any:
        """The decoded value; raises the decode error if this process cannot read it."""
        if self._problem is not None:
            raise self._problem
        return self._value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RedisJobInfo):
            return NotImplemented
        same = (
            self._id,
            self._queue,
            self._state,
            self._attempts,
            self._max_attempts,
            self._due,
            self._created,
            self._error,
            self._unique,
        ) == (
            other._id,
            other._queue,
            other._state,
            other._attempts,
            other._max_attempts,
            other._due,
            other._created,
            other._error,
            other._unique,
        )
        if not same:
            return False
        if self._problem is None and other._problem is None:
            return bool(self._value == other._value)
        return self._problem is other._problem

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if self._problem is None:
            value = repr(self._value)
        elif self._preview is not None:
            value = f"<not read; preview: {self._preview}>"
        else:
            value = f"<unreadable: {type(self._problem).__name__}>"
        return (
            f"JobInfo(id={self._id}, queue={self._queue!r}, state={self._state!r}, "
            f"due={self._due!r}, attempts={self._attempts}, max_attempts={self._max_attempts}, "
            f"created={self._created!r}, error={self._error!r}, unique={self._unique!r}, "
            f"value={value})"
        )


def _preview(frame: bytes, width: int) -> str:
    """A short text of a stored value for an operator's listing, never unpickled: the safe
    format is decoded (a pickle or an unregistered type is named, not read) and its repr cut
    to ``width`` characters. (A directory builds its preview from the first bytes without
    decoding; the binding does not expose that to Python yet: D-060.)"""
    try:
        text = repr(_core.decode_value(frame, pickle=False))
    except Exception as problem:
        text = f"<{type(problem).__name__}: {len(frame)} bytes>"
    width = max(width, 1)
    return text if len(text) <= width else text[: width - 1] + "…"


# ---- the storage ----------------------------------------------------------------------------


class JobsNamespace(Protocol):
    """What the job storage reads of its :class:`~diskcache_oxide.remote.RedisCache`: a
    protocol, so that this module need not import the cache's (which reaches it through its
    store, remote/store.py)."""

    @property
    def namespace(self) -> str: ...
    @property
    def client(self) -> Any: ...

    _base: bytes
    _link: Link
    _pickle: bool
    _slice: float


class RedisJobs:
    """The jobs of one :class:`~diskcache_oxide.remote.RedisCache` namespace, with the calls
    of the binding's ``JobsCore``: the storage ``JobQueue`` runs on for Redis. Arguments
    arrive checked (``diskcache_oxide.jobs`` checks them for both backends). Every key lives
    under the namespace's hash-tagged prefix, in its one cluster slot.

    :param cache: the namespace's cache
    :param strict: refuse (:class:`~diskcache_oxide.remote.UnsupportedError`) a server whose
        ``maxmemory-policy`` may evict jobs, instead of warning once
        (:class:`~diskcache_oxide.remote.EvictionWarning`; issue 29, D-060)
    """

    __slots__ = ("_link", "_pickle", "_slice", "cache")

    def __init__(self, cache: JobsNamespace, *, strict: bool = False) -> None:
        # Opening is where a server that would evict jobs without a word is caught: the
        # policy is read once per server and process (remote._policy).
        check_eviction(cache, "jobs", strict=strict)
        self.cache = cache
        self._link = Link(cache.client, cache._base, JOB_SCRIPTS, **cache._link.settings())
        self._pickle = cache._pickle
        self._slice = cache._slice

    def __repr__(self) -> str:
        return f"RedisJobs(namespace={self.cache.namespace!r})"

    def _encode(self, value: Any) -> bytes:
        return _core.encode_value(value, pickle=self._pickle)

    def _infos(self, flat: list[Any], preview: int | None = None) -> list[RedisJobInfo]:
        return [
            RedisJobInfo(flat[at : at + 11], self._pickle, listed=True, preview=preview)
            for at in range(0, len(flat), 11)
        ]

    def wake_keys(self, queues: Iterable[str]) -> list[bytes]:
        """The wake-up lists a blocked take on ``queues`` waits on."""
        return [self.cache._base + b"jw:" + _b(q) for q in queues]

    def put(
        self, queue: str, value: Any, delay: float, unique: str | None, max_attempts: int
    ) -> int:
        """Add a job; its id (or, for a held unique key, the holder's)."""
        return self._link.run(put_op(queue, self._encode(value), delay, unique, max_attempts))

    def put_many(
        self, queue: str, values: Iterable[Any], delay: float, max_attempts: int
    ) -> list[int]:
        """Add jobs in order (every value is encoded before any is written); their ids."""
        frames = [self._encode(value) for value in values]
        return self._link.run(put_many_op(queue, frames, delay, max_attempts))

    def take(
        self,
        queues: list[str],
        lease: float,
        n: int,
        timeout: float | None = None,
        default_lease: float | None = None,
    ) -> tuple[list[Any], list[BaseException]]:
        """Lease up to ``n`` jobs (see :func:`take_op`): ``(jobs, errors)``, the errors those
        of the jobs passed over or buried, to be logged."""
        if n == 0:
            return [], []
        keys = self.wake_keys(queues)
        name = self.cache.namespace
        op = take_op(queues, lease, n, timeout, self._pickle, self._slice, keys, name)
        taken, errors = self._link.run(op)
        length = lease if default_lease is None else default_lease
        return [RedisJob(self, row, length) for row in taken], errors

    def sweep(self, queue: str | None = None) -> tuple[int, int]:
        """Requeue (or bury) expired leases: ``(requeued, dead)``."""
        return self._link.run(sweep_op(queue, self.cache.namespace))

    def counts(self, queue: str) -> tuple[int, int, int, int]:
        """``(ready, scheduled, leased, dead)`` of ``queue``."""
        return self._link.run(counts_op(queue))

    def info(self, id: int) -> RedisJobInfo | None:
        """The record of job ``id``, or None."""
        found = self._link.run(info_op(id))
        return None if found is None else RedisJobInfo(found, self._pickle)

    def dead(self, queue: str, after: int, limit: int) -> list[RedisJobInfo]:
        """Up to ``limit`` dead jobs of ``queue`` after id ``after``, by id."""
        flat = self._link.run(list_op(queue, "dead", after, limit))
        return [RedisJobInfo(flat[at : at + 11], self._pickle) for at in range(0, len(flat), 11)]

    def queues(self) -> list[str]:
        """The names of the queues that hold jobs, sorted."""
        return self._link.run(queues_op())

    def list(
        self,
        queue: str,
        state: Literal["ready", "scheduled", "leased", "dead"] | None = None,
        after: int = 0,
        limit: int = 100,
        preview: int | None = None,
    ) -> list[RedisJobInfo]:
        """An operator's page of ``queue``'s jobs (D-046): in ``state`` (``'ready'``: due
        now; ``'scheduled'``: ready, due later; ``'leased'``; ``'dead'``; None: all), by id
        after ``after``, at most ``limit``; with ``preview=WIDTH`` a preview in place of the
        value (whose reading then raises ``ValueError``)."""
        if state not in (None, "ready", "scheduled", "leased", "dead"):
            raise ValueError(
                f"state must be 'ready', 'scheduled', 'leased', 'dead' or None, not {state!r}"
            )
        flat = self._link.run(list_op(queue, state, after, limit))
        return self._infos(flat, preview)

    def bury_any(self, id: int, error: str) -> bool:
        """Send a ready or leased job to the dead-letter list, whoever holds it."""
        return self._link.run(bury_any_op(id, error))

    def purge_dead(self, queue: str) -> int:
        """Delete every dead job of ``queue``; how many there were."""
        return self._link.run(purge_dead_op(queue, self.cache.namespace))

    def forgotten(self) -> dict[str, int]:
        """How many jobs of each queue were forgotten because their record was gone from the
        server (evicted under a ``maxmemory-policy`` that may evict them, or deleted or
        overwritten by another program), by queue name; each was logged once, by the call
        that forgot it. A directory never loses a job's record this way."""
        found: dict[str, int] = self._link.run(_inspect.forgotten_jobs(self.cache._base))
        return found

    def requeue(self, id: int, delay: float) -> bool:
        """Put a dead job back, attempts reset; False if it is not dead."""
        return self._link.run(requeue_op(id, delay))

    def delete(self, id: int) -> bool:
        """Delete a job in any state; False if there was none."""
        return self._link.run(delete_op(id))


class AsyncRedisJobs:
    """The calls of :class:`RedisJobs` as coroutines on a ``redis.asyncio`` client: the same
    operations, awaited on an :class:`~diskcache_oxide.remote._io.AsyncLink`, so no call holds
    a thread and a blocked take is an awaited ``BLPOP``. ``AsyncJobQueue(jobs, client=...)``
    runs on it.

    :param jobs: the blocking storage of the same namespace; a job taken here can be settled
        through either (its own methods use the blocking client)
    :param client: a ``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster`` on the
        same server (made with ``decode_responses=False``)
    """

    __slots__ = ("_link", "jobs")

    def __init__(self, jobs: RedisJobs, client: Any) -> None:
        self.jobs = jobs
        self._link = AsyncLink(client, jobs.cache._base, JOB_SCRIPTS, **jobs._link.settings())

    def __repr__(self) -> str:
        return f"AsyncRedisJobs(namespace={self.jobs.cache.namespace!r})"

    async def put(
        self, queue: str, value: Any, delay: float, unique: str | None, max_attempts: int
    ) -> int:
        """:meth:`RedisJobs.put`, awaited."""
        frame = self.jobs._encode(value)
        return await self._link.run(put_op(queue, frame, delay, unique, max_attempts))

    async def put_many(
        self, queue: str, values: Iterable[Any], delay: float, max_attempts: int
    ) -> list[int]:
        """:meth:`RedisJobs.put_many`, awaited."""
        frames = [self.jobs._encode(value) for value in values]
        return await self._link.run(put_many_op(queue, frames, delay, max_attempts))

    async def take(
        self,
        queues: list[str],
        lease: float,
        n: int,
        timeout: float | None = None,
        default_lease: float | None = None,
    ) -> tuple[list[Any], list[BaseException]]:
        """:meth:`RedisJobs.take`, awaited. A caller cancelled while a take script is on its
        way lets it finish and releases what it leased (the attempt is not counted); one
        cancelled while it waits in ``BLPOP`` holds nothing."""
        if n == 0:
            return [], []
        jobs = self.jobs
        keys, name = jobs.wake_keys(queues), jobs.cache.namespace
        op = take_op(queues, lease, n, timeout, jobs._pickle, jobs._slice, keys, name)
        taken, errors = await self._run_holding(op)
        length = lease if default_lease is None else default_lease
        return [RedisJob(jobs, row, length) for row in taken], errors

    async def _run_holding(self, op: Op[Any]) -> Any:
        """:meth:`AsyncLink.run` for a take: every lease a ``take`` script drew is noted, and
        if the caller is cancelled they are all released (a job refused since is no longer
        leased, and its release does nothing)."""
        held: list[tuple[bytes, int]] = []
        reply: Any = None
        error: BaseException | None = None
        while True:
            try:
                request = op.send(reply) if error is None else op.throw(error)
            except StopIteration as done:
                return done.value
            error = None
            if isinstance(request, Command):  # the wait: nothing is held meanwhile
                try:
                    reply = await self._link.send(request)
                except Exception as exc:
                    reply, error = None, exc
                continue
            sent = asyncio.ensure_future(self._link.send(request))
            try:
                reply = await asyncio.shield(sent)
            except asyncio.CancelledError:
                sent.add_done_callback(functools.partial(self._give_back, request, held))
                self._give_back(request, held, None)
                raise
            except Exception as exc:
                reply, error = None, exc
                continue
            if isinstance(request, Script) and request.name == "take":
                held += _leases(reply)

    def _give_back(
        self, request: Request, held: list[tuple[bytes, int]], done: asyncio.Future[Any] | None
    ) -> None:
        """Release the leases a cancelled take holds: those noted, and then (``done``) those
        of the take script that was still on its way."""
        if done is not None:
            if done.cancelled() or done.exception() is not None:
                return
            if not (isinstance(request, Script) and request.name == "take"):
                return
            pairs = _leases(done.result())
        else:
            pairs, held[:] = list(held), []
        for member, lease in pairs:
            task = asyncio.ensure_future(
                _quietly(self._link.run(release_op(int(member), lease, 0)))
            )
            # The loop keeps only a weak reference to a task: hold it until it is done.
            _BACKGROUND.add(task)
            task.add_done_callback(_BACKGROUND.discard)

    def owns(self, job: Any) -> bool:
        """Whether ``job`` is a job of Redis (and so settled here, on the asyncio client)."""
        return isinstance(job, RedisJob)

    async def finish(self, job: RedisJob) -> bool:
        """:meth:`RedisJob.finish`, awaited."""
        op = job._finish_op()
        return False if op is None else bool(job._settled_by(await self._link.run(op)))

    async def fail(
        self, job: RedisJob, error: str | BaseException | None = "", retry_in: float | None = 0.0
    ) -> Literal["ready", "dead"] | None:
        """:meth:`RedisJob.fail`, awaited."""
        op = job._fail_op(error, retry_in)
        if op is None:
            return None
        state: Literal["ready", "dead"] | None = job._settled_by(await self._link.run(op))
        return state

    async def extend(self, job: RedisJob, lease: float | None = None) -> bool:
        """:meth:`RedisJob.extend`, awaited."""
        op = job._extend_op(lease)
        return False if op is None else job._extended_by(await self._link.run(op))

    async def release(self, job: RedisJob, delay: float | None = 0.0) -> bool:
        """:meth:`RedisJob.release`, awaited."""
        op = job._release_op(delay)
        return False if op is None else bool(job._settled_by(await self._link.run(op)))

    async def sweep(self, queue: str | None = None) -> tuple[int, int]:
        """:meth:`RedisJobs.sweep`, awaited."""
        return await self._link.run(sweep_op(queue, self.jobs.cache.namespace))

    async def counts(self, queue: str) -> tuple[int, int, int, int]:
        """:meth:`RedisJobs.counts`, awaited."""
        return await self._link.run(counts_op(queue))

    async def info(self, id: int) -> RedisJobInfo | None:
        """:meth:`RedisJobs.info`, awaited."""
        found = await self._link.run(info_op(id))
        return None if found is None else RedisJobInfo(found, self.jobs._pickle)

    async def dead(self, queue: str, after: int, limit: int) -> list[RedisJobInfo]:
        """:meth:`RedisJobs.dead`, awaited."""
        flat = await self._link.run(list_op(queue, "dead", after, limit))
        pickle = self.jobs._pickle
        return [RedisJobInfo(flat[at : at + 11], pickle) for at in range(0, len(flat), 11)]

    async def requeue(self, id: int, delay: float) -> bool:
        """:meth:`RedisJobs.requeue`, awaited."""
        return await self._link.run(requeue_op(id, delay))

    async def delete(self, id: int) -> bool:
        """:meth:`RedisJobs.delete`, awaited."""
        return await self._link.run(delete_op(id))


#: Releases a cancelled take started, held until they finish.
_BACKGROUND: set[asyncio.Future[None]] = set()


async def _quietly(work: Any) -> None:
    """Await a clean-up whose failure has nobody to report to (its lease then runs out)."""
    try:
        await work
    except Exception:
        pass
