"""Gets over a real working set: diskcache_oxide beside python-diskcache 5.6.3, diskcache-community
5.8.1 (plain, and with ``SafeDisk``, its fix for CVE-2025-69872) and LMDB.

Issue 23's get rows, measured the same way for every store in one run:

- a cache of 100,000 entries, then one of 1,000,000 (``--quick``: 10,000 and 20,000, and the
  run says so), keys ``w-0`` ... with values int, str and dict in turn (benches/shared.py, as
  benches/bench_cache.py's headline get), filled untimed in batches of 10,000, each batch one
  transaction (``set_many`` for diskcache_oxide, ``set`` calls inside ``transact()`` for
  python-diskcache and diskcache-community);
- every call reads a key no call read before, in one random order, the same for every store:
  each a hit, and diskcache_oxide's memo of recent reads (D-017) can serve none of them; every
  call timed on its own (``time.perf_counter_ns``, garbage collector off) after a warm-up of
  other keys;
- ``Cache(directory)`` and ``FanoutCache(directory, shards=4, timeout=1.0)`` of each library,
  each against its python-diskcache peer: ratio = python-diskcache's median / ours, target at
  least 2.5x;
- the same gets on diskcache-community's ``Cache`` and ``FanoutCache``, plain
  ("diskcache-community") and with ``disk=SafeDisk`` ("community+SafeDisk", the restricted
  unpickling a cache that others can write to needs), in their own table: ratio = their
  median / ours (higher is better for us; no target). diskcache-community is optional: where
  it is not installed its columns are skipped, saying so;
- LMDB through py-lmdb (``lmdb`` in benches/requirements.txt), a near-physical reference for a
  store that several processes share: the same keys, their values pickled, one read
  transaction per get (``with env.begin() as txn: txn.get(key)``), bytes out with nothing
  decoded; written with ``sync=False`` (no fsync). A floor, not a peer: ratio = our ``Cache``'s
  median / LMDB's, target at most 2x. py-lmdb is optional: where it is not installed its rows
  are skipped, saying so;
- routing: our ``FanoutCache``'s get beside our ``Cache``'s at each size, and on 256 hot keys
  the memo holds (memo-friendly, labelled, last): what routing a key to its shard costs,
  target at most 1.3x (issue 32).

Each target is printed with ``met`` or ``MISSED`` after the tables and kept in the JSON
(``"targets"``). benches/bench_cache.py leads with the same 100,000-key Cache get, beside
diskcache-rs.

    .venv/bin/python benches/bench_working_set.py           # full: 100,000 and 1,000,000 entries
    .venv/bin/python benches/bench_working_set.py --quick   # 10,000 and 20,000 entries
    .venv/bin/python benches/bench_working_set.py --sizes 100000   # only these sizes

Filling a million entries takes a while for python-diskcache (a set per entry, untimed). Results
are written as JSON to benches/results/working_set.json (or --json PATH).
"""

from __future__ import annotations

import argparse
import os
import pickle
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
    Check,
    fill,
    optional_module,
    print_targets,
    ratio_text,
    run_facts,
    summarize,
    time_each,
    working_set_items,
    working_set_key,
    write_json,
)

try:
    import diskcache_oxide
except ImportError:  # pragma: no cover - explained to the user
    sys.exit("diskcache_oxide is not importable: run `make bench` (it builds it first)")

# py-lmdb is `make bench`'s (benches/requirements.txt), not `make test`'s or mypy's: imported
# with importlib so that a missing one skips its rows.
lmdb = optional_module("lmdb")
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
COMMUNITY = ("diskcache-community", "community+SafeDisk")
if community is not None:
    LIBRARIES[COMMUNITY[0]] = (community, False)
    LIBRARIES[COMMUNITY[1]] = (community, True)
#: Each library that ours is compared with.
PEERS = [name for name in LIBRARIES if name != "oxide"]
KINDS = ("Cache", f"FanoutCache(shards={SHARDS})")
SPEEDUP_TARGET = 2.5  # python-diskcache's median / ours
LMDB_TARGET = 2.0  # ours / LMDB's, at most
ROUTING_TARGET = 1.3  # our FanoutCache's get median / our Cache's, at most (issue 32, point 4)
HOT_KEYS = 256  # the memo-friendly routing row: gets of these keys only
LMDB_MAP_SIZE = 4 << 30  # address space only: the file grows as it is written
STATS = ("median_us", "p90_us", "p99_us")


def open_cache(library: str, kind: str, directory: str) -> Any:
    """A handle of ``kind`` from ``library`` on ``directory``."""
    module, safe = LIBRARIES[library]
    extra = {"disk": module.SafeDisk} if safe else {}
    if kind == "Cache":
        return module.Cache(directory, **extra)
    return module.FanoutCache(directory, shards=SHARDS, timeout=FANOUT_TIMEOUT, **extra)


