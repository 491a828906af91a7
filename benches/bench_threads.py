"""Threads sharing one handle: diskcache_oxide beside python-diskcache 5.6.3 and diskcache-community
5.8.1 (plain, and with ``SafeDisk``), in one run.

Issue 23's threads row, measured the same way for every library:

- one handle, ``Cache(directory)`` (and ``FanoutCache(directory, shards=4, timeout=1.0)``, as in
  benches/bench_mixed.py), opened once and shared by 1, 2, 4 and 8 threads of this process;
- 1,000 bytes keys, pre-filled with each key as its value; each operation a get (90%) or a set
  (10%) of a value of 1 to 99 repeats of its number, drawn as python-diskcache's benchmark
  draws its mix (benches/shared.py ``plan``), seeded by the thread's number, so each library
  gets the very same operations;
- diskcache-community (python-diskcache's maintained fork) run twice: plain
  ("diskcache-community") and with ``disk=SafeDisk``, its restricted unpickling and fix for
  CVE-2025-69872 ("community+SafeDisk"); it is optional, and where it does not import its
  columns are skipped and the run says so;
- every thread does the same number of operations; each warms up first (python-diskcache
  opens a SQLite connection per thread on its first call), then all start together at a
  barrier; the total is all threads' operations over the time from the first thread's first
  timed call to the last thread's last one, garbage collector off;
- each (library, kind, thread count) on a fresh directory, repeated (``--repeat``) with the
  libraries in turn; the median run is reported.

Ratios are ours / python-diskcache's ops/s (python-diskcache's time / ours, as in every bench
here), and the same against each community column (printed in its cell, with no target; in the
JSON, ``"community_results"``). Issue 23's targets, for Cache and for FanoutCache against
python-diskcache's own: ours at 2, 4 and 8 threads no lower than ours at 1 thread, and at least
2.5x python-diskcache's at every thread count. Each is printed with ``met`` or ``MISSED`` and
kept in the JSON (``"targets"``).

    .venv/bin/python benches/bench_threads.py            # full run: 20,000 ops per thread, 3 runs
    .venv/bin/python benches/bench_threads.py --quick    # a short smoke run: 500 ops, 1 run

Results are written as JSON to benches/results/threads.json (or --json PATH).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import diskcache
from shared import (
    GET,
    Check,
    Plan,
    optional_module,
    plan,
    print_targets,
    ratio_text,
    run_facts,
    write_json,
)

try:
    import diskcache_oxide
except ImportError:  # pragma: no cover - explained to the user
    sys.exit("diskcache_oxide is not importable: run `make bench` (it builds it first)")

community = optional_module("diskcache_community")

ROOT = Path(__file__).resolve().parent
KEYS = 1000
GETS, SETS = 0.9, 0.1
THREADS = (1, 2, 4, 8)
SHARDS = 4
FANOUT_TIMEOUT = 1.0
LIBRARIES = {"python-diskcache": diskcache, "oxide": diskcache_oxide}
# diskcache-community's two columns, run beside LIBRARIES where it imports: (name, the JSON
# key of ours over it in our rows, SafeDisk). Their rows are the report's "community_results".
COMMUNITY = (
    ("diskcache-community", "ratio_community", False),
    ("community+SafeDisk", "ratio_community_safedisk", True),
)
KINDS = ("Cache", f"FanoutCache(shards={SHARDS})")
# Issue 23's targets: ours / python-diskcache at every thread count, and ours at n threads /
# ours at 1 thread (adding threads must not lower the total).
SPEEDUP_TARGET = 2.5
SCALING_TARGET = 1.0


def open_cache(library: str, kind: str, directory: str) -> Any:
    """A handle of ``kind`` from ``library`` on ``directory``."""
    extra: dict[str, Any] = {}
    if library in LIBRARIES:
        module = LIBRARIES[library]
    else:  # a community column
        module = community
        safe = next(s for name, _, s in COMMUNITY if name == library)
        extra = {"disk": module.SafeDisk} if safe else {}
    if kind == "Cache":
        return module.Cache(directory, **extra)
    return module.FanoutCache(directory, shards=SHARDS, timeout=FANOUT_TIMEOUT, **extra)


def drive(cache: Any, ops: Plan) -> None:
    """Do the operations as fast as one thread can (no per-call clock: this bench counts
    throughput, and a clock read per call would be a share of a 2 µs get)."""
    get, set_ = cache.get, cache.set
    for action, key, value in ops:
        if action == GET:
            get(key)
        else:
            set_(key, value)


def run_threads(cache: Any, threads: int, ops: int, warmup: int) -> dict[str, Any]:
    """``threads`` threads sharing ``cache``, each warmed up, then started together at a
    barrier on its own ``ops`` operations; the wall time from the first start to the last end."""
    timed = [plan(i, ops, keys=KEYS, gets=GETS, sets=SETS) for i in range(threads)]
    warm = [plan(1000 + i, warmup, keys=KEYS, gets=GETS, sets=SETS) for i in range(threads)]
    barrier = threading.Barrier(threads)
    starts = [0.0] * threads
    ends = [0.0] * threads
    errors: list[str] = []

    def body(i: int) -> None:
        """Thread ``i``: warm up, wait for the others, run its timed operations."""
        try:
            drive(cache, warm[i])
            barrier.wait(timeout=120)
            starts[i] = time.perf_counter()
            drive(cache, timed[i])
            ends[i] = time.perf_counter()
        except Exception as exc:  # reported, counted as a failed run
            errors.append(f"{type(exc).__name__}: {exc}")
            barrier.abort()

    workers = [threading.Thread(target=body, args=(i,)) for i in range(threads)]
    gc.collect()
    gc.disable()  # process-wide: a collection in one thread would stall them all
    try:
        for t in workers:
            t.start()
        for t in workers:
            t.join()
    finally:
        gc.enable()
    wall = max(ends) - min(starts) if not errors else 0.0
    return {
        "wall_s": wall,
        "ops": threads * ops,
        "ops_per_s": threads * ops / wall if wall > 0 else 0.0,
        "errors": errors[:3],
    }


def bench(library: str, kind: str, threads: int, ops: int, warmup: int) -> dict[str, Any]:
    """One run on a fresh directory pre-filled with every key."""
    directory = tempfile.mkdtemp(prefix=f"bench-threads-{library}-")
    try:
        cache = open_cache(library, kind, directory)
        try:
            for key in range(KEYS):
                cache.set(str(key).encode(), str(key).encode())
            return run_threads(cache, threads, ops, warmup)
        finally:
            cache.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median throughput (failed runs count as zero), with every run's ops/s."""
    ordered = sorted(runs, key=lambda r: r["ops_per_s"])
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    chosen["runs_ops_per_s"] = [r["ops_per_s"] for r in runs]
    chosen["errors"] = [e for r in runs for e in r["errors"]][:3]
    return chosen


