"""Many processes on one cache: how the aggregate and each call hold up as processes are added
(issue 32), diskcache_oxide beside python-diskcache 5.6.3 and diskcache-community 5.8.1 (plain,
and with ``SafeDisk``, its fix for CVE-2025-69872) in one run.

The workload is python-diskcache's published mix (90% get, 9% set, 1% delete, a set's value
up to about 600 bytes; ``benches/shared.py``), over three key sets, realistic ones first:

- **100,000 keys, uniform**: a working set far bigger than any memo;
- **1,000,000 keys, Zipf(1.1)**: key ``k`` drawn with weight ``1 / (k + 1) ** 1.1``, as a
  real cache's popularity falls off (the popular keys are the low numbers);
- **100 keys, uniform** (memo-friendly: almost every get is answered from memory).

Each key set runs at 1, 2, 4, 8 and 16 processes (``--procs``), each with its own handle on
one directory, started together at a barrier after an untimed warm-up; the cache is filled
first with each key as its value. Every call is timed on its own. A row gives the aggregate
calls per second (all processes' calls over the wall time from the first timed call to the
last) and each action's median, p90 and p99 in microseconds; ratios are the peer's time over
ours (higher is better for us). ``Cache`` and ``FanoutCache(shards=8, timeout=1.0)`` of each
library are run; a FanoutCache set that times out returns False having stored nothing, and
such sets are counted and shown.

Then **a drain**: one queue of items (``push``) emptied by 1 to 16 worker processes
(``pull`` until empty; ours also as a ``JobQueue``, ``take`` then ``finish``): items per
second from the first take to the last.

The bench runs on any core count and says how many it had: on 2 cores, 16 processes measure
contention, not parallelism.

    .venv/bin/python benches/bench_scale.py            # the full run (many minutes)
    .venv/bin/python benches/bench_scale.py --quick    # 10,000 / 100,000 / 100 keys, 1-2 procs

Results are written as JSON to benches/results/scale.json (or ``--json PATH``).
"""

from __future__ import annotations

import argparse
import bisect
import gc
import itertools
import random
import shutil
import sys
import tempfile
import time
from array import array
from typing import Any

import diskcache
from shared import (
    ACTIONS,
    GET,
    SET,
    SPAWN,
    collect,
    fill,
    optional_module,
    run_facts,
    summarize,
    write_json,
)

try:
    import diskcache_oxide
except ImportError:  # pragma: no cover - explained to the user
    sys.exit("diskcache_oxide is not importable: run `make bench` (it builds it first)")

community = optional_module("diskcache_community")

SHARDS = 8
FANOUT_TIMEOUT = 1.0
KINDS = ("Cache", f"FanoutCache({SHARDS})")
ZIPF_S = 1.1

#: A key set this small is almost all answered from the memo of recent reads (D-065): its
#: rows are labelled memo-friendly.
MEMO_KEYS = 256

#: The implementations, in the order of the table's columns: (name, module name, SafeDisk).
LIBRARIES = (
    ("oxide", "diskcache_oxide", False),
    ("python-diskcache", "diskcache", False),
    ("diskcache-community", "diskcache_community", False),
    ("community+SafeDisk", "diskcache_community", True),
)
PEERS = [name for name, _, _ in LIBRARIES[1:]]


def available(library: str) -> bool:
    """Whether ``library`` can be run here (diskcache-community is optional)."""
    module = next(m for name, m, _ in LIBRARIES if name == library)
    return module != "diskcache_community" or community is not None


def open_cache(library: str, kind: str, directory: str) -> Any:
    """A handle of ``kind`` from ``library`` on ``directory`` (run in each spawned process)."""
    _, module_name, safe = next(entry for entry in LIBRARIES if entry[0] == library)
    module = sys.modules.get(module_name) or __import__(module_name)
    extra = {"disk": module.SafeDisk} if safe else {}
    if kind == "Cache":
        return module.Cache(directory, **extra)
    return module.FanoutCache(directory, shards=SHARDS, timeout=FANOUT_TIMEOUT, **extra)


# ---- the key sets ---------------------------------------------------------------------------


class KeySet:
    """How keys are drawn: ``size`` keys, uniformly or with a Zipf popularity."""

    def __init__(self, size: int, zipf: bool) -> None:
        self.size = size
        self.zipf = zipf

    @property
    def label(self) -> str:
        how = f"Zipf({ZIPF_S})" if self.zipf else "uniform"
        return f"{self.size:,} keys, {how}"

    @property
    def memo_friendly(self) -> bool:
        return self.size <= MEMO_KEYS and not self.zipf

    def drawer(self, rng: random.Random) -> Any:
        """A function giving the next key number."""
        if not self.zipf:
            return lambda: rng.randrange(self.size)
        cumulative = list(itertools.accumulate(1.0 / (k + 1) ** ZIPF_S for k in range(self.size)))
        total = cumulative[-1]
        return lambda: bisect.bisect_left(cumulative, rng.random() * total)


