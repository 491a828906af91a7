"""Issue 29 §2: jobs, claims and tasks on a Redis server whose ``maxmemory-policy`` may evict
them (remote/_policy.py), on real servers started with that policy and a small
``maxmemory``.

Before, filling the cache of a namespace under ``allkeys-lru`` evicted every queued job and
``counts()`` read ``(0, 0, 0, 0)`` with no error and no warning. Now opening a JobQueue,
Claims or Tasks there warns once (``EvictionWarning``), or refuses with ``strict=True``; the
``size_limit`` advice names ``noeviction``; ``diskcache-oxide info`` shows the policy and what
it means for jobs; and a server that refuses ``CONFIG`` has an unknown policy, which fails
nothing.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

redis = pytest.importorskip("redis")

import diskcache_oxide as dc  # noqa: E402
from diskcache_oxide import admin  # noqa: E402
from diskcache_oxide.remote import EvictionWarning, RedisCache, UnsupportedError  # noqa: E402
from diskcache_oxide.remote._policy import _read, _warned  # noqa: E402
from diskcache_oxide.tasks import Tasks  # noqa: E402

pytestmark = pytest.mark.oxide


def space() -> str:
    return "t" + uuid.uuid4().hex[:12]


@pytest.fixture(autouse=True)
def fresh_policy_memory() -> Iterator[None]:
    """Each test reads the policy afresh and may be warned again: the process remembers
    both (a server's policy for a minute, a warning for good)."""
    _read.clear()
    _warned.clear()
    yield
    _read.clear()
    _warned.clear()


@pytest.fixture
def evicting(make_redis_server: Callable[..., Any]) -> Any:
    """A server that evicts any key past 2 MB."""
    return make_redis_server(extra=["--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru"])


def eviction_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, EvictionWarning)]


def fill(cache: RedisCache, megabytes: int) -> None:
    """Write ``megabytes`` of cache entries (the server's errors, OOM included, pass up)."""
    blob = b"x" * 50_000
    for i in range(megabytes * 20):
        cache.set(f"fill-{i}", blob)


# ---- the warning and the refusal -----------------------------------------------------------


def test_a_job_queue_on_an_evicting_server_warns_once_and_its_jobs_are_lost(
    evicting: Any,
) -> None:
    """The issue's run: 100 jobs and a cache filled in the same namespace under allkeys-lru.
    The jobs are still lost (Redis cannot be asked to spare them), but the opener said so,
    once, naming the policy, the namespace and what to do."""
    namespace = space()
    cache = RedisCache(evicting.url, namespace=namespace)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jobs = dc.JobQueue(cache, "work")
        dc.JobQueue(cache, "other")  # the same server and namespace: said already
        dc.Claims(cache)  # under allkeys-* the one warning covers claims too
    (message,) = eviction_warnings(caught)
    assert "allkeys-lru" in message and "noeviction" in message
    assert repr(namespace) in message and "strict=True" in message
    assert caught[0].filename == __file__  # it points at the line that opened the queue
    jobs.put_many(range(100))
    fill(cache, 6)
    assert jobs.counts().ready < 100  # evicted, as the warning said


def test_strict_refuses_an_evicting_server(evicting: Any) -> None:
    cache = RedisCache(evicting.url, namespace=space())
    with pytest.raises(UnsupportedError, match="allkeys-lru.*noeviction"):
        dc.JobQueue(cache, "work", strict=True)
    with pytest.raises(UnsupportedError, match="JobQueue"):
        dc.jobs.jobs_of(cache, strict=True)
    with pytest.raises(UnsupportedError, match="Claims"):
        dc.Claims(cache, strict=True)
    with pytest.raises(UnsupportedError, match="Tasks"):
        _ = Tasks(cache, strict=True).jobs


def test_tasks_on_an_evicting_server_warn(evicting: Any) -> None:
    cache = RedisCache(evicting.url, namespace=space())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _ = Tasks(cache).jobs
    assert len(eviction_warnings(caught)) == 1


def test_noeviction_keeps_jobs_and_says_nothing(make_redis_server: Callable[..., Any]) -> None:
    """The advised policy: every job is still there after the fill, and a put past maxmemory
    fails with the server's OOM error, which the caller sees. (The cache's own writes are not
    always refused: a script whose first write cannot add memory, as the cache's set with its
    cleanup, may write on past maxmemory; Redis checks OOM at a script's first write.)"""
    server = make_redis_server(extra=["--maxmemory", "2mb", "--maxmemory-policy", "noeviction"])
    cache = RedisCache(server.url, namespace=space())
    with warnings.catch_warnings():
        warnings.simplefilter("error", EvictionWarning)
        jobs = dc.JobQueue(cache, "work", strict=True)
        dc.Claims(cache, strict=True)
        _ = Tasks(cache, strict=True).jobs
    jobs.put_many(range(100))
    try:
        fill(cache, 6)
    except Exception as error:
        assert "OOM" in str(error) or "maxmemory" in str(error)
    assert jobs.counts().ready == 100
    with pytest.raises(Exception, match="OOM|maxmemory"):
        jobs.put("one more")
    assert jobs.counts().ready == 100


