"""Redis benchmark: diskcache_oxide's RedisCache (and JobQueue on Redis) beside rq, arq, saq,
redis-py and Django's Redis cache, on the same redis-server, in one run.

Everything runs in one invocation, on this machine, against one redis-server started for the
run (tests/helpers/redis_servers.py: 127.0.0.1, a random port, no persistence; stopped by pid at
the end) or the server of ``--url``. The database is emptied (FLUSHDB) before each row, so a
``--url`` must name a scratch database. Measured:

1. one call at a time in one process (median and p99 per call): putting an item or a job in
   (RedisCache ``push``, JobQueue ``put``, redis-py ``LPUSH``, rq ``Queue.enqueue``, arq
   ``enqueue_job``, saq ``Queue.enqueue``), and taking one out (RedisCache ``pull``, JobQueue
   ``take`` + ``finish``, redis-py ``RPOP``). rq, arq and saq have no call that takes one job:
   their workers dequeue inside their loop, so they appear in 2 and not in the "take" table;
2. draining N prefilled items or no-op jobs with 1 and 4 worker processes (spawned, started
   together at a barrier): items/s from the first worker's start to the last item handled,
   and the items lost or handled twice, which must be none for ours and the directory's (a
   peer's are shown: saq's start-up sweep can re-queue a job being taken). rq runs its
   ``SimpleWorker`` (``work(burst=True)``: jobs run in the worker's own process, no fork per
   job), arq its
   ``Worker(burst=True)`` (``poll_delay=0.01``: the default 0.5 s sleeps between reads of at
   most 100 jobs, which caps a worker at about 200 jobs/s), saq its ``Worker(burst=True,
   dequeue_timeout=0.05)``; each with its default concurrency (arq 10, saq 10 jobs at a time);
3. python-diskcache's mixed workload (benches/bench_mixed.py: 90% get, 9% set, 1% delete over
   100 bytes keys, bytes values of up to about 600 bytes) in 1 and 4 processes (spawned, each
   with its own handle and the same operations for every library), every call timed: on
   RedisCache; on redis-py's plain ``GET``/``SET``/``DEL`` with the values already bytes (no
   encoding at all: the floor) and once pickling them (what a hand-rolled cache does); on
   Django's own ``django.core.cache.backends.redis.RedisCache`` (settings configured in
   process); and on a directory ``Cache``.

Beside them, the directory backend (``diskcache_oxide.Cache`` and ``JobQueue`` on a temporary
directory) in 1 and 2, so the cost of going over the network is in the same table.

What is realistic and what is not. The headline rows are the 4-worker drain and the mixed
workload on RedisCache: every call is a round trip to the server and a script run there, as a
user's calls are (RedisCache keeps no client-side memo). redis-py's rows are a floor, not a
peer: a bare ``LPUSH``/``RPOP`` or ``GET``/``SET`` with no value format, no expiry index, no
insertion order and no exactly-once pull. rq, arq and saq record each job's status and result
in Redis, as ``JobQueue`` records a lease and its finish, and unlike a ``pull``, which deletes
the item as it hands it over: the like-for-like peer of rq, arq and saq is JobQueue on Redis
(the "/ JobQueue" column). The directory ``Cache`` in the mixed workload is memo-friendly:
100 hot keys, which its memo of recent reads (D-017) serves without SQLite between writes; it
is printed last, apart, and marked ``"memo_friendly": true`` in the JSON.

Ratios: the row's time per call (or per item) divided by RedisCache's (by JobQueue on Redis's
in the "/ JobQueue" column): above 1, RedisCache (JobQueue) is faster.

Setup (rq, arq and saq are optional: a missing one's rows are skipped, saying why)::

    .venv/bin/pip install -r benches/requirements.txt
    .venv/bin/python benches/bench_redis.py            # full run (a few minutes)
    .venv/bin/python benches/bench_redis.py --quick    # a short smoke run: 4-worker drains,
                                                       # the mixed workload in 1 process
    .venv/bin/python benches/bench_redis.py --url redis://127.0.0.1:6379/15   # a server of
                                                       # yours: its db 15 is FLUSHed

JobQueue on Redis is being written (issue 21): until ``JobQueue(redis_cache)`` is accepted its
rows print "not available yet" and the run goes on.

Results are written as JSON to benches/results/redis.json (or --json PATH).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import multiprocessing
import os
import pickle
import platform
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from shared import (
    MIX_KEYS,
    collect,
    ratio_text,
    run_facts,
    run_mix,
    summarize,
    time_each,
    time_each_async,
    write_json,
)

try:
    import diskcache_oxide
    import redis
    from diskcache_oxide.remote import RedisCache
except ImportError as error:  # pragma: no cover - explained to the user
    sys.exit(f"{error}: run `make bench` (it builds diskcache_oxide and installs redis-py)")

ROOT = Path(__file__).resolve().parent
HELPERS = ROOT.parent / "tests" / "helpers"
SPAWN = multiprocessing.get_context("spawn")
#: The module name the workers' job functions are found under (rq imports them by name).
JOBS_MODULE = "bench_redis"
NAMESPACE = "bench"
JOBS_NAMESPACE = "bench-jobs"
PREFIX = "q"
LIST = b"bench:list"
RQ_QUEUE = "bench"
SAQ_QUEUE = "bench"
PEERS = ("rq", "arq", "saq")
OURS = "RedisCache"
JOBS = "JobQueue on Redis"


def installed(name: str) -> bool:
    """Whether ``name`` is importable here (it is imported only where it is used, so that the
    spawned workers load only what their row needs)."""
    return importlib.util.find_spec(name) is not None


def dist_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


# ----------------------------------------------------------------------------- the no-op jobs
# rq, arq and saq run these in their workers: each records which item it ran and when, so that a
# drain counts lost and repeated jobs and ends at the last job handled.

DONE: list[int] = []
LAST = [0.0]


def rq_job(i: int) -> None:
    DONE.append(i)
    LAST[0] = time.monotonic()


async def arq_job(ctx: Any, i: int) -> None:
    DONE.append(i)
    LAST[0] = time.monotonic()


async def saq_job(ctx: Any, *, i: int) -> None:
    DONE.append(i)
    LAST[0] = time.monotonic()


RQ_FUNC = f"{JOBS_MODULE}.rq_job"


# ----------------------------------------------------------------------------- backends


def connect(url: str) -> Any:
    """A redis-py client (typed Any: its stubs type keys as str and replies as maybe-awaitable)."""
    return redis.Redis.from_url(url)


def flush(url: str) -> None:
    """Empty the bench's database before a row."""
    client = connect(url)
    try:
        client.flushdb()
    finally:
        client.close()


