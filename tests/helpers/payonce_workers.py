"""Process bodies for the pay-once tests (spawned, so they must be importable).

The "paid" operation counts its calls in the store (``cache.incr(("paid", article))``), so
every process sees the same count.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from diskcache_oxide import Cache, JobQueue
from diskcache_oxide.aio import AsyncCache, AsyncJobQueue, aget_or_compute, drain_turns
from diskcache_oxide.claims import Claims

QUEUE = "clean"
STOP = "stop"


def open_cache(directory: str) -> Cache:
    """The test's cache: a directory, or a Redis URL with its namespace (backends.address)."""
    if "://" in directory:
        import diskcache_oxide

        return diskcache_oxide.open(directory, eviction_policy="none")  # type: ignore[no-any-return]
    return Cache(directory, eviction_policy="none")


def article_key(article: int) -> tuple[str, int]:
    return ("clean", article)


def paid_key(article: int) -> tuple[str, int]:
    return ("paid", article)


def paid_count(cache: Cache, article: int) -> int:
    return int(cache.get(paid_key(article), default=0))


async def clean_article(acache: AsyncCache, article: int, seconds: float) -> str:
    """The paid operation: counted in the store before it starts, then slow."""
    await acache.incr(paid_key(article), retry=True)
    await asyncio.sleep(seconds)
    return f"clean text of article {article}"


async def open_article(
    acache: AsyncCache, article: int, *, seconds: float, ttl: float, wait: float
) -> str:
    """The request lane and the worker both come through here."""
    return await aget_or_compute(
        acache,
        article_key(article),
        lambda: clean_article(acache, article, seconds),
        lease=ttl,
        timeout=wait,
    )


async def queue_worker(
    directory: str, *, seconds: float, ttl: float, lease: float, idle_stop: float = 10.0
) -> int:
    """Serial, oldest first; every job was an explicit tap. Stops when the cache says
    ``stop`` or after ``idle_stop`` seconds without a job. Returns the jobs finished."""
    acache = AsyncCache(open_cache(directory))
    jobs = AsyncJobQueue(JobQueue(acache.cache, QUEUE, lease=lease))
    done = 0
    idle_since = time.monotonic()
    while not await acache.get(STOP, default=False):
        job = await jobs.take(timeout=0.05)
        if job is None:
            if time.monotonic() - idle_since > idle_stop:
                break
            continue
        async with jobs.settle(job):
            await open_article(acache, job.value, seconds=seconds, ttl=ttl, wait=ttl * 4)
        done += 1
        idle_since = time.monotonic()
    await drain_turns(timeout=30)
    return done


async def request_lane(
    directory: str, articles: list[int], *, seconds: float, ttl: float, concurrency: int
) -> list[str]:
    acache = AsyncCache(open_cache(directory))
    gate = asyncio.Semaphore(concurrency)

    async def one(article: int) -> str:
        async with gate:
            return await open_article(acache, article, seconds=seconds, ttl=ttl, wait=ttl * 4)

    results = await asyncio.gather(*(one(a) for a in articles))
    await drain_turns(timeout=30)
    return list(results)


# ---- process entry points -------------------------------------------------------------------


def run_worker(directory: str, seconds: float, ttl: float, lease: float) -> int:
    return asyncio.run(queue_worker(directory, seconds=seconds, ttl=ttl, lease=lease))


def run_requests(
    directory: str, articles: list[int], seconds: float, ttl: float, concurrency: int
) -> list[str]:
    return asyncio.run(
        request_lane(directory, articles, seconds=seconds, ttl=ttl, concurrency=concurrency)
    )


def try_claim(directory: str, key: Any) -> bool:
    return Claims(open_cache(directory)).try_acquire(key, lease=30) is not None


def release_claim(directory: str, key: Any, token: str) -> bool:
    return Claims(open_cache(directory)).release(key, token)
