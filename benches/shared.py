"""What the benchmarks share: timing one call at a time (garbage collector off, medians and
percentiles), importing the libraries they compare against only where those are installed,
python-diskcache's mixed workload run in several processes (benches/bench_mixed.py and
benches/bench_redis.py), filling a large cache untimed, and printing each target with whether
it is met (one format for every bench)."""

from __future__ import annotations

import gc
import importlib
import json
import multiprocessing
import os
import platform
import queue
import random
import statistics
import time
from array import array
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
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


def run_facts() -> dict[str, Any]:
    """When and where a bench ran, the first fields of every JSON report."""
    return {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }


def write_json(path: str, report: dict[str, Any]) -> None:
    """Write a bench's report as JSON (creating its folder) and say where."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(report, indent=2))
    print(f"JSON written to {target}")


# ----------------------------------------------------------------------------- targets


@dataclass
class Check:
    """One target of a bench: a ratio beside its bound, at least ``bound`` (a speed-up over
    python-diskcache, higher is better) or, with ``at_most``, at most ``bound`` (a slow-down
    against a floor such as LMDB, lower is better). ``detail`` names what missed, where one
    check stands for several numbers (its ``ratio`` is then the worst of them)."""

    label: str
    ratio: float | None
    bound: float
    at_most: bool = False
    detail: str = ""

    @property
    def met(self) -> bool:
        """Whether the ratio is on the right side of its bound (a missing ratio never is)."""
        if self.ratio is None:
            return False
        return self.ratio <= self.bound if self.at_most else self.ratio >= self.bound

    def record(self) -> dict[str, Any]:
        """The check as the JSON reports keep it."""
        return {
            "label": self.label,
            "ratio": self.ratio,
            "target": f"{'<=' if self.at_most else '>='} {self.bound:.1f}x",
            "bound": self.bound,
            "at_most": self.at_most,
            "met": self.met,
            "detail": self.detail,
        }


def verdict(ratio: float | None, bound: float, at_most: bool = False) -> str:
    """``>= 2.5x met`` or ``>= 2.5x MISSED`` (``<=`` where lower is better): the one way every
    bench prints a target beside its ratio, in a table's column or a targets section."""
    word = "met" if Check("", ratio, bound, at_most).met else "MISSED"
    return f"{'<=' if at_most else '>='} {bound:.1f}x {word}"


def ratio_text(x: float | None) -> str:
    """A ratio as the tables print it: 2.47x, 12.3x, 1,024x; ``-`` where there is none."""
    if x is None:
        return "-"
    return f"{x:.2f}x" if x < 10 else f"{x:.1f}x" if x < 100 else f"{x:,.0f}x"


def print_targets(title: str, checks: list[Check]) -> list[dict[str, Any]]:
    """Print a bench's targets section: each check's ratio and ``target >= 3.0x  met`` (or
    ``MISSED``, with what missed), then how many are met; return the checks for the JSON."""
    print(title)
    width = max(len(c.label) for c in checks) + 2
    for c in checks:
        line = f"  {c.label:<{width}}{ratio_text(c.ratio):>9}   target "
        line += verdict(c.ratio, c.bound, c.at_most)
        print(line + (f"  ({c.detail})" if c.detail else ""))
    missed = [c.label for c in checks if not c.met]
    print(f"{len(checks) - len(missed)}/{len(checks)} targets met")
    if missed:
        print(f"Why rows stay below, and what closing them would cost: {WHY_BELOW}")
    print()
    return [c.record() for c in checks]


# ----------------------------------------------------------------------------- filling

# The small values of benches/bench_cache.py's rows, and of the working sets that
# bench_cache.py's headline get and benches/bench_working_set.py read (int, str, dict in turn).
SMALL_VALUES: dict[str, Any] = {
    "int": 1234567,
    "str": "a twenty char value!",
    "dict": {"a": 1, "b": [1, 2, 3]},
}


def working_set_key(j: int) -> str:
    """The key of entry ``j`` of a working set."""
    return f"w-{j}"


def working_set_items(size: int) -> Iterable[tuple[str, Any]]:
    """The ``size`` entries of a working set: ``w-0`` ... with values int, str and dict in
    turn, made as they are stored (a million of them at once would be a few hundred MB)."""
    values = list(SMALL_VALUES.values())
    return ((working_set_key(j), values[j % len(values)]) for j in range(size))


def fill(cache: Any, items: Iterable[tuple[Any, Any]], batch: int = 10_000) -> None:
    """Store ``items`` untimed, ``batch`` at a time, each batch one transaction: ``set_many``
    where the library has it (diskcache_oxide, diskcache-rs), else ``set`` calls inside
    ``transact()`` (python-diskcache's Cache and FanoutCache). One transaction per key would
    make filling a million entries take minutes; one for all of them would grow the WAL by
    the whole cache."""
    pending: list[tuple[Any, Any]] = []

    def flush() -> None:
        """Store the pending batch in one transaction."""
        # Asked of the class: python-diskcache's FanoutCache fails an assert in __getattr__
        # for a name its shards lack, where hasattr expects an AttributeError.
        if hasattr(type(cache), "set_many"):
            cache.set_many(dict(pending))
        elif hasattr(cache, "transact"):
            with cache.transact():
                for key, value in pending:
                    cache.set(key, value)
        else:  # pragma: no cover - every library compared here has one of the two
            for key, value in pending:
                cache.set(key, value)
        pending.clear()

    for item in items:
        pending.append(item)
        if len(pending) >= batch:
            flush()
    if pending:
        flush()