def read_order(size: int, count: int) -> list[int]:
    """``count`` distinct entries of ``size``, in the random order every store reads them."""
    return random.Random(17).sample(range(size), count)


def measure(
    build: Callable[[], tuple[Callable[[int], Any], Callable[[], None]]], n: int, warm: int
) -> dict[str, Any]:
    """Fill a store (``build`` returns its get of read ``i`` and its close), time ``n`` gets
    after ``warm`` untimed ones (warm-up ``i < 0`` reads the tail of the order), and check one
    more get is a hit. The fill's time is reported, never counted."""
    started = time.perf_counter()
    get, close = build()
    filled = time.perf_counter() - started
    try:
        samples = time_each(get, n, warm)
        hit = get(n) is not None
    finally:
        close()
    return {**summarize(samples), "fill_s": filled, "hit": hit}


def bench_cache(library: str, kind: str, size: int, reads: list[str], n: int, warm: int) -> Any:
    """One cache of ``size`` entries: its get of each key of ``reads``, once."""
    directory = tempfile.mkdtemp(prefix=f"bench-ws-{library}-")

    def build() -> tuple[Callable[[int], Any], Callable[[], None]]:
        """Open and fill the cache; its get of read ``i``, and its close."""
        cache = open_cache(library, kind, directory)
        fill(cache, working_set_items(size))
        get = cache.get
        return (lambda i: get(reads[i])), cache.close

    try:
        return measure(build, n, warm)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def bench_lmdb(size: int, reads: list[str], n: int, warm: int) -> Any:
    """LMDB of ``size`` entries (the same keys, values pickled): one read transaction per get."""
    assert lmdb is not None
    directory = tempfile.mkdtemp(prefix="bench-ws-lmdb-")
    keys = [key.encode() for key in reads]  # encoded untimed: the get is LMDB's alone

    def build() -> tuple[Callable[[int], Any], Callable[[], None]]:
        """Open and fill the LMDB environment; its get of read ``i``, and its close."""
        env = lmdb.open(directory, map_size=LMDB_MAP_SIZE, sync=False, metasync=False)
        batch: list[tuple[bytes, bytes]] = []
        for key, value in working_set_items(size):
            batch.append((key.encode(), pickle.dumps(value, protocol=5)))
            if len(batch) == 10_000:
                with env.begin(write=True) as txn:
                    txn.cursor().putmulti(batch)
                batch.clear()
        if batch:
            with env.begin(write=True) as txn:
                txn.cursor().putmulti(batch)
        begin = env.begin

        def get(i: int) -> Any:
            """Read ``i`` in a read transaction of its own, as a cache's get would."""
            with begin() as txn:
                return txn.get(keys[i])

        return get, env.close

    try:
        return measure(build, n, warm)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def bench_hot(kind: str, n: int, warm: int) -> Any:
    """Our ``kind`` with ``HOT_KEYS`` entries, each get one of them (memo-friendly: after the
    first reads the memo answers, so what is left is the call and, for FanoutCache, its
    routing to a shard)."""
    directory = tempfile.mkdtemp(prefix="bench-ws-hot-")
    reads = [working_set_key(j % HOT_KEYS) for j in random.Random(5).sample(range(n + 1), n + 1)]

    def build() -> tuple[Callable[[int], Any], Callable[[], None]]:
        """Open and fill the cache; its get of read ``i``, and its close."""
        cache = open_cache("oxide", kind, directory)
        fill(cache, working_set_items(HOT_KEYS))
        get = cache.get
        return (lambda i: get(reads[i])), cache.close

    try:
        return measure(build, n, warm)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def routing_rows(rows: list[dict[str, Any]], n: int, warm: int) -> list[dict[str, Any]]:
    """Our FanoutCache's get beside our Cache's: at each size (from ``rows``), then on
    ``HOT_KEYS`` keys the memo holds (labelled memo-friendly, last)."""
    out = []
    for size in sorted({r["entries"] for r in rows}):
        cache, fanout = (
            next(r["oxide"] for r in rows if r["entries"] == size and r["kind"] == kind)
            for kind in KINDS
        )
        out.append({"label": f"{size:,} entries", "Cache": cache, "FanoutCache": fanout})
    hot = {"Cache": bench_hot("Cache", n, warm), "FanoutCache": bench_hot(KINDS[1], n, warm)}
    out.append({"label": f"{HOT_KEYS} hot keys (memo-friendly)", **hot})
    for r in out:
        r["ratio"] = r["FanoutCache"]["median_us"] / r["Cache"]["median_us"]
    return out