def jobqueue_on_redis(url: str) -> tuple[Any, str]:
    """``(JobQueue(RedisCache), "")`` where JobQueue accepts a RedisCache, else ``(None, why)``."""
    cache = RedisCache(url, namespace=JOBS_NAMESPACE)
    make: Any = diskcache_oxide.JobQueue  # typed for a directory Cache; a RedisCache is tried
    try:
        return make(cache), ""
    except Exception as exc:  # TypeError today; whatever it raises, the row is skipped
        cache.close()
        return None, f"JobQueue(RedisCache) raised {type(exc).__name__}: {exc}"


def directory_cache(directory: str) -> Any:
    return diskcache_oxide.Cache(directory, eviction_policy="none")


class Loop:
    """An event loop of its own, for the asyncio clients (arq, saq) in synchronous code."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    def gather(self, coroutines: Any) -> list[Any]:
        """Run the coroutines concurrently on this loop (to fill a queue quickly)."""

        async def together() -> list[Any]:
            return list(await asyncio.gather(*coroutines))

        return list(self.run(together()))

    def close(self) -> None:
        self.loop.close()


def arq_pool(loop: Loop, url: str) -> Any:
    connections = importlib.import_module("arq.connections")
    settings = connections.RedisSettings.from_dsn(url)
    return loop.run(connections.create_pool(settings))


def saq_queue(loop: Loop, url: str) -> Any:
    saq = importlib.import_module("saq")
    queue = saq.Queue.from_url(url, name=SAQ_QUEUE)
    loop.run(queue.connect())
    return queue


# ----------------------------------------------------------------------------- 1. one call


def row(
    op: str, library: str, what: str, samples: list[int], kind: str, **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {"op": op, "library": library, "what": what, "kind": kind}
    out.update(summarize(samples))
    out["ops_per_s"] = 1e6 / out["mean_us"] if out["mean_us"] > 0 else 0.0
    out.update(extra)
    return out


def bench_latency(url: str, n: int, warm: int) -> list[dict[str, Any]]:
    """Put and take, one call at a time, for every library: rows of ``row()``."""
    rows: list[dict[str, Any]] = []
    items = list(range(n))

    flush(url)
    cache = RedisCache(url, namespace=NAMESPACE)
    try:
        rows.append(
            row(
                "put",
                OURS,
                "push(i, prefix=...)",
                time_each(lambda i: cache.push(i, prefix=PREFIX), n, warm),
                "ours",
            )
        )
        got: list[Any] = []
        samples = time_each(lambda i: got.append(cache.pull(prefix=PREFIX)[1]), n, warm)
        assert got[warm:] == items, "RedisCache: pull order"
        rows.append(row("take", OURS, "pull(prefix=...)", samples, "ours"))
    finally:
        cache.close()

    flush(url)
    jobs, why = jobqueue_on_redis(url)
    if jobs is not None:
        try:
            rows.append(
                row("put", JOBS, "put(i)", time_each(lambda i: jobs.put(i), n, warm), "ours")
            )

            def take_finish(i: int) -> None:
                job = jobs.take()
                assert job is not None, "the queue was filled with enough jobs"
                jobs.finish(job)

            rows.append(row("take", JOBS, "take() + finish()", time_each(take_finish, n), "ours"))
        finally:
            jobs.cache.close()
    else:
        for op in ("put", "take"):
            rows.append({"op": op, "library": JOBS, "kind": "ours", "unavailable": why})

    flush(url)
    client = connect(url)
    try:
        rows.append(
            row(
                "put",
                "redis-py",
                "LPUSH key bytes",
                time_each(lambda i: client.lpush(LIST, b"%d" % i), n, warm),
                "floor",
            )
        )
        rows.append(
            row(
                "take",
                "redis-py",
                "RPOP key",
                time_each(lambda i: client.rpop(LIST), n, warm),
                "floor",
            )
        )
    finally:
        client.close()

    if installed("rq"):
        flush(url)
        rq = importlib.import_module("rq")
        client = connect(url)
        try:
            queue = rq.Queue(RQ_QUEUE, connection=client)
            samples = time_each(lambda i: queue.enqueue(RQ_FUNC, i), n, warm)
            rows.append(row("put", "rq", "Queue.enqueue(func, i)", samples, "peer"))
        finally:
            client.close()

    if installed("arq"):
        flush(url)
        loop = Loop()
        try:
            pool = arq_pool(loop, url)
            samples = loop.run(time_each_async(lambda i: pool.enqueue_job("arq_job", i), n, warm))
            rows.append(row("put", "arq", "ArqRedis.enqueue_job(name, i)", samples, "peer"))
            loop.run(pool.aclose())
        finally:
            loop.close()

    if installed("saq"):
        flush(url)
        loop = Loop()
        try:
            queue = saq_queue(loop, url)
            samples = loop.run(time_each_async(lambda i: queue.enqueue("saq_job", i=i), n, warm))
            rows.append(row("put", "saq", "Queue.enqueue(name, i=i)", samples, "peer"))
            loop.run(queue.disconnect())
        finally:
            loop.close()

    directory = tempfile.mkdtemp(prefix="bench-redis-dir-")
    try:
        local = directory_cache(directory)
        try:
            rows.append(
                row(
                    "put",
                    "directory Cache",
                    "push(i, prefix=...)",
                    time_each(lambda i: local.push(i, prefix=PREFIX), n, warm),
                    "directory",
                )
            )
            samples = time_each(lambda i: local.pull(prefix=PREFIX), n, warm)
            rows.append(row("take", "directory Cache", "pull(prefix=...)", samples, "directory"))
            local_jobs = diskcache_oxide.JobQueue(local)
            rows.append(
                row(
                    "put",
                    "directory JobQueue",
                    "put(i)",
                    time_each(lambda i: local_jobs.put(i), n, warm),
                    "directory",
                )
            )

            def local_take_finish(i: int) -> None:
                job = local_jobs.take()
                assert job is not None, "the queue was filled with enough jobs"
                local_jobs.finish(job)

            samples = time_each(local_take_finish, n)
            rows.append(
                row("take", "directory JobQueue", "take() + finish()", samples, "directory")
            )
        finally:
            local.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)

    for op in ("put", "take"):
        base = next(r for r in rows if r["op"] == op and r["library"] == OURS)["median_us"]
        jq = next(
            (r for r in rows if r["op"] == op and r["library"] == JOBS and "median_us" in r), None
        )
        for r in rows:
            if r["op"] == op and "median_us" in r:
                r["ratio"] = r["median_us"] / base
                r["ratio_jobqueue"] = r["median_us"] / jq["median_us"] if jq else None
    return rows


# ----------------------------------------------------------------------------- 2. drain
# Each kind: fill(url, directory, count) in the parent, untimed; then in each worker process
# setup(url, directory) -> run, with connections opened before the barrier, and run() ->
# (items handled, time of the last one).

Drain = Callable[[], tuple[list[int], float]]


def fill(kind: str, url: str, directory: str, count: int) -> None:
    chunks = [list(range(start, min(count, start + 1000))) for start in range(0, count, 1000)]
    if kind == OURS:
        with RedisCache(url, namespace=NAMESPACE) as cache:
            for chunk in chunks:
                cache.push_many(chunk, prefix=PREFIX)
    elif kind == JOBS:
        jobs, why = jobqueue_on_redis(url)
        assert jobs is not None, why
        for chunk in chunks:
            jobs.put_many(chunk)
        jobs.cache.close()
    elif kind == "redis-py":
        client = connect(url)
        for chunk in chunks:
            client.lpush(LIST, *[b"%d" % i for i in chunk])
        client.close()
    elif kind in ("directory Cache", "directory JobQueue"):
        local = directory_cache(directory)
        for chunk in chunks:
            if kind == "directory Cache":
                local.push_many(chunk, prefix=PREFIX)
            else:
                diskcache_oxide.JobQueue(local).put_many(chunk)
        local.close()
    elif kind == "rq":
        rq = importlib.import_module("rq")
        client = connect(url)
        queue = rq.Queue(RQ_QUEUE, connection=client)
        for chunk in chunks:
            queue.enqueue_many([rq.Queue.prepare_data(RQ_FUNC, (i,)) for i in chunk])
        client.close()
    elif kind in ("arq", "saq"):
        loop = Loop()
        try:
            if kind == "arq":
                pool = arq_pool(loop, url)
                for chunk in chunks:
                    loop.gather([pool.enqueue_job("arq_job", i) for i in chunk])
                loop.run(pool.aclose())
            else:
                queue = saq_queue(loop, url)
                for chunk in chunks:
                    loop.gather([queue.enqueue("saq_job", i=i) for i in chunk])
                loop.run(queue.disconnect())
        finally:
            loop.close()
    else:
        raise ValueError(kind)


def drainer(kind: str, url: str, directory: str) -> Drain:
    """In a worker process: open ``kind``'s connection, and return the call that drains."""
    me = importlib.import_module(JOBS_MODULE)
    clock = time.monotonic
    if kind in (OURS, "redis-py", "directory Cache"):
        if kind == OURS:
            cache = RedisCache(url, namespace=NAMESPACE)
            cache.peek(prefix="warm")  # connects and loads the scripts

            def take() -> Any:
                key, value = cache.pull(prefix=PREFIX)
                return None if key is None else value
        elif kind == "redis-py":
            client = connect(url)
            client.ping()

            def take() -> Any:
                data = client.rpop(LIST)
                return None if data is None else int(data)
        else:
            local = directory_cache(directory)

            def take() -> Any:
                key, value = local.pull(prefix=PREFIX)
                return None if key is None else value

        def run() -> tuple[list[int], float]:
            got: list[int] = []
            end = clock()
            while (value := take()) is not None:
                got.append(value)
                end = clock()
            return got, end

        return run
    if kind in (JOBS, "directory JobQueue"):
        if kind == JOBS:
            jobs, why = jobqueue_on_redis(url)
            assert jobs is not None, why
        else:
            jobs = diskcache_oxide.JobQueue(directory_cache(directory))
        jobs.counts()  # connects

        def run_jobs() -> tuple[list[int], float]:
            got: list[int] = []
            end = clock()
            while (job := jobs.take()) is not None:
                got.append(job.value)
                jobs.finish(job)
                end = clock()
            return got, end

        return run_jobs
    if kind == "rq":
        rq = importlib.import_module("rq")
        client = connect(url)
        client.ping()
        worker = rq.SimpleWorker([rq.Queue(RQ_QUEUE, connection=client)], connection=client)

        def run_rq() -> tuple[list[int], float]:
            me.LAST[0] = clock()
            worker.work(burst=True, logging_level="WARNING")
            return list(me.DONE), me.LAST[0]

        return run_rq
    loop = Loop()
    if kind == "arq":
        arq = importlib.import_module("arq")
        pool = arq_pool(loop, url)
        worker = arq.Worker(
            functions=[me.arq_job],
            redis_pool=pool,
            burst=True,
            poll_delay=0.01,
            handle_signals=False,
        )

        def run_arq() -> tuple[list[int], float]:
            me.LAST[0] = clock()
            loop.run(worker.main())
            loop.run(worker.close())
            return list(me.DONE), me.LAST[0]

        return run_arq
    if kind == "saq":
        saq = importlib.import_module("saq")
        queue = saq_queue(loop, url)
        worker = saq.Worker(queue, functions=[me.saq_job], burst=True, dequeue_timeout=0.05)

        def run_saq() -> tuple[list[int], float]:
            me.LAST[0] = clock()
            loop.run(worker.start())
            loop.run(queue.disconnect())
            return list(me.DONE), me.LAST[0]

        return run_saq
    raise ValueError(kind)


