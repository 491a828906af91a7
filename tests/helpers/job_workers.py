"""Process bodies for the multi-process job tests on any backend (spawned, so importable).

A worker opens its cache with ``diskcache_oxide.open(location)``: a directory, or a Redis URL
naming a namespace (tests/helpers/backends.py's ``location``), so one body serves the
conformance suite's every backend. Logs are written as ``queue_workers`` writes them: one
``os.write`` per record on a file opened with ``O_APPEND``, so a SIGKILL cannot undo a record
that was written.
"""

from __future__ import annotations

import os
import time
from typing import Any

from queue_workers import open_log, write_record


def job_worker(
    location: str, queues: Any, lease: float, work_seconds: float, log_path: str
) -> None:
    """Take, work and finish jobs until the cache holds ``stop``.

    Log records: ``take {id} {attempt} {pid}`` once a job is held, ``slow {id} {pid}`` when a
    job marked slow starts its long first attempt, ``finish {id} {attempt} {pid}`` after a
    finish that returned True (the lease's fencing allows that once per job).
    """
    import diskcache_oxide

    cache = diskcache_oxide.open(location)
    jobs = diskcache_oxide.JobQueue(cache, queues, lease=lease, max_attempts=100)
    fd = open_log(log_path)
    pid = os.getpid()
    while True:
        job = jobs.take(timeout=0.2)
        if job is None:
            if cache.get("stop", False):
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
