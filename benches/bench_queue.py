"""Queue benchmark: diskcache_oxide beside python-diskcache 5.6.3 and diskcache-community 5.8.1
(plain, and with ``SafeDisk``, its fix for CVE-2025-69872), and diskcache-rs, litequeue,
persist-queue.

Everything runs in one invocation, on this machine, each library in its own fresh temporary
directory with its default settings (diskcache_oxide's queue cache with
``eviction_policy='none'``, as a queue's cache must be opened). diskcache-community has
python-diskcache's API and is run exactly as python-diskcache is, everywhere python-diskcache
is, twice: plain ("diskcache-community") and with ``Cache(directory, disk=SafeDisk)``
("community+SafeDisk", the restricted unpickling a cache that others can write to needs). Each
section also prints oxide against each of the three, as the peer's time over ours (items/s:
ours over the peer's; higher is better for oxide). Measured:

1. push, pull and peek latency in one process (median and p99 per call, ratio of
   python-diskcache's median to each library's; higher is better);
2. take + finish in one process: diskcache_oxide's ``JobQueue``; the seed page's lease recipe
   (``transact()`` + ``pull`` + a ``running:`` record, then ``delete``) over python-diskcache
   and diskcache-community;
   litequeue ``pop`` + ``done``; persist-queue ``SQLiteAckQueue.get`` + ``ack``;
3. draining a prefilled queue with 1, 2 and 4 worker processes (spawned), pulling one item at a
   time and in batches of 100 (``pull_many``; python-diskcache: 100 pulls in one
   ``transact()``); items/s from the first worker's start to the last worker's end, and the
   number of items lost or delivered twice, which must be zero;
4. latency from a push in one process to a ``pull(timeout=...)`` blocked in another
   (python-diskcache and diskcache-community have no blocking pull: their rows are a
   ``pull()`` loop sleeping 1 ms).

diskcache-rs (pinned in requirements-dev.txt) has python-diskcache's ``Cache.push``, ``pull``
and ``peek``, so it appears in 1 and in the single-item drains of 3. It has no batch pull, no
lease (take/finish) and no blocking pull, so it is absent from 2, 4 and the batched drains.
Its push and pull keep their counters in ordinary keys updated under a thread lock, so they
are not atomic across processes: its multi-process drains can lose or repeat items, which
the drain table counts (that is a property of diskcache-rs, not a bench failure).

Targets, printed beside the numbers: push/pull/peek >= 3x python-diskcache; a single-item
drain by 4 workers >= 2x python-diskcache; a batched drain by 4 workers >= 100,000 items/s.

Setup (diskcache-community, diskcache-rs, litequeue and persist-queue are optional; their rows
are skipped if not installed)::

    .venv/bin/pip install diskcache-community diskcache-rs==0.4.10 litequeue persist-queue
    .venv/bin/python benches/bench_queue.py            # full run (a few minutes)
    .venv/bin/python benches/bench_queue.py --quick    # a short smoke run

Results are written as JSON to benches/results/queue.json (or --json PATH).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import diskcache
from shared import WHY_BELOW, collect, optional_module, run_facts, summarize, time_each, write_json

try:
    import diskcache_oxide
except ImportError:  # pragma: no cover - explained to the user
    sys.exit("diskcache_oxide is not importable: build it first (`make build`)")

community = optional_module("diskcache_community")
diskcache_rs = optional_module("diskcache_rs")
litequeue = optional_module("litequeue")
persistqueue = optional_module("persistqueue")

ROOT = Path(__file__).resolve().parent
SPAWN = multiprocessing.get_context("spawn")
PREFIX = "bench"
TARGET_LATENCY_RATIO = 3.0
TARGET_DRAIN_RATIO = 2.0
TARGET_BATCHED_RATE = 100_000.0


def item(i: int) -> str:
    """The payload: a short str (litequeue stores only str), parseable back to its number."""
    return f"job-{i:09d}"


def number(value: Any) -> int:
    return int(str(value)[4:])


# ----------------------------------------------------------------------------- adapters


class Adapter:
    """One library's queue, opened on a directory. Subclasses fill in what they support."""

    name = ""
    batch_note = ""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def push(self, value: str) -> Any:
        raise NotImplementedError

    def pull(self) -> Any:
        """The value, or None when the queue is empty."""
        raise NotImplementedError

    def peek(self) -> Any:
        raise NotImplementedError

    def pull_batch(self, n: int) -> list[Any]:
        raise NotImplementedError

    def fill(self, values: list[str]) -> None:
        for value in values:
            self.push(value)

    def close(self) -> None:
        pass

    has_peek = True
    has_batch = True


