"""A job a worker cannot decode never stalls the jobs behind it (D-047).

A take passes over a job whose value this process cannot decode (a pickle on a safe cache, a
type it has not registered, a decoder that raises): the pass counts as an attempt, its reason
becomes the job's ``error``, and the job is offered again after a pass delay (1 s, doubling),
to a worker that can read it, until it has used its attempts and goes to the dead-letter list.
A damaged value goes to the dead-letter list at once. Either way the take returns the next
due job, or, with ``timeout``, waits for one without spinning. Tested in one process and with
real worker processes, for ``take`` and ``take_many``.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.oxide


@dataclass
class Parcel:
    weight: int


def corrupt_job_value(directory: str, job_id: int) -> None:
    """Flip a byte in the middle of a job's inline value, as a bad disk or a hostile writer
    would."""
    db = sqlite3.connect(os.path.join(directory, "cache.db"), timeout=30)
    try:
        (value,) = db.execute("SELECT value FROM jobs WHERE id = ?", (job_id,)).fetchone()
        raw = bytearray(value if isinstance(value, bytes) else value.encode())
        raw[len(raw) // 2] ^= 0xFF
        with db:
            db.execute("UPDATE jobs SET value = ? WHERE id = ?", (bytes(raw), job_id))
    finally:
        db.close()


def make_due(directory: str, job_id: int) -> None:
    """Skip a pass delay: make a ready job due now."""
    db = sqlite3.connect(os.path.join(directory, "cache.db"), timeout=30)
    try:
        with db:
            db.execute("UPDATE jobs SET due = 0 WHERE id = ? AND state = 0", (job_id,))
    finally:
        db.close()


def drain(queue: Any, n: int, timeout: float = 10.0) -> list[Any]:
    """Take and finish up to ``n`` jobs, returning their values."""
    values = []
    deadline = time.monotonic() + timeout
    while len(values) < n and time.monotonic() < deadline:
        job = queue.take(timeout=0.5)
        if job is not None:
            values.append(job.value)
            assert job.finish()
    return values


@pytest.fixture
def directory(tmp_path: Path) -> str:
    return str(tmp_path / "shared")


# ----------------------------------------------------------------------------- one process


def test_a_pickled_job_is_passed_over_and_the_jobs_behind_it_are_served(
    dc: Any, directory: str
) -> None:
    trusting = dc.JobQueue(dc.Cache(directory, pickle=True), "work")
    bad = trusting.put(Parcel(1))
    good = [trusting.put(f"good {i}") for i in range(5)]
    safe = dc.JobQueue(dc.Cache(directory), ["work", "low"])
    job = safe.take()
    assert job is not None and job.id == good[0], "the take went on past the pickled job"
    assert job.finish()
    assert drain(safe, 4) == [f"good {i}" for i in range(1, 5)]
    info = safe.get(bad)
    assert (info.state, info.attempts) == ("ready", 1), "the pass counts as an attempt"
    assert "UnsafeValueError" in info.error and f"pid {os.getpid()}" in info.error
    assert info.due > time.time(), "it waits a pass delay before it is offered again"
    # A worker that can decode it still gets it, once the pass delay is over.
    job = trusting.take(timeout=5)
    assert job is not None and job.value == Parcel(1) and job.attempts == 2
    assert job.finish()


def test_a_job_of_an_unregistered_type_is_passed_over(dc: Any, directory: str) -> None:
    jobs = dc.JobQueue(dc.Cache(directory))
    dc.register_type(Parcel, "tests.jobs.Parcel", lambda p: p.weight, Parcel)
    try:
        bad = jobs.put(Parcel(9))
    finally:
        dc.unregister_type(Parcel)
    jobs.put("behind it")
    job = jobs.take()
    assert job is not None and job.value == "behind it"
    assert job.finish()
    assert "UnknownTypeError" in jobs.get(bad).error
    dc.register_type(Parcel, "tests.jobs.Parcel", lambda p: p.weight, Parcel)
    try:
        job = jobs.take(timeout=5)
        assert job is not None and job.value == Parcel(9)
    finally:
        dc.unregister_type(Parcel)


def test_a_job_whose_decoder_raises_is_passed_over(dc: Any, directory: str) -> None:
    def broken(_: Any) -> Any:
        raise RuntimeError("decoder for an older layout")

    jobs = dc.JobQueue(dc.Cache(directory))
    dc.register_type(Parcel, "tests.jobs.Parcel", lambda p: p.weight, broken)
    try:
        bad = jobs.put(Parcel(5))
        jobs.put("behind it")
        job = jobs.take()
        assert job is not None and job.value == "behind it"
        assert "decoder for an older layout" in jobs.get(bad).error
    finally:
        dc.unregister_type(Parcel)


def test_take_many_returns_the_jobs_behind_undecodable_ones(dc: Any, directory: str) -> None:
    trusting = dc.JobQueue(dc.Cache(directory, pickle=True))
    for i in range(3):
        trusting.put(Parcel(i))
    for i in range(3):
        trusting.put(i)
    safe = dc.JobQueue(dc.Cache(directory))
    taken = safe.take_many(3)
    assert [job.value for job in taken] == [0, 1, 2]


def test_a_backlog_of_undecodable_jobs_does_not_hide_a_good_one(dc: Any, directory: str) -> None:
    # More than one take's share of passes (64): the take makes another pass at once.
    trusting = dc.JobQueue(dc.Cache(directory, pickle=True))
    trusting.put_many([Parcel(i) for i in range(150)])
    trusting.put("the good one")
    job = dc.JobQueue(dc.Cache(directory)).take()
    assert job is not None and job.value == "the good one"


def test_a_damaged_job_is_buried_at_once_and_the_take_goes_on(
    dc: Any, directory: str, caplog: Any
) -> None:
    jobs = dc.JobQueue(dc.Cache(directory))
    bad = jobs.put({"payload": "x" * 40})
    good = jobs.put("fine")
    corrupt_job_value(directory, bad)
    with caplog.at_level(logging.WARNING, logger="diskcache_oxide"):
        job = jobs.take()
    assert job is not None and job.id == good
    info = jobs.get(bad)
    assert info.state == "dead" and "damaged value" in info.error
    assert any(f"job {bad} " in r.getMessage() for r in caplog.records), "the burial is logged"


def test_the_pass_is_logged_with_what_to_do(dc: Any, directory: str, caplog: Any) -> None:
    dc.JobQueue(dc.Cache(directory, pickle=True)).put(Parcel(1))
    with caplog.at_level(logging.WARNING, logger="diskcache_oxide"):
        assert dc.JobQueue(dc.Cache(directory)).take() is None
    (message,) = [r.getMessage() for r in caplog.records]
    assert "passed over" in message and "UnsafeValueError" in message


def test_a_job_no_worker_can_decode_reaches_the_dead_letters(dc: Any, directory: str) -> None:
    trusting = dc.JobQueue(dc.Cache(directory, pickle=True), max_attempts=2)
    bad = trusting.put(Parcel(7))
    safe = dc.JobQueue(dc.Cache(directory))
    assert safe.take() is None
    make_due(directory, bad)
    assert safe.take() is None
    info = safe.get(bad)
    assert (info.state, info.attempts) == ("dead", 2)
    assert "UnsafeValueError" in info.error
    assert [d.id for d in safe.dead()] == [bad]
    # An operator who fixed the workers puts it back; a worker that can read it runs it.
    assert trusting.requeue(bad)
    job = trusting.take()
    assert job is not None and job.value == Parcel(7)


def test_a_waiting_take_with_only_undecodable_jobs_waits_without_spinning(
    dc: Any, directory: str
) -> None:
    dc.JobQueue(dc.Cache(directory, pickle=True), max_attempts=0).put(Parcel(1))
    safe = dc.JobQueue(dc.Cache(directory))
    cpu, started = time.process_time(), time.monotonic()
    assert safe.take(timeout=2.5) is None
    waited, used = time.monotonic() - started, time.process_time() - cpu
    assert waited >= 2.5, "timeout is honoured: the take waited"
    # Offered at 0 s, then after 1 s and 2 more: a few passes, not one per wake-up.
    attempts = (
        sqlite3.connect(os.path.join(directory, "cache.db"))
        .execute("SELECT attempts FROM jobs")
        .fetchone()[0]
    )
    assert 1 <= attempts <= 3
    assert used < 0.5 * waited, f"the wait used {used:.2f} s of CPU in {waited:.2f} s"


# ----------------------------------------------------------------------------- real processes

PARCEL_MODULE = """
from dataclasses import dataclass

