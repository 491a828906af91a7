"""Side-by-side latency benchmark: python-diskcache 5.6.3 vs diskcache_oxide.

Both run in this one process, on this machine, each in its own fresh temporary
directory with default settings. Every operation is timed on its own with
``time.perf_counter_ns`` after a warm-up, with the garbage collector off while timing.
The table shows median and p99 latency per operation in microseconds, and the ratio
diskcache / oxide of the medians (higher is better for oxide) beside its target.

    python benches/bench_cache.py            # full run (~1-2 minutes)
    python benches/bench_cache.py --quick    # fewer iterations, for a smoke test

Results are also written as JSON to benches/results/latest.json (or --json PATH).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import diskcache

try:
    import diskcache_oxide
except ImportError:  # pragma: no cover - explained to the user
    sys.exit("diskcache_oxide is not importable: run `make bench` (it builds it first)")

ROOT = Path(__file__).resolve().parent
SMALL_VALUES: dict[str, Any] = {
    "int": 1234567,
    "str": "a twenty char value!",
    "dict": {"a": 1, "b": [1, 2, 3]},
}
MB = 1 << 20
TARGETS = {"get": 2.5, "set": 3.0, "add": 3.0, "delete": 3.0, "incr": 3.0, "set 1MB": 4.0}


def target_for(op: str) -> float | None:
    if op.startswith("set 1MB"):
        return TARGETS["set 1MB"]
    if op.startswith("get 1MB"):
        return TARGETS["get"]
    for prefix in ("get", "set", "add", "delete", "incr"):
        if op.startswith(prefix):
            return TARGETS[prefix]
    return None


# ----------------------------------------------------------------------------- timing


def time_each(fn: Callable[[int], Any], iterations: int, warmup: int) -> list[int]:
    """Call fn(i) for warm-up then for ``iterations`` timed calls; return ns per call."""
    for i in range(warmup):
        fn(-1 - i)
    samples = [0] * iterations
    clock = time.perf_counter_ns
    gc_was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for i in range(iterations):
            start = clock()
            fn(i)
            samples[i] = clock() - start
    finally:
        if gc_was_enabled:
            gc.enable()
    return samples


def summarize(samples_ns: list[int], items_per_call: int = 1) -> dict[str, float]:
    ordered = sorted(samples_ns)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {
        "median_us": statistics.median(ordered) / 1000 / items_per_call,
        "p99_us": p99 / 1000 / items_per_call,
        "mean_us": statistics.fmean(ordered) / 1000 / items_per_call,
        "n": len(ordered),
    }


# ----------------------------------------------------------------------------- scenarios


class Scenario:
    """One operation, set up the same way on a cache of either implementation."""

    def __init__(self, name: str, iterations: int, warmup: int, build: Callable[[Any], Any]):
        self.name = name
        self.iterations = iterations
        self.warmup = warmup
        self.build = build  # cache -> fn(i)


def scenarios(n: int, n_big: int) -> list[Scenario]:
    warm = max(50, n // 10)
    out: list[Scenario] = []
    for label, value in SMALL_VALUES.items():

        def get_hit(cache: Any, value: Any = value) -> Callable[[int], Any]:
            for i in range(256):
                cache.set(f"hit-{i}", value)
            return lambda i: cache.get(f"hit-{i % 256}")

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

        out += [
            Scenario(f"get {label}", n, warm, get_hit),
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
    out.append(Scenario("get 1MB bytes", n_big, 10, get_big))
    return out


def run_pair(scenario: Scenario) -> dict[str, Any]:
    result: dict[str, Any] = {"op": scenario.name}
    for impl_name, module in (("diskcache", diskcache), ("oxide", diskcache_oxide)):
        directory = tempfile.mkdtemp(prefix=f"bench-{impl_name}-")
        cache = module.Cache(directory)
        try:
            fn = scenario.build(cache)
            samples = time_each(fn, scenario.iterations, scenario.warmup)
            result[impl_name] = summarize(samples)
        finally:
            cache.close()
            shutil.rmtree(directory, ignore_errors=True)
    result["ratio"] = result["diskcache"]["median_us"] / result["oxide"]["median_us"]
    result["target"] = target_for(scenario.name)
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
            m = summarize(time_each(many, n_batches, 3), batch)
            if op != "set":
                fill()
            s = summarize(time_each(single, n_batches, 3), batch)
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


def print_table(rows: list[dict[str, Any]], batches: list[dict[str, Any]]) -> None:
    head = (
        f"{'operation':<24}{'diskcache med':>14}{'p99':>10}{'oxide med':>12}{'p99':>10}"
        f"{'ratio':>9}{'target':>9}  "
    )
    print(head)
    print("-" * len(head))
    for row in rows:
        d, o = row["diskcache"], row["oxide"]
        target = row["target"]
        verdict = ""
        if target is not None:
            verdict = "ok" if row["ratio"] >= target else "BELOW"
        target_text = f">={target:g}x" if target is not None else "-"
        print(
            f"{row['op']:<24}{d['median_us']:>12.1f}us{d['p99_us']:>8.1f}us"
            f"{o['median_us']:>10.1f}us{o['p99_us']:>8.1f}us"
            f"{row['ratio']:>8.2f}x{target_text:>9}  {verdict}"
        )
    print()
    print("diskcache_oxide batch calls, cost per item (median):")
    for b in batches:
        print(
            f"  {b['op']:<22} batch {b['batch']:>4}: "
            f"{b['many_per_item']['median_us']:8.2f}us per item vs "
            f"{b['single_per_item']['median_us']:8.2f}us single  ({b['speedup']:.1f}x)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    parser.add_argument("--json", default=str(ROOT / "results" / "latest.json"))
    args = parser.parse_args(argv)

    n, n_big, n_batches = (500, 20, 20) if args.quick else (3000, 100, 200)
    print(
        f"python-diskcache {diskcache.__version__} vs diskcache_oxide "
        f"{getattr(diskcache_oxide, '__version__', '?')} | Python {platform.python_version()} "
        f"| {platform.machine()} {os.cpu_count()} cpu | {n} iterations "
        f"({n_big} for 1 MB values)\n"
    )
    started = time.perf_counter()
    rows = [run_pair(s) for s in scenarios(n, n_big)]
    batches = run_batches(n_batches, 100)
    print_table(rows, batches)
    below = [r["op"] for r in rows if r["target"] is not None and r["ratio"] < r["target"]]
    elapsed = time.perf_counter() - started
    print(
        f"\n{len(rows) - len(below)}/{len(rows)} operations meet their target"
        + (f"; below: {', '.join(below)}" if below else "")
        + f"  ({elapsed:.0f} s)"
    )

    report = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "diskcache_version": diskcache.__version__,
        "oxide_version": getattr(diskcache_oxide, "__version__", None),
        "iterations": {"small": n, "1MB": n_big, "batches": n_batches},
        "results": rows,
        "batches": batches,
        "targets": TARGETS,
    }
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))
    print(f"JSON written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