def checks(rows: list[dict[str, Any]]) -> list[Check]:
    """Issue 23's thread targets for each kind: at least 2.5x python-diskcache's at every
    thread count, and ours at n threads no lower than ours at 1 thread."""
    out: list[Check] = []
    for kind in KINDS:
        ours = {r["threads"]: r for r in rows if r["kind"] == kind and r["library"] == "oxide"}
        for n, row in ours.items():
            out.append(
                Check(
                    f"{kind}, {n} thread{'s' if n > 1 else ''}: vs python-diskcache",
                    row["ratio"],
                    SPEEDUP_TARGET,
                )
            )
        one = ours.get(1, {}).get("ops_per_s", 0.0)
        for n, row in ours.items():
            if n > 1:
                scaling = row["ops_per_s"] / one if one > 0 else None
                out.append(
                    Check(f"{kind}, {n} threads: vs ours at 1 thread", scaling, SCALING_TARGET)
                )
    return out


def print_table(rows: list[dict[str, Any]], community_rows: list[dict[str, Any]], ops: int) -> None:
    """Per kind: each thread count's total ops/s for python-diskcache and ours, the ratio, ours
    against ours at 1 thread, then each community column's ops/s with ours over it."""
    peers = [name for name, _, _ in COMMUNITY if any(r["library"] == name for r in community_rows)]
    for kind in KINDS:
        print(f"{kind}: one handle shared by N threads, {ops:,} ops per thread (total ops/s)")
        head = (
            f"{'threads':>8}{'python-diskcache':>18}{'diskcache_oxide':>18}"
            f"{'ours / dc':>11}{'ours / ours@1':>15}" + "".join(f"{name:>22}" for name in peers)
        )
        print(head)
        print("-" * len(head))
        by = {(r["library"], r["threads"]): r for r in rows + community_rows if r["kind"] == kind}
        one = by[("oxide", 1)]["ops_per_s"] if ("oxide", 1) in by else 0.0
        for n in sorted({r["threads"] for r in rows}):
            dc, ox = by[("python-diskcache", n)], by[("oxide", n)]
            scaling = ox["ops_per_s"] / one if one > 0 else None
            cells = ""
            for name, key, _ in COMMUNITY:
                if name in peers:
                    cell = f"{by[(name, n)]['ops_per_s']:,.0f} ({ratio_text(ox[key])})"
                    cells += f"{cell:>22}"
            print(
                f"{n:>8}{dc['ops_per_s']:>18,.0f}{ox['ops_per_s']:>18,.0f}"
                f"{ratio_text(ox['ratio']):>11}{ratio_text(scaling):>15}{cells}"
            )
            for r in (dc, ox, *(by[(name, n)] for name in peers)):
                if r["errors"]:
                    print(f"{'':>8}{r['library']}: ERRORS {r['errors']}")
        print()


