"""What the benchmarks share: timing one call at a time (garbage collector off, medians and
percentiles), and importing the libraries they compare against only where those are installed."""

from __future__ import annotations

import gc
import importlib
import json
import queue
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

# Where the rows that miss their targets are explained, with what closing them would cost.
WHY_BELOW = "docs/decisions/D-016-where-the-time-goes.md"


def optional_module(name: str) -> Any:
    """The module, or None where it is not installed (its columns are then skipped)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def time_each(fn: Callable[[int], Any], iterations: int, warmup: int = 0) -> list[int]:
    """Call ``fn(i)`` ``warmup`` times untimed (with negative ``i``), then ``iterations`` times
    timed; return nanoseconds per call."""
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


async def time_each_async(
    fn: Callable[[int], Awaitable[Any]], iterations: int, warmup: int = 0
) -> list[int]:
    """``time_each`` for a coroutine function, inside the running event loop: each awaited
    call on its own, nanoseconds per call (for the asyncio clients arq and saq)."""
    for i in range(warmup):
        await fn(-1 - i)
    samples = [0] * iterations
    clock = time.perf_counter_ns
    gc_was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for i in range(iterations):
            start = clock()
            await fn(i)
            samples[i] = clock() - start
    finally:
        if gc_was_enabled:
            gc.enable()
    return samples


def summarize(
    samples: Sequence[float], scale: float = 1000.0, items_per_call: int = 1
) -> dict[str, float]:
    """Median, p90, p99, max and mean in microseconds per item; ``scale`` is samples per
    microsecond (1000 for nanoseconds, 1e-6 for seconds)."""
    ordered = sorted(samples)

    def at(fraction: float) -> float:
        return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]

    per = scale * items_per_call
    return {
        "median_us": statistics.median(ordered) / per,
        "p90_us": at(0.90) / per,
        "p99_us": at(0.99) / per,
        "max_us": ordered[-1] / per,
        "mean_us": statistics.fmean(ordered) / per,
        "n": len(ordered),
    }


def collect(
    results: Any, procs: list[Any], timeout: float, no_report: Callable[[str], Any]
) -> list[Any]:
    """One report per worker process from the `results` queue. A worker that died without
    reporting (diskcache-rs's workers have crashed here), or a run past `timeout` seconds,
    gets `no_report(why)` in its place instead of stalling the bench."""
    reports: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(reports) < len(procs):
        try:
            reports.append(results.get(timeout=0.5))
            continue
        except queue.Empty:
            pass
        crashed = [p for p in procs if p.exitcode not in (None, 0)]
        if crashed or time.monotonic() > deadline:
            why = f"worker exit codes {[p.exitcode for p in procs]}" if crashed else "timed out"
            reports += [no_report(f"no report: {why}")] * (len(procs) - len(reports))
    return reports


def write_json(path: str, report: dict[str, Any]) -> None:
    """Write a bench's report as JSON (creating its folder) and say where."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(report, indent=2))
    print(f"JSON written to {target}")