def drain_worker(
    kind: str, url: str, directory: str, barrier: Any, results: Any, index: int
) -> None:
    """Spawned: connect, wait for the others, drain until empty, report (index, start, end,
    items, error)."""
    import logging

    logging.getLogger("saq").setLevel(logging.ERROR)  # its upkeep tasks' cancellation at exit
    got: list[int] = []
    error = ""
    start = end = time.monotonic()
    try:
        run = drainer(kind, url, directory)
        barrier.wait(timeout=120)
        start = time.monotonic()
        got, end = run()
        end = max(end, start)
    except Exception as exc:  # reported, counted as a failed run
        error = f"{type(exc).__name__}: {exc}"
        barrier.abort()
    results.put((index, start, end, got, error))


def bench_drain(kind: str, url: str, count: int, workers: int) -> dict[str, Any]:
    flush(url)
    directory = tempfile.mkdtemp(prefix="bench-redis-drain-")
    try:
        fill(kind, url, directory, count)
        barrier = SPAWN.Barrier(workers)
        results = SPAWN.Queue()
        procs = [
            SPAWN.Process(target=drain_worker, args=(kind, url, directory, barrier, results, i))
            for i in range(workers)
        ]
        for p in procs:
            p.start()
        reports = collect(
            results, procs, 900, lambda why: (-1, time.monotonic(), time.monotonic(), [], why)
        )
        for p in procs:
            p.join(60)
            if p.is_alive():
                p.kill()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    errors = [r[4] for r in reports if r[4]]
    seen: Counter[int] = Counter()
    for r in reports:
        seen.update(r[3])
    elapsed = max(max(r[2] for r in reports) - min(r[1] for r in reports), 1e-9)
    handled = sum(seen.values())
    return {
        "library": kind,
        "workers": workers,
        "items": count,
        "seconds": elapsed,
        "items_per_s": handled / elapsed,
        "us_per_item": elapsed * 1e6 / handled if handled else None,
        "lost": count - len(seen),
        "duplicated": sum(n - 1 for n in seen.values() if n > 1),
        "errors": errors[:3],
    }


