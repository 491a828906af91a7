"""Leased jobs on Redis (issue 21, D-060): what the conformance modules
(tests/queue/test_jobs*.py, run on a directory, a server and a cluster) cannot see from the API:
the key layout under the namespace's hash tag, the stored bytes, a blocking take that waits on
the server, the operator's calls beside a directory's, the records' protocols, and a
hypothesis state machine that runs the same operations on a Redis JobQueue and a directory's
and compares every deterministic result.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from typing import Any

import pytest

redis = pytest.importorskip("redis")

import diskcache_oxide as dc  # noqa: E402
from diskcache_oxide import _core  # noqa: E402
from diskcache_oxide.aio import AsyncJobQueue  # noqa: E402
from diskcache_oxide.jobs import jobs_of  # noqa: E402
from diskcache_oxide.remote import RedisCache  # noqa: E402
from diskcache_oxide.remote.jobs import RedisJob, RedisJobInfo, RedisJobs  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import (  # noqa: E402
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

pytestmark = pytest.mark.oxide


@pytest.fixture
def namespace() -> str:
    return "t" + uuid.uuid4().hex[:12]


@pytest.fixture(params=["server", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    """The session server's URL, then the session cluster's: each test that takes it runs on
    both."""
    if request.param == "server":
        return str(request.getfixturevalue("redis_url"))
    return str(request.getfixturevalue("redis_cluster_url")) + "?cluster=1"


@pytest.fixture
def cache(url: str, namespace: str) -> Any:
    with RedisCache(url, namespace=namespace) as handle:
        yield handle


@pytest.fixture
def directory_cache(tmp_path: Any) -> Any:
    with dc.Cache(str(tmp_path / "jobs"), eviction_policy="none") as handle:
        yield handle


def every_key(client: Any) -> list[bytes]:
    """Every key on the server (each master of a cluster)."""
    if isinstance(client, redis.cluster.RedisCluster):
        found: list[bytes] = []
        for node in client.get_primaries():
            found += client.keys(target_nodes=node)
        return found
    return list(client.keys())


# ---- layout and bytes -----------------------------------------------------------------------


def test_every_job_key_is_under_the_namespace_hash_tag_in_one_slot(cache: Any) -> None:
    jobs = dc.JobQueue(cache, queues=("hi", "lo"), max_attempts=1)
    jobs.put("a", unique="u")
    jobs.put_many(["b", "c"], queue="lo", delay=60)
    jobs.fail(jobs.take(), "boom")  # one dead
    jobs.put("d")
    jobs.take()  # one leased
    keys = every_key(cache.client)
    assert keys, "the jobs are stored"
    assert all(key.startswith(cache._base) for key in keys), keys
    slots = (
        {cache.client.execute_command("CLUSTER KEYSLOT", key) for key in keys}
        if isinstance(cache.client, redis.cluster.RedisCluster)
        else {0}
    )
    assert len(slots) == 1, "every key of the namespace hashes to one slot"
    # None of them is an entry of the cache: its index stays empty.
    assert len(cache) == 0 and list(cache) == []


def test_values_are_stored_as_the_engines_frames(cache: Any) -> None:
    jobs = dc.JobQueue(cache)
    value = {"episode": 510, "tags": ("a", "b"), "raw": b"\x00\xff"}
    job_id = jobs.put(value)
    stored = cache.client.hget(cache._base + b"jj:%016d" % job_id, "v")
    assert stored == _core.encode_value(value)
    assert _core.decode_value(stored) == value


def test_a_pickle_is_refused_without_pickle_true(url: str, namespace: str) -> None:
    with RedisCache(url, namespace=namespace) as safe:
        with pytest.raises(dc.UnsupportedTypeError):
            dc.JobQueue(safe).put(object())
    with RedisCache(url, namespace=namespace, pickle=True) as trusting:
        job_id = dc.JobQueue(trusting).put(complex(1, 2))
        assert dc.JobQueue(trusting).get(job_id).value == complex(1, 2)


def test_put_many_beyond_one_script_batch_keeps_order_and_ids(cache: Any) -> None:
    jobs = dc.JobQueue(cache)
    ids = jobs.put_many(range(2500))
    assert ids == list(range(ids[0], ids[0] + 2500))
    assert jobs.counts().ready == 2500
    assert [job.value for job in jobs.take_many(5)] == [0, 1, 2, 3, 4]


# ---- the blocking take ----------------------------------------------------------------------


def evalsha_calls(client: Any) -> int:
    stats = client.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


def test_a_blocking_take_waits_on_the_server_not_by_polling(redis_url: str, namespace: str) -> None:
    with RedisCache(redis_url, namespace=namespace) as cache:
        jobs = dc.JobQueue(cache)
        jobs.take()  # scripts loaded
        before = evalsha_calls(cache.client)
        assert jobs.take(timeout=1.5) is None
        # One take, then BLPOP slices of up to 2 s: a few scripts, not one per poll.
        assert evalsha_calls(cache.client) - before <= 3
        assert int(cache.client.info("commandstats")["cmdstat_blpop"]["calls"]) >= 1


def test_a_blocking_take_gets_a_delayed_job_when_it_falls_due(
    redis_url: str, namespace: str
) -> None:
    with RedisCache(redis_url, namespace=namespace) as cache:
        jobs = dc.JobQueue(cache)
        job_id = jobs.put("later", delay=0.5)
        before = evalsha_calls(cache.client)
        job = jobs.take(timeout=30)
        assert job is not None and job.id == job_id
        # The wait was bounded by the due time: two takes, not a 30 s wait or a poll.
        assert evalsha_calls(cache.client) - before <= 3


def test_a_blocking_take_is_woken_by_a_put(cache: Any, url: str, namespace: str) -> None:
    import threading

    jobs = dc.JobQueue(cache)
    got: list[Any] = []
    taker = threading.Thread(target=lambda: got.append(jobs.take(timeout=30)))
    taker.start()
    with RedisCache(url, namespace=namespace) as other:
        job_id = dc.JobQueue(other).put("wake up")
    taker.join(30)
    assert not taker.is_alive()
    assert got and got[0] is not None and got[0].id == job_id


def test_a_blocking_take_over_several_queues_is_woken_by_any(
    cache: Any, url: str, namespace: str
) -> None:
    import threading

    jobs = dc.JobQueue(cache, queues=("urgent", "bulk", "mail"))
    got: list[Any] = []
    taker = threading.Thread(target=lambda: got.append(jobs.take(timeout=30)))
    taker.start()
    time.sleep(0.2)  # blocked in one BLPOP over the three queues' wake-up lists
    with RedisCache(url, namespace=namespace) as other:
        job_id = dc.JobQueue(other, queues="mail").put("to the last queue")
    taker.join(30)
    assert not taker.is_alive()
    assert got and got[0] is not None and (got[0].id, got[0].queue) == (job_id, "mail")


# ---- records --------------------------------------------------------------------------------


def test_jobs_of_both_backends_are_jobs(cache: Any, directory_cache: Any) -> None:
    for backing in (cache, directory_cache):
        jobs = dc.JobQueue(backing)
        job_id = jobs.put({"n": 1})
        job = jobs.take()
        assert isinstance(job, dc.Job)
        info = jobs.get(job_id)
        assert isinstance(info, dc.JobInfo)
        assert not isinstance(info, dc.Job) and not isinstance(job, dc.JobInfo)
        assert job == job and hash(job) == hash(job)
        assert repr(job).startswith(f"Job(id={job_id}, queue='default', value={{'n': 1}}")
        assert repr(info).startswith(f"JobInfo(id={job_id}, queue='default', state='leased'")
        assert job.finish()
    assert isinstance(dc.JobQueue(cache).cache, RedisCache)
    with pytest.raises(TypeError, match="must be a Job"):
        dc.JobQueue(cache).finish(object())  # type: ignore[arg-type]


def test_a_jobinfo_this_process_cannot_decode_is_still_a_jobinfo(url: str, namespace: str) -> None:
    with RedisCache(url, namespace=namespace, pickle=True) as trusting:
        job_id = dc.JobQueue(trusting).put(complex(1, 2))
    with RedisCache(url, namespace=namespace) as safe:
        info = dc.JobQueue(safe).get(job_id)
        assert isinstance(info, dc.JobInfo)  # the check never reads the value
        with pytest.raises(dc.UnsafeValueError):
            _ = info.value
        assert "unreadable" in repr(info)


def test_jobs_of_names_each_backends_storage(cache: Any, directory_cache: Any) -> None:
    assert isinstance(jobs_of(cache), RedisJobs)
    assert jobs_of(directory_cache) is not None
    with pytest.raises(TypeError, match="Cache or a RedisCache"):
        jobs_of("not a cache")  # type: ignore[arg-type]
    assert "redis namespace" in repr(dc.JobQueue(cache))


def test_the_async_job_queue_runs_on_redis(cache: Any) -> None:
    async def work() -> list[Any]:
        ajobs = AsyncJobQueue(dc.JobQueue(cache))
        first = await ajobs.put("one")
        await ajobs.put("two")
        job = await ajobs.take(timeout=5)
        assert job is not None and job.id == first
        async with ajobs.settle(job):
            pass
        job = await ajobs.take()
        assert job is not None
        with pytest.raises(ZeroDivisionError):
            async with ajobs.settle(job):
                1 / 0  # noqa: B018
        return [await ajobs.get(first), await ajobs.get(job.id), await ajobs.length()]

    gone, failed, length = asyncio.run(work())
    assert gone is None
    assert failed.state == "ready" and "ZeroDivisionError" in failed.error
    assert length == 1


# ---- the operator's calls, beside a directory's ---------------------------------------------


def fill(backing: Any) -> list[int]:
    """The same jobs in the same states on either backend: ready, scheduled, leased, dead."""
    jobs = dc.JobQueue(backing, queues=("mail", "video"), max_attempts=1)
    ids = jobs.put_many([f"m{i}" for i in range(6)])
    ids.append(jobs.put("later", delay=3600))
    ids.append(jobs.put("v", queue="video", unique="clip"))
    held = jobs.take_many(2)
    jobs.fail(held[1], "boom")  # dead
    return ids


STATES = (None, "ready", "scheduled", "leased", "dead")


def listed(infos: list[Any]) -> list[tuple[Any, ...]]:
    return [
        (i.id, i.queue, i.state, i.attempts, i.max_attempts, i.error, i.unique, i.taken is None)
        for i in infos
    ]


def test_the_operators_calls_match_a_directorys(cache: Any, directory_cache: Any) -> None:
    assert fill(cache) == fill(directory_cache)
    remote, local = jobs_of(cache), jobs_of(directory_cache)
    assert remote.queues() == local.queues() == ["mail", "video"]
    for state in STATES:
        for after, limit in ((0, 100), (1, 2), (3, 1), (100, 5)):
            got = remote.list("mail", state, after, limit)
            want = local.list("mail", state, after, limit)
            assert listed(got) == listed(want), (state, after, limit)
    (leased,) = remote.list("mail", "leased")
    assert leased.taken is not None and leased.taken <= leased.due
    previewed = remote.list("mail", None, 0, 100, preview=4)
    assert [len(info.preview) <= 4 for info in previewed] == [True] * len(previewed)
    with pytest.raises(ValueError, match="preview"):
        _ = previewed[0].value
    with pytest.raises(ValueError, match="state must be"):
        remote.list("mail", "gone")  # type: ignore[arg-type]
    # Bury whoever holds it; the holder's lease is then lost; purge the dead letters.
    for store in (remote, local):
        ready = store.list("mail", "ready", 0, 1)[0].id
        assert store.bury_any(ready, "by hand") is True
        assert store.bury_any(ready, "again") is False
        assert store.counts("mail") == (3, 1, 1, 2)
        assert store.purge_dead("mail") == 2
        assert store.counts("mail") == (3, 1, 1, 0)
        assert store.sweep(None) == (0, 0)
    holder = remote.take(["mail"], 60.0, 1)[0][0]
    assert remote.bury_any(holder.id, "stuck") is True
    assert holder.finish() is False, "an operator's bury ends the holder's lease"


# ---- a Redis JobQueue against a directory's, operation by operation -------------------------

VALUES = st.one_of(
    st.integers(-(2**40), 2**40), st.text(max_size=8), st.binary(max_size=8), st.none()
)
QUEUES = ("a", "b")


class SameAsADirectory(RuleBasedStateMachine):
    """The same operations on a Redis JobQueue and a directory's, with every lease long and
    every delay 0 or an hour, so that nothing depends on the clocks: ids, values, states,
    attempts, errors, counts and the fencing of settled jobs must agree."""

    url = ""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.local_cache = dc.Cache(self.tmp.name, eviction_policy="none")
        self.remote_cache = RedisCache(self.url, namespace="t" + uuid.uuid4().hex[:12])
        self.local = dc.JobQueue(self.local_cache, queues=QUEUES, max_attempts=2)
        self.remote = dc.JobQueue(self.remote_cache, queues=QUEUES, max_attempts=2)
        self.held: list[tuple[Any, Any]] = []
        self.ids: list[int] = []

    def teardown(self) -> None:
        self.local_cache.close()
        self.remote_cache.close()
        self.tmp.cleanup()

    def both(self, call: str, *args: Any, **kwargs: Any) -> Any:
        got = getattr(self.remote, call)(*args, **kwargs)
        want = getattr(self.local, call)(*args, **kwargs)
        assert got == want, (call, args, kwargs, got, want)
        return got

    @rule(
        value=VALUES,
        queue=st.sampled_from(QUEUES),
        later=st.booleans(),
        unique=st.none() | st.sampled_from(["u1", "u2"]),
        most=st.none() | st.integers(0, 3),
    )
    def put(self, value: Any, queue: str, later: bool, unique: str | None, most: Any) -> None:
        job_id = self.both(
            "put", value, queue=queue, delay=3600 if later else 0, unique=unique, max_attempts=most
        )
        self.ids.append(job_id)

    @rule(values=st.lists(VALUES, max_size=4), queue=st.sampled_from(QUEUES))
    def put_many(self, values: list[Any], queue: str) -> None:
        self.ids += self.both("put_many", values, queue=queue)

    @rule(n=st.integers(1, 3))
    def take_many(self, n: int) -> None:
        got = self.remote.take_many(n)
        want = self.local.take_many(n)
        fields = ("id", "queue", "value", "attempts", "max_attempts", "error")
        assert [[getattr(j, f) for f in fields] for j in got] == [
            [getattr(j, f) for f in fields] for j in want
        ]
        assert all(isinstance(j, RedisJob) for j in got)
        self.held += list(zip(got, want, strict=True))

    @precondition(lambda self: self.held)
    @rule(
        data=st.data(),
        how=st.sampled_from(["finish", "fail", "fail_later", "release", "extend", "exit_error"]),
    )
    def settle(self, data: Any, how: str) -> None:
        remote_job, local_job = data.draw(st.sampled_from(self.held))
        results = []
        for job in (remote_job, local_job):
            if how == "finish":
                results.append(job.finish())
            elif how == "fail":
                results.append(job.fail("no"))
            elif how == "fail_later":
                results.append(job.fail(ValueError("later"), retry_in=3600))
            elif how == "release":
                results.append(job.release())
            elif how == "extend":
                results.append(job.extend(120))
            else:
                try:
                    with job:
                        raise KeyError("inside")
                except KeyError:
                    results.append("raised")
        assert results[0] == results[1], (how, results)

    @precondition(lambda self: self.ids)
    @rule(data=st.data(), how=st.sampled_from(["requeue", "delete", "get", "bury"]))
    def by_id(self, data: Any, how: str) -> None:
        job_id = data.draw(st.sampled_from(self.ids))
        if how == "requeue":
            outcomes = []
            for jobs in (self.remote, self.local):
                try:
                    outcomes.append(jobs.requeue(job_id))
                except ValueError as error:
                    outcomes.append(str(error))
            assert outcomes[0] == outcomes[1]
        elif how == "delete":
            self.both("delete", job_id)
        elif how == "bury":
            got = jobs_of(self.remote_cache).bury_any(job_id, "operator")
            assert got == jobs_of(self.local_cache).bury_any(job_id, "operator")
        else:
            got, want = self.remote.get(job_id), self.local.get(job_id)
            assert (got is None) == (want is None)
            if got is not None:
                fields = ("id", "queue", "state", "attempts", "max_attempts", "error", "unique")
                assert [getattr(got, f) for f in fields] == [getattr(want, f) for f in fields]
                assert got.value == want.value

    @rule(queue=st.sampled_from(QUEUES))
    def purge_dead(self, queue: str) -> None:
        got = jobs_of(self.remote_cache).purge_dead(queue)
        assert got == jobs_of(self.local_cache).purge_dead(queue)

    @invariant()
    def same_counts(self) -> None:
        for queue in QUEUES:
            self.both("counts", queue)
        self.both("__len__")
        dead = [(i.id, i.error, i.attempts) for i in self.remote.dead()]
        assert dead == [(i.id, i.error, i.attempts) for i in self.local.dead()]
        assert jobs_of(self.remote_cache).queues() == jobs_of(self.local_cache).queues()


def test_a_redis_job_queue_does_what_a_directorys_does(url: str) -> None:
    machine = type("Machine", (SameAsADirectory,), {"url": url})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=40,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )


def test_jobinfo_records_compare_by_fields(cache: Any) -> None:
    jobs = dc.JobQueue(cache)
    job_id = jobs.put([1, 2])
    first, second = jobs.get(job_id), jobs.get(job_id)
    assert isinstance(first, RedisJobInfo)
    assert first == second and first != "x"


# ---- the asyncio face on redis.asyncio ------------------------------------------------------


class NoThreads:
    """An executor that refuses work: the asyncio face on a redis.asyncio client must not
    need one."""

    def submit(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a call ran on a thread instead of the asyncio client")


def asyncio_client(url: str) -> Any:
    import redis.asyncio
    import redis.asyncio.cluster

    plain = url.removesuffix("?cluster=1")
    if plain != url:
        return redis.asyncio.cluster.RedisCluster.from_url(plain)
    return redis.asyncio.Redis.from_url(url)


def test_the_async_job_queue_awaits_a_redis_asyncio_client(cache: Any, url: str) -> None:
    async def work() -> None:
        client = asyncio_client(url)
        try:
            jobs = dc.JobQueue(cache, max_attempts=2)
            ajobs = AsyncJobQueue(jobs, executor=NoThreads(), client=client)  # type: ignore[arg-type]
            waiting = asyncio.ensure_future(ajobs.take(timeout=30))
            await asyncio.sleep(0.2)  # the take is blocked in BLPOP, on the loop
            first = await ajobs.put({"n": 1})
            job = await waiting
            assert job is not None and job.id == first and isinstance(job, RedisJob)
            assert await ajobs.extend(job, 120) is True
            assert job.lease_deadline > time.time() + 100
            async with ajobs.settle(job):
                pass
            assert await ajobs.get(first) is None
            assert await ajobs.finish(job) is False  # settled
            ids = await ajobs.put_many(["a", "b"], delay=0)
            batch = await ajobs.take_many(2)
            assert [j.id for j in batch] == ids
            assert await ajobs.release(batch[0]) is True
            assert await ajobs.fail(batch[1], "no") == "ready"
            again = await ajobs.take_many(5)
            assert sorted(j.id for j in again) == ids
            assert await ajobs.fail(again[0], ValueError("x")) in ("ready", "dead")
            assert await ajobs.fail(again[1], "twice") in ("ready", "dead")
            dead = await ajobs.dead()
            assert [d.id for d in dead] == [j.id for j in again if j.attempts == 2]
            assert (await ajobs.counts()).dead == len(dead)
            for d in dead:
                assert await ajobs.requeue(d.id) is True
            assert await ajobs.length() == 2
            assert await ajobs.sweep() == (0, 0)
            assert await ajobs.delete(ids[0]) is True
            assert await ajobs.length() == 1
            # The blocking face settles what the asyncio face took, and the other way round.
            held = await ajobs.take()
            assert held is not None and jobs.finish(held) is True
        finally:
            await client.aclose()

    asyncio.run(work())


def test_the_async_job_queue_makes_its_own_asyncio_client_by_default(cache: Any) -> None:
    """Without client=, a Redis JobQueue's async face awaits the asyncio twin of the cache's
    client (no executor is ever used), and closing it closes only that twin."""

    async def work() -> None:
        async with AsyncJobQueue(dc.JobQueue(cache), executor=NoThreads()) as ajobs:  # type: ignore[arg-type]
            waiting = asyncio.ensure_future(ajobs.take(timeout=30))
            await asyncio.sleep(0.2)  # blocked in an awaited BLPOP
            first = await ajobs.put("woken")
            job = await waiting
            assert job is not None and job.id == first
            assert await ajobs.finish(job) is True
        assert ajobs._owned is None  # closed
        assert cache.push("still open") is not None  # the cache's own client is untouched

    asyncio.run(work())


def test_a_cancelled_async_take_holds_nothing(cache: Any, url: str) -> None:
    async def work() -> None:
        client = asyncio_client(url)
        try:
            ajobs = AsyncJobQueue(dc.JobQueue(cache), client=client)
            waiting = asyncio.ensure_future(ajobs.take(timeout=30))
            await asyncio.sleep(0.2)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            job_id = await ajobs.put("after")
            job = await ajobs.take()
            assert job is not None and (job.id, job.attempts) == (job_id, 1)
        finally:
            await client.aclose()

    asyncio.run(work())


def test_client_is_for_a_redis_job_queue(directory_cache: Any, url: str) -> None:
    with pytest.raises(TypeError, match="leave client out"):
        AsyncJobQueue(dc.JobQueue(directory_cache), client=object())


def test_a_take_of_more_than_a_script_can_count(cache: Any) -> None:
    jobs = dc.JobQueue(cache)
    jobs.put_many(range(3))
    assert [job.value for job in jobs.take_many(2**70)] == [0, 1, 2]


def test_the_job_queue_on_redis_is_the_one_job_queue(cache: Any) -> None:
    from diskcache_oxide.remote import jobs as remote_jobs

    queue = dc.JobQueue(cache, "mail")
    assert type(queue) is dc.JobQueue
    assert isinstance(queue._core, RedisJobs)
    # The backend holds the storage, not a queue class of its own: JobQueue is a feature above
    # the seam, and a backend imports nothing above it (D-068; it was re-exported here before).
    assert not hasattr(remote_jobs, "JobQueue")


def test_large_batches_and_pages_beyond_one_script(cache: Any, directory_cache: Any) -> None:
    # More jobs than one take script leases (1,000) and than a state's set is read whole for
    # a page (5,000): the results are a directory's.
    for backing in (cache, directory_cache):
        jobs = dc.JobQueue(backing)
        jobs.put_many(range(5200))
        jobs.put("later", delay=3600)
        taken = jobs.take_many(2500)
        assert [job.value for job in taken] == list(range(2500))
        for job in taken[:2400]:
            assert job.finish()
        jobs.put_many(range(3000))  # 5,700 ready: a page of them walks the queue's ids
    remote, local = jobs_of(cache), jobs_of(directory_cache)
    assert remote.counts("default") == local.counts("default") == (5700, 1, 100, 0)
    for state in STATES:
        for after in (0, 2450, 5000, 8000):
            got = remote.list("default", state, after, 7)
            want = local.list("default", state, after, 7)
            assert [i.id for i in got] == [i.id for i in want], (state, after)
            assert [i.state for i in got] == [i.state for i in want]


class Stops:
    """A registered type whose decoder is interrupted (Ctrl-C while a take decodes it)."""

    def __init__(self, n: int) -> None:
        self.n = n


def test_a_take_interrupted_while_decoding_gives_its_jobs_back(cache: Any) -> None:
    def interrupted(_: Any) -> Any:
        raise KeyboardInterrupt

    jobs = dc.JobQueue(cache)
    first = jobs.put("fine")
    dc.register_type(Stops, "tests.redis.Stops", lambda s: s.n, interrupted)
    try:
        second = jobs.put(Stops(1))
        with pytest.raises(KeyboardInterrupt):
            jobs.take_many(2)
    finally:
        dc.unregister_type(Stops)
    for job_id in (first, second):
        info = jobs.get(job_id)
        assert (info.state, info.attempts) == ("ready", 0), "given back, the attempt uncounted"
