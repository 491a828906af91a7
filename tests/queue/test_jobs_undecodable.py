"""A job a worker cannot decode never stalls the jobs behind it (D-047).

A take passes over a job whose value this process cannot decode (a pickle on a safe cache, a
type it has not registered, a decoder that raises): the pass counts as an attempt, its reason
becomes the job's ``error``, and the job is offered again after a pass delay (1 s, doubling),
to a worker that can read it, until it has used its attempts and goes to the dead-letter list.
A damaged value goes to the dead-letter list at once. Either way the take returns the next
due job, or, with ``timeout``, waits for one without spinning. Tested in one process and with
real worker processes, for ``take`` and ``take_many``.

A conformance module (tests/helpers/backends.py): each test runs on a directory, a Redis server
and a Redis Cluster, its handles opened with ``diskcache_oxide.open`` on one location (a
directory, or a URL naming one namespace), so two handles with different ``pickle`` settings
share the jobs as two processes would (D-060).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import backends
import pytest

pytestmark = [pytest.mark.oxide, pytest.mark.backends]


@dataclass
class Parcel:
    weight: int


def _redis_job(cache: Any, job_id: int) -> tuple[Any, bytes]:
    """The client of a RedisCache and the key of one job's HASH (D-060's layout)."""
    return cache.client, cache._base + b"jj:%016d" % job_id


def corrupt_job_value(cache: Any, job_id: int) -> None:
    """Flip a byte in the middle of a job's stored value, as a bad disk or a hostile writer
    would."""
    if not hasattr(cache, "directory"):
        client, key = _redis_job(cache, job_id)
        raw = bytearray(client.hget(key, "v"))
        raw[len(raw) // 2] ^= 0xFF
        client.hset(key, "v", bytes(raw))
        return
    db = sqlite3.connect(os.path.join(cache.directory, "cache.db"), timeout=30)
    try:
        (value,) = db.execute("SELECT value FROM jobs WHERE id = ?", (job_id,)).fetchone()
        raw = bytearray(value if isinstance(value, bytes) else value.encode())
        raw[len(raw) // 2] ^= 0xFF
        with db:
            db.execute("UPDATE jobs SET value = ? WHERE id = ?", (bytes(raw), job_id))
    finally:
        db.close()


def make_due(cache: Any, job_id: int) -> None:
    """Skip a pass delay: make a ready job due now."""
    if not hasattr(cache, "directory"):
        client, key = _redis_job(cache, job_id)
        assert client.hget(key, "s") == b"0"
        queue = client.hget(key, "q")
        client.hset(key, "d", 0)
        client.zadd(cache._base + b"jr:" + queue, {b"%016d" % job_id: 0})
        return
    db = sqlite3.connect(os.path.join(cache.directory, "cache.db"), timeout=30)
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
def location(backend: Any, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """Where this test's jobs live: a directory, or a Redis URL naming a fresh namespace."""
    return backends.location(backend, str(tmp_path / "shared"), request)


@pytest.fixture
def opener(dc: Any, location: str) -> Iterator[Callable[..., Any]]:
    """``opener(pickle=...)``: another handle on the test's jobs (closed after the test)."""
    opened: list[Any] = []

    def open_cache(**settings: Any) -> Any:
        cache = dc.open(location, **settings)
        opened.append(cache)
        return cache

    yield open_cache
    for cache in opened:
        cache.close()


# ----------------------------------------------------------------------------- one process


def test_a_pickled_job_is_passed_over_and_the_jobs_behind_it_are_served(
    dc: Any, opener: Any
) -> None:
    trusting = dc.JobQueue(opener(pickle=True), "work")
    bad = trusting.put(Parcel(1))
    good = [trusting.put(f"good {i}") for i in range(5)]
    safe = dc.JobQueue(opener(), ["work", "low"])
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


def test_a_job_of_an_unregistered_type_is_passed_over(dc: Any, opener: Any) -> None:
    jobs = dc.JobQueue(opener())
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


def test_a_job_whose_decoder_raises_is_passed_over(dc: Any, opener: Any) -> None:
    def broken(_: Any) -> Any:
        raise RuntimeError("decoder for an older layout")

    jobs = dc.JobQueue(opener())
    dc.register_type(Parcel, "tests.jobs.Parcel", lambda p: p.weight, broken)
    try:
        bad = jobs.put(Parcel(5))
        jobs.put("behind it")
        job = jobs.take()
        assert job is not None and job.value == "behind it"
        assert "decoder for an older layout" in jobs.get(bad).error
    finally:
        dc.unregister_type(Parcel)