def plan(seed: int, ops: int, keys: KeySet) -> list[tuple[int, bytes, bytes]]:
    """``ops`` operations of the 90/9/1 mix over ``keys``: (action, key, value)."""
    rng = random.Random(seed)
    draw = keys.drawer(rng)
    out = []
    for count in range(ops):
        key = str(draw()).encode()
        value = str(count).encode() * rng.randrange(1, 100)
        choice = rng.random()
        action = GET if choice < 0.9 else SET if choice < 0.99 else 2
        out.append((action, key, value))
    return out


# ---- the mix in many processes --------------------------------------------------------------


def mix_worker(
    library: str,
    kind: str,
    directory: str,
    keys: KeySet,
    index: int,
    ops: int,
    warmup: int,
    barrier: Any,
    results: Any,
) -> None:
    """Spawned: open a handle, warm up, wait for the others, run this process's timed calls,
    report (start, end, samples per action, misses per action, error)."""
    error = ""
    samples: list[array[int]] = [array("q"), array("q"), array("q")]
    misses = [0, 0, 0]
    start = end = 0.0
    try:
        timed = plan(index, ops, keys)
        warm = plan(10_000 + index, warmup, keys)
        cache = open_cache(library, kind, directory)
        try:
            calls = (cache.get, cache.set, cache.delete)
            for action, key, value in warm:
                calls[action](key) if action != SET else calls[SET](key, value)
            barrier.wait(timeout=300)
            gc.collect()
            gc.disable()
            clock = time.perf_counter_ns
            start = time.monotonic()
            for action, key, value in timed:
                if action == SET:
                    began = clock()
                    result = calls[SET](key, value)
                    ended = clock()
                    missed = result is False
                else:
                    began = clock()
                    result = calls[action](key)
                    ended = clock()
                    missed = result is None if action == GET else result is False
                samples[action].append(ended - began)
                misses[action] += missed
            end = time.monotonic()
            gc.enable()
        finally:
            cache.close()
    except Exception as exc:  # reported, counted as a failed run
        error = f"{type(exc).__name__}: {exc}"
        barrier.abort()
    results.put((start, end, [a.tobytes() for a in samples], misses, error))


def run_row(
    library: str, kind: str, keys: KeySet, directory: str, procs: int, ops: int, warmup: int
) -> dict[str, Any]:
    """The mix of ``procs`` processes on the filled cache in ``directory``."""
    barrier = SPAWN.Barrier(procs)
    results = SPAWN.Queue()
    workers = [
        SPAWN.Process(
            target=mix_worker,
            args=(library, kind, directory, keys, i, ops, warmup, barrier, results),
        )
        for i in range(procs)
    ]
    for worker in workers:
        worker.start()
    reports = collect(
        results, workers, 600, lambda why: (0.0, 0.0, [b"", b"", b""], [0, 0, 0], why)
    )
    for worker in workers:
        worker.join(60)
        if worker.is_alive():
            worker.kill()
    errors = [r[4] for r in reports if r[4]]
    per_action: list[array[int]] = [array("q"), array("q"), array("q")]
    misses = [0, 0, 0]
    for report in reports:
        for action in range(3):
            per_action[action].frombytes(report[2][action])
            misses[action] += report[3][action]
    stats: dict[str, Any] = {}
    every: array[int] = array("q")
    for name, samples in zip(ACTIONS, per_action, strict=True):
        every.extend(samples)
        if samples:
            stats[name] = summarize(samples)
    if every:
        stats["all"] = summarize(every)
    ok = [r for r in reports if not r[4]]
    wall = max(r[1] for r in ok) - min(r[0] for r in ok) if ok else 0.0
    return {
        "library": library,
        "kind": kind,
        "keys": keys.label,
        "memo_friendly": keys.memo_friendly,
        "processes": procs,
        "ops_per_process": ops,
        "calls": len(every),
        "wall_s": wall,
        "calls_per_s": len(every) / wall if wall > 0 and not errors else 0.0,
        "stats": stats,
        "failed_sets": misses[SET] if kind != "Cache" else 0,
        "errors": errors[:3],
    }


