"""What the benchmarks share: timing one call at a time (garbage collector off, medians and
percentiles), and importing the libraries they compare against only where those are installed."""

from __future__ import annotations

import gc
import importlib
import statistics
import time
from collections.abc import Callable, Sequence
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
