"""Process bodies for the multi-process queue and job tests (spawned, so importable).

Every function takes the implementation's module name (``support.IMPL_NAME``) so a spawned
child uses what the parent tests. Logs are written with one ``os.write`` per record on a
file opened with ``O_APPEND``: a SIGKILL cannot undo a write that returned (the kernel
keeps it), so each record that a log holds was written before the process went on. Set
``DCO_QUEUE_FSYNC=1`` to fsync each record as well (only matters for power loss).
"""

from __future__ import annotations

import importlib
import os
import time
from typing import Any

FSYNC = os.environ.get("DCO_QUEUE_FSYNC", "") not in ("", "0")
DONE_KEY = "producers-done"


def _open(impl_name: str, directory: str) -> Any:
    # A directory, or a Redis URL with its namespace (tests/helpers/backends.address).
    if "://" in directory:
        return importlib.import_module("diskcache_oxide").open(directory, timeout=60)
    return importlib.import_module(impl_name).Cache(directory, timeout=60)


def open_log(path: str) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


def write_record(fd: int, text: str) -> None:
    data = text.encode()
    while data:
        data = data[os.write(fd, data) :]
    if FSYNC:
        os.fsync(fd)


def item_values(producer: int, count: int) -> range:
    base = producer * 10_000_000
    return range(base, base + count)


# ----------------------------------------------------------------------------- queue producers


def produce(
    impl_name: str, directory: str, prefix: str, producer: int, count: int, batch: int
) -> int:
    """Push ``count`` distinct ints, one at a time (batch 1) or with push_many."""
    cache = _open(impl_name, directory)
    values = list(item_values(producer, count))
    if batch <= 1:
        for value in values:
            cache.push(value, prefix=prefix, retry=True)
    else:
        for start in range(0, len(values), batch):
            cache.push_many(values[start : start + batch], prefix=prefix, retry=True)
    cache.incr(DONE_KEY, retry=True)
    cache.close()
    return count


def consume(
    impl_name: str, directory: str, prefix: str, producers: int, batch: int, out_path: str
) -> int:
    """Pull until every producer is done and the queue is empty; write what was pulled."""
    cache = _open(impl_name, directory)
    got: list[int] = []
    while True:
        done = cache.get(DONE_KEY, 0, retry=True) >= producers  # read before the pull
        if batch <= 1:
            key, value = cache.pull(prefix=prefix, timeout=0.2, retry=True)
            items = [] if key is None else [value]
        else:
            items = [v for _, v in cache.pull_many(batch, prefix=prefix, timeout=0.2, retry=True)]
        if not items and done:
            break
        got.extend(items)
    cache.close()
    with open(out_path, "w") as f:
        f.write("\n".join(map(str, got)))
    return len(got)


# ----------------------------------------------------------------------------- killed workers


def consume_logged(
    impl_name: str,
    directory: str,
    prefix: str,
    producers: int,
    batch: int,
    log_path: str,
    pause_at: int = 0,
) -> None:
    """A worker that may be SIGKILLed at any moment (see test_queue_multiprocess.py).

    Each pull runs inside ``transact()``. Inside that transaction the worker (1) pulls one
    item or a batch, (2) increments ``receipt:{item}`` for each, and (3) appends the batch
    to its log as lines ``"{seq} {item}"``; only then does the transaction commit. So every
    committed pull is in the log (it was written before the commit) and in the receipts
    (which commit with it), and a kill before the commit rolls all three steps back in the
    database, leaving at most the last batch of a killed worker's log uncommitted.

    With ``pause_at``, the worker stops inside the transaction right after logging batch
    number ``pause_at`` (and creates ``{log_path}.paused``) so a test can kill it there.
    """
    cache = _open(impl_name, directory)
    fd = open_log(log_path)
    seq = 0
    while True:
        done = cache.get(DONE_KEY, 0, retry=True) >= producers
        with cache.transact(retry=True):
            if batch <= 1:
                key, value = cache.pull(prefix=prefix, retry=True)
                items = [] if key is None else [value]
            else:
                items = [v for _, v in cache.pull_many(batch, prefix=prefix, retry=True)]
            for item in items:
                cache.incr(f"receipt:{item}", retry=True)
            if items:
                seq += 1
                write_record(fd, "".join(f"{seq} {item}\n" for item in items))
                if seq == pause_at:
                    open(f"{log_path}.paused", "w").close()
                    time.sleep(120)  # the test kills this process here
        if not items:
            if done:
                break
            time.sleep(0.002)
    os.close(fd)
    cache.close()


def consume_plain_logged(
    impl_name: str, directory: str, prefix: str, producers: int, batch: int, log_path: str
) -> None:
    """A worker with plain pulls: it logs what a pull returned, after the pull committed.

    A kill between the commit and the log write loses that pull's items: at-most-once, the
    documented cost of pull() without a transaction or a lease.
    """
    cache = _open(impl_name, directory)
    fd = open_log(log_path)
    while True:
        done = cache.get(DONE_KEY, 0, retry=True) >= producers
        items = [v for _, v in cache.pull_many(batch, prefix=prefix, timeout=0.05, retry=True)]
        if items:
            write_record(fd, "".join(f"{item}\n" for item in items))
        elif done:
            break
    os.close(fd)
    cache.close()


# ----------------------------------------------------------------------------- job workers


def job_worker(
    impl_name: str, directory: str, queues: Any, lease: float, work_seconds: float, log_path: str
) -> None:
    """Take, work and finish jobs until the cache holds ``stop``.

    Log records: ``take {id} {attempt} {pid}`` once a job is held, ``slow {id} {pid}`` when
    a job marked slow starts its long first attempt, ``finish {id} {attempt} {pid}`` after
    a finish that returned True.
    """
    mod = importlib.import_module(impl_name)
    cache = mod.Cache(directory, timeout=60)
    jobs = mod.JobQueue(cache, queues, lease=lease, max_attempts=100)
    fd = open_log(log_path)
    pid = os.getpid()
    while True:
        job = jobs.take(timeout=0.2)
        if job is None:
            if cache.get("stop", False, retry=True):
                break
            continue
        write_record(fd, f"take {job.id} {job.attempts} {pid}\n")
        value = job.value
        if isinstance(value, dict) and value.get("slow") and job.attempts == 1:
            write_record(fd, f"slow {job.id} {pid}\n")
            time.sleep(120)  # the test kills this process here
        if work_seconds:
            time.sleep(work_seconds)
        if jobs.finish(job):
            write_record(fd, f"finish {job.id} {job.attempts} {pid}\n")
    os.close(fd)
    cache.close()


def read_lines(path: str) -> list[str]:
    """Complete lines of a log (a torn last line, without its newline, is dropped)."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return []
    lines = text.split("\n")
    return lines[:-1]  # after the last "\n": empty, or a torn record
