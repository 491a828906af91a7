"""Issue 29 §2: a job's record that vanished (evicted, or deleted by another program) or was
replaced by a key of another type, met by every Lua script of the job queue on a real server
and a real cluster (remote/_job_scripts.py).

Before, the take script failed on it (``attempt to concatenate local 'q' (a boolean
value)``), and once the job's lease ran out every take failed (``attempt to compare number
with nil``): no later job ever ran. Now every script passes over such an id without an error,
the take and the sweep forget it (counted in ``RedisJobs.forgotten()``, logged once), and the
good jobs around it are each served exactly once.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

redis = pytest.importorskip("redis")

import diskcache_oxide as dc  # noqa: E402
from diskcache_oxide.jobs import jobs_of  # noqa: E402
from diskcache_oxide.remote import RedisCache  # noqa: E402
from diskcache_oxide.remote._job_scripts import JOB_SCRIPTS  # noqa: E402
from diskcache_oxide.remote.jobs import RedisJobs, _call, _member  # noqa: E402

pytestmark = pytest.mark.oxide

#: How a job's record is damaged: removed, or replaced by a key of each other type.
DAMAGES = ["deleted", "string", "list", "set", "zset", "half-hash"]


@pytest.fixture(params=["server", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    if request.param == "server":
        return str(request.getfixturevalue("redis_url"))
    return str(request.getfixturevalue("redis_cluster_url")) + "?cluster=1"


@pytest.fixture
def cache(url: str) -> Iterator[RedisCache]:
    with RedisCache(url, namespace="t" + uuid.uuid4().hex[:12]) as handle:
        yield handle


def record_key(cache: RedisCache, job_id: int) -> bytes:
    return cache._base + b"jj:" + _member(job_id)


def damage(cache: RedisCache, job_id: int, how: str) -> None:
    """Remove job ``job_id``'s record, or put a key of another type in its place."""
    key = record_key(cache, job_id)
    client = cache.client
    client.delete(key)
    if how == "string":
        client.set(key, b"not a job")
    elif how == "list":
        client.rpush(key, b"q", b"s")
    elif how == "set":
        client.sadd(key, b"q")
    elif how == "zset":
        client.zadd(key, {b"q": 1})
    elif how == "half-hash":
        # A HASH that another program wrote: a queue and a state, no attempts, no value.
        client.hset(key, mapping={b"q": b"work", b"s": b"0", b"a": b"x"})


def drain(jobs: dc.JobQueue) -> list[Any]:
    """Take and finish every job that is due; their values in the order served."""
    served = []
    while True:
        job = jobs.take()
        if job is None:
            return served
        served.append(job.value)
        assert job.finish()


def once_each(values: list[Any]) -> Counter[Any]:
    counted = Counter(values)
    assert all(n == 1 for n in counted.values()), counted
    return counted


def lost_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "had no record left" in r.getMessage()]


@pytest.fixture
def queue(cache: RedisCache) -> dc.JobQueue:
    return dc.JobQueue(cache, "work", lease=30, max_attempts=3)


# ---- one test per script ---------------------------------------------------------------------


def test_every_script_is_covered_here() -> None:
    """A script added to JOB_SCRIPTS needs its test below (this list names them)."""
    assert set(JOB_SCRIPTS) == set(COVERED)


