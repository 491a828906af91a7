"""Pay once: two lanes (a queue worker and a request lane) race to open the same articles, and
every article is paid for once.

The paid operation (``payonce_workers.clean_article``) counts its calls in the store, so
the count covers every thread, loop and process. Every wait has a timeout.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import payonce_workers as pw
import pytest
from backends import address

#: The conformance suite: each test runs on a directory, a Redis server and a cluster.
pytestmark = [pytest.mark.oxide, pytest.mark.backends]

dc = pytest.importorskip("diskcache_oxide")
from diskcache_oxide.aio import AsyncCache, drain_turns  # noqa: E402
from diskcache_oxide.claims import Claims  # noqa: E402

SPAWN = multiprocessing.get_context("spawn")
ARTICLES = list(range(100))


@pytest.fixture
def cache(make_cache: Any) -> Any:
    """The store: a directory, a Redis server's namespace or a cluster's (the conformance suite
    runs this module on each; the workers open it by backends.address)."""
    return make_cache("store", eviction_policy="none")


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.01)


def tap_all(cache: Any, articles: list[int]) -> None:
    """The browsing pass: one explicit tap per article puts it in the queue."""
    dc.JobQueue(cache, pw.QUEUE).put_many(articles)


def assert_paid_once_and_cached(cache: Any, articles: list[int]) -> None:
    paid = {a: pw.paid_count(cache, a) for a in articles}
    assert {a: n for a, n in paid.items() if n != 1} == {}
    missing = [a for a in articles if cache.get(pw.article_key(a)) is None]
    assert missing == []
    assert all(Claims(cache).holder(pw.article_key(a)) is None for a in articles)


def queue_drained(cache: Any) -> bool:
    counts = dc.JobQueue(cache, pw.QUEUE).counts()
    return counts.ready + counts.scheduled + counts.leased == 0


def test_two_loops_on_two_threads_pay_once(cache: Any) -> None:
    tap_all(cache, ARTICLES)
    shuffled = random.Random(5).sample(ARTICLES, len(ARTICLES))
    out: dict[str, Any] = {}

    def worker() -> None:
        out["worker"] = pw.run_worker(address(cache), 0.03, 10.0, 30.0)

    def requests() -> None:
        out["requests"] = pw.run_requests(address(cache), shuffled, 0.03, 10.0, 10)

    threads = [threading.Thread(target=worker), threading.Thread(target=requests)]
    for t in threads:
        t.start()
    threads[1].join(20)
    assert not threads[1].is_alive()
    wait_for(lambda: queue_drained(cache), 20, "the worker to drain the queue")
    cache.set(pw.STOP, True)
    threads[0].join(20)
    assert not threads[0].is_alive()

    assert out["requests"] == [f"clean text of article {a}" for a in shuffled]
    assert out["worker"] == len(ARTICLES)  # every job finished, most from the cache
    assert_paid_once_and_cached(cache, ARTICLES)
    assert dc.JobQueue(cache, pw.QUEUE).dead() == []


@pytest.mark.slow
def test_separate_processes_pay_once(cache: Any) -> None:
    tap_all(cache, ARTICLES)
    shuffled = random.Random(7).sample(ARTICLES, len(ARTICLES))
    workers = [
        SPAWN.Process(target=pw.run_worker, args=(address(cache), 0.03, 10.0, 30.0))
        for _ in range(2)
    ]
    lane = SPAWN.Process(target=pw.run_requests, args=(address(cache), shuffled, 0.03, 10.0, 10))
    for p in [*workers, lane]:
        p.start()
    try:
        lane.join(30)
        assert lane.exitcode == 0
        wait_for(lambda: queue_drained(cache), 20, "the workers to drain the queue")
        cache.set(pw.STOP, True)
        for p in workers:
            p.join(20)
            assert p.exitcode == 0
    finally:
        for p in [*workers, lane]:
            if p.is_alive():
                p.kill()
                p.join(5)
    assert_paid_once_and_cached(cache, ARTICLES)


def test_cancelled_readers_leave_cached_results(cache: Any) -> None:
    readers = list(range(20))

    async def main() -> int:
        acache = AsyncCache(cache)

        async def reader(article: int) -> None:
            # The reader closes the page once its paid turn has begun (the payment is
            # counted before the 0.5 s of work), whatever the machine's load.
            opened = asyncio.ensure_future(
                pw.open_article(acache, article, seconds=0.5, ttl=10, wait=10)
            )
            while pw.paid_count(cache, article) == 0:
                assert not opened.done(), "the turn ended before it was paid"
                await asyncio.sleep(0.002)
            opened.cancel()
            with pytest.raises(asyncio.CancelledError):
                await opened

        await asyncio.gather(*(reader(a) for a in readers))
        await drain_turns(timeout=10)
        stored = await acache.get_many([pw.article_key(a) for a in readers])
        return sum(1 for value in stored if value is not None)

    assert asyncio.run(asyncio.wait_for(main(), 20)) == 20
    assert_paid_once_and_cached(cache, readers)
    # the next reader gets the result without paying again
    again = asyncio.run(pw.open_article(AsyncCache(cache), 3, seconds=0.05, ttl=10, wait=10))
    assert again == "clean text of article 3"
    assert pw.paid_count(cache, 3) == 1


def test_unshielded_turn_loses_the_work(cache: Any) -> None:
    """Without the library the work is paid for and then lost (as in 20 paid extractions with
    6 results cached): a paid call awaited directly in a request that times out is lost with
    the request."""

    async def main() -> None:
        acache = AsyncCache(cache)

        async def naive(article: int) -> None:
            value = await pw.clean_article(acache, article, 30.0)
            await acache.set(pw.article_key(article), value)

        for article in range(5):
            request = asyncio.ensure_future(naive(article))
            # The request's deadline passes once the call is paid for, as a web request's does
            # mid-call (cancelled then, not after a fixed time: a slow first round trip to a
            # cluster outlasted a 10 ms deadline and made the test depend on the machine).
            while await acache.get(pw.paid_key(article)) is None:
                await asyncio.sleep(0.005)
            request.cancel()
            with pytest.raises(asyncio.CancelledError):
                await request

    asyncio.run(main())
    assert [pw.paid_count(cache, a) for a in range(5)] == [1] * 5  # paid for...
    assert [cache.get(pw.article_key(a)) for a in range(5)] == [None] * 5  # ...and lost


@pytest.mark.slow
def test_killed_worker_loses_its_claim_after_the_ttl(cache: Any) -> None:
    ttl = 1.0
    tap_all(cache, [0])
    # A paid turn of 60 s: the worker is killed in the middle of it.
    victim = SPAWN.Process(target=pw.run_worker, args=(address(cache), 60.0, ttl, ttl))
    victim.start()
    try:
        wait_for(lambda: pw.paid_count(cache, 0) == 1, 20, "the worker to start its turn")
        holder = Claims(cache).holder(pw.article_key(0))
        assert holder is not None and holder.pid == victim.pid
        os.kill(victim.pid, signal.SIGKILL)  # type: ignore[arg-type]
        victim.join(10)
        assert victim.exitcode == -signal.SIGKILL
    finally:
        if victim.is_alive():
            victim.kill()
            victim.join(5)

    # The request lane opens the article: it waits out the dead holder's claim, then pays
    # once more and caches the result.
    begun = time.monotonic()
    value = asyncio.run(
        asyncio.wait_for(pw.open_article(AsyncCache(cache), 0, seconds=0.05, ttl=ttl, wait=10), 15)
    )
    waited = time.monotonic() - begun
    assert value == "clean text of article 0"
    assert waited < ttl + 3
    assert pw.paid_count(cache, 0) == 2
    assert cache.get(pw.article_key(0)) == value

    # The job itself came back after its lease; the next worker finds the result cached
    # and finishes it without paying.
    worker = SPAWN.Process(target=pw.run_worker, args=(address(cache), 0.05, ttl, ttl))
    worker.start()
    try:
        wait_for(lambda: queue_drained(cache), 20, "the job to be finished")
        cache.set(pw.STOP, True)
        worker.join(20)
        assert worker.exitcode == 0
    finally:
        if worker.is_alive():
            worker.kill()
            worker.join(5)
    assert pw.paid_count(cache, 0) == 2
    assert dc.JobQueue(cache, pw.QUEUE).dead() == []
