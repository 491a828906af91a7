"""Two processes sharing one cache directory, on an installed wheel.

`make wheels-check` (tools/wheels/check.sh) runs this with the interpreter of each platform the
Linux wheels are for, after tests/wheel/check_installed.py: importing is not enough, the
engine's locks, WAL index and wake-ups must work between processes on that platform's kernel
interface and libc (under qemu-user for aarch64, on musl for musllinux). The parent writes a
value, pushes a queue item and puts a leased job; a child process started from the same
interpreter reads the value, pulls the item, takes the job under its lease and finishes it,
and answers through the cache; the parent checks each answer and that the job is done.

Usage: python exchange.py            (the parent; makes its own temporary directory)
       python exchange.py child DIR  (started by the parent)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time

QUEUE = "exchange"


def child(directory: str) -> None:
    from diskcache_oxide import Cache, JobQueue

    cache = Cache(directory, eviction_policy="none")
    value = cache.get("greeting")
    # pull waits for the item (it was pushed before this process started, so it is there).
    _, item = cache.pull(prefix="items", timeout=30)
    jobs = JobQueue(cache, QUEUE, lease=60, max_attempts=1)
    with jobs.take(timeout=30) as job:
        job_value = job.value
    cache.set("answer", {"value": value, "item": item, "job": job_value})
    cache.push("done", prefix="replies")
    cache.close()


def parent() -> None:
    from diskcache_oxide import Cache, JobQueue

    directory = tempfile.mkdtemp(prefix="dco-exchange-")
    cache = Cache(directory, eviction_policy="none")
    cache.set("greeting", ("hello", 1))
    cache.push({"n": 2}, prefix="items")
    jobs = JobQueue(cache, QUEUE, lease=60, max_attempts=1)
    jobs.put({"episode": 3})
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-I", __file__, "child", directory], timeout=300, check=False
    )
    if proc.returncode != 0:
        sys.exit(f"exchange: the child process exited with {proc.returncode}")
    # The child pushed its reply after writing its answer; pull blocks until it is there.
    _, reply = cache.pull(prefix="replies", timeout=30)
    if reply != "done":
        sys.exit(f"exchange: no reply from the child (pull gave {reply!r})")
    answer = cache.get("answer")
    expected = {"value": ("hello", 1), "item": {"n": 2}, "job": {"episode": 3}}
    if answer != expected:
        sys.exit(f"exchange: the child saw {answer!r}, not {expected!r}")
    counts = jobs.counts()
    if tuple(counts) != (0, 0, 0, 0):
        sys.exit(f"exchange: the job was not finished: {counts!r}")
    cache.close()
    print(
        f"exchange: value, queue item and leased job passed between two processes "
        f"({time.monotonic() - started:.1f} s)"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        child(sys.argv[2])
    else:
        parent()