def test_take_many_returns_the_jobs_behind_undecodable_ones(dc: Any, opener: Any) -> None:
    trusting = dc.JobQueue(opener(pickle=True))
    for i in range(3):
        trusting.put(Parcel(i))
    for i in range(3):
        trusting.put(i)
    safe = dc.JobQueue(opener())
    taken = safe.take_many(3)
    assert [job.value for job in taken] == [0, 1, 2]


def test_a_backlog_of_undecodable_jobs_does_not_hide_a_good_one(dc: Any, opener: Any) -> None:
    # More than one take's share of passes (64): the take makes another pass at once.
    trusting = dc.JobQueue(opener(pickle=True))
    trusting.put_many([Parcel(i) for i in range(150)])
    trusting.put("the good one")
    job = dc.JobQueue(opener()).take()
    assert job is not None and job.value == "the good one"


def test_a_damaged_job_is_buried_at_once_and_the_take_goes_on(
    dc: Any, opener: Any, caplog: Any
) -> None:
    cache = opener()
    jobs = dc.JobQueue(cache)
    bad = jobs.put({"payload": "x" * 40})
    good = jobs.put("fine")
    corrupt_job_value(cache, bad)
    with caplog.at_level(logging.WARNING, logger="diskcache_oxide"):
        job = jobs.take()
    assert job is not None and job.id == good
    info = jobs.get(bad)
    assert info.state == "dead" and "damaged value" in info.error
    assert any(f"job {bad} " in r.getMessage() for r in caplog.records), "the burial is logged"


def test_the_pass_is_logged_with_what_to_do(dc: Any, opener: Any, caplog: Any) -> None:
    dc.JobQueue(opener(pickle=True)).put(Parcel(1))
    with caplog.at_level(logging.WARNING, logger="diskcache_oxide"):
        assert dc.JobQueue(opener()).take() is None
    (message,) = [r.getMessage() for r in caplog.records]
    assert "passed over" in message and "UnsafeValueError" in message


def test_a_job_no_worker_can_decode_reaches_the_dead_letters(dc: Any, opener: Any) -> None:
    trusting = dc.JobQueue(opener(pickle=True), max_attempts=2)
    bad = trusting.put(Parcel(7))
    safe = dc.JobQueue(opener())
    assert safe.take() is None
    make_due(safe.cache, bad)
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
    dc: Any, opener: Any
) -> None:
    bad = dc.JobQueue(opener(pickle=True), max_attempts=0).put(Parcel(1))
    safe = dc.JobQueue(opener())
    cpu, started = time.process_time(), time.monotonic()
    assert safe.take(timeout=2.5) is None
    waited, used = time.monotonic() - started, time.process_time() - cpu
    assert waited >= 2.5, "timeout is honoured: the take waited"
    # Offered at 0 s, then after 1 s and 2 more: a few passes, not one per wake-up.
    attempts = safe.get(bad).attempts
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
import diskcache_oxide
from diskcache_oxide import JobQueue, DecodeError
location, out, many = sys.argv[1], sys.argv[2], sys.argv[3] == "many"
q = JobQueue(diskcache_oxide.open(location), ["work", "low"])
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
from diskcache_oxide import JobQueue, open
q = JobQueue(open(sys.argv[1], pickle=True), "work")
job = q.take(timeout=10)
print(repr(job.value), job.finish())
"""


def run_python(code: str, *args: str, path: Path) -> subprocess.CompletedProcess[str]:
    # The test's own import path after ``path``, so a child runs the package under test.
    inherited = os.environ.get("PYTHONPATH")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(path), inherited])))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("many", [False, True], ids=["take", "take_many"])
def test_across_processes_a_safe_worker_serves_every_good_job(
    tmp_path: Path, location: str, many: bool
) -> None:
    (tmp_path / "parcels.py").write_text(PARCEL_MODULE)
    producer = run_python(
        """
        import sys
        from diskcache_oxide import JobQueue, open
        from parcels import Point
        q = JobQueue(open(sys.argv[1], pickle=True), "work", max_attempts=0)
        for i in range(3):
            q.put(Point(i))
        for i in range(5):
            q.put(f"good {i}")
        """,
        location,
        path=tmp_path,
    )
    assert producer.returncode == 0, producer.stderr
    out = tmp_path / "served.txt"
    worker = run_python(SAFE_WORKER, location, str(out), "many" if many else "one", path=tmp_path)
    assert worker.returncode == 0, worker.stderr
    assert out.read_text() == repr([f"good {i}" for i in range(5)])
    assert "passed over" in worker.stderr  # logged by the library, once per pass
    # The pickled jobs are still there for a worker that can read them.
    trusting = run_python(TRUSTING_WORKER, location, path=tmp_path)
    assert trusting.returncode == 0, trusting.stderr
    assert trusting.stdout.startswith("Point(x=") and trusting.stdout.strip().endswith("True")
