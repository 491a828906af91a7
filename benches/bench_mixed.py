"""python-diskcache's published mixed workload, diskcache_oxide beside python-diskcache 5.6.3.

The workload of python-diskcache's documentation page "DiskCache Cache Benchmarks" (its
tests/benchmark_core.py), measured here the same way for both libraries in one run:

- 100 keys, ``str(randrange(100)).encode()``: bytes keys; pre-filled with each key as its value;
- each operation is a get (90%), a set (9%) or a delete (1%), chosen at random; a set's value
  is ``str(op_number).encode()`` repeated 1 to 99 times (bytes of up to about 600 bytes);
- 1 process, then 4 processes (spawned), each with its own handle on the same directory and
  the same number of operations, seeded by its number (so each library gets the very same
  operations); a warm-up of the same mix before the timed operations is not counted;
- every call is timed on its own (``time.perf_counter_ns``, garbage collector off); the table
  shows per-call median, p90, p99 and max for get, set, delete and all calls, and the wall time
  from the first process's first timed call to the last process's last one.

Implementations: ``Cache(directory)`` and ``FanoutCache(directory, shards=4, timeout=1.0)``
(the shard count and timeout of python-diskcache's published FanoutCache row) of each library,
with default settings otherwise. Ratios are python-diskcache / oxide (higher is better for
oxide). A FanoutCache swallows a lock timeout: its set then returns False having stored
nothing, which is quick and would flatter the numbers, so such sets are counted and shown.

diskcache-rs is left out: it does not store bytes keys (its ``set`` of a bytes key returns
False), which this workload uses throughout.

    .venv/bin/python benches/bench_mixed.py            # full run: 100,000 ops per process
    .venv/bin/python benches/bench_mixed.py --quick    # a short smoke run

Results are written as JSON to benches/results/mixed.json (or --json PATH).
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from array import array
from pathlib import Path
from typing import Any

import diskcache
from shared import collect, summarize, write_json

try:
    import diskcache_oxide
except ImportError:  # pragma: no cover - explained to the user
    sys.exit("diskcache_oxide is not importable: run `make bench` (it builds it first)")

ROOT = Path(__file__).resolve().parent
SPAWN = multiprocessing.get_context("spawn")
KEYS = 100
SHARDS = 4
FANOUT_TIMEOUT = 1.0
ACTIONS = ("get", "set", "delete")
GET, SET, DELETE = range(3)
LIBRARIES = {"python-diskcache": diskcache, "oxide": diskcache_oxide}
KINDS = ("Cache", f"FanoutCache(shards={SHARDS})")
STATS = ("median_us", "p90_us", "p99_us", "max_us")


def open_cache(library: str, kind: str, directory: str) -> Any:
    module = LIBRARIES[library]
    if kind == "Cache":
        return module.Cache(directory)
    return module.FanoutCache(directory, shards=SHARDS, timeout=FANOUT_TIMEOUT)


Plan = list[tuple[int, bytes, bytes]]


def plan(seed: int, ops: int) -> Plan:
    """``ops`` operations of the mix: (action, key, value), drawn as python-diskcache draws
    them (key, then value, then the action, per operation)."""
    rng = random.Random(seed)
    out: Plan = []
    for count in range(ops):
        key = str(rng.randrange(KEYS)).encode()
        value = str(count).encode() * rng.randrange(1, 100)
        choice = rng.random()
        action = GET if choice < 0.9 else SET if choice < 0.99 else DELETE
        out.append((action, key, value))
    return out


def run_plan(cache: Any, ops: Plan, timed: bool) -> tuple[list[array[int]], list[int]]:
    """Do the operations; return nanoseconds per call and the misses (a get finding nothing,
    a set or delete returning False) per action."""
    samples: list[array[int]] = [array("q"), array("q"), array("q")]
    misses = [0, 0, 0]
    clock = time.perf_counter_ns
    get, set_, delete = cache.get, cache.set, cache.delete
    for action, key, value in ops:
        if action == GET:
            start = clock()
            result = get(key)
            end = clock()
            missed = result is None
        elif action == SET:
            start = clock()
            result = set_(key, value)
            end = clock()
            missed = result is False
        else:
            start = clock()
            result = delete(key)
            end = clock()
            missed = result is False
        if timed:
            samples[action].append(end - start)
        misses[action] += missed
    return samples, misses


def worker(
    library: str,
    kind: str,
    directory: str,
    index: int,
    ops: int,
    warmup: int,
    barrier: Any,
    results: Any,
) -> None:
    """Spawned: open a handle, warm up, wait for the others, run the timed operations, report
    (index, start, end, samples per action, misses per action, error)."""
    error = ""
    samples: list[array[int]] = [array("q"), array("q"), array("q")]
    misses = [0, 0, 0]
    start = end = 0.0
    try:
        timed_ops = plan(index, ops)
        warm_ops = plan(1000 + index, warmup)
        cache = open_cache(library, kind, directory)
        try:
            run_plan(cache, warm_ops, timed=False)
            barrier.wait(timeout=120)
            gc.collect()
            gc.disable()
            start = time.monotonic()
            samples, misses = run_plan(cache, timed_ops, timed=True)
            end = time.monotonic()
            gc.enable()
        finally:
            cache.close()
    except Exception as exc:  # reported, counted as a failed run
        error = f"{type(exc).__name__}: {exc}"
        barrier.abort()
    results.put((index, start, end, [a.tobytes() for a in samples], misses, error))


def run_mixed(library: str, kind: str, procs: int, ops: int, warmup: int) -> dict[str, Any]:
    directory = tempfile.mkdtemp(prefix=f"bench-mixed-{library}-")
    try:
        cache = open_cache(library, kind, directory)
        for key in range(KEYS):
            cache.set(str(key).encode(), str(key).encode())
        cache.close()
        barrier = SPAWN.Barrier(procs)
        results = SPAWN.Queue()
        workers = [
            SPAWN.Process(
                target=worker,
                args=(library, kind, directory, i, ops, warmup, barrier, results),
            )
            for i in range(procs)
        ]
        for p in workers:
            p.start()
        reports = collect(
            results, workers, 1800, lambda why: (-1, 0.0, 0.0, [b"", b"", b""], [0, 0, 0], why)
        )
        for p in workers:
            p.join(60)
            if p.is_alive():
                p.kill()
    finally:
        shutil.rmtree(directory, ignore_errors=True)

    errors = [r[5] for r in reports if r[5]]
    per_action: list[array[int]] = [array("q"), array("q"), array("q")]
    misses = [0, 0, 0]
    for r in reports:
        for action in range(3):
            per_action[action].frombytes(r[3][action])
            misses[action] += r[4][action]
    every: array[int] = array("q")
    for samples in per_action:
        every.extend(samples)
    stats: dict[str, Any] = {}
    for name, samples, missed in zip(ACTIONS, per_action, misses, strict=True):
        if samples:
            stats[name] = summarize(samples)
            stats[name]["misses"] = missed
    if every:
        stats["all"] = summarize(every)
    ok = [r for r in reports if not r[5]]
    wall = max(r[2] for r in ok) - min(r[1] for r in ok) if ok else 0.0
    return {
        "library": library,
        "kind": kind,
        "processes": procs,
        "ops_per_process": ops,
        "calls": len(every),
        "wall_s": wall,
        "ops_per_s": len(every) / wall if wall > 0 else 0.0,
        "stats": stats,
        "failed_sets": misses[SET] if kind != "Cache" else 0,
        "errors": errors[:3],
    }


def compare(dc: dict[str, Any], ox: dict[str, Any]) -> dict[str, Any]:
    """python-diskcache / oxide for each statistic of each action, and for the wall time."""
    ratios: dict[str, Any] = {}
    for action, s in dc["stats"].items():
        o = ox["stats"].get(action)
        if o is not None:
            ratios[action] = {stat: s[stat] / o[stat] if o[stat] > 0 else None for stat in STATS}
    ratios["wall"] = dc["wall_s"] / ox["wall_s"] if ox["wall_s"] > 0 else None
    return ratios


# ----------------------------------------------------------------------------- output


W_LABEL, W_OP, W_STAT, W_RATIO = 23, 7, 8, 8
W_BLOCK = 4 * W_STAT


def cell(x: float) -> str:
    text = f"{x:,.1f}" if x < 10_000 else f"{x / 1000:,.1f}ms"
    return f"{text:>{W_STAT}}"


def ratio_cell(x: float | None) -> str:
    if x is None:
        return f"{'-':>{W_RATIO}}"
    text = f"{x:.2f}x" if x < 10 else f"{x:.1f}x" if x < 100 else f"{x:,.0f}x"
    return f"{text:>{W_RATIO}}"


def print_rows(rows: list[dict[str, Any]]) -> None:
    names = ("median", "p90", "p99", "max")
    stat_head = "".join(f"{h:>{W_STAT}}" for h in names)
    ratio_head = "".join(f"{h:>{W_RATIO}}" for h in names)
    for procs in sorted({r["processes"] for r in rows}):
        group = [r for r in rows if r["processes"] == procs]
        ops = group[0]["ops_per_process"]
        print(
            f"{procs} process{'es' if procs > 1 else ''} x {ops:,} operations each"
            " (per call, microseconds; ms where marked)"
        )
        print(
            f"{'':<{W_LABEL + W_OP}}{'python-diskcache':>{W_BLOCK}}{'diskcache_oxide':>{W_BLOCK}}"
            f"{'python-diskcache / oxide':>{4 * W_RATIO}}"
        )
        head = f"{'':<{W_LABEL}}{'op':<{W_OP}}{stat_head}{stat_head}{ratio_head}"
        print(head)
        print("-" * len(head))
        for kind in KINDS:
            dc = next(r for r in group if r["kind"] == kind and r["library"] == "python-diskcache")
            ox = next(r for r in group if r["kind"] == kind and r["library"] == "oxide")
            ratios = compare(dc, ox)
            label = kind
            for action in (*ACTIONS, "all"):
                s, o = dc["stats"].get(action), ox["stats"].get(action)
                if s is None or o is None:
                    continue
                line = f"{label:<{W_LABEL}}{action:<{W_OP}}"
                line += "".join(cell(s[stat]) for stat in STATS)
                line += "".join(cell(o[stat]) for stat in STATS)
                line += "".join(ratio_cell(ratios[action][stat]) for stat in STATS)
                print(line)
                label = ""
            dc_wall = f"{dc['wall_s']:.2f} s, {dc['ops_per_s']:,.0f} ops/s"
            ox_wall = f"{ox['wall_s']:.2f} s, {ox['ops_per_s']:,.0f} ops/s"
            print(
                f"{'':<{W_LABEL}}{'wall':<{W_OP}}{dc_wall:>{W_BLOCK}}{ox_wall:>{W_BLOCK}}"
                f"{ratio_cell(ratios['wall'])}"
            )
            for r in (dc, ox):
                if r["failed_sets"]:
                    print(
                        f"{'':<{W_LABEL}}{r['library']}: {r['failed_sets']} sets timed out"
                        " (returned False, stored nothing)"
                    )
                if r["errors"]:
                    print(f"{'':<{W_LABEL}}{r['library']}: ERRORS {r['errors']}")
        print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run")
    parser.add_argument("--ops", type=int, default=None, help="operations per process")
    parser.add_argument("--json", default=str(ROOT / "results" / "mixed.json"))
    args = parser.parse_args(argv)

    ops = args.ops or (2000 if args.quick else 100_000)
    warmup = min(1000, max(100, ops // 10))
    print(
        f"diskcache_oxide {diskcache_oxide.__version__} vs python-diskcache"
        f" {diskcache.__version__}: python-diskcache's mixed workload\n"
        f"Python {platform.python_version()} | {platform.machine()} {os.cpu_count()} cpu"
        f" | 90% get, 9% set, 1% delete over {KEYS} bytes keys, bytes values;"
        f" {ops:,} ops per process after {warmup:,} untimed\n"
    )
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for procs in (1, 4):
        for kind in KINDS:
            for library in LIBRARIES:
                row = run_mixed(library, kind, procs, ops, warmup)
                rows.append(row)
                print(
                    f"  {library} {kind} x{procs}: {row['wall_s']:.2f} s,"
                    f" {row['ops_per_s']:,.0f} ops/s",
                    file=sys.stderr,
                )
    print_rows(rows)
    comparisons = []
    for procs in (1, 4):
        for kind in KINDS:
            dc, ox = (
                next(
                    r
                    for r in rows
                    if r["processes"] == procs and r["kind"] == kind and r["library"] == lib
                )
                for lib in LIBRARIES
            )
            comparisons.append({"processes": procs, "kind": kind, "ratios": compare(dc, ox)})
    failed = [r for r in rows if r["errors"]]
    elapsed = time.perf_counter() - started
    print(
        "Ratios: python-diskcache / oxide (higher is better for oxide); wall: from the first"
        " process's\nfirst timed call to the last process's last one. diskcache-rs is left out:"
        " it does not\nstore bytes keys."
        + (f"\nRUNS WITH ERRORS: {len(failed)}" if failed else "")
        + f"  ({elapsed:.0f} s)"
    )

    report = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "diskcache_version": diskcache.__version__,
        "oxide_version": diskcache_oxide.__version__,
        "quick": args.quick,
        "workload": {
            "keys": KEYS,
            "mix": {"get": 0.9, "set": 0.09, "delete": 0.01},
            "ops_per_process": ops,
            "warmup_per_process": warmup,
            "fanout": {"shards": SHARDS, "timeout": FANOUT_TIMEOUT},
        },
        "results": rows,
        "comparisons": comparisons,
    }
    write_json(args.json, report)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