def run_key_set(keys: KeySet, procs_list: list[int], ops: int, warmup: int) -> list[dict[str, Any]]:
    """Every implementation, at every process count, over ``keys``: each on its own directory
    filled once."""
    rows = []
    for kind in KINDS:
        for library, _, _ in LIBRARIES:
            if not available(library):
                continue
            directory = tempfile.mkdtemp(prefix="bench-scale-")
            try:
                cache = open_cache(library, kind, directory)
                began = time.monotonic()
                fill(cache, ((str(k).encode(), str(k).encode()) for k in range(keys.size)))
                cache.close()
                print(
                    f"  {keys.label}: {library} {kind} filled in {time.monotonic() - began:.1f} s",
                    flush=True,
                )
                for procs in procs_list:
                    rows.append(run_row(library, kind, keys, directory, procs, ops, warmup))
            finally:
                shutil.rmtree(directory, ignore_errors=True)
    return rows


# ---- the drain ------------------------------------------------------------------------------

DRAINERS = (
    ("oxide JobQueue", "diskcache_oxide", "jobs"),
    ("oxide pull", "diskcache_oxide", "pull"),
    ("python-diskcache pull", "diskcache", "pull"),
    ("diskcache-community pull", "diskcache_community", "pull"),
)


def drain_worker(module_name: str, how: str, directory: str, barrier: Any, results: Any) -> None:
    """Spawned: take items until the queue is empty; report (first, last, taken, error)."""
    error, taken, first, last = "", 0, 0.0, 0.0
    try:
        module = __import__(module_name)
        cache = module.Cache(directory)
        jobs = module.JobQueue(cache) if how == "jobs" else None
        barrier.wait(timeout=300)
        first = time.monotonic()
        while True:
            if jobs is not None:
                job = jobs.take()
                if job is None:
                    break
                job.finish()
            else:
                key, _ = cache.pull()
                if key is None:
                    break
            taken += 1
        last = time.monotonic()
        cache.close()
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        barrier.abort()
    results.put((first, last, taken, error))


def run_drain(name: str, module_name: str, how: str, items: int, procs: int) -> dict[str, Any]:
    """``items`` pushed, then drained by ``procs`` processes."""
    module = __import__(module_name)
    directory = tempfile.mkdtemp(prefix="bench-scale-drain-")
    try:
        cache = module.Cache(directory)
        if how == "jobs":
            module.JobQueue(cache).put_many(range(items))
        else:
            for i in range(items):
                cache.push(i)
        cache.close()
        barrier = SPAWN.Barrier(procs)
        results = SPAWN.Queue()
        workers = [
            SPAWN.Process(target=drain_worker, args=(module_name, how, directory, barrier, results))
            for _ in range(procs)
        ]
        for worker in workers:
            worker.start()
        reports = collect(results, workers, 600, lambda why: (0.0, 0.0, 0, why))
        for worker in workers:
            worker.join(60)
            if worker.is_alive():
                worker.kill()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    errors = [r[3] for r in reports if r[3]]
    taken = sum(r[2] for r in reports)
    ok = [r for r in reports if not r[3]]
    wall = max(r[1] for r in ok) - min(r[0] for r in ok) if ok else 0.0
    return {
        "drainer": name,
        "processes": procs,
        "items": items,
        "taken": taken,
        "wall_s": wall,
        "items_per_s": taken / wall if wall > 0 and not errors else 0.0,
        "errors": errors[:3],
    }


# ---- the tables -----------------------------------------------------------------------------


def _find(rows: list[dict[str, Any]], library: str, kind: str, procs: int) -> Any:
    return next(
        (
            r
            for r in rows
            if r["library"] == library and r["kind"] == kind and r["processes"] == procs
        ),
        None,
    )


def print_key_set(label: str, rows: list[dict[str, Any]], procs_list: list[int]) -> None:
    """One key set's table: per kind and process count, each library's calls/s, and our get
    and set medians and p90s with the peers' over ours."""
    memo = " (memo-friendly)" if rows and rows[0]["memo_friendly"] else ""
    print(f"\n{label}{memo}: aggregate calls/s (peer's ratio: ours / theirs, higher is better)")
    present = [name for name, _, _ in LIBRARIES if available(name)]
    head = f"{'':<18}{'procs':>6}" + "".join(f"{name:>22}" for name in present)
    print(head)
    print("-" * len(head))
    for kind in KINDS:
        shown = kind
        for procs in procs_list:
            ours = _find(rows, "oxide", kind, procs)
            line = f"{shown:<18}{procs:>6}"
            for name in present:
                row = _find(rows, name, kind, procs)
                if row is None or not row["calls_per_s"]:
                    line += f"{'failed' if row else '-':>22}"
                    continue
                cell = f"{row['calls_per_s']:,.0f}"
                if name != "oxide" and ours and ours["calls_per_s"]:
                    cell += f" ({ours['calls_per_s'] / row['calls_per_s']:.2f}x)"
                line += f"{cell:>22}"
            print(line)
            shown = ""
    print(f"\n{label}: per call, microseconds (median / p90 / p99), ours and each peer's over ours")
    for kind in KINDS:
        for procs in procs_list:
            ours = _find(rows, "oxide", kind, procs)
            if ours is None:
                continue
            for action in ("get", "set"):
                mine = ours["stats"].get(action)
                if mine is None:
                    continue
                line = (
                    f"{kind:<18}{procs:>3} {action:<4} ours "
                    f"{mine['median_us']:7.2f} / {mine['p90_us']:7.2f} / {mine['p99_us']:8.2f}"
                )
                for name in PEERS:
                    row = _find(rows, name, kind, procs)
                    theirs = row["stats"].get(action) if row else None
                    if theirs is None:
                        continue
                    ratios = "/".join(
                        f"{theirs[s] / mine[s]:.2f}" for s in ("median_us", "p90_us", "p99_us")
                    )
                    line += f"  {name} {ratios}"
                print(line)
    for row in rows:
        if row["errors"]:
            print(f"  {row['library']} {row['kind']} x{row['processes']}: ERRORS {row['errors']}")
        if row["failed_sets"]:
            print(
                f"  {row['library']} {row['kind']} x{row['processes']}: {row['failed_sets']} "
                "sets timed out (returned False, stored nothing)"
            )