def test_volatile_policies_keep_jobs_but_not_claims_or_tasks(
    make_redis_server: Callable[..., Any],
) -> None:
    """volatile-* evicts only keys that carry a TTL: no job record does, so jobs are safe; a
    claim carries its lease as one, a task's result and tick their expiry."""
    server = make_redis_server(extra=["--maxmemory", "2mb", "--maxmemory-policy", "volatile-ttl"])
    cache = RedisCache(server.url, namespace=space())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dc.JobQueue(cache, "work", strict=True)
        dc.Claims(cache)
        dc.Claims(cache, "other")
        _ = Tasks(cache).jobs
    said = eviction_warnings(caught)
    assert len(said) == 2, said  # claims once, tasks once; jobs never
    assert "volatile-ttl" in said[0] and "lease" in said[0]
    assert "result" in said[1]
    with pytest.raises(UnsupportedError, match="lease"):
        dc.Claims(cache, strict=True)


def test_no_job_key_carries_a_ttl(redis_url: str) -> None:
    """What makes volatile-* safe for jobs: after every kind of write, no job key but the
    wake-up lists has a TTL."""
    cache = RedisCache(redis_url, namespace=space())
    jobs = dc.JobQueue(cache, ("hi", "lo"), max_attempts=1)
    jobs.put("a", unique="u")
    jobs.put_many(["b", "c"], delay=60)
    taken = jobs.take()
    assert taken is not None and taken.fail("boom") == "dead"
    jobs.put("d", queue="lo")
    held = jobs.take()
    assert held is not None and held.extend(30)
    client = cache.client
    keys = [k for k in client.keys(cache._base + b"j*")]
    assert len(keys) >= 8
    for key in keys:
        ttl = client.ttl(key)
        if key.startswith(cache._base + b"jw:"):
            continue
        assert ttl == -1, (key, ttl)


def test_an_unreadable_policy_is_unknown_and_fails_nothing(
    make_redis_server: Callable[..., Any],
) -> None:
    """A managed server may refuse CONFIG: the policy is unknown, nothing warns or fails, even
    strict, and info says it is unknown."""
    server = make_redis_server(
        extra=["--maxmemory-policy", "allkeys-lru", "--rename-command", "CONFIG", ""]
    )
    cache = RedisCache(server.url, namespace=space())
    with warnings.catch_warnings():
        warnings.simplefilter("error", EvictionWarning)
        jobs = dc.JobQueue(cache, "work", strict=True)
        dc.Claims(cache, strict=True)
    jobs.put(1)
    memory = admin.server_memory(cache)
    assert memory["maxmemory_policy"].startswith("unknown (CONFIG GET was refused")
    assert memory["jobs_and_claims"].startswith("unknown")


def test_each_master_of_a_cluster_is_checked(redis_cluster: Any, redis_cluster_url: str) -> None:
    """One master of three evicts: that is enough to warn (a slot may move to it)."""
    evicting = redis_cluster.masters[2]
    evicting.command("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu")
    try:
        cache = RedisCache(redis_cluster_url + "?cluster=1", namespace=space())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dc.JobQueue(cache, "work")
        (message,) = eviction_warnings(caught)
        assert "allkeys-lfu" in message and evicting.address in message
        memory = admin.server_memory(cache)
        assert memory["maxmemory_policy"] == "allkeys-lfu, noeviction"
        assert "may be evicted" in memory["jobs_and_claims"]
    finally:
        evicting.command("CONFIG", "SET", "maxmemory-policy", "noeviction")


# ---- what the operator and the advice say -----------------------------------------------------


def test_info_shows_the_policy_and_what_it_means_for_jobs(evicting: Any) -> None:
    url = f"{evicting.url}?namespace={space()}"
    result = subprocess.run(
        [sys.executable, "-m", "diskcache_oxide", "info", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "maxmemory_policy" in result.stdout and "allkeys-lru" in result.stdout
    assert "set maxmemory-policy noeviction" in result.stdout


def test_info_json_counts_forgotten_jobs(redis_url: str) -> None:
    cache = RedisCache(redis_url, namespace=space())
    jobs = dc.JobQueue(cache, "work")
    ids = jobs.put_many(["x", "y"])
    cache.client.delete(cache._base + b"jj:%016d" % ids[0])
    assert jobs.take() is not None
    data = admin.info(cache)
    assert data["jobs_forgotten"] == {"work": 1}
    assert data["settings"]["maxmemory_policy"] == "noeviction"
    assert data["settings"]["jobs_and_claims"] == "kept (noeviction)"


def test_the_size_limit_advice_names_noeviction_for_jobs(redis_url: str) -> None:
    with pytest.raises(UnsupportedError) as raised:
        RedisCache(redis_url, namespace=space(), size_limit=2**20)
    text = str(raised.value)
    assert "noeviction" in text and "jobs" in text and "claims" in text
