"""What one dashboard poll costs on a large directory: the time of ``GET /api/state``, the size
of its answer and how far the process's resident memory rises while it is built (issue 19,
point 4; D-046).

Scenarios, each in a directory of its own under ``target/bench-dashboard/`` (built once, kept):

- ``jobs-100k``: 100,000 ready jobs in one job queue.
- ``job-queues-10k``, ``prefixes-10k``, ``claims-10k``: 10,000 job queues of one job each,
  10,000 queue prefixes of one item each, 10,000 live claims.
- ``lists-10k``: the three above in one directory.
- ``values-5mb``: 200 jobs of 5 MB each, 50 in each state, so that every one is on the page.

Each scenario is measured in a fresh process (the dashboard app in-process through Starlette's
TestClient): one poll to warm up, then ``--polls`` polls, reporting the median time, the answer's
bytes and the peak RSS (VmHWM) above what the process held before its first poll.

Usage: ``python benches/bench_dashboard.py [--polls N] [--only NAME] [--rebuild]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "target" / "bench-dashboard"
BIG = 5 * 1000 * 1000


def build(name: str, directory: Path) -> None:
    from diskcache_oxide import Cache, JobQueue
    from diskcache_oxide.claims import Claims

    cache = Cache(str(directory), eviction_policy="none", size_limit=2**40)
    try:
        if name == "jobs-100k":
            jobs = JobQueue(cache, "bulk")
            for start in range(0, 100_000, 10_000):
                jobs.put_many([{"n": n} for n in range(start, start + 10_000)])
        elif name == "job-queues-10k":
            with cache.transact():
                for n in range(10_000):
                    JobQueue(cache, f"queue-{n:05}").put(n)
        elif name == "prefixes-10k":
            with cache.transact():
                for n in range(10_000):
                    cache.push(n, prefix=f"prefix-{n:05}")
        elif name == "claims-10k":
            claims = Claims(cache)
            for n in range(10_000):
                assert claims.try_acquire(f"key-{n:05}", lease=10 * 365 * 86400) is not None
        elif name == "lists-10k":
            for part in ("job-queues-10k", "prefixes-10k", "claims-10k"):
                build(part, directory)
        elif name == "values-5mb":
            jobs = JobQueue(cache, "big", lease=10 * 365 * 86400, max_attempts=1)
            for n in range(50):  # dead
                jobs.put(bytes([n]) * BIG)
                job = jobs.take()
                assert job is not None
                jobs.fail(job, "no")
            for n in range(50):  # leased
                jobs.put(bytes([n]) * BIG)
                assert jobs.take() is not None
            for n in range(50):  # ready
                jobs.put(bytes([n]) * BIG)
            for n in range(50):  # scheduled
                jobs.put(bytes([n]) * BIG, delay=10 * 365 * 86400)
        else:
            raise SystemExit(f"no scenario {name!r}")
    finally:
        cache.close()


def memory() -> dict[str, int]:
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) * 1024
    return fields


#: What a scenario's polls ask for beyond the defaults: all 200 large values on the page (the
#: default page lists 20 jobs per state; the build before issue 19 listed 50).
QUERY = {"values-5mb": "?jobs_limit=50"}


def measure(directory: str, polls: int) -> None:
    """In a fresh process: the figures of ``polls`` polls, as JSON on stdout."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    from diskcache_oxide.dashboard import create_app

    with TestClient(create_app(directory), base_url="http://127.0.0.1:8000") as client:
        before = memory()["VmRSS"]
        seconds, sizes = [], []
        for n in range(polls + 1):
            start = time.perf_counter()
            answer = client.get("/api/state" + QUERY.get(Path(directory).name, ""))
            elapsed = time.perf_counter() - start
            assert answer.status_code == 200, answer.text[:500]
            if n:  # the first poll warms up
                seconds.append(elapsed)
                sizes.append(len(answer.content))
        peak = memory()["VmHWM"]
    print(
        json.dumps(
            {
                "seconds": statistics.median(seconds),
                "bytes": max(sizes),
                "rss_rise": max(0, peak - before),
            }
        )
    )


SCENARIOS = (
    "jobs-100k",
    "job-queues-10k",
    "prefixes-10k",
    "claims-10k",
    "lists-10k",
    "values-5mb",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--polls", type=int, default=3)
    parser.add_argument("--only", choices=SCENARIOS)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # the child's part
    args = parser.parse_args()
    if args.measure:
        measure(args.measure, args.polls)
        return
    for name in [args.only] if args.only else SCENARIOS:
        directory = ROOT / name
        if args.rebuild and directory.exists():
            shutil.rmtree(directory)
        if not (directory / "cache.db").exists():
            directory.mkdir(parents=True, exist_ok=True)
            print(f"building {name} ...", file=sys.stderr, flush=True)
            build(name, directory)
        out = subprocess.run(
            [sys.executable, __file__, "--measure", str(directory), "--polls", str(args.polls)],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        ).stdout
        figures = json.loads(out)
        print(
            f"{name:16} {figures['seconds']:8.3f} s/poll  {figures['bytes'] / 1e6:8.3f} MB  "
            f"RSS +{figures['rss_rise'] / 1e6:8.1f} MB",
            flush=True,
        )


if __name__ == "__main__":
    main()