@pytest.mark.parametrize("how", DAMAGES)
def test_take_forgets_a_ready_job_whose_record_is_gone(
    queue: dc.JobQueue, cache: RedisCache, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    ids = queue.put_many(range(6))
    damage(cache, ids[1], how)
    damage(cache, ids[4], how)
    caplog.set_level(logging.WARNING, "diskcache_oxide")
    first = queue.take()
    assert first is not None and first.value == 0
    first.finish()
    # take_many asks for 3: two of the ids it reads are gone, and it still gets 3.
    batch = queue.take_many(3)
    assert [job.value for job in batch] == [2, 3, 5]
    for job in batch:
        job.finish()
    assert drain(queue) == []
    assert RedisJobs(cache).forgotten() == {"work": 2}
    lines = lost_lines(caplog)
    assert len(lines) == 1, lines  # one take forgot both, and said so once
    assert f"ids {ids[1]}, {ids[4]}" in lines[0] and '"work"' in lines[0]
    assert queue.counts() == (0, 0, 0, 0)


@pytest.mark.parametrize("how", DAMAGES)
def test_take_after_the_lease_of_a_lost_job_ran_out(
    cache: RedisCache, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The stall the issue found: a leased job's record gone, its lease runs out, and every
    take after failed. Now the take's sweep forgets it and serves the rest."""
    queue = dc.JobQueue(cache, "work", lease=0.05, max_attempts=3)
    ids = queue.put_many(range(4))
    held = queue.take()
    assert held is not None and held.id == ids[0]
    damage(cache, ids[0], how)
    time.sleep(0.1)
    caplog.set_level(logging.WARNING, "diskcache_oxide")
    assert once_each(drain(queue)) == Counter([1, 2, 3])
    assert RedisJobs(cache).forgotten() == {"work": 1}
    assert len(lost_lines(caplog)) == 1
    # The lost job's holder settles nothing and fails nothing.
    assert held.finish() is False


@pytest.mark.parametrize("how", DAMAGES)
def test_a_blocking_take_on_a_queue_with_a_lost_job(
    queue: dc.JobQueue, cache: RedisCache, how: str
) -> None:
    ids = queue.put_many(["a", "b"])
    damage(cache, ids[0], how)
    job = queue.take(timeout=1)
    assert job is not None and job.value == "b"
    job.finish()
    started = time.monotonic()
    assert queue.take(timeout=0.2) is None
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("how", DAMAGES)
def test_put_with_a_unique_key_whose_holder_is_gone(
    queue: dc.JobQueue, cache: RedisCache, how: str
) -> None:
    a = queue.put("a", unique="ua")
    b = queue.put("b", unique="ub")
    damage(cache, b, how)
    # ub's holder is gone: a new job takes the key; ua's holder is alive: its id comes back.
    fresh = queue.put("b again", unique="ub")
    assert fresh not in (a, b)
    assert queue.put("a twice", unique="ua") == a
    assert once_each(drain(queue)) == Counter(["a", "b again"])


@pytest.mark.parametrize("how", DAMAGES)
def test_put_and_put_many_pass_over_a_taken_id(
    queue: dc.JobQueue, cache: RedisCache, how: str
) -> None:
    """A key of another program at the next ids (or a counter that was lost) is passed over:
    a put never writes over a key and never fails on one of another type."""
    last = queue.put("first")
    damage(cache, last + 1, how)
    damage(cache, last + 3, how)
    one = queue.put("one")
    many = queue.put_many(["two", "three"])
    if how == "deleted":  # nothing there: the ids follow on
        assert one == last + 1 and many == [last + 2, last + 3]
    else:
        assert one == last + 2 and many == [last + 4, last + 5]
    assert once_each(drain(queue)) == Counter(["first", "one", "two", "three"])
    if how != "deleted":
        assert cache.client.type(record_key(cache, last + 1)) != b"none"  # left alone


def _settle(cache: RedisCache, queue: dc.JobQueue, how: str, settle: Callable[[Any], Any]) -> Any:
    """Take three jobs, damage the middle one's record, settle each with ``settle``: the
    damaged one's lease reads lost, the others settle; return what the damaged one's settle
    returned."""
    queue.put_many(["x", "y", "z"])
    taken = queue.take_many(3)
    assert [job.value for job in taken] == ["x", "y", "z"]
    damage(cache, taken[1].id, how)
    results = [settle(job) for job in taken]
    return results


@pytest.mark.parametrize("how", DAMAGES)
def test_finish_of_a_lost_job(queue: dc.JobQueue, cache: RedisCache, how: str) -> None:
    results = _settle(cache, queue, how, lambda job: job.finish())
    assert results == [True, False, True]
    assert queue.counts().ready == 0


@pytest.mark.parametrize("how", DAMAGES)
def test_fail_of_a_lost_job(queue: dc.JobQueue, cache: RedisCache, how: str) -> None:
    results = _settle(cache, queue, how, lambda job: job.fail("boom"))
    assert results == ["ready", None, "ready"]
    assert once_each(drain(queue)) == Counter(["x", "z"])


@pytest.mark.parametrize("how", DAMAGES)
def test_extend_of_a_lost_job(queue: dc.JobQueue, cache: RedisCache, how: str) -> None:
    results = _settle(cache, queue, how, lambda job: job.extend(60))
    assert results == [True, False, True]


@pytest.mark.parametrize("how", DAMAGES)
def test_release_of_a_lost_job(queue: dc.JobQueue, cache: RedisCache, how: str) -> None:
    results = _settle(cache, queue, how, lambda job: job.release())
    assert results == [True, False, True]
    assert once_each(drain(queue)) == Counter(["x", "z"])


@pytest.mark.parametrize("how", DAMAGES)
def test_refuse_of_a_lost_job(queue: dc.JobQueue, cache: RedisCache, how: str) -> None:
    """``refuse`` (a take's pass over a job it cannot decode, D-047) on a job whose record
    went between the take and the refusal: the lease reads lost, the others are refused."""
    jobs = RedisJobs(cache)

    def refuse(job: Any) -> Any:
        member = _member(job.id)
        return jobs._link.run(_call("refuse", member, job._lease, "p", b"cannot decode", 0))

    results = _settle(cache, queue, how, refuse)
    assert results == [[b"0"], [None], [b"0"]]
    assert once_each(drain(queue)) == Counter(["x", "z"])


@pytest.mark.parametrize("how", DAMAGES)
def test_sweep_forgets_a_leased_job_whose_record_is_gone(
    cache: RedisCache, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    queue = dc.JobQueue(cache, "work", lease=0.05, max_attempts=3)
    queue.put_many(["x", "y", "z"])
    taken = queue.take_many(3)
    damage(cache, taken[2].id, how)
    time.sleep(0.1)
    caplog.set_level(logging.WARNING, "diskcache_oxide")
    assert tuple(queue.sweep()) == (2, 0)
    assert tuple(RedisJobs(cache).sweep()) == (0, 0)  # every queue: nothing left to sweep
    assert RedisJobs(cache).forgotten() == {"work": 1}
    assert len(lost_lines(caplog)) == 1
    assert once_each(drain(queue)) == Counter(["x", "y"])


@pytest.mark.parametrize("how", DAMAGES)
def test_counts_info_list_and_queues_pass_over_a_lost_job(
    queue: dc.JobQueue, cache: RedisCache, how: str
) -> None:
    ids = queue.put_many(["x", "y", "z"])
    damage(cache, ids[1], how)
    jobs = jobs_of(cache)
    assert sum(queue.counts()) in (2, 3)  # the lost id is counted until a take forgets it
    assert jobs.info(ids[1]) is None
    info = jobs.info(ids[0])
    assert info is not None and info.value == "x"
    for state in (None, "ready", "scheduled", "leased", "dead"):
        listed = jobs.list("work", state)
        assert [i.id for i in listed] == ([ids[0], ids[2]] if state in (None, "ready") else [])
    assert jobs.queues() == ["work"]
    assert once_each(drain(queue)) == Counter(["x", "z"])
    assert jobs.queues() == []  # the lost id, forgotten, keeps no queue alive


@pytest.mark.parametrize("how", ["deleted", "string", "half-hash"])
def test_list_by_walking_the_ids_passes_over_a_lost_job(cache: RedisCache, how: str) -> None:
    """Past 5,000 jobs in a state's set, ``list(state=...)`` walks the queue's ids and reads
    each record: that walk meets the lost one too."""
    queue = dc.JobQueue(cache, "work")
    ids = queue.put_many(range(5002))
    damage(cache, ids[1], how)
    listed = jobs_of(cache).list("work", "ready", limit=3)
    assert [i.id for i in listed] == [ids[0], ids[2], ids[3]]


@pytest.mark.parametrize("how", DAMAGES)
def test_bury_any_of_a_lost_job(queue: dc.JobQueue, cache: RedisCache, how: str) -> None:
    ids = queue.put_many(["x", "y", "z"])
    damage(cache, ids[1], how)
    jobs = jobs_of(cache)
    assert [jobs.bury_any(i, "by hand") for i in ids] == [True, False, True]
    assert [i.id for i in queue.dead()] == [ids[0], ids[2]]


@pytest.mark.parametrize("how", DAMAGES)
def test_purge_dead_forgets_a_dead_job_whose_record_is_gone(
    queue: dc.JobQueue, cache: RedisCache, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    ids = queue.put_many(["x", "y", "z", "w"])
    jobs = jobs_of(cache)
    for job_id in ids[:3]:
        assert jobs.bury_any(job_id, "by hand")
    damage(cache, ids[1], how)
    caplog.set_level(logging.WARNING, "diskcache_oxide")
    assert jobs.purge_dead("work") == 2
    assert queue.counts().dead == 0
    assert RedisJobs(cache).forgotten() == {"work": 1}
    assert len(lost_lines(caplog)) == 1
    assert drain(queue) == ["w"]


@pytest.mark.parametrize("how", DAMAGES)
def test_requeue_of_a_lost_job_and_past_a_lost_unique_holder(
    queue: dc.JobQueue, cache: RedisCache, how: str
) -> None:
    dead = queue.put("first", unique="u")
    other = queue.put("other")
    jobs = jobs_of(cache)
    assert jobs.bury_any(dead, "by hand") and jobs.bury_any(other, "by hand")
    holder = queue.put("second", unique="u")  # the dead job gave the key up
    damage(cache, holder, how)
    damage(cache, other, how)
    assert queue.requeue(other) is False
    # The key's holder is gone: the dead job takes its key back instead of a ValueError.
    assert queue.requeue(dead) is True
    assert once_each(drain(queue)) == Counter(["first"])


@pytest.mark.parametrize("how", DAMAGES)
def test_delete_of_a_lost_job(queue: dc.JobQueue, cache: RedisCache, how: str) -> None:
    ids = queue.put_many(["x", "y", "z"])
    damage(cache, ids[1], how)
    assert [queue.delete(i) for i in ids] == [True, False, True]
    assert drain(queue) == []
    if how != "deleted":
        assert cache.client.exists(record_key(cache, ids[1]))  # not ours: left alone


def test_forgotten_is_empty_on_a_namespace_that_lost_nothing(cache: RedisCache) -> None:
    queue = dc.JobQueue(cache, "work")
    queue.put_many(range(3))
    drain(queue)
    assert RedisJobs(cache).forgotten() == {}


def test_a_forgotten_queue_name_is_logged_escaped(
    cache: RedisCache, caplog: pytest.LogCaptureFixture
) -> None:
    """The queue's name comes from the store: a newline or an escape sequence in it does not
    reach the log as such."""
    name = "evil\n1 job(s) succeeded\x1b[31m\x07"
    queue = dc.JobQueue(cache, name)
    ids = queue.put_many(["x", "y"])
    damage(cache, ids[0], "deleted")
    caplog.set_level(logging.WARNING, "diskcache_oxide")
    assert drain(queue) == ["y"]
    (line,) = lost_lines(caplog)
    assert "\n" not in line and "\x1b" not in line and "\x07" not in line
    assert RedisJobs(cache).forgotten() == {name: 1}


#: Each script and the tests above that meet it with a lost record.
COVERED = {
    "put": test_put_with_a_unique_key_whose_holder_is_gone,
    "put_many": test_put_and_put_many_pass_over_a_taken_id,
    "take": test_take_forgets_a_ready_job_whose_record_is_gone,
    "refuse": test_refuse_of_a_lost_job,
    "finish": test_finish_of_a_lost_job,
    "fail": test_fail_of_a_lost_job,
    "extend": test_extend_of_a_lost_job,
    "release": test_release_of_a_lost_job,
    "sweep": test_sweep_forgets_a_leased_job_whose_record_is_gone,
    "counts": test_counts_info_list_and_queues_pass_over_a_lost_job,
    "info": test_counts_info_list_and_queues_pass_over_a_lost_job,
    "list": test_list_by_walking_the_ids_passes_over_a_lost_job,
    "queues": test_counts_info_list_and_queues_pass_over_a_lost_job,
    "bury_any": test_bury_any_of_a_lost_job,
    "purge_dead": test_purge_dead_forgets_a_dead_job_whose_record_is_gone,
    "requeue": test_requeue_of_a_lost_job_and_past_a_lost_unique_holder,
    "delete": test_delete_of_a_lost_job,
}
