"""Load: many processes and many threads on one cache for a bounded time, without an error.

``test_soak`` runs 16 spawned processes on one directory (helpers/load_workers.py): 8 do a
90/9/1 get/set/delete mix over 1,000 keys (values of 10 B to 96 KiB, 3% of the sets value
files of 32 KiB or more; every value read is checked byte for byte), 4 producers push
items ``"{producer}:{seq}"`` (every 4th on a ``JobQueue`` instead), 3 workers take them
with a blocking ``pull(timeout=0.5)`` and one with ``JobQueue.take(timeout=0.5)`` and
``finish`` (and a non-blocking ``pull`` now and then). Every handle uses the default
timeout (60 s) and no ``retry``. Afterwards: no errors, no ``Timeout``; every item
produced was taken exactly once, by a worker or by the drain of what was left; ``check()``
finds nothing and ``PRAGMA integrity_check`` is ok; no process's resident memory grew by
10% or more after its warm-up (the first third of the run, at least 2 s).

``DCO_SOAK_SECONDS`` sets how long the processes run (default 4 s: about 7 s for the test
on two cores; ``make soak`` runs 60). ``DCO_SOAK_REPORT=path`` writes the figures as JSON
(with the largest size the WAL file reached); ``-s`` shows a one-line summary.

``test_the_wal_stays_bounded_while_processes_read_and_write`` is the soak's memory growth
made small: the WAL is never restarted while readers overlap, so it grows without bound.

``test_threads_share_one_handle`` runs 16 threads on one ``Cache`` handle, mixing plain
calls with ``transact()`` blocks, for a few seconds; a deadlock fails the test (every join
has a timeout) instead of hanging it. The FanoutCache variant does the same over 4 shards.
"""

from __future__ import annotations

import collections
import json
import multiprocessing
import os
import random
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import load_workers as lw
import pytest
import support

SPAWN = multiprocessing.get_context("spawn")
SECONDS = float(os.environ.get("DCO_SOAK_SECONDS", "") or 4)
WARM_UP = max(2.0, SECONDS / 3)
MAX_GROWTH = 0.10
CACHE_PROCS, PRODUCERS, PULLERS, TAKERS = 8, 4, 3, 1
CRASHERS = str(Path(__file__).resolve().parents[1] / "helpers" / "crashers.py")
THREADS = 16
THREAD_SECONDS = 3.0

pytestmark = [pytest.mark.slow]


# ------------------------------------------------------------------------------- the soak


