"""Side-by-side latency benchmark: diskcache_oxide vs python-diskcache 5.6.3, diskcache-community
5.8.1 (plain, and with ``SafeDisk``) and diskcache-rs.

All of them run in this one process, on this machine, each in its own fresh temporary
directory with default settings. Every operation is timed on its own with
``time.perf_counter_ns`` after a warm-up, with the garbage collector off while timing.
The table shows median and p99 latency per operation in microseconds, the ratio
diskcache / oxide of the medians (higher is better for oxide) beside its target, and the
ratio diskcache-rs / oxide (no target: the targets are against python-diskcache).

A second table puts the same rows beside diskcache-community (PyPI ``diskcache-community``,
python-diskcache's maintained fork), run in the same run: its ``Cache`` plain
("diskcache-community") and with ``disk=SafeDisk``, its restricted unpickling and fix for
CVE-2025-69872 ("community+SafeDisk"), each with its median and p99 and the ratio of its median
over oxide's (higher is better for oxide; no target). diskcache-community is optional: if it
does not import, its columns are skipped and the run says so. A community row whose result
differs from python-diskcache's is shown as "n/a", as for diskcache-rs.

The headline get row reads a cache pre-filled with 100,000 keys (int, str and dict values in
turn) in random order, each timed read a key not read before, so diskcache_oxide's memo of
recent reads (docs/decisions/D-017-reads-without-locks.md) cannot serve it: that is what a
get costs a user whose reads spread over many keys. The ``get <type> (memo: 256 hot keys)``
rows read the same 256 keys over and over on a cache nobody writes to, which the memo serves
without touching SQLite; they are printed last, marked memo-friendly (``"memo_friendly":
true`` in the JSON), and show the best case, not a typical get.

diskcache-rs (PyPI ``diskcache-rs``, pinned in requirements-dev.txt) is optional: if it
does not import, its columns read "n/a" and the run says so. Its ``Cache`` has the same
calls as python-diskcache's for every operation timed here (str keys; values pickled,
bytes stored raw), but ``add`` and ``incr`` are a get then a set in Python, atomic only
among the threads of one process; rows marked * compare against that weaker
operation. After timing, every implementation makes one more call of the operation, and a
diskcache-rs row whose result differs from python-diskcache's is shown as "n/a".

python-diskcache's own mixed workload (90% get, 9% set, 1% delete; 1 and 4 processes;
Cache and FanoutCache) is benches/bench_mixed.py; threads sharing one handle,
benches/bench_threads.py; the headline get at 100,000 and 1,000,000 entries, for FanoutCache
too and beside LMDB, benches/bench_working_set.py.

    python benches/bench_cache.py            # full run (about a minute on 2 cores)
    python benches/bench_cache.py --quick    # fewer iterations, for a smoke test

Results are also written as JSON to benches/results/latest.json (or --json PATH).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import diskcache
from shared import (
    SMALL_VALUES,
    WHY_BELOW,
    fill,
    optional_module,
    run_facts,
    summarize,
    time_each,
    verdict,
    working_set_items,
    working_set_key,
    write_json,
)

try:
    import diskcache_oxide
except ImportError:  # pragma: no cover - explained to the user
    sys.exit("diskcache_oxide is not importable: run `make bench` (it builds it first)")

diskcache_rs = optional_module("diskcache_rs")
community = optional_module("diskcache_community")

ROOT = Path(__file__).resolve().parent
MB = 1 << 20
TARGETS = {"get": 2.5, "set": 3.0, "add": 3.0, "delete": 3.0, "incr": 3.0, "set 1MB": 4.0}
# Operations diskcache-rs does with a weaker guarantee than python-diskcache and oxide.
RS_WEAKER = ("add", "incr")
RS_WEAKER_NOTE = (
    "diskcache-rs's add and incr are a get then a set in Python under a thread lock: they\n"
    "  are not atomic across processes (concurrent incr calls lose counts and can even\n"
    "  restart the counter), so these rows compare against a weaker operation"
)
# diskcache-community's two columns: (name, the row's JSON key, SafeDisk).
COMMUNITY = (
    ("diskcache-community", "community", False),
    ("community+SafeDisk", "community_safedisk", True),
)


def target_for(op: str) -> float | None:
    if op.startswith("set 1MB"):
        return TARGETS["set 1MB"]
    if op.startswith("get 1MB"):
        return TARGETS["get"]
    for prefix in ("get", "set", "add", "delete", "incr"):
        if op.startswith(prefix):
            return TARGETS[prefix]
    return None


# ----------------------------------------------------------------------------- scenarios


class Scenario:
    """One operation, set up the same way on a cache of either implementation.

    ``memo_friendly``: the timed calls repeat reads of an unchanged cache, which
    diskcache_oxide's memo of recent reads (D-017) serves without SQLite: a best case."""

    def __init__(
        self,
        name: str,
        iterations: int,
        warmup: int,
        build: Callable[[Any], Any],
        memo_friendly: bool = False,
        headline: bool = False,
    ):
        self.name = name
        self.iterations = iterations
        self.warmup = warmup
        self.build = build  # cache -> fn(i)
        self.memo_friendly = memo_friendly
        self.headline = headline