def checks(
    rows: list[dict[str, Any]], lmdb_rows: list[dict[str, Any]], routing: list[dict[str, Any]]
) -> list[Check]:
    """At each size, each kind at least 2.5x python-diskcache's median; our Cache's median at
    most 2x LMDB's; our FanoutCache's get at most 1.3x our Cache's."""
    out = [
        Check(
            f"{r['entries']:,} entries, {r['kind']}: vs python-diskcache",
            r["ratio"],
            SPEEDUP_TARGET,
        )
        for r in rows
    ]
    out += [
        Check(
            f"{r['entries']:,} entries, Cache: ours / LMDB", r["ratio"], LMDB_TARGET, at_most=True
        )
        for r in lmdb_rows
    ]
    out += [
        Check(
            f"{r['label']}: our FanoutCache / our Cache", r["ratio"], ROUTING_TARGET, at_most=True
        )
        for r in routing
    ]
    return out


def cells(stats: dict[str, Any]) -> str:
    """Median, p90 and p99 in microseconds."""
    return "".join(f"{stats[s]:>8.1f}" for s in STATS)


def print_routing(routing: list[dict[str, Any]]) -> None:
    """Our FanoutCache's get beside our Cache's (the cost of routing a key to its shard)."""
    stat_head = f"{'median':>8}{'p90':>8}{'p99':>8}"
    print("Routing: our FanoutCache's get beside our Cache's (us per call)")
    print(f"{'':<34}{'Cache':>24}{f'FanoutCache({SHARDS})':>24}")
    head = f"{'':<34}{stat_head}{stat_head}{'fanout / cache':>16}"
    print(head)
    print("-" * len(head))
    for r in routing:
        print(
            f"{r['label']:<34}{cells(r['Cache'])}{cells(r['FanoutCache'])}"
            f"{ratio_text(r['ratio']):>16}"
        )
    print()


def print_community(rows: list[dict[str, Any]]) -> None:
    """The same gets on diskcache-community, plain and with SafeDisk, each over ours (our
    figures are in the table above)."""
    if community is None:
        print(
            "diskcache-community: skipped: diskcache_community is not installed"
            " (`make bench` has it)\n"
        )
        return
    print(
        f"The same gets on diskcache-community {community.__version__}, plain and with SafeDisk"
        " (us per call; ratio: theirs / ours)"
    )
    stat_head = f"{'median':>8}{'p90':>8}{'p99':>8}"
    print(f"{'':<37}" + "".join(f"{name:>24}" for name in COMMUNITY))
    head = f"{'entries':>12}  {'kind':<23}{stat_head}{stat_head}"
    head += "".join(f"{label:>18}" for label in ("community / ours", "SafeDisk / ours"))
    print(head)
    print("-" * len(head))
    for r in rows:
        line = f"{r['entries']:>12,}  {r['kind']:<23}"
        line += "".join(cells(r[name]) for name in COMMUNITY)
        line += "".join(f"{ratio_text(r['ratios'][name]):>18}" for name in COMMUNITY)
        print(line)
    print()


def print_tables(rows: list[dict[str, Any]], lmdb_rows: list[dict[str, Any]], skip: str) -> None:
    """The get table (python-diskcache and ours, each kind and size), diskcache-community's
    (plain and with SafeDisk), then LMDB beside our Cache."""
    print("Get hit, memo not hit: each call reads a key no call read before (us per call)")
    stat_head = f"{'median':>8}{'p90':>8}{'p99':>8}"
    print(f"{'':<37}{'python-diskcache':>24}{'diskcache_oxide':>24}")
    head = f"{'entries':>12}  {'kind':<23}{stat_head}{stat_head}{'dc / ours':>11}"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['entries']:>12,}  {r['kind']:<23}{cells(r['python-diskcache'])}"
            f"{cells(r['oxide'])}{ratio_text(r['ratio']):>11}"
        )
    print()
    print_community(rows)
    if skip:
        print(f"LMDB: skipped: {skip}\n")
        return
    print(
        f"LMDB (py-lmdb {lmdb.__version__}): one read transaction per get, bytes out, no decoding"
        " (a floor, not a peer)"
    )
    print(f"{'':<14}{'LMDB':>24}{'ours (Cache)':>24}")
    head = f"{'entries':>12}  {stat_head}{stat_head}{'ours / LMDB':>13}"
    print(head)
    print("-" * len(head))
    for r in lmdb_rows:
        print(
            f"{r['entries']:>12,}  {cells(r['lmdb'])}{cells(r['oxide'])}"
            f"{ratio_text(r['ratio']):>13}"
        )
    print()