DRAIN_HOW = {
    OURS: "pull() until empty (at most once: the item is gone when handed over)",
    JOBS: "take() + finish() until empty (a lease, then its finish)",
    "redis-py": "RPOP until empty (floor)",
    "rq": "SimpleWorker.work(burst=True), no-op job",
    "arq": "Worker(burst=True, poll_delay=0.01), no-op job",
    "saq": "Worker(burst=True, dequeue_timeout=0.05), no-op job",
    "directory Cache": "pull() until empty, on a directory",
    "directory JobQueue": "take() + finish() until empty, on a directory",
}
DRAIN_KIND = {
    OURS: "ours",
    JOBS: "ours",
    "redis-py": "floor",
    "rq": "peer",
    "arq": "peer",
    "saq": "peer",
    "directory Cache": "directory",
    "directory JobQueue": "directory",
}


def drain_ratios(rows: list[dict[str, Any]]) -> None:
    """Each drain row's time per item / RedisCache's (and JobQueue on Redis's) at its worker
    count."""
    for r in rows:
        peers = {p["library"]: p for p in rows if p["workers"] == r["workers"]}
        for column, ref in (("ratio", OURS), ("ratio_jobqueue", JOBS)):
            base = peers.get(ref)
            if base is None or base["errors"] or not base["us_per_item"] or not r["us_per_item"]:
                r[column] = None
            else:
                r[column] = r["us_per_item"] / base["us_per_item"]