HOT_KEYS = 256


def working_set_name(working_set: int) -> str:
    size = f"{working_set // 1000}k" if working_set % 1000 == 0 else f"{working_set:,}"
    return f"get ({size} keys, random)"


def scenarios(n: int, n_big: int, working_set: int) -> list[Scenario]:
    warm = max(50, n // 10)
    out: list[Scenario] = []

    # The headline get: every call (warm-up, timed, and the one more call) reads a key of the
    # working set that no call read before, in random order, the same order for every library.
    reads = [working_set_key(j) for j in random.Random(17).sample(range(working_set), n + 1 + warm)]

    def get_spread(cache: Any) -> Callable[[int], Any]:
        # Untimed, in batches of one transaction each (shared.fill).
        fill(cache, working_set_items(working_set))
        return lambda i: cache.get(reads[i])  # warm-up i < 0 reads the tail of the list

    out.append(Scenario(working_set_name(working_set), n, warm, get_spread, headline=True))

    memo_rows: list[Scenario] = []
    for label, value in SMALL_VALUES.items():

        def get_hit(cache: Any, value: Any = value) -> Callable[[int], Any]:
            for i in range(HOT_KEYS):
                cache.set(f"hit-{i}", value)
            return lambda i: cache.get(f"hit-{i % HOT_KEYS}")

        def set_new(cache: Any, value: Any = value) -> Callable[[int], Any]:
            return lambda i: cache.set(f"new-{i}", value)

        def set_overwrite(cache: Any, value: Any = value) -> Callable[[int], Any]:
            for i in range(256):
                cache.set(f"ow-{i}", value)
            return lambda i: cache.set(f"ow-{i % 256}", value)

        def add_new(cache: Any, value: Any = value) -> Callable[[int], Any]:
            return lambda i: cache.add(f"add-{i}", value)

        def delete(cache: Any, value: Any = value) -> Callable[[int], Any]:
            for i in range(-warm, n):
                cache.set(f"del-{i}", value)
            return lambda i: cache.delete(f"del-{i}")

        memo_rows.append(
            Scenario(
                f"get {label} (memo: {HOT_KEYS} hot keys)", n, warm, get_hit, memo_friendly=True
            )
        )
        out += [
            Scenario(f"set new {label}", n, warm, set_new),
            Scenario(f"set overwrite {label}", n, warm, set_overwrite),
            Scenario(f"add {label}", n, warm, add_new),
            Scenario(f"delete {label}", n, warm, delete),
        ]

    def incr(cache: Any) -> Callable[[int], Any]:
        return lambda i: cache.incr("counter")

    out.append(Scenario("incr", n, warm, incr))

    big = os.urandom(MB)

    def set_big(cache: Any) -> Callable[[int], Any]:
        return lambda i: cache.set(f"big-{i % 32}", big)

    def get_big(cache: Any) -> Callable[[int], Any]:
        for i in range(8):
            cache.set(f"bigget-{i}", big)
        return lambda i: cache.get(f"bigget-{i % 8}")

    out.append(Scenario("set 1MB bytes", n_big, 10, set_big))
    out.append(Scenario("get 1MB bytes", n_big, 10, get_big))  # in files: never memoized
    return out + memo_rows  # the realistic rows first, the memo-friendly ones last


def run_one(
    module: Any, impl_name: str, scenario: Scenario, **options: Any
) -> tuple[dict[str, float], Any]:
    """Time the scenario on a fresh cache (``module.Cache(directory, **options)``); return the
    summary and one more call's result."""
    directory = tempfile.mkdtemp(prefix=f"bench-{impl_name}-")
    cache = module.Cache(directory, **options)
    try:
        fn = scenario.build(cache)
        samples = time_each(fn, scenario.iterations, scenario.warmup)
        return summarize(samples), fn(scenario.iterations)
    finally:
        cache.close()
        shutil.rmtree(directory, ignore_errors=True)


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def run_peer(
    module: Any, impl_name: str, scenario: Scenario, expected: Any, **options: Any
) -> tuple[dict[str, float] | None, str | None]:
    """Time the scenario on a peer; its summary, or None and why (its result differs from
    python-diskcache's, or it raised)."""
    try:
        summary, got = run_one(module, impl_name, scenario, **options)
    except Exception as exc:  # shown as n/a with the reason
        return None, f"{type(exc).__name__}: {exc}"
    if got != expected:
        return None, f"returned {short(got)} where python-diskcache returned {short(expected)}"
    return summary, None


def run_pair(scenario: Scenario) -> dict[str, Any]:
    """Time one scenario on python-diskcache, oxide and (where they apply) diskcache-rs and
    diskcache-community, plain and with SafeDisk."""
    result: dict[str, Any] = {
        "op": scenario.name,
        "headline": scenario.headline,
        "memo_friendly": scenario.memo_friendly,
    }
    result["diskcache"], expected = run_one(diskcache, "diskcache", scenario)
    result["oxide"], _ = run_one(diskcache_oxide, "oxide", scenario)
    result["ratio"] = result["diskcache"]["median_us"] / result["oxide"]["median_us"]
    result["target"] = target_for(scenario.name)
    rs: dict[str, float] | None = None
    note = None
    if diskcache_rs is None:
        note = "diskcache-rs is not installed"
    else:
        rs, note = run_peer(diskcache_rs, "diskcache-rs", scenario, expected)
    if rs is not None and scenario.name.startswith(RS_WEAKER):
        note = "weaker: not atomic across processes"
    result["diskcache_rs"] = rs
    result["ratio_rs"] = rs["median_us"] / result["oxide"]["median_us"] if rs else None
    result["diskcache_rs_note"] = note
    # diskcache-community, plain and with SafeDisk: "community", "ratio_community" and
    # "community_note", then the same with "community_safedisk".
    for name, key, safe in COMMUNITY:
        peer: dict[str, float] | None = None
        if community is None:
            note = "diskcache-community is not installed"
        else:
            options = {"disk": community.SafeDisk} if safe else {}
            peer, note = run_peer(community, name, scenario, expected, **options)
        result[key] = peer
        result[f"ratio_{key}"] = peer["median_us"] / result["oxide"]["median_us"] if peer else None
        result[f"{key}_note"] = note
    return result


def run_batches(n_batches: int, batch: int) -> list[dict[str, Any]]:
    """Per-item cost of oxide's get_many/set_many/delete_many against its single calls."""
    value = SMALL_VALUES["dict"]
    rows: list[dict[str, Any]] = []
    directory = tempfile.mkdtemp(prefix="bench-oxide-batch-")
    cache = diskcache_oxide.Cache(directory)
    try:
        keys = [[f"b-{j}-{k}" for k in range(batch)] for j in range(n_batches + 5)]

        def set_many(i: int) -> Any:
            return cache.set_many({k: value for k in keys[i % len(keys)]})

        def set_single(i: int) -> Any:
            for k in keys[i % len(keys)]:
                cache.set(k, value)

        def get_many(i: int) -> Any:
            return cache.get_many(keys[i % len(keys)])

        def get_single(i: int) -> Any:
            return [cache.get(k) for k in keys[i % len(keys)]]

        def delete_many(i: int) -> Any:
            return cache.delete_many(keys[i % len(keys)])

        def delete_single(i: int) -> Any:
            for k in keys[i % len(keys)]:
                cache.delete(k)

        pairs = [
            ("set", set_many, set_single),
            ("get", get_many, get_single),
            ("delete", delete_many, delete_single),
        ]

        def fill() -> None:
            for ks in keys:
                cache.set_many({k: value for k in ks})

        for op, many, single in pairs:
            if op != "set":
                fill()  # every timed get/delete finds its keys
            m = summarize(time_each(many, n_batches, 3), items_per_call=batch)
            if op != "set":
                fill()
            s = summarize(time_each(single, n_batches, 3), items_per_call=batch)
            rows.append(
                {
                    "op": f"{op}_many vs {op}",
                    "batch": batch,
                    "many_per_item": m,
                    "single_per_item": s,
                    "speedup": s["median_us"] / m["median_us"],
                }
            )
    finally:
        cache.close()
        shutil.rmtree(directory, ignore_errors=True)
    return rows


# ----------------------------------------------------------------------------- output


OP_WIDTH = 30


def print_row(row: dict[str, Any], why: dict[str, list[str]]) -> None:
    d, o, r = row["diskcache"], row["oxide"], row["diskcache_rs"]
    target = row["target"]
    target_text = verdict(row["ratio"], target) if target is not None else "-"
    op = row["op"]
    if r is not None and op.startswith(RS_WEAKER):
        op += " *"
    elif r is None:
        why.setdefault(row["diskcache_rs_note"], []).append(row["op"])
    rs_cells = f"{r['median_us']:>8.1f}{r['p99_us']:>9.1f}" if r else f"{'n/a':>8}{'n/a':>9}"
    rs_ratio = f"{row['ratio_rs']:>7.2f}x" if r else f"{'n/a':>8}"
    print(
        f"{op:<{OP_WIDTH}}{d['median_us']:>8.1f}{d['p99_us']:>9.1f}{o['median_us']:>8.1f}"
        f"{o['p99_us']:>9.1f}{rs_cells}{row['ratio']:>7.2f}x   {target_text:<14}{rs_ratio}"
    )


def print_table(
    rows: list[dict[str, Any]], batches: list[dict[str, Any]], working_set: int
) -> None:
    impls = f"{'python-diskcache':>17}{'diskcache_oxide':>17}{'diskcache-rs':>17}"
    print(f"{'':<{OP_WIDTH}}{impls}{'oxide faster by':>26}")
    head = f"{'operation':<{OP_WIDTH}}" + f"{'median':>8}{'p99':>9}" * 3
    head += f"{'vs dc':>8}{'   target':<17}{'vs rs':>8}"
    print(head)
    print("-" * len(head))
    why: dict[str, list[str]] = {}
    realistic = [row for row in rows if not row["memo_friendly"]]
    memo = [row for row in rows if row["memo_friendly"]]
    for row in realistic:
        print_row(row, why)
    if memo:
        print(
            f"-- memo-friendly (best case, not a typical get): the same {HOT_KEYS} keys read over"
            "\n   and over on a cache nobody writes to, which oxide's memo of recent reads"
            " (D-017)\n   serves without SQLite"
        )
        for row in memo:
            print_row(row, why)
    print(
        "\nTimes in microseconds. vs dc = python-diskcache median / oxide median (target:"
        " against\npython-diskcache); vs rs = diskcache-rs median / oxide median (no target)."
        f"\n{working_set_name(working_set)}: the headline get. The cache holds {working_set:,}"
        " keys (int, str and dict\nvalues in turn); each call reads a key no call read before,"
        " in random order, so no\nmemo can serve it."
    )
    if any(row["diskcache_rs"] is not None and row["op"].startswith(RS_WEAKER) for row in rows):
        print(f"* {RS_WEAKER_NOTE}.")
    for note, ops in why.items():
        which = "all operations" if len(ops) == len(rows) else ", ".join(ops)
        print(f"n/a ({which}): {note}.")
    print()
    print_community_table(rows)
    print("diskcache_oxide batch calls, cost per item (median):")
    for b in batches:
        print(
            f"  {b['op']:<22} batch {b['batch']:>4}: "
            f"{b['many_per_item']['median_us']:8.2f}us per item vs "
            f"{b['single_per_item']['median_us']:8.2f}us single  ({b['speedup']:.1f}x)"
        )


def print_community_table(rows: list[dict[str, Any]]) -> None:
    """The same rows beside diskcache-community, plain and with SafeDisk: python-diskcache's and
    oxide's medians, each community column's median and p99, and its median over oxide's."""
    if community is None:
        print(
            "diskcache-community is not installed: its columns (plain and with SafeDisk) are"
            " skipped\n(`make bench` has it).\n"
        )
        return
    names = "".join(f"{name:>20}" for name, _, _ in COMMUNITY)
    print(
        f"Beside diskcache-community {community.__version__}, plain and with SafeDisk (same run):"
    )
    print(f"{'':<{OP_WIDTH}}{'medians':>18}{names}{'oxide faster by':>26}")
    head = f"{'operation':<{OP_WIDTH}}{'dc':>9}{'oxide':>9}" + f"{'median':>11}{'p99':>9}" * 2
    head += "".join(f"{'vs ' + name:>13}" for name in ("community", "SafeDisk"))
    print(head)
    print("-" * len(head))
    why: dict[str, list[str]] = {}
    for row in rows:
        if row["memo_friendly"] and row is next(r for r in rows if r["memo_friendly"]):
            print("-- memo-friendly (best case, not a typical get): as in the table above")
        cells, ratios = "", ""
        for name, key, _ in COMMUNITY:
            peer = row[key]
            if peer is None:
                why.setdefault(f"{name}: {row[f'{key}_note']}", []).append(row["op"])
                cells += f"{'n/a':>11}{'n/a':>9}"
                ratios += f"{'n/a':>13}"
            else:
                cells += f"{peer['median_us']:>11.1f}{peer['p99_us']:>9.1f}"
                ratios += f"{row[f'ratio_{key}']:>12.2f}x"
        print(
            f"{row['op']:<{OP_WIDTH}}{row['diskcache']['median_us']:>9.1f}"
            f"{row['oxide']['median_us']:>9.1f}{cells}{ratios}"
        )
    print(
        "\nTimes in microseconds. dc, oxide: python-diskcache's and diskcache_oxide's medians (the"
        "\ntable above). vs community, vs SafeDisk = diskcache-community's median / oxide's,"
        "\nplain and with SafeDisk (no target)."
    )
    for note, ops in why.items():
        which = "all operations" if len(ops) == len(rows) else ", ".join(ops)
        print(f"n/a ({which}): {note}.")
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    parser.add_argument("--json", default=str(ROOT / "results" / "latest.json"))
    parser.add_argument(
        "--working-set",
        type=int,
        default=None,
        help="keys in the headline get's cache (default 100,000; 20,000 with --quick)",
    )
    args = parser.parse_args(argv)

    n, n_big, n_batches = (500, 20, 20) if args.quick else (3000, 100, 200)
    working_set = args.working_set or (20_000 if args.quick else 100_000)
    if working_set < n + 1 + max(50, n // 10):
        parser.error(f"--working-set must be at least {n + 1 + max(50, n // 10)} for {n} reads")
    rs_version = diskcache_rs.__version__ if diskcache_rs is not None else None
    community_version = community.__version__ if community is not None else None
    community_text = (
        f"{community_version} (plain and with SafeDisk)"
        if community_version
        else "(not installed, skipped)"
    )
    print(
        f"diskcache_oxide {getattr(diskcache_oxide, '__version__', '?')} vs python-diskcache "
        f"{diskcache.__version__}, diskcache-community {community_text}"
        f" and diskcache-rs {rs_version or '(not installed, skipped)'}"
        f"\nPython {platform.python_version()} | {platform.machine()} {os.cpu_count()} cpu "
        f"| {n} iterations ({n_big} for 1 MB values), headline get over {working_set:,} keys\n"
    )
    started = time.perf_counter()
    rows = [run_pair(s) for s in scenarios(n, n_big, working_set)]
    batches = run_batches(n_batches, 100)
    print_table(rows, batches, working_set)
    below = [r["op"] for r in rows if r["target"] is not None and r["ratio"] < r["target"]]
    n_memo = sum(1 for r in rows if r["memo_friendly"])
    memo_below = sum(1 for r in rows if r["memo_friendly"] and r["op"] in below)
    elapsed = time.perf_counter() - started
    print(
        f"\n{len(rows) - len(below)}/{len(rows)} operations meet their target"
        f" ({n_memo - memo_below}/{n_memo} of them memo-friendly)"
        + (f"; below: {', '.join(below)}" if below else "")
        + f"  ({elapsed:.0f} s)"
    )
    if below:
        print("Why those rows stay below, and what closing them would cost: " + WHY_BELOW)

    report = {
        **run_facts(),
        "diskcache_version": diskcache.__version__,
        "oxide_version": getattr(diskcache_oxide, "__version__", None),
        "diskcache_rs_version": rs_version,
        "community_version": community_version,
        "quick": args.quick,
        "iterations": {"small": n, "1MB": n_big, "batches": n_batches},
        "working_set": working_set,
        "memo_friendly_means": (
            f"repeated reads of {HOT_KEYS} keys on an unchanged cache, served by oxide's memo"
            " of recent reads (D-017): a best case, not a typical get"
        ),
        "results": rows,
        "batches": batches,
        "targets": TARGETS,
    }
    write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
