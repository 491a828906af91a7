"""python-diskcache's published mixed workload, diskcache_oxide beside python-diskcache 5.6.3
and diskcache-community 5.8.1 (plain, and with ``SafeDisk``, its fix for CVE-2025-69872).

The workload of python-diskcache's documentation page "DiskCache Cache Benchmarks" (its
tests/benchmark_core.py), measured here the same way for every library in one run:

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
with default settings otherwise: python-diskcache, diskcache_oxide, and diskcache-community
twice, plain ("diskcache-community") and with ``disk=SafeDisk`` ("community+SafeDisk"), the
restricted unpickling a cache that others can write to needs. diskcache-community is
optional: where it is not installed its columns are skipped, saying so. Each peer gets a table
of its own beside ours, ratios peer / oxide (higher is better for oxide); issue 23's targets
are against python-diskcache. A FanoutCache swallows a lock timeout: its set then returns
False having stored nothing, which is quick and would flatter the numbers, so such sets are
counted and shown.

diskcache-rs is left out: it does not store bytes keys (its ``set`` of a bytes key returns
False), which this workload uses throughout.

    .venv/bin/python benches/bench_mixed.py              # full run: 100,000 ops per process
    .venv/bin/python benches/bench_mixed.py --ops 20000  # issue 23's table: 20,000 per process
    .venv/bin/python benches/bench_mixed.py --quick      # a short smoke run: 2,000 per process

After the tables, issue 23's targets, each with its ratio and ``met`` or ``MISSED``: at 1 and
at 4 processes, for Cache and for FanoutCache, the total (wall) time at least 3x
python-diskcache's, no action's median, p90 or p99 below 1x (those below are named), and the
median get at least 2.5x. They are also in the JSON (``"targets"``).

Results are written as JSON to benches/results/mixed.json (or --json PATH).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import diskcache
from shared import (
    ACTIONS,
    Check,
    optional_module,
    print_targets,
    ratio_text,
    run_facts,
    run_mix,
    write_json,
)
from shared import MIX_KEYS as KEYS

try:
    import diskcache_oxide
except ImportError:  # pragma: no cover - explained to the user
    sys.exit("diskcache_oxide is not importable: run `make bench` (it builds it first)")

community = optional_module("diskcache_community")

ROOT = Path(__file__).resolve().parent
SHARDS = 4
FANOUT_TIMEOUT = 1.0
#: The implementations run, in order: name -> (module, whether opened with ``disk=SafeDisk``).
#: diskcache-community's two are there only where it is installed.
LIBRARIES: dict[str, tuple[Any, bool]] = {
    "python-diskcache": (diskcache, False),
    "oxide": (diskcache_oxide, False),
}
if community is not None:
    LIBRARIES["diskcache-community"] = (community, False)
    LIBRARIES["community+SafeDisk"] = (community, True)
#: Each library that ours is compared with, in the order of the tables.
PEERS = [name for name in LIBRARIES if name != "oxide"]
KINDS = ("Cache", f"FanoutCache(shards={SHARDS})")
STATS = ("median_us", "p90_us", "p99_us", "max_us")


def open_cache(library: str, kind: str, directory: str) -> Any:
    """A handle of ``kind`` from ``library`` on ``directory`` (run in each spawned process)."""
    module, safe = LIBRARIES[library]
    extra = {"disk": module.SafeDisk} if safe else {}
    if kind == "Cache":
        return module.Cache(directory, **extra)
    return module.FanoutCache(directory, shards=SHARDS, timeout=FANOUT_TIMEOUT, **extra)


def run_mixed(library: str, kind: str, procs: int, ops: int, warmup: int) -> dict[str, Any]:
    """One row: the mix on ``kind`` of ``library`` in ``procs`` processes, on a fresh directory
    pre-filled with each key as its value (as python-diskcache's benchmark does)."""
    directory = tempfile.mkdtemp(prefix=f"bench-mixed-{library}-")
    try:
        cache = open_cache(library, kind, directory)
        for key in range(KEYS):
            cache.set(str(key).encode(), str(key).encode())
        cache.close()
        row = run_mix(open_cache, (library, kind, directory), procs, ops, warmup, 1800)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    # A FanoutCache's set that times out returns False having stored nothing: counted, shown.
    failed_sets = row["misses"]["set"] if kind != "Cache" else 0
    return {"library": library, "kind": kind, **row, "failed_sets": failed_sets}


def compare(peer: dict[str, Any], ox: dict[str, Any]) -> dict[str, Any]:
    """The peer's / oxide's for each statistic of each action, and for the wall time."""
    ratios: dict[str, Any] = {}
    for action, s in peer["stats"].items():
        o = ox["stats"].get(action)
        if o is not None:
            ratios[action] = {stat: s[stat] / o[stat] if o[stat] > 0 else None for stat in STATS}
    wall, ox_wall = peer["wall_s"], ox["wall_s"]
    ratios["wall"] = wall / ox_wall if ox_wall > 0 and wall > 0 else None
    return ratios


def find(rows: list[dict[str, Any]], library: str, kind: str, procs: int) -> dict[str, Any]:
    """The row of ``library``'s ``kind`` at ``procs`` processes."""
    return next(
        r for r in rows if r["library"] == library and r["kind"] == kind and r["processes"] == procs
    )


# Issue 23's targets for the mix, at 1 and at 4 processes, for Cache and for FanoutCache (each
# against python-diskcache's own): ratios of python-diskcache's time to ours.
TOTAL_TARGET = 3.0  # the wall time of the whole run
NO_WORSE = 1.0  # every action's median, p90 and p99
GET_MEDIAN_TARGET = 2.5
TAILS = (("median_us", "median"), ("p90_us", "p90"), ("p99_us", "p99"))


def checks(procs: int, kind: str, ratios: dict[str, Any]) -> list[Check]:
    """The three targets of one (process count, kind): total time, no action's median, p90 or
    p99 worse than python-diskcache's (one check, naming each that is), and the median get."""
    where = f"{procs} process{'es' if procs > 1 else ''}, {kind}:"
    # An action none of the processes drew (a delete, in a very short run) has no ratios; a
    # row that failed has none at all, and its checks are missed.
    each = [
        (f"{action} {name}", ratios[action][stat])
        for action in ACTIONS
        if action in ratios
        for stat, name in TAILS
    ]
    known = [r for _, r in each if r is not None]
    below = [f"{name} {ratio_text(r)}" for name, r in each if r is None or r < NO_WORSE]
    get = ratios.get("get", {}).get("median_us")
    return [
        Check(f"{where} total time", ratios.get("wall"), TOTAL_TARGET),
        Check(
            f"{where} worst action median/p90/p99",
            min(known) if known and len(known) == len(each) else None,
            NO_WORSE,
            detail=f"below: {', '.join(below)}" if below else "",
        ),
        Check(f"{where} median get", get, GET_MEDIAN_TARGET),
    ]


# ----------------------------------------------------------------------------- output


W_LABEL, W_OP, W_STAT, W_RATIO = 23, 7, 8, 8
W_BLOCK = 4 * W_STAT


def cell(x: float) -> str:
    """Microseconds in a table cell; milliseconds, marked, from 10 ms."""
    text = f"{x:,.1f}" if x < 10_000 else f"{x / 1000:,.1f}ms"
    return f"{text:>{W_STAT}}"


def ratio_cell(x: float | None) -> str:
    """A ratio in a table cell."""
    return f"{ratio_text(x):>{W_RATIO}}"


def print_rows(rows: list[dict[str, Any]]) -> None:
    """The tables: per process count, for each peer in turn (python-diskcache, then
    diskcache-community plain and with SafeDisk), each kind's actions for the peer and for
    ours, and the peer's / ours."""
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
        for peer in PEERS:
            print_peer(group, peer, stat_head, ratio_head)
        print()


def print_peer(group: list[dict[str, Any]], peer: str, stat_head: str, ratio_head: str) -> None:
    """One process count's table of ``peer`` beside ours: each kind's actions and wall time."""
    print(
        f"{'':<{W_LABEL + W_OP}}{peer:>{W_BLOCK}}{'diskcache_oxide':>{W_BLOCK}}"
        f"{f'{peer} / oxide':>{4 * W_RATIO}}"
    )
    head = f"{'':<{W_LABEL}}{'op':<{W_OP}}{stat_head}{stat_head}{ratio_head}"
    print(head)
    print("-" * len(head))
    procs = group[0]["processes"]
    for kind in KINDS:
        theirs, ox = find(group, peer, kind, procs), find(group, "oxide", kind, procs)
        ratios = compare(theirs, ox)
        label = kind
        for action in (*ACTIONS, "all"):
            s, o = theirs["stats"].get(action), ox["stats"].get(action)
            if s is None or o is None:
                continue
            line = f"{label:<{W_LABEL}}{action:<{W_OP}}"
            line += "".join(cell(s[stat]) for stat in STATS)
            line += "".join(cell(o[stat]) for stat in STATS)
            line += "".join(ratio_cell(ratios[action][stat]) for stat in STATS)
            print(line)
            label = ""
        their_wall = f"{theirs['wall_s']:.2f} s, {theirs['ops_per_s']:,.0f} ops/s"
        ox_wall = f"{ox['wall_s']:.2f} s, {ox['ops_per_s']:,.0f} ops/s"
        print(
            f"{'':<{W_LABEL}}{'wall':<{W_OP}}{their_wall:>{W_BLOCK}}{ox_wall:>{W_BLOCK}}"
            f"{ratio_cell(ratios['wall'])}"
        )
        # Ours is noted under python-diskcache's table only, not once per peer.
        for r in (theirs, ox) if peer == PEERS[0] else (theirs,):
            if r["failed_sets"]:
                print(
                    f"{'':<{W_LABEL}}{r['library']}: {r['failed_sets']} sets timed out"
                    " (returned False, stored nothing)"
                )
            if r["errors"]:
                print(f"{'':<{W_LABEL}}{r['library']}: ERRORS {r['errors']}")


def print_summary(comparisons: list[dict[str, Any]]) -> None:
    """Against each peer, per process count and kind: the peer's / ours for the wall time and
    the median get and set (the tables above have the rest)."""
    width = 24
    print("Against each peer, peer / oxide: wall time, median get, median set")
    head = f"{'':<{W_LABEL + 14}}" + "".join(f"{peer:>{width}}" for peer in PEERS)
    print(head)
    print("-" * len(head))
    for c in comparisons:
        where = f"{c['processes']} process{'es' if c['processes'] > 1 else ''}, {c['kind']}"
        line = f"{where:<{W_LABEL + 14}}"
        for peer in PEERS:
            ratios = c["peers"][peer]
            figures = [ratios.get("wall")] + [
                ratios.get(action, {}).get("median_us") for action in ("get", "set")
            ]
            line += f"{' '.join(ratio_text(x) for x in figures):>{width}}"
        print(line)
    print()


def main(argv: list[str] | None = None) -> int:
    """Run every library's kinds at 1 and 4 processes, print the tables and the targets,
    write the JSON; exit 1 if a run failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run")
    parser.add_argument("--ops", type=int, default=None, help="operations per process")
    parser.add_argument("--json", default=str(ROOT / "results" / "mixed.json"))
    args = parser.parse_args(argv)

    ops = args.ops or (2000 if args.quick else 100_000)
    warmup = min(1000, max(100, ops // 10))
    print(
        f"diskcache_oxide {diskcache_oxide.__version__} vs python-diskcache"
        f" {diskcache.__version__} and diskcache-community"
        f" {community.__version__ + ' (plain and SafeDisk)' if community else '(not installed)'}:"
        " python-diskcache's mixed workload\n"
        f"Python {platform.python_version()} | {platform.machine()} {os.cpu_count()} cpu"
        f" | 90% get, 9% set, 1% delete over {KEYS} bytes keys, bytes values;"
        f" {ops:,} ops per process after {warmup:,} untimed"
        f"{'' if ops == 20_000 else ' (issue 23 measured 20,000: --ops 20000)'}\n"
    )
    if community is None:
        print(
            "diskcache-community is not installed: its columns are skipped (`make bench` has it)\n"
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
    comparisons: list[dict[str, Any]] = []
    for procs in (1, 4):
        for kind in KINDS:
            ox = find(rows, "oxide", kind, procs)
            peers = {peer: compare(find(rows, peer, kind, procs), ox) for peer in PEERS}
            comparisons.append(
                {
                    "processes": procs,
                    "kind": kind,
                    "ratios": peers["python-diskcache"],
                    "peers": peers,
                }
            )
    print_summary(comparisons)
    failed = [r for r in rows if r["errors"]]
    print(
        "Ratios: each peer's / oxide's (higher is better for oxide); wall: from the first"
        " process's\nfirst timed call to the last process's last one. diskcache-rs is left out:"
        " it does not\nstore bytes keys.\n"
    )
    targets = print_targets(
        f"Targets (issue 23), python-diskcache / oxide, {ops:,} ops per process:",
        [check for c in comparisons for check in checks(c["processes"], c["kind"], c["ratios"])],
    )
    elapsed = time.perf_counter() - started
    print((f"RUNS WITH ERRORS: {len(failed)}  " if failed else "") + f"({elapsed:.0f} s)")

    report = {
        **run_facts(),
        "diskcache_version": diskcache.__version__,
        "community_version": community.__version__ if community else None,
        "oxide_version": diskcache_oxide.__version__,
        "libraries": list(LIBRARIES),
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
        "targets": targets,
    }
    write_json(args.json, report)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