# ----------------------------------------------------------------------------- 3. mixed


class Plain:
    """redis-py's GET/SET/DEL as a cache, values stored as they are (bytes) or pickled."""

    def __init__(self, url: str, pickled: bool) -> None:
        self.client = connect(url)
        self.pickled = pickled

    def get(self, key: bytes) -> Any:
        data = self.client.get(key)
        if data is None or not self.pickled:
            return data
        return pickle.loads(data)

    def set(self, key: bytes, value: Any) -> bool:
        data = pickle.dumps(value, pickle.HIGHEST_PROTOCOL) if self.pickled else value
        return bool(self.client.set(key, data))

    def delete(self, key: bytes) -> bool:
        return bool(self.client.delete(key))

    def close(self) -> None:
        self.client.close()


class DjangoRedis:
    """Django's own Redis cache backend (str keys: the workload's bytes keys decoded)."""

    def __init__(self, url: str) -> None:
        from django.conf import settings

        if not settings.configured:
            settings.configure(
                CACHES={
                    "default": {
                        "BACKEND": "django.core.cache.backends.redis.RedisCache",
                        "LOCATION": url,
                    }
                }
            )
        from django.core.cache import caches

        self.cache = caches["default"]

    def get(self, key: bytes) -> Any:
        return self.cache.get(key.decode())

    def set(self, key: bytes, value: Any) -> bool:
        self.cache.set(key.decode(), value)
        return True

    def delete(self, key: bytes) -> bool:
        return bool(self.cache.delete(key.decode()))

    def close(self) -> None:
        self.cache.close()


