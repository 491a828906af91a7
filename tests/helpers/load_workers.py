"""Process bodies for durability/test_load.py (spawned, so importable).

Every body takes the implementation's module name (``support.IMPL_NAME``), opens the cache
with the default timeout (60 s) and never passes ``retry=True``, so a ``Timeout`` surfaces
as an error. It waits on the shared barrier, runs for ``seconds``, and writes what it did
as JSON to ``out_path``: op counts, errors (their repr, the first few), ``Timeout``\\ s, and
resident-memory samples ``[t, rss, rss_anon]`` (bytes, every ``SAMPLE_EVERY`` seconds, ``t``
from the start of the run). Whatever a worker pulls it appends to a log file, not to a list,
so its memory stays flat however long it runs.
"""

from __future__ import annotations

import collections
import importlib
import json
import os
import random
import time
from typing import Any

import support

SAMPLE_EVERY = 0.5
KEYS = 1000  # the cache processes' key space: k0 .. k999
QUEUE = "load"  # the push/pull queue's prefix
JOBS = "loadjobs"  # the JobQueue's name
JOB_EVERY = 4  # a producer puts every 4th item on the JobQueue, the others it pushes
MAX_BACKLOG = 2000  # a producer waits while its queue holds more than this
MAX_ERRORS = 20  # reprs kept per process
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> tuple[int, int]:
    """(resident set size, anonymous part of it) of this process, in bytes."""
    with open("/proc/self/statm") as f:
        resident = int(f.read().split()[1]) * PAGE
    anon = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                anon = int(line.split()[1]) * 1024
                break
    return resident, anon


class Meter:
    """Counts, errors and memory samples of one process."""

    def __init__(self, mod: Any, role: str, index: int) -> None:
        self.mod = mod
        self.role = role
        self.index = index
        self.ops: collections.Counter[str] = collections.Counter()
        self.errors: list[str] = []
        self.error_count = 0
        self.timeouts = 0
        self.samples: list[list[float]] = []
        self.start = time.monotonic()
        self.next_sample = self.start
        self.extra: dict[str, Any] = {}

    def begin(self, seconds: float) -> float:
        """Start the clock after the barrier; returns the deadline."""
        self.start = self.next_sample = time.monotonic()
        self.sample(self.start)
        return self.start + seconds

    def sample(self, now: float) -> None:
        if now >= self.next_sample:
            self.next_sample += SAMPLE_EVERY
            resident, anon = rss()
            self.samples.append([round(now - self.start, 3), resident, anon])

    def failed(self, what: str, exc: BaseException) -> None:
        self.error_count += 1
        if isinstance(exc, self.mod.Timeout):
            self.timeouts += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(f"{self.role}{self.index} {what}: {exc!r}")

    def problem(self, text: str) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(f"{self.role}{self.index}: {text}")

    def dump(self, out_path: str) -> None:
        self.sample(self.next_sample)  # a last sample
        report = {
            "role": self.role,
            "index": self.index,
            "seconds": round(time.monotonic() - self.start, 3),
            "ops": dict(self.ops),
            "errors": self.errors,
            "error_count": self.error_count,
            "timeouts": self.timeouts,
            "samples": self.samples,
            **self.extra,
        }
        with open(out_path + ".tmp", "w") as f:
            json.dump(report, f)
        os.replace(out_path + ".tmp", out_path)


def key_value(key_index: int, writer: int, n: int, size: int) -> bytes:
    """A self-describing value (support.payload) whose generation names its key."""
    return support.payload(key_index * 10**12 + writer * 10**9 + n, size)