def main(argv: list[str] | None = None) -> int:
    """Run every (kind, thread count) for both libraries, print the tables and the targets,
    write the JSON; exit 1 if a run failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run")
    parser.add_argument("--ops", type=int, default=None, help="operations per thread")
    parser.add_argument("--repeat", type=int, default=None, help="runs per row (median kept)")
    parser.add_argument("--json", default=str(ROOT / "results" / "threads.json"))
    args = parser.parse_args(argv)

    ops = args.ops or (500 if args.quick else 20_000)
    repeat = args.repeat or (1 if args.quick else 3)
    warmup = min(1000, max(100, ops // 10))
    community_text = (
        f"{community.__version__} (plain and with SafeDisk)"
        if community is not None
        else "(not installed, skipped)"
    )
    print(
        f"diskcache_oxide {diskcache_oxide.__version__} vs python-diskcache"
        f" {diskcache.__version__} and diskcache-community {community_text}:"
        " threads sharing one handle\n"
        f"Python {platform.python_version()} | {platform.machine()} {os.cpu_count()} cpu"
        f" | 90% get, 10% set over {KEYS:,} bytes keys; {ops:,} ops per thread after"
        f" {warmup:,} untimed; median of {repeat} run{'s' if repeat > 1 else ''}\n"
    )
    if community is None:
        print(
            "diskcache-community is not installed: its columns (plain and with SafeDisk) are"
            " skipped (`make bench` has it)\n"
        )
    peers = [name for name, _, _ in COMMUNITY] if community is not None else []
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    community_rows: list[dict[str, Any]] = []
    for kind in KINDS:
        for threads in THREADS:
            runs: dict[str, list[dict[str, Any]]] = {lib: [] for lib in [*LIBRARIES, *peers]}
            for _ in range(repeat):
                for library in runs:  # in turn, so that drift on the machine hits them all
                    runs[library].append(bench(library, kind, threads, ops, warmup))
            medians = {library: median_run(r) for library, r in runs.items()}
            dc_rate = medians["python-diskcache"]["ops_per_s"]
            ours = medians["oxide"]["ops_per_s"]
            for library, row in medians.items():
                record = {"library": library, "kind": kind, "threads": threads, **row}
                # Its ops/s / python-diskcache's (for ours: ours / python-diskcache's).
                record["ratio"] = row["ops_per_s"] / dc_rate if dc_rate > 0 else None
                if library == "oxide":  # ours / each community column's (its time / ours)
                    for name, key, _ in COMMUNITY:
                        theirs = medians[name]["ops_per_s"] if name in medians else 0.0
                        record[key] = ours / theirs if theirs > 0 else None
                if library in LIBRARIES:
                    rows.append(record)
                else:  # ours / its ops/s, as in our row
                    record["ratio_ours"] = ours / row["ops_per_s"] if row["ops_per_s"] > 0 else None
                    community_rows.append(record)
                print(
                    f"  {library} {kind} x{threads} threads: {row['ops_per_s']:,.0f} ops/s",
                    file=sys.stderr,
                )
    print_table(rows, community_rows, ops)
    print(
        "ours / dc: our total ops/s / python-diskcache's (its time / ours; higher is better for"
        " oxide).\nours / ours@1: our total at N threads / ours at 1 thread."
        + (
            "\ndiskcache-community, community+SafeDisk: its total ops/s (ours / its, higher is"
            " better for oxide; no target)."
            if peers
            else ""
        )
        + "\n"
    )
    targets = print_targets(f"Targets (issue 23), {ops:,} ops per thread:", checks(rows))
    failed = [r for r in rows + community_rows if r["errors"]]
    elapsed = time.perf_counter() - started
    print((f"RUNS WITH ERRORS: {len(failed)}  " if failed else "") + f"({elapsed:.0f} s)")
    report = {
        **run_facts(),
        "diskcache_version": diskcache.__version__,
        "oxide_version": diskcache_oxide.__version__,
        "community_version": community.__version__ if community is not None else None,
        "quick": args.quick,
        "workload": {
            "keys": KEYS,
            "mix": {"get": GETS, "set": SETS},
            "threads": list(THREADS),
            "ops_per_thread": ops,
            "warmup_per_thread": warmup,
            "repeat": repeat,
            "fanout": {"shards": SHARDS, "timeout": FANOUT_TIMEOUT},
        },
        "results": rows,
        # diskcache-community, plain and with SafeDisk: each row's "ratio" is its ops/s over
        # python-diskcache's, "ratio_ours" ours over its (our rows keep it too, as
        # "ratio_community" and "ratio_community_safedisk").
        "community_results": community_rows,
        "targets": targets,
    }
    write_json(args.json, report)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
