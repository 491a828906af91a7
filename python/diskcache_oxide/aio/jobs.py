"""`AsyncJobQueue`: leased jobs from asyncio (D-015, D-024)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from concurrent.futures import Executor
from typing import Any

from .._asyncio import T, _in_thread, _taking
from .._docs import mirror_docs
from .._store import (
    AsyncJobsBackend,
    Job,
    JobCounts,
    JobInfo,
    Swept,
    _count,
    _job_id,
    _seconds,
    store_of,
)
from ..jobs import JobQueue

# ---- leased jobs ----------------------------------------------------------------------------


class AsyncJobQueue:
    """:class:`~diskcache_oxide.JobQueue` as coroutines.

    :param jobs: a :class:`JobQueue`
    :param executor: where the blocking calls run (default: the loop's default executor)
    :param client: for a :class:`JobQueue` on a :class:`~diskcache_oxide.remote.RedisCache`, the
        ``redis.asyncio`` client to await its calls on (default: the asyncio twin of the
        cache's client, :func:`~diskcache_oxide.remote.asyncio_client`). A Redis queue's calls
        hold no thread, and a waiting ``take`` is an awaited ``BLPOP`` (D-060). A directory's
        blocking calls run in ``executor``.

    A ``take`` whose caller is cancelled releases the jobs it got (the attempt is not
    counted). ``async with ajobs.settle(job):`` finishes the job on a clean exit, fails it
    on an ``Exception`` and releases it on cancellation.
    """

    def __init__(
        self, jobs: JobQueue[Any], *, executor: Executor | None = None, client: Any = None
    ) -> None:
        if not isinstance(jobs, JobQueue):
            raise TypeError(f"jobs must be a JobQueue, not {type(jobs).__name__}")
        self._jobs = jobs
        self._executor = executor
        #: The job storage awaited on an asyncio client, where the store has one (Redis:
        #: no call holds a thread); else None, and the blocking calls run in the executor.
        self._remote: AsyncJobsBackend | None = None
        #: The asyncio client this queue made (and closes), if it made one.
        self._owned: Any = None
        native = store_of(jobs.cache).asyncio_jobs(jobs._core, client)
        if native is not None:
            self._remote, self._owned = native
        elif client is not None:
            raise TypeError(
                "client= is an asyncio Redis client for a JobQueue on a RedisCache; this "
                "JobQueue is on a directory: leave client out"
            )

    async def close(self) -> None:
        """Close the asyncio client this queue made for a Redis namespace (a ``client=`` given
        to it is the caller's to close, and so is the JobQueue's own)."""
        if self._owned is not None:
            owned, self._owned = self._owned, None
            await owned.aclose()

    async def __aenter__(self) -> AsyncJobQueue:
        return self

    async def __aexit__(self, *exception: object) -> None:
        await self.close()

    @property
    def jobs(self) -> JobQueue[Any]:
        """The synchronous queue underneath."""
        return self._jobs

    def __repr__(self) -> str:
        return f"Async{self._jobs!r}"

    async def _run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        return await _in_thread(self._executor, fn, *args, **kwargs)

    async def put(
        self,
        value: Any,
        *,
        queue: str | None = None,
        delay: float = 0.0,
        unique: str | None = None,
        max_attempts: int | None = None,
    ) -> int:
        if self._remote is not None:
            name, wait, key, attempts = self._jobs._put_args(queue, delay, unique, max_attempts)
            return await self._remote.put(name, value, wait, key, attempts)
        return await self._run(
            self._jobs.put,
            value,
            queue=queue,
            delay=delay,
            unique=unique,
            max_attempts=max_attempts,
        )

    async def put_many(
        self,
        values: Iterable[Any],
        *,
        queue: str | None = None,
        delay: float = 0.0,
        max_attempts: int | None = None,
    ) -> list[int]:
        if self._remote is not None:
            name, wait, _, attempts = self._jobs._put_args(queue, delay, None, max_attempts)
            return await self._remote.put_many(name, values, wait, attempts)
        return await self._run(
            self._jobs.put_many, list(values), queue=queue, delay=delay, max_attempts=max_attempts
        )

    async def take(self, *, timeout: float | None = None, lease: float | None = None) -> Job | None:
        jobs = await self.take_many(1, timeout=timeout, lease=lease)
        return jobs[0] if jobs else None

    async def take_many(
        self, n: int, *, timeout: float | None = None, lease: float | None = None
    ) -> list[Job]:
        if self._remote is not None:
            taken, errors = await self._remote.take(*self._jobs._take_args(n, timeout, lease))
            self._jobs._report(errors)
            return taken

        def give_back(jobs: list[Job]) -> None:
            for job in jobs:
                job.release()

        return await _taking(
            self._executor,
            lambda: self._jobs.take_many(n, timeout=timeout, lease=lease),
            give_back,
        )

    def _awaited(self, job: Job) -> tuple[AsyncJobsBackend, Any] | None:
        """Where to await the calls settling ``job``: this face's asyncio storage for a job
        it owns, or None (the blocking call then runs in the executor)."""
        if self._remote is None:
            return None
        held = self._jobs._held(job)
        return (self._remote, held) if self._remote.owns(held) else None

    async def finish(self, job: Job) -> bool:
        if (awaited := self._awaited(job)) is not None:
            remote, held = awaited
            return await remote.finish(held)
        return await self._run(self._jobs.finish, job)

    async def fail(
        self, job: Job, error: str | BaseException = "", *, retry_in: float = 0.0
    ) -> str | None:
        if (awaited := self._awaited(job)) is not None:
            remote, held = awaited
            return await remote.fail(held, error, retry_in)
        return await self._run(self._jobs.fail, job, error, retry_in=retry_in)

    async def extend(self, job: Job, lease: float | None = None) -> bool:
        if (awaited := self._awaited(job)) is not None:
            remote, held = awaited
            return await remote.extend(held, lease)
        return await self._run(self._jobs.extend, job, lease)

    async def release(self, job: Job, *, delay: float = 0.0) -> bool:
        if (awaited := self._awaited(job)) is not None:
            remote, held = awaited
            return await remote.release(held, delay)
        return await self._run(self._jobs.release, job, delay=delay)

    @contextlib.asynccontextmanager
    async def settle(self, job: Job) -> AsyncIterator[Job]:
        """Finish ``job`` on a clean exit, fail it on an ``Exception`` (re-raised), release
        it on cancellation or another ``BaseException``."""
        try:
            yield job
        except Exception as exc:
            await asyncio.shield(self.fail(job, exc))
            raise
        except BaseException:
            await asyncio.shield(self.release(job))
            raise
        await asyncio.shield(self.finish(job))

    async def sweep(self) -> Swept:
        if self._remote is not None:
            return Swept(*await self._remote.sweep(None))
        return await self._run(self._jobs.sweep)

    async def dead(self, *, queue: str | None = None, limit: int = 100) -> list[JobInfo]:
        if self._remote is not None:
            count = _count("limit", limit)
            found: list[JobInfo] = []
            for name in self._jobs._names(queue):
                found.extend(await self._remote.dead(name, 0, count))
            return self._jobs._oldest(found, count)
        return await self._run(self._jobs.dead, queue=queue, limit=limit)

    async def requeue(self, job_id: int, *, delay: float = 0.0) -> bool:
        if self._remote is not None:
            return await self._remote.requeue(_job_id(job_id), _seconds("delay", delay))
        return await self._run(self._jobs.requeue, job_id, delay=delay)

    async def delete(self, job_id: int) -> bool:
        if self._remote is not None:
            return await self._remote.delete(_job_id(job_id))
        return await self._run(self._jobs.delete, job_id)

    async def get(self, job_id: int) -> JobInfo | None:
        if self._remote is not None:
            return await self._remote.info(_job_id(job_id))
        return await self._run(self._jobs.get, job_id)

    async def counts(self, queue: str | None = None) -> JobCounts:
        if self._remote is not None:
            totals = [0, 0, 0, 0]
            for name in self._jobs._names(queue):
                for index, n in enumerate(await self._remote.counts(name)):
                    totals[index] += n
            return JobCounts(*totals)
        return await self._run(self._jobs.counts, queue)

    async def length(self) -> int:
        if self._remote is not None:
            counts = await self.counts()
            return counts.ready + counts.scheduled + counts.leased
        return await self._run(self._jobs.__len__)


def _jobs_lead(name: str) -> str:
    if name in ("take", "take_many"):
        return (
            f"Awaitable `JobQueue.{name}`: runs it in the queue's executor; a caller "
            "cancelled meanwhile releases the jobs it got (the attempt is not counted)."
        )
    spelled = " (``len(jobs)``)" if name == "__len__" else ""
    return f"Awaitable `JobQueue.{name}`{spelled}: runs it in the queue's executor."


mirror_docs(AsyncJobQueue, JobQueue, lead=_jobs_lead, renamed={"length": "__len__"})