class CacheQueue(Adapter):
    """A library with python-diskcache's ``push``/``pull``/``peek`` on a ``Cache`` (``module``),
    opened with ``disk=module.SafeDisk`` where ``safe``."""

    module: Any = None
    safe = False

    def __init__(self, directory: str) -> None:
        super().__init__(directory)
        self.cache = self.open(directory, timeout=60, eviction_policy="none")

    @classmethod
    def open(cls, directory: str, **settings: Any) -> Any:
        """The library's ``Cache`` on ``directory``, with SafeDisk where ``safe``."""
        if cls.safe:
            settings["disk"] = cls.module.SafeDisk
        return cls.module.Cache(directory, **settings)

    def push(self, value: str) -> Any:
        return self.cache.push(value, prefix=PREFIX)

    def pull(self) -> Any:
        return self.cache.pull(prefix=PREFIX, retry=True)[1]

    def peek(self) -> Any:
        return self.cache.peek(prefix=PREFIX)[1]

    def close(self) -> None:
        self.cache.close()


class Oxide(CacheQueue):
    name = "oxide"
    batch_note = "pull_many(100)"
    module = diskcache_oxide

    def pull_batch(self, n: int) -> list[Any]:
        return [v for _, v in self.cache.pull_many(n, prefix=PREFIX, retry=True)]

    def fill(self, values: list[str]) -> None:
        for start in range(0, len(values), 1000):
            self.cache.push_many(values[start : start + 1000], prefix=PREFIX)


class DiskCache(CacheQueue):
    name = "diskcache"
    batch_note = "100 pulls in one transact()"
    module = diskcache

    def pull_batch(self, n: int) -> list[Any]:
        out = []
        with self.cache.transact(retry=True):
            for _ in range(n):
                value = self.cache.pull(prefix=PREFIX)[1]
                if value is None:
                    break
                out.append(value)
        return out

    def fill(self, values: list[str]) -> None:
        for start in range(0, len(values), 1000):
            with self.cache.transact(retry=True):
                for value in values[start : start + 1000]:
                    self.cache.push(value, prefix=PREFIX)


class Community(DiskCache):
    """diskcache-community: python-diskcache's calls, run exactly as python-diskcache's."""

    name = "diskcache-community"
    module = community


class CommunitySafe(Community):
    """diskcache-community with ``disk=SafeDisk`` (restricted unpickling)."""

    name = "community+SafeDisk"
    safe = True


class DiskCacheRs(CacheQueue):
    """diskcache-rs: python-diskcache's push/pull/peek calls; no batch pull, no transaction
    across processes (its ``transact()`` is a thread lock)."""

    name = "diskcache-rs"
    has_batch = False
    module = diskcache_rs


class LiteQueue(Adapter):
    name = "litequeue"
    has_batch = False

    def __init__(self, directory: str) -> None:
        super().__init__(directory)
        os.makedirs(directory, exist_ok=True)
        self.q = litequeue.LiteQueue(os.path.join(directory, "queue.db"), timeout=60)

    def push(self, value: str) -> Any:
        return self.q.put(value)

    def pull(self) -> Any:
        message = self.q.pop()
        return None if message is None else message.data

    def peek(self) -> Any:
        message = self.q.peek()
        return None if message is None else message.data

    def fill(self, values: list[str]) -> None:
        for start in range(0, len(values), 1000):
            with self.q.transaction(mode="IMMEDIATE"):
                for value in values[start : start + 1000]:
                    self.q.put(value)

    def close(self) -> None:
        self.q.close()


