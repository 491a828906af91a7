"""At-least-once delivery of leased jobs across real processes, with SIGKILL.

Workers are spawned processes running ``job_workers.job_worker``; each writes a log of
``take``, ``slow`` and ``finish`` records (one ``os.write`` each). ``finish`` is logged only
when ``JobQueue.finish`` returned True, which the lease's fencing allows once per job.

A conformance module (tests/helpers/backends.py): each test runs on a directory, a Redis
server and a Redis Cluster; the workers open the same location (a directory, or a URL naming
the test's namespace) with ``diskcache_oxide.open`` (D-060).
"""

from __future__ import annotations

import collections
import multiprocessing
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import backends
import job_workers
import pytest
import queue_workers as qw
import support

pytestmark = [pytest.mark.slow, pytest.mark.oxide, pytest.mark.backends]

SPAWN = multiprocessing.get_context("spawn")
SOAK = max(1, int(os.environ.get("DCO_QUEUE_SOAK", "1") or 1))


@pytest.fixture
def location(backend: Any, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """Where this test's jobs live: a directory, or a Redis URL naming a fresh namespace."""
    return backends.location(backend, str(tmp_path / "jobs"), request)


def check_integrity(cache: Any) -> None:
    """A directory's SQLite file is intact after the kills (a server keeps its own)."""
    directory = getattr(cache, "directory", None)
    cache.close()
    if directory is not None:
        assert support.integrity(directory) == "ok"


def start_worker(location: str, log: str, lease: float, work_seconds: float) -> Any:
    p = SPAWN.Process(
        target=job_workers.job_worker,
        args=(location, "default", lease, work_seconds, log),
        daemon=True,
    )
    p.start()
    return p


def records(logs: list[str]) -> list[list[str]]:
    return [line.split() for log in logs for line in qw.read_lines(log) if line.strip()]


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.02)


def stop_and_join(cache: Any, processes: list[Any], timeout: float = 60) -> None:
    cache.set("stop", True)
    deadline = time.monotonic() + timeout
    for p in processes:
        p.join(max(0.1, deadline - time.monotonic()))
    stuck = [p for p in processes if p.is_alive()]
    for p in stuck:
        p.kill()
        p.join(10)
    assert not stuck, f"{len(stuck)} workers did not stop"


def test_a_job_whose_worker_is_killed_is_finished_by_another(
    tmp_path: Path, dc: Any, location: str
) -> None:
    cache = dc.open(location, eviction_policy="none")
    jobs = dc.JobQueue(cache)
    lease = 1.0
    ids = jobs.put_many([{"n": i} for i in range(20)])
    slow_id = jobs.put({"n": 20, "slow": True})
    ids.append(slow_id)
    ids += jobs.put_many([{"n": i} for i in range(21, 30)])
    logs = [str(tmp_path / f"worker{i}.log") for i in range(3)]
    workers = [start_worker(location, log, lease, 0.01) for log in logs]
    try:
        # wait until some worker is in the middle of the slow job, then kill it
        wait_for(lambda: any(r[0] == "slow" for r in records(logs)), 60, "the slow job")
        (victim_pid,) = [int(r[2]) for r in records(logs) if r[0] == "slow"]
        victim = next(p for p in workers if p.pid == victim_pid)
        killed_at = time.monotonic()
        os.kill(victim_pid, signal.SIGKILL)
        victim.join(10)
        assert victim.exitcode == -signal.SIGKILL
        wait_for(lambda: len(jobs) == 0, 60, "every job to be finished")
        finished_after = time.monotonic() - killed_at
    finally:
        stop_and_join(cache, workers)
    log = records(logs)
    # (logs are read file by file, so order the slow job's takes by attempt)
    takes = sorted(
        (r for r in log if r[0] == "take" and int(r[1]) == slow_id), key=lambda r: int(r[2])
    )
    finishes = collections.Counter(int(r[1]) for r in log if r[0] == "finish")
    # the killed worker's job came back after the lease and another worker finished it
    assert [int(r[2]) for r in takes] == [1, 2]
    assert int(takes[0][3]) == victim_pid and int(takes[1][3]) != victim_pid
    (slow_finish,) = [r for r in log if r[0] == "finish" and int(r[1]) == slow_id]
    assert int(slow_finish[2]) == 2 and int(slow_finish[3]) != victim_pid
    assert finished_after < 30
    # every job finished exactly once
    assert finishes == collections.Counter(ids)
    assert all(jobs.get(job_id) is None for job_id in ids)
    counts = jobs.counts()
    assert (counts.ready, counts.scheduled, counts.leased, counts.dead) == (0, 0, 0, 0)
    check_integrity(cache)