def value_size(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.03:
        return rng.randrange(32 * 1024, 96 * 1024)  # a value file
    if r < 0.20:
        return rng.randrange(1000, 8000)
    return rng.randrange(10, 300)


def cache_worker(
    impl_name: str, directory: str, index: int, seconds: float, barrier: Any, out_path: str
) -> None:
    """A 90/9/1 mix of get/set/delete over ``KEYS`` keys; every value read is checked."""
    mod = importlib.import_module(impl_name)
    meter = Meter(mod, "cache", index)
    rng = random.Random(1000 + index)
    cache = mod.Cache(directory)
    barrier.wait(timeout=120)
    deadline = meter.begin(seconds)
    n = 0
    while (now := time.monotonic()) < deadline:
        meter.sample(now)
        k = rng.randrange(KEYS)
        key = f"k{k}"
        r = rng.random()
        try:
            if r < 0.90:
                value = cache.get(key)
                meter.ops["get"] += 1
                if value is None:
                    meter.ops["miss"] += 1
                else:
                    problem = support.check_payload(value)
                    if problem is None and int.from_bytes(value[:8], "little") // 10**12 != k:
                        problem = "holds the value of another key"
                    if problem:
                        meter.problem(f"get {key}: {problem}")
            elif r < 0.99:
                n += 1
                size = value_size(rng)
                cache.set(key, key_value(k, index, n, size))
                meter.ops["set"] += 1
                if size >= 32 * 1024:
                    meter.ops["set_file"] += 1
            else:
                cache.delete(key)
                meter.ops["delete"] += 1
        except Exception as exc:
            meter.failed(f"op on {key}", exc)
    cache.close()
    meter.dump(out_path)


def _backlog(cache: Any, jobs: Any) -> tuple[int, int]:
    """(items in the push/pull queue, ready jobs)."""
    front = cache.peek(prefix=QUEUE, side="front")[0]
    back = cache.peek(prefix=QUEUE, side="back")[0]
    depth = 0
    if front is not None and back is not None:
        depth = int(back.rsplit("-", 1)[1]) - int(front.rsplit("-", 1)[1]) + 1
    return depth, jobs.counts().ready


def producer(
    impl_name: str, directory: str, index: int, seconds: float, barrier: Any, out_path: str
) -> None:
    """Push items ``"{index}:{seq}"``, seq = 0, 1, ...; every ``JOB_EVERY``-th goes to the
    JobQueue instead. Reports how many it produced (``produced``) and the seqs of calls that
    raised (whose item may or may not be there: ``uncertain``)."""
    mod = importlib.import_module(impl_name)
    meter = Meter(mod, "producer", index)
    cache = mod.Cache(directory)
    jobs = mod.JobQueue(cache, JOBS, lease=600)
    uncertain: list[int] = []
    throttled = 0.0
    barrier.wait(timeout=120)
    deadline = meter.begin(seconds)
    seq = 0
    while (now := time.monotonic()) < deadline:
        meter.sample(now)
        item = f"{index}:{seq}"
        try:
            if seq % JOB_EVERY == JOB_EVERY - 1:
                jobs.put(item)
                meter.ops["put"] += 1
            else:
                cache.push(item, prefix=QUEUE)
                meter.ops["push"] += 1
        except Exception as exc:
            meter.failed(f"produce {item}", exc)
            uncertain.append(seq)
        seq += 1
        if seq % 64 == 0:
            # keep the backlog bounded, so the database (and what maps it) stays flat
            try:
                while time.monotonic() < deadline:
                    depth, ready = _backlog(cache, jobs)
                    if depth <= MAX_BACKLOG and ready <= MAX_BACKLOG // JOB_EVERY:
                        break
                    time.sleep(0.02)
                    throttled += 0.02
                    meter.sample(time.monotonic())
            except Exception as exc:
                meter.failed("backlog", exc)
    meter.extra = {"produced": seq, "uncertain": uncertain, "throttled": round(throttled, 2)}
    cache.close()
    meter.dump(out_path)


def puller(
    impl_name: str,
    directory: str,
    index: int,
    seconds: float,
    barrier: Any,
    out_path: str,
    log_path: str,
) -> None:
    """Blocking ``pull(timeout=0.5)`` until the deadline; appends each item to ``log_path``."""
    mod = importlib.import_module(impl_name)
    meter = Meter(mod, "puller", index)
    cache = mod.Cache(directory)
    barrier.wait(timeout=120)
    deadline = meter.begin(seconds)
    with open(log_path, "w") as log:
        while (now := time.monotonic()) < deadline:
            meter.sample(now)
            try:
                key, value = cache.pull(prefix=QUEUE, timeout=0.5)
            except Exception as exc:
                meter.failed("pull", exc)
                continue
            if key is None:
                meter.ops["pull_empty"] += 1
            else:
                meter.ops["pull"] += 1
                log.write(f"{value}\n")
    cache.close()
    meter.dump(out_path)


def taker(
    impl_name: str,
    directory: str,
    index: int,
    seconds: float,
    barrier: Any,
    out_path: str,
    log_path: str,
) -> None:
    """``JobQueue.take(timeout=0.5)`` and ``finish``; appends each finished job's item to
    ``log_path``. Between jobs it also pulls from the push/pull queue (without waiting), so
    the JobQueue and the queue share a worker."""
    mod = importlib.import_module(impl_name)
    meter = Meter(mod, "taker", index)
    cache = mod.Cache(directory)
    jobs = mod.JobQueue(cache, JOBS, lease=600)
    barrier.wait(timeout=120)
    deadline = meter.begin(seconds)
    with open(log_path, "w") as log:
        while (now := time.monotonic()) < deadline:
            meter.sample(now)
            try:
                job = jobs.take(timeout=0.5)
                if job is None:
                    meter.ops["take_empty"] += 1
                else:
                    meter.ops["take"] += 1
                    if jobs.finish(job):
                        meter.ops["finish"] += 1
                        log.write(f"{job.value}\n")
                    else:
                        meter.problem(f"finish of job {job.id} ({job.value}) returned False")
                if (meter.ops["take"] + meter.ops["take_empty"]) % 4 == 0:
                    key, value = cache.pull(prefix=QUEUE)
                    if key is not None:
                        meter.ops["pull"] += 1
                        log.write(f"{value}\n")
            except Exception as exc:
                meter.failed("take/finish/pull", exc)
    cache.close()
    meter.dump(out_path)