class PersistQueue(Adapter):
    name = "persist-queue"
    has_batch = False
    has_peek = False

    def __init__(self, directory: str) -> None:
        super().__init__(directory)
        self.q = persistqueue.SQLiteQueue(directory, timeout=60)

    def push(self, value: str) -> Any:
        return self.q.put(value)

    def pull(self) -> Any:
        try:
            return self.q.get(block=False)
        except persistqueue.Empty:
            return None

    def fill(self, values: list[str]) -> None:
        bulk = persistqueue.SQLiteQueue(self.directory, timeout=60, auto_commit=False)
        for value in values:
            bulk.put(value)
        bulk.task_done()
        bulk.close()
        self.q.close()
        self.q = persistqueue.SQLiteQueue(self.directory, timeout=60)

    def close(self) -> None:
        self.q.close()


ADAPTERS: dict[str, type[Adapter]] = {"diskcache": DiskCache, "oxide": Oxide}
if community is not None:
    ADAPTERS["diskcache-community"] = Community
    ADAPTERS["community+SafeDisk"] = CommunitySafe
if diskcache_rs is not None:
    ADAPTERS["diskcache-rs"] = DiskCacheRs
if litequeue is not None:
    ADAPTERS["litequeue"] = LiteQueue
if persistqueue is not None:
    ADAPTERS["persist-queue"] = PersistQueue


#: python-diskcache and the libraries run exactly as it is (diskcache-community, plain and with
#: SafeDisk): the peers every section compares oxide with.
PEERS = [name for name, cls in ADAPTERS.items() if issubclass(cls, DiskCache)]


def cache_class(name: str) -> type[CacheQueue]:
    """The adapter of ``name``, one with python-diskcache's ``Cache`` (and its ``open``)."""
    cls = ADAPTERS[name]
    assert issubclass(cls, CacheQueue), name
    return cls


def versus(figures: dict[str, Any], higher: bool = False) -> dict[str, float]:
    """Oxide against each peer in ``figures`` ({library: summary or row}): the peer's median
    over ours, or with ``higher`` (items/s) ours over the peer's; higher is better for oxide."""
    ours = figures.get("oxide")
    out: dict[str, float] = {}
    if ours is None:  # its run failed: no ratios
        return out
    for peer in PEERS:
        theirs = figures.get(peer)
        if theirs is None:
            continue
        if higher:
            if theirs["items_per_s"] > 0:
                out[peer] = ours["items_per_s"] / theirs["items_per_s"]
        elif ours["median_us"] > 0:
            out[peer] = theirs["median_us"] / ours["median_us"]
    return out


def versus_text(ratios: dict[str, float]) -> str:
    """``diskcache 3.10x, diskcache-community 3.02x, community+SafeDisk 3.21x``."""
    return ", ".join(f"{peer} {ratio:.2f}x" for peer, ratio in ratios.items())


def fresh_dir(label: str) -> str:
    return tempfile.mkdtemp(prefix=f"bench-queue-{label}-")


# ----------------------------------------------------------------------------- 1. latency


def bench_latency(n: int) -> dict[str, dict[str, Any]]:
    """push, peek, pull latency per library: {op: {library: summary}}."""
    out: dict[str, dict[str, Any]] = {"push": {}, "peek": {}, "pull": {}}
    for name, cls in ADAPTERS.items():
        for op, summary in latency_of(name, cls, n).items():
            out[op][name] = summary
    return out