MIX_ROWS: dict[str, tuple[str, str]] = {
    OURS: ("ours", "get/set/delete, values in the safe format, one script each"),
    "redis-py bytes": ("floor", "GET/SET/DEL, values already bytes: no format at all"),
    "redis-py pickle": ("peer", "GET/SET/DEL, values pickled (a hand-rolled cache)"),
    "Django RedisCache": ("peer", "django.core.cache.backends.redis.RedisCache (pickles)"),
    "directory Cache": ("directory", "diskcache_oxide.Cache on a directory (memo-friendly)"),
}


def open_mix(library: str, url: str, directory: str) -> Any:
    """A handle on one row's store for the mix (run in each spawned process)."""
    if library == OURS:
        return RedisCache(url, namespace=NAMESPACE)
    if library == "redis-py bytes":
        return Plain(url, pickled=False)
    if library == "redis-py pickle":
        return Plain(url, pickled=True)
    if library == "Django RedisCache":
        return DjangoRedis(url)
    return diskcache_oxide.Cache(directory)


def bench_mix(library: str, url: str, procs: int, ops: int, warmup: int) -> dict[str, Any]:
    """One row of 3: the mix (shared with bench_mixed.py) on ``library`` in ``procs``
    processes, on an emptied database (or a fresh directory) pre-filled with each key."""
    flush(url)
    directory = tempfile.mkdtemp(prefix="bench-redis-mix-")
    try:
        cache = open_mix(library, url, directory)
        try:
            for key in range(MIX_KEYS):
                cache.set(str(key).encode(), str(key).encode())
        finally:
            cache.close()
        row = run_mix(open_mix, (library, url, directory), procs, ops, warmup, 900)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    kind, what = MIX_ROWS[library]
    row.pop("misses")
    return {
        "library": library,
        "kind": kind,
        "what": what,
        "memo_friendly": library == "directory Cache",
        "headline": library == OURS,
        **row,
    }


# ----------------------------------------------------------------------------- output


def fmt_us(x: float) -> str:
    return f"{x:,.1f}" if x < 10_000 else f"{x / 1000:,.1f}ms"


fmt_ratio = ratio_text


def print_latency(rows: list[dict[str, Any]]) -> None:
    print("1. One call at a time, one process (us per call; ops/s from the mean)")
    print("   ratio: this row's median / RedisCache's (above 1: RedisCache is faster)")
    for op, title in (("put", "putting one item or job in"), ("take", "taking one out")):
        print(f"   {title}")
        head = (
            f"   {'library':<20}{'call':<32}{'median':>9}{'p99':>9}{'ops/s':>10}"
            f"{'ratio':>8}{'/ JobQueue':>12}"
        )
        print(head)
        print("   " + "-" * (len(head) - 3))
        for r in rows:
            if r["op"] != op:
                continue
            if "unavailable" in r:
                print(f"   {r['library']:<20}not available yet (see above)")
                continue
            print(
                f"   {r['library']:<20}{r['what']:<32}{fmt_us(r['median_us']):>9}"
                f"{fmt_us(r['p99_us']):>9}{r['ops_per_s']:>10,.0f}{fmt_ratio(r['ratio']):>8}"
                f"{fmt_ratio(r['ratio_jobqueue']):>12}"
            )
        if op == "take":
            print(
                "   (rq, arq and saq have no call that takes one job: their workers dequeue in"
                " their loop; see 2)"
            )
        print()


