"""`AsyncJobQueue`: leased jobs from asyncio (D-015, D-024)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from concurrent.futures import Executor
from typing import Any

from .._docs import mirror_docs
from ..jobs import Job, JobCounts, JobInfo, JobQueue, Swept
from ._run import T, _in_thread, _taking

# ---- leased jobs ----------------------------------------------------------------------------


class AsyncJobQueue:
    """:class:`~diskcache_oxide.JobQueue` as coroutines.

    :param jobs: a :class:`JobQueue`
    :param executor: where the blocking calls run (default: the loop's default executor)

    A ``take`` whose caller is cancelled releases the jobs it got (the attempt is not
    counted). ``async with ajobs.settle(job):`` finishes the job on a clean exit, fails it
    on an ``Exception`` and releases it on cancellation.
    """

    def __init__(self, jobs: JobQueue, *, executor: Executor | None = None) -> None:
        if not isinstance(jobs, JobQueue):
            raise TypeError(f"jobs must be a JobQueue, not {type(jobs).__name__}")
        self._jobs = jobs
        self._executor = executor

    @property
    def jobs(self) -> JobQueue:
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
        return await self._run(
            self._jobs.put_many, list(values), queue=queue, delay=delay, max_attempts=max_attempts
        )

    async def take(self, *, timeout: float | None = None, lease: float | None = None) -> Job | None:
        jobs = await self.take_many(1, timeout=timeout, lease=lease)
        return jobs[0] if jobs else None

    async def take_many(
        self, n: int, *, timeout: float | None = None, lease: float | None = None
    ) -> list[Job]:
        def give_back(jobs: list[Job]) -> None:
            for job in jobs:
                job.release()

        return await _taking(
            self._executor,
            lambda: self._jobs.take_many(n, timeout=timeout, lease=lease),
            give_back,
        )

    async def finish(self, job: Job) -> bool:
        return await self._run(self._jobs.finish, job)

    async def fail(
        self, job: Job, error: str | BaseException = "", *, retry_in: float = 0.0
    ) -> str | None:
        return await self._run(self._jobs.fail, job, error, retry_in=retry_in)

    async def extend(self, job: Job, lease: float | None = None) -> bool:
        return await self._run(self._jobs.extend, job, lease)

    async def release(self, job: Job, *, delay: float = 0.0) -> bool:
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
        return await self._run(self._jobs.sweep)

    async def dead(self, *, queue: str | None = None, limit: int = 100) -> list[JobInfo]:
        return await self._run(self._jobs.dead, queue=queue, limit=limit)

    async def requeue(self, job_id: int, *, delay: float = 0.0) -> bool:
        return await self._run(self._jobs.requeue, job_id, delay=delay)

    async def delete(self, job_id: int) -> bool:
        return await self._run(self._jobs.delete, job_id)

    async def get(self, job_id: int) -> JobInfo | None:
        return await self._run(self._jobs.get, job_id)

    async def counts(self, queue: str | None = None) -> JobCounts:
        return await self._run(self._jobs.counts, queue)

    async def length(self) -> int:
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
