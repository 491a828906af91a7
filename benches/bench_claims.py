"""Compute-once waiters: how soon a waiter in another process has the value once the winner
stores it, diskcache_oxide beside python-diskcache 5.6.3, in one run.

Each sample: the parent holds the claim on a key (for python-diskcache, its ``Lock`` recipe,
the way a python-diskcache user makes other processes wait), a waiter process asks for the
key, and 10-30 ms later the parent stores the value, a ``time.monotonic()`` stamp, and lets
go of the claim. The waiter reports how long after the stamp it returned the value.

- ``oxide``: ``cache.get_or_compute(key, fn)`` in the waiter, woken by the commit (D-044).
- ``oxide-portable``: the same with ``DISKCACHE_OXIDE_PORTABLE=1``: no directory watch, so
  the waiter polls (what it does where there is no inotify, D-040).
- ``diskcache``: ``with diskcache.Lock(cache, name): cache.get(key)``, whose acquire polls
  every millisecond.

Usage: ``python benches/bench_claims.py [--quick] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import time
from typing import Any

import diskcache
import diskcache_oxide
from diskcache_oxide.claims import Claims
from shared import summarize, write_json

SPAWN = multiprocessing.get_context("spawn")


def waiter(name: str, directory: str, samples: int, ready: Any, asked: Any, results: Any) -> None:
    """Spawned: ask for each key in turn; report how long after its stamp each value came."""
    latencies: list[float] = []
    ready.set()
    if name == "diskcache":
        cache: Any = diskcache.Cache(directory, timeout=60)
        for i in range(samples):
            asked.value = i + 1
            with diskcache.Lock(cache, f"lock-{i}"):
                stamp = cache.get(("value", i))
            latencies.append(time.monotonic() - stamp)
    else:
        cache = diskcache_oxide.Cache(directory, timeout=60, eviction_policy="none")

        def never() -> float:
            raise AssertionError("the waiter should never compute")

        for i in range(samples):
            asked.value = i + 1
            stamp = cache.get_or_compute(("value", i), never, lease=60)
            latencies.append(time.monotonic() - stamp)
    cache.close()
    results.put(latencies)


def bench(name: str, samples: int) -> dict[str, Any]:
    directory = tempfile.mkdtemp(prefix=f"bench-claims-{name}-")
    saved = os.environ.get("DISKCACHE_OXIDE_PORTABLE")
    try:
        if name == "oxide-portable":
            os.environ["DISKCACHE_OXIDE_PORTABLE"] = "1"
        if name == "diskcache":
            cache: Any = diskcache.Cache(directory, timeout=60)
            holds = [diskcache.Lock(cache, f"lock-{i}") for i in range(samples)]
            for lock in holds:
                lock.acquire()
        else:
            cache = diskcache_oxide.Cache(directory, timeout=60, eviction_policy="none")
            claims = Claims(cache)
            holds = [claims.try_acquire(("value", i), lease=60) for i in range(samples)]
        ready, asked, results = SPAWN.Event(), SPAWN.Value("i", 0), SPAWN.Queue()
        proc = SPAWN.Process(target=waiter, args=(name, directory, samples, ready, asked, results))
        proc.start()
        ready.wait(60)
        rng = random.Random(7)
        for i in range(samples):
            deadline = time.monotonic() + 30
            while asked.value <= i and time.monotonic() < deadline:
                time.sleep(0.0005)
            time.sleep(rng.uniform(0.01, 0.03))  # the waiter settles into its wait
            cache.set(("value", i), time.monotonic())
            holds[i].release()
        latencies = results.get(timeout=120)
        proc.join(30)
        cache.close()
        return dict(summarize(latencies, scale=1e-6))
    finally:
        if saved is None:
            os.environ.pop("DISKCACHE_OXIDE_PORTABLE", None)
        else:
            os.environ["DISKCACHE_OXIDE_PORTABLE"] = saved
        shutil.rmtree(directory, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--json")
    args = parser.parse_args()
    samples = 30 if args.quick else 150
    print(f"compute-once waiter wake-up across processes, {samples} samples each")
    report: dict[str, Any] = {"samples": samples, "python": sys.version.split()[0]}
    for name in ("oxide", "oxide-portable", "diskcache"):
        report[name] = bench(name, samples)
    peer = report["diskcache"]["median_us"]
    print(f"{'waiter':<16}{'median µs':>12}{'p90 µs':>12}{'p99 µs':>12}{'vs diskcache':>14}")
    for name in ("oxide", "oxide-portable", "diskcache"):
        row = report[name]
        ratio = peer / row["median_us"] if row["median_us"] else float("inf")
        print(
            f"{name:<16}{row['median_us']:>12.0f}{row['p90_us']:>12.0f}"
            f"{row['p99_us']:>12.0f}{ratio:>13.2f}x"
        )
    if args.json:
        write_json(args.json, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
