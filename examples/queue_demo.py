"""diskcache_oxide queue demo: one directory, a producer, several workers, one SIGKILL.

A producer process puts jobs into a ``JobQueue`` while worker processes take them, work
and finish them. Some jobs fail on their first attempt and are retried a moment later. Part
way through, one worker is killed with SIGKILL while it holds a job: nobody finishes or
gives that job back, so it stays leased until its lease runs out, then another worker takes
it again and finishes it. Each finish is recorded in the same transaction as the job's
``finish()``, so the closing summary can prove that every job was finished exactly once.

Run it with ``python examples/queue_demo.py``. It exits 0 when the summary checks out and 1
when it does not.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from typing import Any

import diskcache_oxide as dc

JOBS = 150
WORKERS = 3
LEASE = 1.5  # seconds a worker holds a job before it is taken back
FLAKY_EVERY = 16  # every 16th job fails on its first attempt
KILL_AFTER = 0.4  # kill a worker once this share of the jobs is finished
DEADLINE = 60.0  # the demo gives up (and fails) after this many seconds

SPAWN = multiprocessing.get_context("spawn")


def open_queue(directory: str) -> tuple[dc.Cache, Any]:
    cache = dc.Cache(directory, timeout=60)
    return cache, dc.JobQueue(cache, "render", lease=LEASE, max_attempts=5)


# ----------------------------------------------------------------------------- processes


def producer(directory: str) -> None:
    """Put JOBS jobs, a few at a time, as requests would arrive."""
    cache, jobs = open_queue(directory)
    rng = random.Random(1)
    n = 0
    while n < JOBS:
        burst = [{"frame": n + i} for i in range(min(rng.randint(3, 8), JOBS - n))]
        with cache.transact(retry=True):
            ids = jobs.put_many(burst)
            cache.incr("stat:pushed", len(ids))
            for job_id in ids:
                cache.set(f"job:{job_id}", "put")
        n += len(burst)
        time.sleep(rng.uniform(0.03, 0.08))
    cache.close()


def worker(directory: str, index: int) -> None:
    """Take jobs until told to stop; fail flaky ones once; record every finish."""
    cache, jobs = open_queue(directory)
    rng = random.Random(index)
    pid = os.getpid()
    while not cache.get("stop", False, retry=True):
        job = jobs.take(timeout=0.2)
        if job is None:
            continue
        cache.incr("stat:taken", retry=True)
        if job.attempts > 1:
            cache.incr("stat:retried", retry=True)
        if cache.get("victim", None, retry=True) == index:
            # This worker was picked to die: say which job it holds, then "work" until killed.
            cache.set("victim:job", (job.id, pid), retry=True)
            time.sleep(3600)
        time.sleep(rng.uniform(0.02, 0.06))  # the work
        if job.value["frame"] % FLAKY_EVERY == 7 and job.attempts == 1:
            jobs.fail(job, "flaky renderer", retry_in=0.2)
            continue
        with cache.transact(retry=True):  # the finish and its record commit together
            if jobs.finish(job):
                cache.incr(f"finished:{job.id}")
                cache.set(f"finisher:{job.id}", (index, pid, job.attempts))
                cache.incr("stat:finished")
    cache.close()


# ----------------------------------------------------------------------------- the show


def progress(cache: dc.Cache, jobs: Any, alive: int) -> str:
    stat = {k: cache.get(f"stat:{k}", 0) for k in ("pushed", "taken", "finished", "retried")}
    counts = jobs.counts()
    return (
        f"pushed {stat['pushed']:>3}  taken {stat['taken']:>3}  finished {stat['finished']:>3}"
        f"  retried {stat['retried']:>2}  | ready {counts.ready:>3}  leased {counts.leased}"
        f"  scheduled {counts.scheduled}  | workers alive {alive}"
    )


def run(directory: str) -> int:
    cache = dc.Cache(directory, eviction_policy="none")  # a queue's cache: nothing evicted
    cache.close()
    cache, jobs = open_queue(directory)
    print(f"queue directory: {directory}")
    print(f"{JOBS} jobs, {WORKERS} worker processes, lease {LEASE} s\n")
    prod = SPAWN.Process(target=producer, args=(directory,), daemon=True)
    workers = [
        SPAWN.Process(target=worker, args=(directory, i), daemon=True) for i in range(WORKERS)
    ]
    prod.start()
    for w in workers:
        w.start()

    tty = sys.stdout.isatty()
    started = time.monotonic()
    last_line = 0.0
    victim: tuple[int, int] | None = None  # (job id, pid)
    killed_at = 0.0

    def show(final: bool = False) -> None:
        nonlocal last_line
        alive = sum(w.is_alive() for w in workers)
        line = progress(cache, jobs, alive)
        if tty:
            print("\r" + line, end="\n" if final else "", flush=True)
        elif final or time.monotonic() - last_line >= 1.0:
            print(line, flush=True)
            last_line = time.monotonic()

    def say(message: str) -> None:
        if tty:
            print("\r" + " " * 100 + "\r", end="")
        print(message, flush=True)

    while True:
        if time.monotonic() - started > DEADLINE:
            show(final=True)
            say("the demo ran out of time")
            break
        finished = cache.get("stat:finished", 0)
        if victim is None and killed_at == 0.0 and finished >= JOBS * KILL_AFTER:
            cache.set("victim", 0)
            killed_at = -1.0  # picked, not yet killed
        if killed_at == -1.0 and (held := cache.get("victim:job")) is not None:
            victim = held
            os.kill(held[1], signal.SIGKILL)
            workers[0].join(5)
            killed_at = time.monotonic()
            say(
                f">> worker 0 (pid {held[1]}) killed with SIGKILL while holding job "
                f"#{held[0]}; its lease runs out {LEASE} s after it was taken"
            )
        if victim is not None and killed_at > 0 and cache.get(f"finisher:{victim[0]}"):
            index, pid, attempts = cache.get(f"finisher:{victim[0]}")
            say(
                f">> job #{victim[0]} came back after its lease and was finished by worker "
                f"{index} (pid {pid}) on attempt {attempts}, "
                f"{time.monotonic() - killed_at:.1f} s after the kill"
            )
            killed_at = float("inf")  # reported
        counts = jobs.counts()
        if (
            not prod.is_alive()
            and finished == JOBS
            and (counts.ready, counts.scheduled, counts.leased) == (0, 0, 0)
        ):
            show(final=True)
            break
        show()
        time.sleep(0.1)

    cache.set("stop", True)
    for p in [prod, *workers]:
        p.join(10)
        if p.is_alive():
            p.kill()
            p.join(5)
    return summary(cache, jobs, victim)


def summary(cache: dc.Cache, jobs: Any, victim: tuple[int, int] | None) -> int:
    job_ids = sorted(int(key.split(":")[1]) for key in cache.iterkeys(prefix="job:"))
    finishes = {job_id: cache.get(f"finished:{job_id}", 0) for job_id in job_ids}
    never = [j for j, n in finishes.items() if n == 0]
    twice = [j for j, n in finishes.items() if n > 1]
    counts = jobs.counts()
    stats = {k: cache.get(f"stat:{k}", 0) for k in ("pushed", "taken", "finished", "retried")}
    print("\nsummary")
    print(f"  jobs put:                     {len(job_ids)}")
    print(f"  finished exactly once:        {sum(1 for n in finishes.values() if n == 1)}")
    print(f"  never finished:               {len(never)} {never[:10] if never else ''}")
    print(f"  finished more than once:      {len(twice)} {twice[:10] if twice else ''}")
    print(f"  takes / retries:              {stats['taken']} / {stats['retried']}")
    print(
        f"  left in the queue:            ready {counts.ready}, scheduled {counts.scheduled},"
        f" leased {counts.leased}, dead {counts.dead}"
    )
    checks = {
        "every job was put": len(job_ids) == JOBS,
        "every job finished exactly once": not never and not twice,
        "nothing left in the queue": (counts.ready, counts.scheduled, counts.leased, counts.dead)
        == (0, 0, 0, 0),
        "flaky jobs were retried": stats["retried"] > 0,
    }
    if victim is not None:
        record = cache.get(f"finisher:{victim[0]}")
        checks["the killed worker's job was finished by another worker"] = (
            record is not None and record[1] != victim[1] and record[2] >= 2
        )
    else:
        checks["a worker was killed"] = False
    for name, ok in checks.items():
        print(f"  [{'ok' if ok else 'FAILED'}] {name}")
    good = all(checks.values())
    print("\nevery job was finished exactly once" if good else "\nTHE DEMO FAILED ITS CHECKS")
    return 0 if good else 1


def main() -> int:
    directory = tempfile.mkdtemp(prefix="diskcache-oxide-queue-demo-")
    try:
        return run(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
