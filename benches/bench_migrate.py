"""Migration benchmark: how long ``diskcache_oxide.migrate`` takes over a python-diskcache
5.6.3 directory of 100,000 entries (or ``--entries N``).

The source is built with python-diskcache itself, in a fresh temporary directory, with a mix
like a real cache's: short strings and ints stored natively, dicts and tuples stored as
pickles (decoded by the restricted unpickler, as by default), a tenth of the entries with an
expiry and a tag, and one entry in a hundred a 40 KB value file. Building the source is not
timed; the migration is, from the call to its return (the destination renamed into place).

    .venv/bin/python benches/bench_migrate.py                   # 100,000 entries, a Cache
    .venv/bin/python benches/bench_migrate.py --fanout 8        # the same in a FanoutCache
    .venv/bin/python benches/bench_migrate.py --quick           # 5,000 entries

Results are printed and written as JSON to benches/results/migrate.json (or --json PATH).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from typing import Any

import diskcache

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import diskcache_oxide  # noqa: E402
from shared import write_json  # noqa: E402


def build(directory: str, entries: int, shards: int) -> int:
    """Fill a python-diskcache directory; returns the bytes of its files."""
    source: Any = (
        diskcache.FanoutCache(directory, shards=shards, eviction_policy="none")
        if shards
        else diskcache.Cache(directory, eviction_policy="none")
    )
    blob = os.urandom(40_000)
    batch = 5_000
    for start in range(0, entries, batch):
        with source.transact():
            for number in range(start, min(start + batch, entries)):
                kind = number % 10
                if number % 100 == 99:
                    value: Any = blob
                elif kind < 4:
                    value = f"value {number}"
                elif kind < 6:
                    value = number
                elif kind < 9:
                    value = {"id": number, "name": f"user {number}", "tags": ("a", "b")}
                else:
                    value = (number, float(number), [number, None])
                expiring = number % 10 == 0
                source.set(
                    f"key:{number}",
                    value,
                    expire=86_400 if expiring else None,
                    tag="t" if expiring else None,
                )
    source.close()
    total = 0
    for here, _, files in os.walk(directory):
        total += sum(os.path.getsize(os.path.join(here, name)) for name in files)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--fanout", type=int, default=0, help="shards (0: a plain Cache)")
    parser.add_argument("--quick", action="store_true", help="5,000 entries: a smoke run")
    parser.add_argument("--json", default=os.path.join("benches", "results", "migrate.json"))
    args = parser.parse_args()
    if args.quick:
        args.entries = 5_000

    root = tempfile.mkdtemp(prefix="bench-migrate-")
    try:
        src = os.path.join(root, "src")
        started = time.perf_counter()
        size = build(src, args.entries, args.fanout)
        built = time.perf_counter() - started
        report = diskcache_oxide.migrate(src, os.path.join(root, "dst"))
        layout = f"FanoutCache({args.fanout} shards)" if args.fanout else "Cache"
        print(f"source: python-diskcache {layout}, {args.entries:,} entries, {size:,} bytes")
        print(f"  (built in {built:.1f} s)")
        print(
            f"migrate: {report.seconds:.2f} s, {report.entries_per_second:,.0f} entries/s; "
            f"converted {report.converted:,}, skipped {len(report.skipped)}, "
            f"{report.bytes:,} bytes of values"
        )
        write_json(
            args.json,
            {
                "layout": layout,
                "entries": args.entries,
                "source_bytes": size,
                "seconds": report.seconds,
                "entries_per_second": report.entries_per_second,
                "converted": report.converted,
                "skipped": len(report.skipped),
                "value_bytes": report.bytes,
                "exact_times": "store_time" in report.carried,
            },
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