def print_drain(rows: list[dict[str, Any]], workers: tuple[int, ...], unavailable: str) -> None:
    print("2. Draining N prefilled items or no-op jobs with worker processes (items/s)")
    print(
        "   ratio: time per item / RedisCache's at the same worker count; / JobQueue: / JobQueue"
        " on Redis's"
    )
    cols = "".join(f"{f'{w} worker' + ('s' if w > 1 else ''):>12}" for w in workers)
    w_last = workers[-1]
    head = (
        f"   {'library':<20}{cols}{f'ratio {w_last}w':>10}{'/ JobQueue':>12}{'lost,dup':>10}   how"
    )
    print(head)
    print("   " + "-" * (len(head) + 40))
    libraries = list(dict.fromkeys(r["library"] for r in rows))
    if unavailable and JOBS not in libraries:
        libraries.insert(1, JOBS)
    for lib in libraries:
        runs = {r["workers"]: r for r in rows if r["library"] == lib}
        if not runs:
            print(f"   {lib:<20}not available yet (see above)")
            continue
        cells = ""
        for w in workers:
            r = runs.get(w)
            cells += f"{r['items_per_s']:>12,.0f}" if r and not r["errors"] else f"{'ERR':>12}"
        last = runs.get(w_last, {})
        lost = sum(r["lost"] for r in runs.values())
        dup = sum(r["duplicated"] for r in runs.values())
        print(
            f"   {lib:<20}{cells}{fmt_ratio(last.get('ratio')):>10}"
            f"{fmt_ratio(last.get('ratio_jobqueue')):>12}{f'{lost},{dup}':>10}   {DRAIN_HOW[lib]}"
        )
        for r in runs.values():
            if r["errors"]:
                print(f"   {'':<20}{r['workers']} workers: ERRORS {r['errors']}")
    items = rows[0]["items"] if rows else 0
    print(f"   N = {items:,} items per drain")
    print()


def print_mix(rows: list[dict[str, Any]]) -> None:
    print(
        "3. Mixed workload: 90% get, 9% set, 1% delete over 100 bytes keys, each process its own"
        " handle (us per call)"
    )
    print(
        "   ratio: this row's median (all calls) / RedisCache's;"
        " wall: its total time / RedisCache's"
    )
    for procs in sorted({r["processes"] for r in rows}):
        group = [r for r in rows if r["processes"] == procs]
        print(
            f"   {procs} process{'es' if procs > 1 else ''} x"
            f" {group[0]['ops_per_process']:,} operations each"
        )
        head = (
            f"   {'library':<20}{'get':>8}{'set':>8}{'delete':>8}{'all':>8}{'p99':>9}"
            f"{'ops/s':>9}{'ratio':>8}{'wall':>8}   what"
        )
        print(head)
        print("   " + "-" * (len(head) + 40))
        ours = next(r for r in group if r["library"] == OURS)
        realistic = [r for r in group if not r["memo_friendly"]]
        memo = [r for r in group if r["memo_friendly"]]
        for part in (realistic, memo):
            if part is memo and memo:
                print(
                    "   -- memo-friendly (a directory's best case, not a typical get): 100 hot"
                    " keys, which\n      the directory's memo of recent reads serves between"
                    " writes (D-017)"
                )
            for r in part:
                s = r["stats"]
                if r["errors"] or "all" not in s:
                    print(f"   {r['library']:<20}ERRORS {r['errors']}")
                    r["ratio"] = r["ratio_wall"] = None
                    continue
                cells = "".join(
                    f"{fmt_us(s[a]['median_us']) if a in s else '-':>8}"
                    for a in ("get", "set", "delete", "all")
                )
                ratio = s["all"]["median_us"] / ours["stats"]["all"]["median_us"]
                wall = r["wall_s"] / ours["wall_s"] if ours["wall_s"] > 0 else None
                print(
                    f"   {r['library']:<20}{cells}{fmt_us(s['all']['p99_us']):>9}"
                    f"{r['ops_per_s']:>9,.0f}{fmt_ratio(ratio):>8}{fmt_ratio(wall):>8}"
                    f"   {r['what']}"
                )
                r["ratio"] = ratio
                r["ratio_wall"] = wall
        print()


def print_headline(drains: list[dict[str, Any]], mix: list[dict[str, Any]]) -> None:
    w = max(r["workers"] for r in drains)
    p = max(r["processes"] for r in mix)
    print(f"Headline (realistic: every call a round trip to the server), {w} worker processes:")
    for r in drains:
        if r["workers"] == w and r["library"] in (OURS, JOBS, *PEERS) and not r["errors"]:
            print(f"   drain            {r['library']:<20}{r['items_per_s']:>10,.0f} items/s")
    for r in mix:
        if not r["memo_friendly"] and r["processes"] == p and not r["errors"]:
            print(f"   mixed 90/9/1     {r['library']:<20}{r['ops_per_s']:>10,.0f} ops/s")
    print()


# ----------------------------------------------------------------------------- main