@dataclass
class Point:
    x: int
"""

# The worker loop of the issue that found the stall: it must serve every good job.
SAFE_WORKER = """
import sys, time
from diskcache_oxide import Cache, JobQueue, DecodeError
directory, out, many = sys.argv[1], sys.argv[2], sys.argv[3] == "many"
q = JobQueue(Cache(directory), ["work", "low"])
served, deadline = [], time.monotonic() + 20
while len(served) < 5 and time.monotonic() < deadline:
    try:
        jobs = q.take_many(3, timeout=1) if many else [j for j in [q.take(timeout=1)] if j]
    except DecodeError:
        continue
    for job in jobs:
        served.append(job.value)
        job.finish()
open(out, "w").write(repr(served))
"""

TRUSTING_WORKER = """
import sys
from diskcache_oxide import Cache, JobQueue
q = JobQueue(Cache(sys.argv[1], pickle=True), "work")
job = q.take(timeout=10)
print(repr(job.value), job.finish())
"""


def run_python(code: str, *args: str, path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(path))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("many", [False, True], ids=["take", "take_many"])
def test_across_processes_a_safe_worker_serves_every_good_job(
    tmp_path: Path, directory: str, many: bool
) -> None:
    (tmp_path / "parcels.py").write_text(PARCEL_MODULE)
    producer = run_python(
        """
        import sys
        from diskcache_oxide import Cache, JobQueue
        from parcels import Point
        q = JobQueue(Cache(sys.argv[1], pickle=True), "work", max_attempts=0)
        for i in range(3):
            q.put(Point(i))
        for i in range(5):
            q.put(f"good {i}")
        """,
        directory,
        path=tmp_path,
    )
    assert producer.returncode == 0, producer.stderr
    out = tmp_path / "served.txt"
    worker = run_python(SAFE_WORKER, directory, str(out), "many" if many else "one", path=tmp_path)
    assert worker.returncode == 0, worker.stderr
    assert out.read_text() == repr([f"good {i}" for i in range(5)])
    assert "passed over" in worker.stderr  # logged by the library, once per pass
    # The pickled jobs are still there for a worker that can read them.
    trusting = run_python(TRUSTING_WORKER, directory, path=tmp_path)
    assert trusting.returncode == 0, trusting.stderr
    assert trusting.stdout.startswith("Point(x=") and trusting.stdout.strip().endswith("True")