def main(argv: list[str] | None = None) -> int:
    """Measure every size, kind and store; print the tables and the targets; write the JSON.
    Exit 1 if a get missed (every read must be a hit)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10,000 and 20,000 entries")
    parser.add_argument("--sizes", type=int, nargs="+", help="entries per cache")
    parser.add_argument("--reads", type=int, default=None, help="timed gets per row")
    parser.add_argument("--json", default=str(ROOT / "results" / "working_set.json"))
    args = parser.parse_args(argv)

    sizes = args.sizes or ([10_000, 20_000] if args.quick else [100_000, 1_000_000])
    n = args.reads or (500 if args.quick else 5000)
    warm = max(50, n // 10)
    if min(sizes) < n + 1 + warm:
        parser.error(f"every size must be at least {n + 1 + warm} for {n} reads")
    skip = (
        ""
        if lmdb is not None
        else "lmdb is not installed (pip install -r benches/requirements.txt)"
    )
    sized = ", ".join(f"{s:,}" for s in sizes)
    print(
        f"diskcache_oxide {diskcache_oxide.__version__} vs python-diskcache"
        f" {diskcache.__version__}, diskcache-community"
        f" {community.__version__ + ' (plain and SafeDisk)' if community else '(not installed)'}"
        f" and py-lmdb {lmdb.__version__ if lmdb else '(not installed)'}:"
        f" gets over a working set\nPython {platform.python_version()} | {platform.machine()}"
        f" {os.cpu_count()} cpu | caches of {sized} entries; {n:,} timed gets each after"
        f" {warm:,} untimed"
        + (
            "\nquick: 10,000 and 20,000 entries stand in for issue 23's 100,000 and 1,000,000"
            if args.quick and not args.sizes
            else ""
        )
        + "\n"
    )
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    lmdb_rows: list[dict[str, Any]] = []
    for size in sizes:
        reads = [working_set_key(j) for j in read_order(size, n + 1 + warm)]
        for kind in KINDS:
            each = {lib: bench_cache(lib, kind, size, reads, n, warm) for lib in LIBRARIES}
            ox = each["oxide"]
            # Each peer's median / ours; "ratio" is python-diskcache's (issue 23's target).
            ratios = {peer: each[peer]["median_us"] / ox["median_us"] for peer in PEERS}
            rows.append(
                {
                    "entries": size,
                    "kind": kind,
                    **each,
                    "ratio": ratios["python-diskcache"],
                    "ratios": ratios,
                }
            )
            print(
                f"  {size:,} {kind}: "
                + ", ".join(
                    f"{lib} {s['median_us']:.1f} us (filled in {s['fill_s']:.1f} s)"
                    for lib, s in each.items()
                ),
                file=sys.stderr,
            )
        if not skip:
            ours = next(r["oxide"] for r in rows if r["entries"] == size and r["kind"] == "Cache")
            floor = bench_lmdb(size, reads, n, warm)
            ratio = ours["median_us"] / floor["median_us"]
            lmdb_rows.append({"entries": size, "lmdb": floor, "oxide": ours, "ratio": ratio})
            print(f"  {size:,} LMDB: {floor['median_us']:.1f} us", file=sys.stderr)
    print_tables(rows, lmdb_rows, skip)
    routing = routing_rows(rows, n, warm)
    print_routing(routing)
    print(
        "dc / ours: python-diskcache's median / ours, each kind against its own (higher is"
        " better for oxide);\ncommunity / ours, SafeDisk / ours: the same for"
        " diskcache-community, plain and with SafeDisk."
        + ("" if skip else "\nours / LMDB: our Cache's median / LMDB's (lower is better).")
        + "\n"
    )
    targets = print_targets(
        f"Targets (issue 23), {n:,} gets per row" + (" (LMDB's skipped):" if skip else ":"),
        checks(rows, lmdb_rows, routing),
    )
    missed = [f"{r['entries']:,} {lib}" for r in rows for lib in LIBRARIES if not r[lib]["hit"]] + [
        f"{r['entries']:,} LMDB" for r in lmdb_rows if not r["lmdb"]["hit"]
    ]
    missed += [
        f"{r['label']} {k}" for r in routing for k in ("Cache", "FanoutCache") if not r[k]["hit"]
    ]
    elapsed = time.perf_counter() - started
    print((f"GETS THAT MISSED: {', '.join(missed)}  " if missed else "") + f"({elapsed:.0f} s)")
    report = {
        **run_facts(),
        "diskcache_version": diskcache.__version__,
        "community_version": community.__version__ if community else None,
        "oxide_version": diskcache_oxide.__version__,
        "lmdb_version": lmdb.__version__ if lmdb else None,
        "libraries": list(LIBRARIES),
        "quick": args.quick,
        "sizes": sizes,
        "reads": n,
        "warmup": warm,
        "fanout": {"shards": SHARDS, "timeout": FANOUT_TIMEOUT},
        "skipped": {
            **({"lmdb": skip} if skip else {}),
            **({} if community else {"diskcache-community": "not installed"}),
        },
        "results": rows,
        "lmdb": lmdb_rows,
        "routing": routing,
        "targets": targets,
    }
    write_json(args.json, report)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