def print_drains(rows: list[dict[str, Any]], procs_list: list[int]) -> None:
    print("\nA drain of one queue: items/s (ours over theirs)")
    names = [name for name, module, _ in DRAINERS if module != "diskcache_community" or community]
    head = f"{'procs':>6}" + "".join(f"{name:>28}" for name in names)
    print(head)
    print("-" * len(head))
    for procs in procs_list:
        line = f"{procs:>6}"
        ours = next(
            (r for r in rows if r["drainer"] == "oxide pull" and r["processes"] == procs), None
        )
        for name in names:
            row = next((r for r in rows if r["drainer"] == name and r["processes"] == procs), None)
            if row is None or not row["items_per_s"]:
                line += f"{'failed' if row else '-':>28}"
                continue
            cell = f"{row['items_per_s']:,.0f}"
            if (
                name.endswith("pull")
                and not name.startswith("oxide")
                and ours
                and ours["items_per_s"]
            ):
                cell += f" ({ours['items_per_s'] / row['items_per_s']:.2f}x)"
            line += f"{cell:>28}"
        print(line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small key sets, 1 and 2 processes")
    parser.add_argument("--procs", type=int, nargs="+", help="process counts (default 1 2 4 8 16)")
    parser.add_argument("--ops", type=int, help="timed calls per process (default 20,000)")
    parser.add_argument(
        "--keys",
        type=int,
        nargs=3,
        metavar=("UNIFORM", "ZIPF", "SMALL"),
        help="the three key sets' sizes (default 100,000, 1,000,000 and 100)",
    )
    parser.add_argument("--json", default="benches/results/scale.json")
    args = parser.parse_args(argv)
    if args.quick:
        key_sets = [KeySet(10_000, False), KeySet(100_000, True), KeySet(100, False)]
        procs_list = args.procs or [1, 2]
        ops, warmup, drain_items = args.ops or 500, 100, 1_000
    else:
        key_sets = [KeySet(100_000, False), KeySet(1_000_000, True), KeySet(100, False)]
        procs_list = args.procs or [1, 2, 4, 8, 16]
        ops, warmup, drain_items = args.ops or 20_000, 2_000, 20_000
    if args.keys:
        key_sets = [
            KeySet(args.keys[0], False),
            KeySet(args.keys[1], True),
            KeySet(args.keys[2], False),
        ]
    facts = run_facts()
    print(
        f"bench_scale: {facts['cpus']} CPUs ({facts['machine']}, Python {facts['python']}); "
        f"python-diskcache {diskcache.__version__}, diskcache-community "
        f"{getattr(community, '__version__', 'not installed')}, "
        f"diskcache_oxide {diskcache_oxide.__version__}; {ops:,} calls per process",
        flush=True,
    )
    if community is None:
        print(
            "  diskcache-community is not installed: its columns are skipped (`make bench` has it)"
        )
    rows: list[dict[str, Any]] = []
    for keys in key_sets:
        found = run_key_set(keys, procs_list, ops, warmup)
        rows += found
        print_key_set(keys.label, found, procs_list)
    drains = []
    for name, module, how in DRAINERS:
        if module == "diskcache_community" and community is None:
            continue
        for procs in procs_list:
            drains.append(run_drain(name, module, how, drain_items, procs))
    print_drains(drains, procs_list)
    write_json(
        args.json,
        {
            **facts,
            "quick": args.quick,
            "diskcache_version": diskcache.__version__,
            "community": community is not None,
            "oxide_version": diskcache_oxide.__version__,
            "ops_per_process": ops,
            "processes": procs_list,
            "results": rows,
            "drains": drains,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