# ----------------------------------------------------------------------------- the mixed workload

# python-diskcache's published mix (its tests/benchmark_core.py): 90% get, 9% set, 1% delete
# over 100 bytes keys. benches/bench_threads.py draws a 90/10 mix over 1,000 keys the same way.
MIX_KEYS = 100
ACTIONS = ("get", "set", "delete")
GET, SET, DELETE = range(3)
SPAWN = multiprocessing.get_context("spawn")

Plan = list[tuple[int, bytes, bytes]]


def plan(seed: int, ops: int, keys: int = MIX_KEYS, gets: float = 0.9, sets: float = 0.09) -> Plan:
    """``ops`` operations of the mix: (action, key, value), drawn as python-diskcache draws
    them (key, then value, then the action, per operation): a get with probability ``gets``,
    a set with ``sets``, else a delete."""
    rng = random.Random(seed)
    out: Plan = []
    for count in range(ops):
        key = str(rng.randrange(keys)).encode()
        value = str(count).encode() * rng.randrange(1, 100)
        choice = rng.random()
        action = GET if choice < gets else SET if choice < gets + sets else DELETE
        out.append((action, key, value))
    return out


def run_plan(cache: Any, ops: Plan, timed: bool) -> tuple[list[array[int]], list[int]]:
    """Do the operations; return nanoseconds per call and the misses (a get finding nothing,
    a set or delete returning False) per action."""
    samples: list[array[int]] = [array("q"), array("q"), array("q")]
    misses = [0, 0, 0]
    clock = time.perf_counter_ns
    get, set_, delete = cache.get, cache.set, cache.delete
    for action, key, value in ops:
        if action == GET:
            start = clock()
            result = get(key)
            end = clock()
            missed = result is None
        elif action == SET:
            start = clock()
            result = set_(key, value)
            end = clock()
            missed = result is False
        else:
            start = clock()
            result = delete(key)
            end = clock()
            missed = result is False
        if timed:
            samples[action].append(end - start)
        misses[action] += missed
    return samples, misses


def mix_worker(
    opener: Callable[..., Any],
    opener_args: tuple[Any, ...],
    index: int,
    ops: int,
    warmup: int,
    barrier: Any,
    results: Any,
) -> None:
    """Spawned: open a handle with ``opener(*opener_args)``, warm up, wait for the others, run
    process ``index``'s timed operations, report (index, start, end, samples per action, misses
    per action, error)."""
    error = ""
    samples: list[array[int]] = [array("q"), array("q"), array("q")]
    misses = [0, 0, 0]
    start = end = 0.0
    try:
        timed_ops = plan(index, ops)
        warm_ops = plan(1000 + index, warmup)
        cache = opener(*opener_args)
        try:
            run_plan(cache, warm_ops, timed=False)
            barrier.wait(timeout=120)
            gc.collect()
            gc.disable()
            start = time.monotonic()
            samples, misses = run_plan(cache, timed_ops, timed=True)
            end = time.monotonic()
            gc.enable()
        finally:
            cache.close()
    except Exception as exc:  # reported, counted as a failed run
        error = f"{type(exc).__name__}: {exc}"
        barrier.abort()
    results.put((index, start, end, [a.tobytes() for a in samples], misses, error))


def run_mix(
    opener: Callable[..., Any],
    opener_args: tuple[Any, ...],
    procs: int,
    ops: int,
    warmup: int,
    timeout: float,
) -> dict[str, Any]:
    """The mix in ``procs`` spawned processes started together at a barrier, each with its own
    handle (``opener`` must be a module-level function, so that a spawned process can import
    it): per-action and all-call statistics, misses per action, and the wall time from the
    first process's first timed call to the last process's last one. The caller fills the
    cache first and labels the row."""
    barrier = SPAWN.Barrier(procs)
    results = SPAWN.Queue()
    workers = [
        SPAWN.Process(
            target=mix_worker,
            args=(opener, opener_args, i, ops, warmup, barrier, results),
        )
        for i in range(procs)
    ]
    for p in workers:
        p.start()
    reports = collect(
        results, workers, timeout, lambda why: (-1, 0.0, 0.0, [b"", b"", b""], [0, 0, 0], why)
    )
    for p in workers:
        p.join(60)
        if p.is_alive():
            p.kill()

    errors = [r[5] for r in reports if r[5]]
    per_action: list[array[int]] = [array("q"), array("q"), array("q")]
    misses = [0, 0, 0]
    for r in reports:
        for action in range(3):
            per_action[action].frombytes(r[3][action])
            misses[action] += r[4][action]
    every: array[int] = array("q")
    stats: dict[str, Any] = {}
    for name, samples, missed in zip(ACTIONS, per_action, misses, strict=True):
        every.extend(samples)
        if samples:
            stats[name] = summarize(samples)
            stats[name]["misses"] = missed
    if every:
        stats["all"] = summarize(every)
    ok = [r for r in reports if not r[5]]
    wall = max(r[2] for r in ok) - min(r[1] for r in ok) if ok else 0.0
    return {
        "processes": procs,
        "ops_per_process": ops,
        "calls": len(every),
        "wall_s": wall,
        "ops_per_s": len(every) / wall if wall > 0 else 0.0,
        "stats": stats,
        "misses": dict(zip(ACTIONS, misses, strict=True)),
        "errors": errors[:3],
    }