def test_workers_killed_at_random_every_job_is_finished(
    tmp_path: Path, dc: Any, location: str
) -> None:
    cache = dc.open(location, eviction_policy="none")
    jobs = dc.JobQueue(cache)
    lease = 0.5
    ids = jobs.put_many(list(range(400 * SOAK)))
    rng = random.Random(os.environ.get("DCO_QUEUE_SEED", "54321"))
    logs: list[str] = []
    current: list[Any] = []
    every: list[Any] = []

    def launch() -> Any:
        log = str(tmp_path / f"worker{len(logs)}.log")
        logs.append(log)
        p = start_worker(location, log, lease, 0.02)
        every.append(p)
        return p

    current = [launch() for _ in range(4)]
    kills = 0
    try:
        deadline = time.monotonic() + 60 * SOAK
        while len(jobs) and kills < 10 * SOAK and time.monotonic() < deadline:
            time.sleep(rng.uniform(0.05, 0.3))
            slot = rng.randrange(len(current))
            os.kill(current[slot].pid, signal.SIGKILL)
            current[slot].join(10)
            kills += 1
            current[slot] = launch()
        wait_for(lambda: len(jobs) == 0, 90 * SOAK, "every job to be finished")
    finally:
        stop_and_join(cache, every)
    assert kills >= 3, "the jobs ran out before the test could kill anyone"
    log = records(logs)
    finishes = collections.Counter(int(r[1]) for r in log if r[0] == "finish")
    taken = {int(r[1]) for r in log if r[0] == "take"}
    # fencing: at most one successful finish per job
    assert max(finishes.values()) == 1
    # every job was finished; a kill right after finish() can only hide its log record
    assert all(jobs.get(job_id) is None for job_id in ids)
    unlogged = set(ids) - set(finishes)
    assert len(unlogged) <= kills, f"{len(unlogged)} finishes unlogged with {kills} kills"
    assert len(set(ids) - taken) <= kills
    assert jobs.dead() == []
    check_integrity(cache)


def test_four_workers_drain_2000_jobs_each_finished_exactly_once(
    tmp_path: Path, dc: Any, location: str
) -> None:
    cache = dc.open(location, eviction_policy="none")
    jobs = dc.JobQueue(cache)
    ids = jobs.put_many([{"n": i} for i in range(2000)])
    logs = [str(tmp_path / f"worker{i}.log") for i in range(4)]
    workers = [start_worker(location, log, 30.0, 0.0) for log in logs]
    try:
        wait_for(lambda: len(jobs) == 0, 120, "every job to be finished")
    finally:
        stop_and_join(cache, workers)
    log = records(logs)
    finishes = collections.Counter(int(r[1]) for r in log if r[0] == "finish")
    takes = collections.Counter(int(r[1]) for r in log if r[0] == "take")
    # Nobody died and no lease ran out: each job was taken once and finished once.
    assert finishes == collections.Counter(ids)
    assert takes == collections.Counter(ids)
    counts = jobs.counts()
    assert (counts.ready, counts.scheduled, counts.leased, counts.dead) == (0, 0, 0, 0)
    check_integrity(cache)