def integrity(directory: str) -> str:
    """PRAGMA integrity_check by Python's sqlite3, read-only, in a process of its own
    (see crashers.inspect and docs/reliability.md, "Found")."""
    done = subprocess.run(
        [sys.executable, CRASHERS, "inspect"],
        input=f"integrity {os.path.join(directory, 'cache.db')}\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout))


def growth(samples: list[list[float]]) -> tuple[float, float, int]:
    """(RSS growth, RssAnon growth) after the warm-up, as fractions of the RSS at its end,
    and that RSS."""
    after = [s for s in samples if s[0] >= WARM_UP]
    assert len(after) >= 2, f"too few samples after the warm-up: {samples}"
    base_rss, base_anon = after[0][1], after[0][2]
    top_rss = max(s[1] for s in after)
    top_anon = max(s[2] for s in after)
    return top_rss / base_rss - 1, top_anon / base_anon - 1, int(base_rss)


def drain(dc: Any, directory: str) -> list[str]:
    """Everything still queued, pulled and taken by the test."""
    cache = dc.Cache(directory)
    try:
        left: list[str] = []
        while True:
            key, value = cache.pull(prefix=lw.QUEUE)
            if key is None:
                break
            left.append(value)
        jobs = dc.JobQueue(cache, lw.JOBS, lease=600)
        while (job := jobs.take()) is not None:
            assert jobs.finish(job)
            left.append(job.value)
        assert tuple(jobs.counts()) == (0, 0, 0, 0), jobs.counts()
        return left
    finally:
        cache.close()


@dataclass
class Run:
    reports: list[dict[str, Any]]
    logs: list[str]  # the pullers' and takers' logs of what they took
    seconds: float  # from the barrier to the last exit
    wal_max: int  # the largest size of cache.db-wal seen while they ran


def run_processes(
    tmp: Path, directory: str, roles: list[tuple[str, int, Any]], seconds: float
) -> Run:
    """Spawn one process per role, start them together, and wait for them (at most 60 s
    past ``seconds``), watching the size of the WAL file meanwhile."""
    barrier = SPAWN.Barrier(len(roles) + 1)
    processes = []
    outs: list[str] = []
    logs: list[str] = []
    for role, index, body in roles:
        out = str(tmp / f"{role}{index}.json")
        args: tuple[Any, ...] = (support.IMPL_NAME, directory, index, seconds, barrier, out)
        if role in ("puller", "taker"):
            log = str(tmp / f"{role}{index}.log")
            args += (log,)
            logs.append(log)
        p = SPAWN.Process(target=body, args=args, daemon=True)
        p.start()
        processes.append(p)
        outs.append(out)
    barrier.wait(timeout=120)
    start = time.monotonic()
    deadline = start + seconds + 60
    wal = os.path.join(directory, "cache.db-wal")
    wal_max = 0
    while any(p.is_alive() for p in processes) and time.monotonic() < deadline:
        try:
            wal_max = max(wal_max, os.path.getsize(wal))
        except FileNotFoundError:
            pass
        processes[0].join(0.25)
    ran = time.monotonic() - start
    stuck = [p for p in processes if p.is_alive()]
    for p in stuck:
        p.kill()
        p.join(10)
    assert not stuck, f"{len(stuck)} processes still running {seconds + 60:.0f} s after the start"
    assert all(p.exitcode == 0 for p in processes), [p.exitcode for p in processes]
    reports = [json.loads(Path(out).read_text()) for out in outs]
    return Run(reports, logs, ran, wal_max)


def seed_keys(directory: str, dc: Any) -> None:
    cache = dc.Cache(directory)
    with cache.transact():
        for k in range(lw.KEYS):
            cache.set(f"k{k}", lw.key_value(k, 99, 0, 100))
    cache.close()


@pytest.mark.oxide
@pytest.mark.timeout(max(300, int(SECONDS * 4) + 120))
def test_soak(tmp_path: Path, dc: Any) -> None:
    directory = str(tmp_path / "cache")
    seed_keys(directory, dc)

    roles = (
        [("cache", i, lw.cache_worker) for i in range(CACHE_PROCS)]
        + [("producer", i, lw.producer) for i in range(PRODUCERS)]
        + [("puller", i, lw.puller) for i in range(PULLERS)]
        + [("taker", i, lw.taker) for i in range(TAKERS)]
    )
    started = time.monotonic()
    run = run_processes(tmp_path, directory, roles, SECONDS)
    reports, logs = run.reports, run.logs

    # exactly once: everything produced was taken by a worker or is still queued
    taken = [line for log in logs for line in Path(log).read_text().splitlines()]
    left = drain(dc, directory)
    produced = {r["index"]: r["produced"] for r in reports if r["role"] == "producer"}
    uncertain = {
        f"{r['index']}:{s}" for r in reports if r["role"] == "producer" for s in r["uncertain"]
    }
    expected = {f"{p}:{s}" for p, n in produced.items() for s in range(n)}
    seen = collections.Counter(taken + left)
    duplicates = sorted(item for item, n in seen.items() if n > 1)
    lost = sorted(expected - set(seen) - uncertain)
    unknown = sorted(set(seen) - expected)

    cache = dc.Cache(directory)
    try:
        found = [str(w.message) for w in cache.check()]
    finally:
        cache.close()
    verdict = integrity(directory)

    # figures
    ops: collections.Counter[str] = collections.Counter()
    for r in reports:
        ops.update(r["ops"])
    memory = []
    for r in reports:
        rss_growth, anon_growth, base = growth(r["samples"])
        memory.append((rss_growth, anon_growth, base, f"{r['role']}{r['index']}"))
    worst = max(memory)
    figures: dict[str, Any] = {
        "seconds": SECONDS,
        "warm_up": WARM_UP,
        "run_seconds": round(run.seconds, 1),
        "wall_seconds": round(time.monotonic() - started, 1),
        "ops": dict(sorted(ops.items())),
        "ops_per_second": {k: round(v / SECONDS) for k, v in sorted(ops.items())},
        "produced": sum(produced.values()),
        "taken_by_workers": len(taken),
        "left_and_drained": len(left),
        "throttled_seconds": round(sum(r.get("throttled", 0) for r in reports), 1),
        "wal_max_mib": round(run.wal_max / 2**20, 1),
        "max_rss_growth_pct": round(100 * worst[0], 2),
        "max_rss_growth_process": worst[3],
        "max_rss_anon_growth_pct": round(100 * max(m[1] for m in memory), 2),
        "rss_growth_pct": {m[3]: round(100 * m[0], 2) for m in memory},
        "rss_after_warm_up_mib": {m[3]: round(m[2] / 2**20, 1) for m in memory},
        "errors": sum(r["error_count"] for r in reports),
        "timeouts": sum(r["timeouts"] for r in reports),
        "duplicates": len(duplicates),
        "lost": len(lost),
        "check": found,
        "integrity": verdict,
    }
    rates = figures["ops_per_second"]
    print(
        f"\nload soak: {SECONDS:.0f} s, {len(roles)} processes; ops/s "
        + ", ".join(f"{k} {v}" for k, v in rates.items())
        + f"; max RSS growth {figures['max_rss_growth_pct']}% ({worst[3]});"
        + f" WAL up to {figures['wal_max_mib']} MiB;"
        + f" errors {figures['errors']}, timeouts {figures['timeouts']}"
    )
    report = os.environ.get("DCO_SOAK_REPORT")
    if report:
        Path(report).write_text(json.dumps(figures, indent=2) + "\n")

    errors = [e for r in reports for e in r["errors"]]
    assert errors == [], "\n".join(errors)
    assert figures["timeouts"] == 0
    assert duplicates == [], f"{len(duplicates)} items taken twice: {duplicates[:10]}"
    assert lost == [], f"{len(lost)} items lost: {lost[:10]}"
    assert unknown == [], f"items never produced: {unknown[:10]}"
    assert found == [], found
    assert verdict == "ok", verdict
    assert ops["get"] and ops["set_file"] and ops["delete"] and ops["finish"], ops
    grown = [m for m in memory if m[0] >= MAX_GROWTH]
    assert grown == [], "RSS grew after the warm-up: " + ", ".join(
        f"{name} +{100 * g:.1f}% (anon +{100 * a:.1f}%) of {base / 2**20:.1f} MiB"
        for g, a, base, name in grown
    )


WAL_LIMIT = 64 * 2**20


@pytest.mark.oxide
@pytest.mark.timeout(300)
def test_the_wal_stays_bounded_while_processes_read_and_write(tmp_path: Path, dc: Any) -> None:
    """4 processes doing the soak's 90/9/1 get/set/delete mix for 3 s. SQLite checkpoints the
    WAL every 1,000 pages, but only a writer that finds no reader in the WAL can start it again
    from the beginning; readers that always overlap starve that restart and the WAL grows
    without bound (about 100 MiB/s here), and with it the WAL index each process maps (the
    soak's RSS growth: 8 MiB of -shm per process after 35 s). A healthy WAL stays within a few
    checkpoints' worth of pages."""
    directory = str(tmp_path / "cache")
    seed_keys(directory, dc)
    run = run_processes(tmp_path, directory, [("cache", i, lw.cache_worker) for i in range(4)], 3)
    errors = [e for r in run.reports for e in r["errors"]]
    assert errors == [], "\n".join(errors)
    sets = sum(r["ops"].get("set", 0) for r in run.reports)
    print(f"\nWAL up to {run.wal_max / 2**20:.1f} MiB after {sets} sets in {run.seconds:.1f} s")
    assert run.wal_max < WAL_LIMIT, (
        f"cache.db-wal grew to {run.wal_max / 2**20:.0f} MiB in {run.seconds:.1f} s "
        f"({sets} sets): checkpoint starvation, the WAL is never restarted"
    )


# ------------------------------------------------------------------------------- threads


class Thread:
    """What one thread of a thread test has: its index, its random numbers, its count of calls
    so far, the calls it made by kind, and a way to report a problem."""

    def __init__(self, index: int, errors: list[str], lock: threading.Lock) -> None:
        self.index = index
        self.rng = random.Random(index)
        self.n = 0
        self.ops: collections.Counter[str] = collections.Counter()
        self._errors = errors
        self._lock = lock

    def report(self, problem: str) -> None:
        with self._lock:
            self._errors.append(f"thread {self.index}: {problem}")


def run_threads(step: Any, seconds: float) -> tuple[list[str], collections.Counter[str]]:
    """Call ``step(thread)`` over and over in ``THREADS`` daemon threads for ``seconds``; an
    exception is reported, not fatal. Returns the problems and the calls made by kind. Fails
    (with every thread's stack) if a thread is still running 30 s after the deadline."""
    errors: list[str] = []
    lock = threading.Lock()
    ops: collections.Counter[str] = collections.Counter()
    deadline = time.monotonic() + seconds

    def body(index: int) -> None:
        me = Thread(index, errors, lock)
        while time.monotonic() < deadline and len(errors) <= 50:
            me.n += 1
            try:
                step(me)
            except Exception as exc:
                me.report(repr(exc))
        with lock:
            ops.update(me.ops)

    threads = [
        threading.Thread(target=body, args=(i,), daemon=True, name=f"load-{i}")
        for i in range(THREADS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.1, deadline + 30 - time.monotonic()))
    stuck = [t for t in threads if t.is_alive()]
    if stuck:
        frames = sys._current_frames()
        stacks = "\n".join(
            f"--- {t.name}\n" + "".join(traceback.format_stack(frames[t.ident]))
            for t in stuck
            if t.ident in frames
        )
        pytest.fail(f"{len(stuck)} threads deadlocked (still running 30 s late):\n{stacks}")
    return errors, ops


def move_and_check(cache: Any, me: Thread, r: float, move_below: float, read_below: float) -> bool:
    """The two-counter invariant under ``transact()``: below ``move_below`` move some of the
    total from one counter to the other, below ``read_below`` read both in one snapshot.
    Returns whether it made a call."""
    if r < move_below:
        move = me.rng.randrange(-50, 51)
        with cache.transact():
            a, b = cache.get("a"), cache.get("b")
            assert cache.set("a", a - move) is not False and cache.set("b", b + move) is not False
        me.ops["tx_move"] += 1
    elif r < read_below:
        with cache.transact():
            a, b = cache.get("a"), cache.get("b")
        if a + b != TOTAL:
            me.report(f"a + b = {a} + {b} inside transact()")
        me.ops["tx_read"] += 1
    else:
        return False
    return True


def get_and_check(cache: Any, me: Thread) -> None:
    key = me.rng.choice(("a", "b", f"big{me.rng.randrange(THREADS)}", f"k{me.n % 50}"))
    value = cache.get(key)
    if key.startswith("big") and (problem := check_big(value, int(key[3:]))):
        me.report(f"{key}: {problem}")
    me.ops["get"] += 1


TOTAL = 1_000_000  # what the two counters hold together


def check_big(value: Any, i: int) -> str | None:
    problem = support.check_payload(value)
    if problem is None and value is not None and int.from_bytes(value[:8], "little") % 100 != i:
        problem = "holds another thread's value"
    return problem


@pytest.mark.timeout(120)
def test_threads_share_one_handle(tmp_path: Path, dc: Any) -> None:
    cache = dc.Cache(str(tmp_path / "cache"))
    cache.set("a", TOTAL)
    cache.set("b", 0)
    incrs = [0] * THREADS
    big_writes = [0] * THREADS
    pushed: list[list[str]] = [[] for _ in range(THREADS)]
    pulled: list[list[str]] = [[] for _ in range(THREADS)]

    def step(me: Thread) -> None:
        i, n, rng, r = me.index, me.n, me.rng, me.rng.random()
        if move_and_check(cache, me, r, 0.12, 0.17):
            pass
        elif r < 0.20:  # a transaction that writes a value file
            with cache.transact():
                cache.set(f"big{i}", support.payload(n * 100 + i, 40_000 + n % 1000))
                cache.incr(f"bigcount{i}")
            big_writes[i] += 1
            me.ops["tx_file"] += 1
        elif r < 0.45:
            get_and_check(cache, me)
        elif r < 0.57:
            cache.set(f"k{rng.randrange(50)}", "x" * rng.randrange(1, 3000))
            me.ops["set"] += 1
        elif r < 0.62:
            cache.delete(f"k{rng.randrange(50)}")
            me.ops["delete"] += 1
        elif r < 0.67:
            cache.add(f"k{rng.randrange(50)}", n)
            me.ops["add"] += 1
        elif r < 0.77:
            cache.incr("hits")
            incrs[i] += 1
            me.ops["incr"] += 1
        elif r < 0.88:
            item = f"{i}:{n}"
            cache.push(item, prefix="t")
            pushed[i].append(item)
            me.ops["push"] += 1
        else:
            key, item = cache.pull(prefix="t", timeout=0.05)
            if key is not None:
                pulled[i].append(item)
            me.ops["pull"] += 1

    errors, ops = run_threads(step, THREAD_SECONDS)
    try:
        print(f"\nthreads on one Cache handle: {dict(ops)}")
        assert errors == [], "\n".join(errors[:20])
        assert cache.get("a") + cache.get("b") == TOTAL
        assert cache.get("hits") == sum(incrs)
        for i in range(THREADS):
            assert cache.get(f"bigcount{i}", 0) == big_writes[i]
            assert check_big(cache.get(f"big{i}"), i) is None
        left = []
        while (item := cache.pull(prefix="t"))[0] is not None:
            left.append(item[1])
        everything = [x for xs in pulled for x in xs] + left
        assert sorted(everything) == sorted(x for xs in pushed for x in xs)
        assert all(ops[k] for k in ("tx_move", "tx_read", "tx_file", "incr", "push", "pull"))
        assert [str(w.message) for w in cache.check()] == []
    finally:
        cache.close()


@pytest.mark.timeout(120)
def test_threads_share_one_fanout_handle(tmp_path: Path, dc: Any) -> None:
    """As above over a FanoutCache of 4 shards (default timeout, 10 ms: a call that finds its
    shard locked fails quietly, returning False or None, and is not counted as done);
    ``transact()`` locks every shard, so the two counters may sit on different shards."""
    cache = dc.FanoutCache(str(tmp_path / "fanout"), shards=4)
    assert cache.set("a", TOTAL, retry=True) and cache.set("b", 0, retry=True)
    incrs = [0] * THREADS

    def step(me: Thread) -> None:
        i, n, rng, r = me.index, me.n, me.rng, me.rng.random()
        if move_and_check(cache, me, r, 0.10, 0.15):
            pass
        elif r < 0.18:
            with cache.transact():
                assert cache.set(f"big{i}", support.payload(n * 100 + i, 40_000))
            me.ops["tx_file"] += 1
        elif r < 0.50:
            get_and_check(cache, me)
        elif r < 0.70:
            done = cache.set(f"k{rng.randrange(50)}", "x" * rng.randrange(1, 3000))
            me.ops["set" if done else "set_locked"] += 1
        elif r < 0.75:
            cache.delete(f"k{rng.randrange(50)}")
            me.ops["delete"] += 1
        elif r < 0.80:
            cache.add(f"k{rng.randrange(50)}", n)
            me.ops["add"] += 1
        elif cache.incr("hits") is not None:
            incrs[i] += 1
            me.ops["incr"] += 1
        else:
            me.ops["incr_locked"] += 1

    errors, ops = run_threads(step, THREAD_SECONDS)
    try:
        print(f"\nthreads on one FanoutCache handle: {dict(ops)}")
        assert errors == [], "\n".join(errors[:20])
        assert cache.get("a", retry=True) + cache.get("b", retry=True) == TOTAL
        assert cache.get("hits", retry=True) == sum(incrs)
        assert all(ops[k] for k in ("tx_move", "tx_read", "tx_file", "incr"))
        assert [str(w.message) for w in cache.check()] == []
    finally:
        cache.close()