def latency_of(name: str, cls: type[Adapter], n: int) -> dict[str, dict[str, float]]:
    """One library's push, peek (where it has one) and pull latency, in a fresh directory."""
    directory = fresh_dir(name)
    q = cls(directory)
    out: dict[str, dict[str, float]] = {}
    try:
        warm = [item(-1 - i) for i in range(50)]
        for value in warm:
            q.push(value)
        for _ in warm:
            q.pull()
        out["push"] = summarize(time_each(lambda i: q.push(item(i)), n))
        if q.has_peek:
            out["peek"] = summarize(time_each(lambda i: q.peek(), n))
        got: list[Any] = []
        out["pull"] = summarize(time_each(lambda i: got.append(q.pull()), n))
        numbers = [number(v) for v in got]
        if isinstance(q, CacheQueue):  # python-diskcache's push/pull, in order
            assert numbers == list(range(n)), f"{name}: pull order"
        else:  # litequeue orders by uuid7, random within a millisecond
            assert sorted(numbers) == list(range(n)), f"{name}: pulled items"
    finally:
        q.close()
        shutil.rmtree(directory, ignore_errors=True)
    return out


# ----------------------------------------------------------------------------- 2. take + finish


def bench_take_finish(n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    values = [item(i) for i in range(n + 50)]

    directory = fresh_dir("jobs-oxide")
    cache = diskcache_oxide.Cache(directory, eviction_policy="none")
    jobs = diskcache_oxide.JobQueue(cache)
    try:
        jobs.put_many(values)

        def oxide_take_finish(i: int) -> None:
            job = jobs.take()
            assert job is not None, "the queue was filled with enough jobs"
            jobs.finish(job)

        out["oxide"] = summarize(time_each(oxide_take_finish, n, 50))
        out["oxide"]["what"] = "JobQueue.take() + finish()"
    finally:
        cache.close()
        shutil.rmtree(directory, ignore_errors=True)

    for peer in PEERS:  # python-diskcache, and diskcache-community plain and with SafeDisk
        out[peer] = recipe_take_finish(peer, n, values)

    if litequeue is not None:
        directory = fresh_dir("jobs-litequeue")
        lq = LiteQueue(directory)
        try:
            lq.fill(values)

            def lite_take_finish(i: int) -> None:
                message = lq.q.pop()
                lq.q.done(message.message_id)

            out["litequeue"] = summarize(time_each(lite_take_finish, n, 50))
            out["litequeue"]["what"] = "pop() + done()"
        finally:
            lq.close()
            shutil.rmtree(directory, ignore_errors=True)

    if persistqueue is not None:
        directory = fresh_dir("jobs-persist")
        aq = persistqueue.SQLiteAckQueue(directory, timeout=60)
        try:
            for value in values:
                aq.put(value)

            def ack_take_finish(i: int) -> None:
                value = aq.get(block=False)
                aq.ack(value)

            out["persist-queue"] = summarize(time_each(ack_take_finish, n, 50))
            out["persist-queue"]["what"] = "SQLiteAckQueue.get() + ack()"
        finally:
            aq.close()
            shutil.rmtree(directory, ignore_errors=True)
    return out


def recipe_take_finish(name: str, n: int, values: list[str]) -> dict[str, Any]:
    """The seed page's lease recipe over ``name``'s Cache (python-diskcache's API): take is
    ``pull`` and a ``running:`` record in one ``transact()``, finish deletes the record."""
    directory = fresh_dir(f"jobs-{name}")
    dc = cache_class(name).open(directory, eviction_policy="none")
    try:
        with dc.transact():
            for i, value in enumerate(values):
                dc.push({"id": i, "value": value}, prefix=PREFIX)

        def take_finish(i: int) -> None:
            with dc.transact():
                _, job = dc.pull(prefix=PREFIX)
                dc.set(f"running:{job['id']}", (time.time(), job))
            dc.delete(f"running:{job['id']}")

        out: dict[str, Any] = dict(summarize(time_each(take_finish, n, 50)))
        out["what"] = "seed recipe: transact(pull + set running) + delete"
        return out
    finally:
        dc.close()
        shutil.rmtree(directory, ignore_errors=True)


# ----------------------------------------------------------------------------- 3. drain


def drain_worker(
    name: str, directory: str, batch: int, barrier: Any, results: Any, index: int
) -> None:
    """Spawned: open, wait for the others, drain until empty, report (start, end, items)."""
    q = ADAPTERS[name](directory)
    got: list[int] = []
    error = ""
    try:
        barrier.wait(timeout=120)
        start = time.monotonic()
        if batch > 1:
            while values := q.pull_batch(batch):
                got.extend(number(v) for v in values)
        else:
            while (value := q.pull()) is not None:
                got.append(number(value))
        end = time.monotonic()
    except Exception as exc:  # reported, counted as a failed run
        error = f"{type(exc).__name__}: {exc}"
        start = end = time.monotonic()
    finally:
        q.close()
    results.put((index, start, end, got, error))


def bench_drain(name: str, count: int, workers: int, batch: int) -> dict[str, Any]:
    directory = fresh_dir(f"drain-{name}")
    try:
        q = ADAPTERS[name](directory)
        q.fill([item(i) for i in range(count)])
        q.close()
        barrier = SPAWN.Barrier(workers)
        results = SPAWN.Queue()
        procs = [
            SPAWN.Process(target=drain_worker, args=(name, directory, batch, barrier, results, i))
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
        errors = [r[4] for r in reports if r[4]]
        seen: Counter[int] = Counter()
        for r in reports:
            seen.update(r[3])
        start = min(r[1] for r in reports)
        end = max(r[2] for r in reports)
        duplicated = sum(n - 1 for n in seen.values() if n > 1)
        lost = count - len(seen)
        elapsed = max(end - start, 1e-9)
        return {
            "library": name,
            "workers": workers,
            "batch": batch,
            "items": count,
            "seconds": elapsed,
            "items_per_s": sum(seen.values()) / elapsed,
            "lost": lost,
            "duplicated": duplicated,
            "errors": errors[:3],
        }
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# ----------------------------------------------------------------------------- 4. wake-up


def wake_listener(
    name: str, directory: str, samples: int, ready: Any, received: Any, results: Any
) -> None:
    """Spawned: wait for each pushed stamp and report how long after the push it arrived."""
    cache = cache_class(name).open(directory, timeout=60)
    latencies: list[float] = []
    ready.set()
    deadline = time.monotonic() + 600
    while len(latencies) < samples and time.monotonic() < deadline:
        if name == "oxide":
            key, stamp = cache.pull(prefix="wake", timeout=5.0, retry=True)
        else:
            key, stamp = cache.pull(prefix="wake", retry=True)
            if key is None:
                time.sleep(0.001)
                continue
        if key is not None:
            latencies.append(time.monotonic() - stamp)
            received.value = len(latencies)
    cache.close()
    results.put(latencies)


def bench_wakeup(name: str, samples: int) -> dict[str, Any]:
    """Each sample: wait until the listener took the previous one, let it settle into its
    wait for 10-30 ms, then push a stamp of ``time.monotonic()`` (system-wide on Linux)."""
    directory = fresh_dir(f"wake-{name}")
    try:
        cache = cache_class(name).open(directory, timeout=60, eviction_policy="none")
        ready = SPAWN.Event()
        received = SPAWN.Value("i", 0)
        results = SPAWN.Queue()
        p = SPAWN.Process(
            target=wake_listener, args=(name, directory, samples, ready, received, results)
        )
        p.start()
        ready.wait(60)
        rng = random.Random(7)
        for i in range(samples):
            deadline = time.monotonic() + 30
            while received.value < i and time.monotonic() < deadline:
                time.sleep(0.0005)
            time.sleep(rng.uniform(0.01, 0.03))
            cache.push(time.monotonic(), prefix="wake")
        latencies = results.get(timeout=120)
        p.join(30)
        cache.close()
        summary: dict[str, Any] = dict(summarize(latencies, scale=1e-6))
        summary["how"] = (
            "pull(timeout=5) blocked in another process"
            if name == "oxide"
            else "pull() loop sleeping 1 ms (no blocking pull)"
        )
        return summary
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def bench_ready_waits(n: int) -> dict[str, Any]:
    """pull(timeout=...) and take(timeout=...) when work is already there: a worker loop's
    usual case, which should cost what pull() and take() cost."""
    out: dict[str, Any] = {}
    directory = fresh_dir("ready-oxide")
    cache = diskcache_oxide.Cache(directory, eviction_policy="none")
    jobs = diskcache_oxide.JobQueue(cache)
    try:
        cache.push_many([item(i) for i in range(2 * n)], prefix=PREFIX)
        out["pull()"] = summarize(time_each(lambda i: cache.pull(prefix=PREFIX), n))
        out["pull(timeout=5)"] = summarize(
            time_each(lambda i: cache.pull(prefix=PREFIX, timeout=5), n)
        )
        jobs.put_many([item(i) for i in range(2 * n)])
        out["take()"] = summarize(time_each(lambda i: jobs.take(), n))
        out["take(timeout=5)"] = summarize(time_each(lambda i: jobs.take(timeout=5), n))
    finally:
        cache.close()
        shutil.rmtree(directory, ignore_errors=True)
    return out


# ----------------------------------------------------------------------------- output


def fmt_us(x: float) -> str:
    return f"{x:,.1f}us" if x < 10_000 else f"{x / 1000:,.1f}ms"


def print_report(report: dict[str, Any]) -> list[str]:
    """Print the tables; return the targets that were missed."""
    missed: list[str] = []
    libs = list(ADAPTERS)
    print("1. One process, latency per call (median / p99); ratio = diskcache median / this")
    head = f"{'op':<8}" + "".join(f"{lib:>30}" for lib in libs) + f"{'target':>12}"
    print(head)
    print("-" * len(head))
    for op, per_lib in report["latency"].items():
        base = per_lib["diskcache"]["median_us"]
        cells = []
        for lib in libs:
            s = per_lib.get(lib)
            if s is None:
                cells.append(f"{'n/a':>30}")
                continue
            ratio = base / s["median_us"]
            both = f"{fmt_us(s['median_us'])} / {fmt_us(s['p99_us'])}"
            cells.append(f"{both:>22}{ratio:>7.2f}x")
        ox_ratio = base / per_lib["oxide"]["median_us"]
        ok = ox_ratio >= TARGET_LATENCY_RATIO
        if not ok:
            missed.append(f"{op} {ox_ratio:.2f}x < {TARGET_LATENCY_RATIO:g}x")
        verdict = f">={TARGET_LATENCY_RATIO:g}x " + ("ok" if ok else "BELOW")
        print(f"{op:<8}" + "".join(cells) + f"{verdict:>12}")
    print("oxide against each peer (the peer's median / oxide's):")
    for op, ratios in report["latency_vs_peers"].items():
        print(f"   {op:<8}{versus_text(ratios)}")
    print()
    print("2. take + finish in one process (median / p99 per job; ratio = diskcache median / this)")
    tf = report["take_finish"]
    for lib, s in tf.items():
        ratio = tf["diskcache"]["median_us"] / s["median_us"]
        print(
            f"   {lib:<20}{fmt_us(s['median_us']):>10} / {fmt_us(s['p99_us']):<10}"
            f"{ratio:>6.2f}x   {s['what']}"
        )
    print(
        "   oxide's JobQueue against each peer's recipe (the peer's median / oxide's): "
        + versus_text(report["take_finish_vs_peers"])
    )
    print()
    print("   diskcache_oxide, with work already waiting (median / p99 per call):")
    for op, r in report["ready_waits"].items():
        print(f"   {op:<18}{fmt_us(r['median_us']):>10} / {fmt_us(r['p99_us'])}")
    print()
    print("3. Draining a prefilled queue with worker processes (items/s; lost, duplicated)")
    head = f"   {'library':<20}{'pull':<18}{'1 worker':>18}{'2 workers':>18}{'4 workers':>18}"
    print(head)
    print("   " + "-" * (len(head) - 3))
    by_key: dict[tuple[str, int], dict[int, dict[str, Any]]] = {}
    for row in report["drain"]:
        by_key.setdefault((row["library"], row["batch"]), {})[row["workers"]] = row
    for (lib, batch), runs in by_key.items():
        how = "one at a time" if batch == 1 else f"batches of {batch}"
        cells = []
        for w in (1, 2, 4):
            r = runs.get(w)
            if r is None:
                cells.append(f"{'-':>18}")
                continue
            flag = f"{r['lost']},{r['duplicated']}"
            if r["errors"]:
                flag += ",ERR"
            cells.append(f"{r['items_per_s']:>11,.0f} ({flag})")
        items = next(iter(runs.values()))["items"]
        print(f"   {lib:<20}{how:<18}" + "".join(f"{c:>18}" for c in cells) + f"  n={items:,}")
    for row in report["drain"]:
        if (row["lost"] or row["duplicated"] or row["errors"]) and row["library"] == "oxide":
            missed.append(
                f"oxide drain {row['workers']}w batch {row['batch']}: lost {row['lost']}, "
                f"duplicated {row['duplicated']}, errors {row['errors']}"
            )
    by_note: dict[str, list[str]] = {}
    for lib, cls in ADAPTERS.items():
        if cls.has_batch:
            by_note.setdefault(cls.batch_note, []).append(lib)
    notes = [f"{', '.join(libs)}: {note}" for note, libs in by_note.items()]
    print(f"   batches: {'; '.join(notes)}")
    print("   oxide against each peer (oxide's items/s / the peer's):")
    for row in report["drain_vs_peers"]:
        how = "one at a time" if row["batch"] == 1 else f"batches of {row['batch']}"
        workers = f"{row['workers']} worker{'s' if row['workers'] > 1 else ''}"
        print(f"   {how + ', ' + workers:<34}{versus_text(row['ratios'])}")
    dc4 = by_key.get(("diskcache", 1), {}).get(4)
    ox4 = by_key.get(("oxide", 1), {}).get(4)
    ox4b = by_key.get(("oxide", 100), {}).get(4)
    if dc4 and ox4:
        ratio = ox4["items_per_s"] / dc4["items_per_s"]
        ok = ratio >= TARGET_DRAIN_RATIO
        print(
            f"   target: single-item drain by 4 workers >= {TARGET_DRAIN_RATIO:g}x diskcache: "
            f"{ratio:.2f}x {'ok' if ok else 'BELOW'}"
        )
        if not ok:
            missed.append(f"4-worker single drain {ratio:.2f}x < {TARGET_DRAIN_RATIO:g}x")
    if ox4b:
        ok = ox4b["items_per_s"] >= TARGET_BATCHED_RATE
        print(
            f"   target: batched drain by 4 workers >= {TARGET_BATCHED_RATE:,.0f} items/s: "
            f"{ox4b['items_per_s']:,.0f} {'ok' if ok else 'BELOW'}"
        )
        if not ok:
            missed.append(f"4-worker batched drain {ox4b['items_per_s']:,.0f} items/s")
    print()
    print("4. Push in one process -> waiting pull in another (latency)")
    for lib, s in report["wakeup"].items():
        print(
            f"   {lib:<20}median {fmt_us(s['median_us']):>9}  p99 {fmt_us(s['p99_us']):>9}"
            f"  n={s['n']}  ({s['how']})"
        )
    print(
        "   oxide against each peer (the peer's median / oxide's): "
        + versus_text(report["wakeup_vs_peers"])
    )
    return missed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run")
    parser.add_argument("--json", default=str(ROOT / "results" / "queue.json"))
    args = parser.parse_args(argv)
    if not hasattr(diskcache_oxide, "JobQueue"):
        sys.exit("this diskcache_oxide has no queue API yet: rebuild it (`make build`)")

    if args.quick:
        n, n_jobs, drain_main, drain_other, wake = 2000, 1000, 20_000, 5_000, 50
    else:
        n, n_jobs, drain_main, drain_other, wake = 10_000, 5000, 100_000, 20_000, 200
    optional = (
        ("diskcache-community", community),
        ("diskcache-rs", diskcache_rs),
        ("litequeue", litequeue),
        ("persist-queue", persistqueue),
    )
    missing = [lib for lib, mod in optional if mod is None]
    print(
        f"diskcache_oxide {diskcache_oxide.__version__} | python-diskcache {diskcache.__version__}"
        + (
            f" | diskcache-community {_version('diskcache-community')} (plain and SafeDisk)"
            if community
            else ""
        )
        + (f" | diskcache-rs {_version('diskcache-rs')}" if diskcache_rs else "")
        + (f" | litequeue {_version('litequeue')}" if litequeue else "")
        + (f" | persist-queue {_version('persist-queue')}" if persistqueue else "")
        + f"\nPython {platform.python_version()} | {platform.machine()} {os.cpu_count()} cpu"
        + f" | {n} calls per latency row, {n_jobs} jobs, drains of {drain_main:,} items"
        + f" ({drain_other:,} for the others), {wake} wake-up samples"
    )
    if missing:
        print(f"not installed, skipped: {', '.join(missing)} (see this script's header)")
    print()
    started = time.perf_counter()
    report: dict[str, Any] = {
        **run_facts(),
        "versions": {
            "diskcache_oxide": diskcache_oxide.__version__,
            "diskcache": diskcache.__version__,
            "diskcache-community": _version("diskcache-community") if community else None,
            "diskcache-rs": _version("diskcache-rs") if diskcache_rs else None,
            "litequeue": _version("litequeue") if litequeue else None,
            "persist-queue": _version("persist-queue") if persistqueue else None,
        },
        "quick": args.quick,
        "peers": PEERS,
    }
    report["latency"] = bench_latency(n)
    report["latency_vs_peers"] = {op: versus(per_lib) for op, per_lib in report["latency"].items()}
    report["take_finish"] = bench_take_finish(n_jobs)
    report["take_finish_vs_peers"] = versus(report["take_finish"])
    report["ready_waits"] = bench_ready_waits(min(n, 500))
    drains = []
    for lib in ADAPTERS:
        # python-diskcache's peers drain as many items as it does, so the ratios compare alike.
        count = drain_main if lib == "oxide" or lib in PEERS else drain_other
        for batch in (1, 100):
            if batch > 1 and not ADAPTERS[lib].has_batch:
                continue
            for workers in (1, 2, 4):
                row = bench_drain(lib, count, workers, batch)
                drains.append(row)
                print(
                    f"  drained {lib} x{workers} batch {batch}: {row['items_per_s']:,.0f} items/s"
                    f" (lost {row['lost']}, duplicated {row['duplicated']})",
                    file=sys.stderr,
                )
    report["drain"] = drains
    report["drain_vs_peers"] = [
        {
            "batch": batch,
            "workers": workers,
            "ratios": versus(
                {
                    r["library"]: r
                    for r in drains
                    if r["batch"] == batch and r["workers"] == workers and not r["errors"]
                },
                higher=True,
            ),
        }
        for batch in (1, 100)
        for workers in (1, 2, 4)
    ]
    report["wakeup"] = {lib: bench_wakeup(lib, wake) for lib in ("oxide", *PEERS)}
    report["wakeup_vs_peers"] = versus(report["wakeup"])
    missed = print_report(report)
    report["targets"] = {
        "push/pull/peek ratio": TARGET_LATENCY_RATIO,
        "4-worker single drain ratio": TARGET_DRAIN_RATIO,
        "4-worker batched drain items/s": TARGET_BATCHED_RATE,
        "missed": missed,
    }
    elapsed = time.perf_counter() - started
    print(
        "\n"
        + ("every target met" if not missed else "targets missed: " + "; ".join(missed))
        + f"  ({elapsed:.0f} s)"
    )
    if missed:
        print("Why these stay below, and what closing them would cost: " + WHY_BELOW)
    write_json(args.json, report)
    return 0


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