def start_server() -> Any:
    sys.path.insert(0, str(HELPERS))
    redis_servers = importlib.import_module("redis_servers")
    missing = redis_servers.redis_missing()
    if missing:
        sys.exit(f"no redis-server to run against: {missing}; or pass --url")
    return redis_servers.RedisServer(name="bench-redis")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run")
    parser.add_argument(
        "--url", help="a redis:// URL of a scratch database (FLUSHed before each row)"
    )
    parser.add_argument("--json", default=str(ROOT / "results" / "redis.json"))
    args = parser.parse_args(argv)

    if args.quick:
        n, warm, count, ops = 200, 20, 300, 300
        workers: tuple[int, ...] = (4,)
        mix_procs: tuple[int, ...] = (1,)
    else:
        n, warm, count, ops = 3000, 200, 10_000, 20_000
        workers = mix_procs = (1, 4)
    mix_warmup = min(1000, max(100, ops // 10))

    server: Any = None if args.url else start_server()
    url: str = args.url or server.url
    started = time.perf_counter()
    try:
        client = connect(url)
        server_version = client.info("server")["redis_version"]
        client.close()
        peers = [p for p in PEERS if installed(p)]
        skipped = {
            p: f"{p} is not installed (pip install -r benches/requirements.txt)"
            for p in PEERS
            if p not in peers
        }
        jobs, why = jobqueue_on_redis(url)
        if jobs is not None:
            jobs.cache.close()
        versions = {
            "diskcache_oxide": diskcache_oxide.__version__,
            "redis-server": server_version,
            **{name: dist_version(name) for name in ("redis", "hiredis", *PEERS, "django")},
        }
        print(
            " | ".join(f"{name} {v}" for name, v in versions.items() if v)
            + f"\nPython {platform.python_version()} | {platform.machine()} {os.cpu_count()} cpu"
            + f" | {'server started for this run' if server else 'server of --url'}"
            + f" | {n:,} calls per row, drains of {count:,} items, mixed {ops:,} ops"
        )
        for reason in skipped.values():
            print(f"skipped: {reason}")
        if jobs is None:
            print(f"JobQueue on Redis: not available yet ({why}); its rows are skipped")
        print()

        latency = bench_latency(url, n, warm)
        kinds = [OURS, *([JOBS] if jobs is not None else []), "redis-py", *peers]
        kinds += ["directory Cache", "directory JobQueue"]
        drains = []
        for kind in kinds:
            for w in workers:
                result = bench_drain(kind, url, count, w)
                result["kind"] = DRAIN_KIND[kind]
                result["how"] = DRAIN_HOW[kind]
                result["headline"] = kind == OURS and w == workers[-1]
                drains.append(result)
                print(
                    f"  drained {kind} x{w}: {result['items_per_s']:,.0f} items/s"
                    f" (lost {result['lost']}, duplicated {result['duplicated']})",
                    file=sys.stderr,
                )
        drain_ratios(drains)
        mix = []
        for procs in mix_procs:
            for library in MIX_ROWS:
                result = bench_mix(library, url, procs, ops, mix_warmup)
                mix.append(result)
                print(
                    f"  mixed {library} x{procs}: {result['ops_per_s']:,.0f} ops/s",
                    file=sys.stderr,
                )
    finally:
        if server is not None:
            server.close()

    print_headline(drains, mix)
    print_latency(latency)
    print_drain(drains, workers, why)
    print_mix(mix)
    # A peer's lost or repeated jobs are its own (the table shows them); ours must be none.
    failed = [
        r
        for r in drains
        if r["errors"] or (r["kind"] in ("ours", "directory") and (r["lost"] or r["duplicated"]))
    ] + [r for r in mix if r["errors"]]
    elapsed = time.perf_counter() - started
    print(
        "Realistic: every row on Redis (no client-side memo). redis-py rows: a floor, not a peer."
        "\nmemo-friendly: the directory Cache in the mixed workload (100 hot keys)."
        + (f"\nDRAINS WITH ERRORS OR LOST ITEMS: {len(failed)}" if failed else "")
        + f"  ({elapsed:.0f} s)"
    )
    report = {
        **run_facts(),
        "quick": args.quick,
        "versions": versions,
        "server": "started for this run" if server is not None else "--url",
        "sizes": {"calls": n, "warmup": warm, "drain_items": count, "mixed_ops": ops},
        "workers": list(workers),
        "mix_processes": list(mix_procs),
        "skipped": skipped,
        "jobqueue_on_redis": {"available": jobs is not None, "why": why},
        "latency": latency,
        "drain": drains,
        "mix": mix,
    }
    write_json(args.json, report)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
