"""Leased jobs: ``diskcache_oxide.JobQueue`` (docs/queue-api-spec.md, D-014).

A job has a lasting id, a lease while a worker holds it, a count of attempts, retries, a
dead-letter list, delays, unique keys and priorities between queues. Timing here is kept
to short leases and sleeps a few times longer than them; every wait has a generous upper
bound and nothing asserts how fast a call is.

A conformance module (tests/helpers/backends.py): every test that uses the ``cache`` fixture
runs on a directory, a Redis server and a Redis Cluster (D-060).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

pytestmark = [pytest.mark.oxide, pytest.mark.backends]


@pytest.fixture
def cache(make_cache: Any) -> Any:
    return make_cache("jobs", eviction_policy="none")


@pytest.fixture
def jobs(dc: Any, cache: Any) -> Any:
    return dc.JobQueue(cache)


def wait_until(predicate: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


# ----------------------------------------------------------------------------- put, take, finish


def test_put_take_finish(jobs: Any) -> None:
    before = time.time()
    job_id = jobs.put({"episode": 510})
    assert type(job_id) is int
    job = jobs.take()
    assert job.id == job_id
    assert job.queue == "default"
    assert job.value == {"episode": 510}
    assert job.attempts == 1
    assert job.max_attempts == 3
    assert job.error is None
    assert before <= job.created <= time.time()
    assert time.time() + 50 <= job.lease_deadline <= time.time() + 61  # default lease 60 s
    assert jobs.take() is None  # the only job is leased
    assert jobs.finish(job) is True
    assert jobs.get(job_id) is None
    assert len(jobs) == 0
    assert jobs.finish(job) is False  # already finished


def test_take_on_an_empty_queue_returns_none(jobs: Any) -> None:
    assert jobs.take() is None
    assert jobs.take_many(5) == []


def test_jobs_are_taken_oldest_first(jobs: Any) -> None:
    ids = [jobs.put(i) for i in range(5)]
    taken = [jobs.take() for _ in range(5)]
    assert [j.id for j in taken] == ids
    assert [j.value for j in taken] == list(range(5))


def test_ids_are_lasting_and_never_reused(jobs: Any) -> None:
    first = jobs.put("a")
    jobs.finish(jobs.take())
    second = jobs.put("b")
    assert second > first
    jobs.delete(second)
    assert jobs.put("c") > second


def test_values_round_trip_exactly(jobs: Any) -> None:
    values = [(1, "two", 3.0), {"nested": [1, {"a": (2,)}]}, b"\x00\xff", None, "x" * 100_000]
    ids = jobs.put_many(values)
    assert len(ids) == len(values)
    for value in values:
        job = jobs.take()
        assert type(job.value) is type(value) and job.value == value
        jobs.finish(job)


def test_jobs_do_not_live_in_the_cache_key_space(cache: Any, jobs: Any) -> None:
    jobs.put("job")
    cache.set("key", "value")
    assert len(cache) == 1
    assert list(cache) == ["key"]
    cache.clear()
    assert len(jobs) == 1
    assert jobs.take().value == "job"


def test_a_directory_works_as_well_as_a_cache(dc: Any, tmp_path: Any) -> None:
    directory = str(tmp_path / "by-path")
    producer = dc.JobQueue(directory)
    job_id = producer.put("hello")
    consumer = dc.JobQueue(dc.Cache(directory))
    job = consumer.take()
    assert (job.id, job.value) == (job_id, "hello")
    assert consumer.finish(job)


def test_job_methods_act_on_their_queue(jobs: Any) -> None:
    jobs.put("a")
    job = jobs.take()
    assert job.extend() is True
    assert job.release() is True
    job = jobs.take()
    assert job.fail("no") == "ready"
    job = jobs.take()
    assert job.finish() is True
    assert len(jobs) == 0


# ----------------------------------------------------------------------------- fail and retry


def test_fail_makes_the_job_ready_again_with_its_error(jobs: Any) -> None:
    job_id = jobs.put("x")
    job = jobs.take()
    assert jobs.fail(job, "it broke") == "ready"
    info = jobs.get(job_id)
    assert (info.state, info.attempts, info.error) == ("ready", 1, "it broke")
    again = jobs.take()
    assert again.id == job_id
    assert again.attempts == 2
    assert again.error == "it broke"


def test_fail_accepts_an_exception(jobs: Any) -> None:
    job_id = jobs.put("x")
    jobs.fail(jobs.take(), ValueError("bad input 42"))
    assert "bad input 42" in jobs.get(job_id).error


def test_fail_with_retry_in_schedules_the_retry(jobs: Any) -> None:
    job_id = jobs.put("x")
    before = time.time()
    assert jobs.fail(jobs.take(), "later", retry_in=1.0) == "ready"
    counts = jobs.counts()
    assert (counts.ready, counts.scheduled, counts.leased, counts.dead) == (0, 1, 0, 0)
    assert jobs.get(job_id).due >= before + 1.0
    assert jobs.take() is None
    assert wait_until(lambda: jobs.counts().ready == 1)
    assert jobs.take().id == job_id


def test_out_of_attempts_the_job_goes_to_the_dead_letter_list(dc: Any, cache: Any) -> None:
    jobs = dc.JobQueue(cache, max_attempts=2)
    job_id = jobs.put({"task": "flaky"})
    assert jobs.fail(jobs.take(), "first") == "ready"
    assert jobs.fail(jobs.take(), "second") == "dead"
    assert jobs.take() is None
    assert len(jobs) == 0  # dead jobs are not counted as waiting
    assert jobs.counts().dead == 1
    (info,) = jobs.dead()
    assert info.id == job_id
    assert info.queue == "default"
    assert info.state == "dead"
    assert info.attempts == 2
    assert info.max_attempts == 2
    assert info.error == "second"
    assert info.value == {"task": "flaky"}
    assert info.unique is None
    assert info.created <= time.time()


def test_requeue_brings_a_dead_job_back_with_attempts_reset(dc: Any, cache: Any) -> None:
    jobs = dc.JobQueue(cache, max_attempts=1)
    job_id = jobs.put("x")
    assert jobs.fail(jobs.take(), "boom") == "dead"
    assert jobs.requeue(job_id) is True
    info = jobs.get(job_id)
    assert (info.state, info.attempts) == ("ready", 0)
    assert jobs.dead() == []
    job = jobs.take()
    assert (job.id, job.attempts) == (job_id, 1)
    assert jobs.requeue(job_id) is False  # it is not dead
    assert jobs.finish(job)


def test_requeue_with_a_delay(dc: Any, cache: Any) -> None:
    jobs = dc.JobQueue(cache, max_attempts=1)
    job_id = jobs.put("x")
    jobs.fail(jobs.take())
    assert jobs.requeue(job_id, delay=60)
    assert jobs.counts().scheduled == 1
    assert jobs.take() is None


def test_delete_removes_a_job_in_any_state(dc: Any, cache: Any) -> None:
    jobs = dc.JobQueue(cache, max_attempts=1)
    dead_id = jobs.put("dead")
    jobs.fail(jobs.take())
    leased_id = jobs.put("leased")
    leased = jobs.take()
    ready_id = jobs.put("ready")
    for job_id in (dead_id, leased_id, ready_id):
        assert jobs.delete(job_id) is True
        assert jobs.get(job_id) is None
        assert jobs.delete(job_id) is False
    assert jobs.finish(leased) is False
    assert len(jobs) == 0 and jobs.dead() == []


def test_dead_list_pages_and_filters_by_queue(dc: Any, cache: Any) -> None:
    jobs = dc.JobQueue(cache, queues=("a", "b"), max_attempts=1)
    for i in range(5):
        jobs.put(i, queue="a")
        jobs.put(i, queue="b")
    while (job := jobs.take()) is not None:
        jobs.fail(job, f"e{job.value}")
    assert [i.value for i in jobs.dead(queue="a")] == [0, 1, 2, 3, 4]
    assert len(jobs.dead(queue="b", limit=2)) == 2
    assert {i.queue for i in jobs.dead(queue="b")} == {"b"}
    assert len(jobs.dead()) == 10  # every queue of this JobQueue


def test_per_job_max_attempts(jobs: Any) -> None:
    job_id = jobs.put("once", max_attempts=1)
    job = jobs.take()
    assert job.max_attempts == 1
    assert jobs.fail(job) == "dead"
    assert jobs.get(job_id).state == "dead"


# ----------------------------------------------------------------------------- leases


def test_extend_is_a_heartbeat(jobs: Any) -> None:
    jobs.put("long job")
    job = jobs.take(lease=1.0)
    first_deadline = job.lease_deadline
    assert jobs.extend(job, lease=30) is True
    assert job.lease_deadline > first_deadline + 20
    time.sleep(1.3)
    assert jobs.sweep().requeued == 0
    assert jobs.take() is None  # still leased
    assert jobs.get(job.id).state == "leased"
    assert jobs.finish(job)


def test_release_gives_the_job_back_without_counting_the_attempt(jobs: Any) -> None:
    job_id = jobs.put("x")
    assert jobs.release(jobs.take()) is True
    info = jobs.get(job_id)
    assert (info.state, info.attempts) == ("ready", 0)
    job = jobs.take()
    assert job.attempts == 1
    assert jobs.release(job, delay=60) is True
    assert jobs.counts().scheduled == 1
    assert jobs.take() is None


def test_an_expired_lease_is_requeued_by_take(jobs: Any) -> None:
    job_id = jobs.put("x")
    stale = jobs.take(lease=0.2)
    time.sleep(0.4)
    fresh = jobs.take()
    assert fresh is not None and fresh.id == job_id
    assert fresh.attempts == 2
    # the first holder lost its lease: it can no longer touch the job (fencing)
    assert jobs.finish(stale) is False
    assert jobs.fail(stale, "late") is None
    assert jobs.extend(stale) is False
    assert jobs.release(stale) is False
    assert jobs.get(job_id).state == "leased"
    assert jobs.finish(fresh) is True


def test_sweep_requeues_expired_leases_of_every_queue(dc: Any, cache: Any) -> None:
    a = dc.JobQueue(cache, queues="a")
    b = dc.JobQueue(cache, queues="b", max_attempts=1)
    a_id = a.put("a")
    b_id = b.put("b")
    a.take(lease=0.1)
    b.take(lease=0.1)
    time.sleep(0.3)
    swept = a.sweep()  # one JobQueue sweeps every queue of the directory
    assert (swept.requeued, swept.dead) == (1, 1)
    assert a.get(a_id).state == "ready"
    info = b.get(b_id)
    assert info.state == "dead" and info.error  # says why
    again = a.sweep()
    assert (again.requeued, again.dead) == (0, 0)


def test_a_job_abandoned_max_attempts_times_goes_dead(dc: Any, cache: Any) -> None:
    jobs = dc.JobQueue(cache, max_attempts=2, lease=0.1)
    job_id = jobs.put("crashes its worker")
    assert jobs.take() is not None
    time.sleep(0.25)
    assert jobs.take().attempts == 2
    time.sleep(0.25)
    assert jobs.take() is None
    info = jobs.get(job_id)
    assert info.state == "dead"
    assert [d.id for d in jobs.dead()] == [job_id]


def test_lease_argument_and_default(dc: Any, cache: Any) -> None:
    jobs = dc.JobQueue(cache, lease=5.0)
    jobs.put("x")
    job = jobs.take()
    assert time.time() + 3 < job.lease_deadline <= time.time() + 5.5
    jobs.release(job)
    job = jobs.take(lease=100)
    assert job.lease_deadline > time.time() + 90


# ----------------------------------------------------------------------------- delays, uniqueness


def test_delayed_job_is_not_taken_before_it_is_due(jobs: Any) -> None:
    job_id = jobs.put("later", delay=1.0)
    counts = jobs.counts()
    assert (counts.ready, counts.scheduled) == (0, 1)
    assert len(jobs) == 1
    assert jobs.take() is None
    assert jobs.get(job_id).state == "ready"  # waiting for its time, not leased
    assert wait_until(lambda: jobs.counts().ready == 1)
    assert jobs.take().id == job_id


def test_delayed_jobs_do_not_block_due_ones(jobs: Any) -> None:
    jobs.put("later", delay=60)
    now_id = jobs.put("now")
    assert jobs.take().id == now_id


def test_unique_jobs_are_enqueued_once(dc: Any, cache: Any) -> None:
    jobs = dc.JobQueue(cache, queues=("a", "b"))
    first = jobs.put("v1", unique="report:7")
    assert jobs.put("v2", unique="report:7") == first
    assert len(jobs) == 1
    other_queue = jobs.put("v3", unique="report:7", queue="b")
    assert other_queue != first
    assert jobs.get(first).unique == "report:7"
    job = jobs.take()
    assert jobs.put("v4", unique="report:7") == first  # leased still counts
    jobs.finish(job)
    assert jobs.put("v5", unique="report:7") != first  # finished: a new one may start


def test_a_dead_unique_job_does_not_block_a_new_one(dc: Any, cache: Any) -> None:
    jobs = dc.JobQueue(cache, max_attempts=1)
    dead = jobs.put("x", unique="k")
    jobs.fail(jobs.take())
    fresh = jobs.put("y", unique="k")
    assert fresh != dead
    with pytest.raises((ValueError, dc.CacheError)):
        jobs.requeue(dead)  # two live jobs would share the key
    assert jobs.get(dead).state == "dead"


# ----------------------------------------------------------------------------- several queues


def test_queues_are_taken_in_priority_order(dc: Any, cache: Any) -> None:
    jobs = dc.JobQueue(cache, queues=("urgent", "transcode", "email"))
    jobs.put("mail", queue="email")
    jobs.put("video", queue="transcode")
    jobs.put("first-queue")  # put() goes to the first queue
    jobs.put("video 2", queue="transcode")
    taken = [jobs.take() for _ in range(4)]
    assert [(j.queue, j.value) for j in taken] == [
        ("urgent", "first-queue"),
        ("transcode", "video"),
        ("transcode", "video 2"),
        ("email", "mail"),
    ]
    assert jobs.take() is None


def test_take_many_follows_priority_across_queues(dc: Any, cache: Any) -> None:
    jobs = dc.JobQueue(cache, queues=("hi", "lo"))
    jobs.put_many(["l1", "l2"], queue="lo")
    jobs.put_many(["h1", "h2"], queue="hi")
    batch = jobs.take_many(3)
    assert [j.value for j in batch] == ["h1", "h2", "l1"]
    assert all(j.attempts == 1 for j in batch)
    assert [j.value for j in jobs.take_many(10)] == ["l2"]


def test_counts_and_len_per_queue(dc: Any, cache: Any) -> None:
    jobs = dc.JobQueue(cache, queues=("a", "b"))
    jobs.put_many([1, 2, 3], queue="a")
    jobs.put(4, queue="b", delay=60)
    jobs.take()
    a = jobs.counts(queue="a")
    assert (a.ready, a.scheduled, a.leased, a.dead) == (2, 0, 1, 0)
    b = jobs.counts(queue="b")
    assert (b.ready, b.scheduled, b.leased, b.dead) == (0, 1, 0, 0)
    assert len(jobs) == 4
    only_b = dc.JobQueue(cache, queues="b")
    assert len(only_b) == 1
    assert only_b.take() is None


def test_a_queue_serves_only_its_queues(dc: Any, cache: Any) -> None:
    email = dc.JobQueue(cache, queues="email")
    video = dc.JobQueue(cache, queues="video")
    email.put("mail")
    assert video.take() is None
    assert email.take().value == "mail"


# --------------------------------------------------------------------------- Job as context manager


def test_job_context_manager_finishes_on_a_clean_exit(jobs: Any) -> None:
    job_id = jobs.put("x")
    with jobs.take(timeout=5) as job:
        assert job.value == "x"
    assert jobs.get(job_id) is None


def test_job_context_manager_fails_on_an_exception_and_reraises(jobs: Any) -> None:
    job_id = jobs.put("x")
    with pytest.raises(ZeroDivisionError):
        with jobs.take(timeout=5) as job:
            assert job.id == job_id
            1 / 0  # noqa: B018
    info = jobs.get(job_id)
    assert info.state == "ready"
    assert "ZeroDivisionError" in info.error
    assert info.attempts == 1


# ----------------------------------------------------------------------------- blocking take


def test_take_with_timeout_returns_a_job_put_later_by_another_thread(jobs: Any) -> None:
    def put_later() -> None:
        time.sleep(0.2)
        jobs.put("late")

    thread = threading.Thread(target=put_later)
    thread.start()
    try:
        job = jobs.take(timeout=20)
    finally:
        thread.join(10)
    assert job is not None and job.value == "late"


def test_take_with_timeout_returns_none_when_nothing_comes(jobs: Any) -> None:
    started = time.monotonic()
    assert jobs.take(timeout=0.3) is None
    assert jobs.take_many(3, timeout=0.1) == []
    assert time.monotonic() - started < 10


def test_blocking_take_wakes_when_a_delayed_job_falls_due(jobs: Any) -> None:
    """Nothing writes when a delayed job falls due; a waiting take must still see it."""
    jobs.put("later", delay=0.3)
    started = time.monotonic()
    job = jobs.take(timeout=8)
    assert job is not None and job.value == "later"
    assert time.monotonic() - started < 6, "the take slept through the job's due time"


def test_blocking_take_wakes_when_a_lease_runs_out(jobs: Any) -> None:
    job_id = jobs.put("x")
    jobs.take(lease=0.3)  # a worker that will never come back
    started = time.monotonic()
    job = jobs.take(timeout=8)
    assert job is not None and job.id == job_id and job.attempts == 2
    assert time.monotonic() - started < 6, "the take slept through the lease's end"


# ----------------------------------------------------------------------------- arguments


def test_bad_arguments_are_refused(dc: Any, cache: Any, jobs: Any) -> None:
    with pytest.raises((ValueError, TypeError)):
        jobs.put("x", delay=-1)
    with pytest.raises((ValueError, TypeError)):
        jobs.take(lease=-1)
    jobs.put("x")
    job = jobs.take()
    with pytest.raises((ValueError, TypeError)):
        jobs.fail(job, retry_in=float("nan"))


# ---- which store a JobQueue is given (the seam: _store.store_of, D-068) ----------------------


def test_a_queue_on_anything_but_a_store_or_a_path_is_a_clear_type_error(tmp_path: Any) -> None:
    import diskcache_oxide as dco
    from diskcache_oxide.jobs import jobs_of

    with pytest.raises(TypeError, match="cache_or_directory must be a Cache, a RedisCache or a"):
        dco.JobQueue(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cache must be a Cache or a RedisCache, not FanoutCache"):
        jobs_of(dco.FanoutCache(str(tmp_path / "fan")))  # type: ignore[arg-type]
    # A path opens a directory whose cache never evicts, and its jobs are the directory's.
    queue = dco.JobQueue(tmp_path / "jobs")
    assert queue.cache.eviction_policy == "none"
    assert queue.put("x") > 0
    assert repr(queue).startswith(f"JobQueue({str(tmp_path / 'jobs')!r}, ")
    assert dco.JobQueue(str(tmp_path / "jobs")).take().value == "x"
