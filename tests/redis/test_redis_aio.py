"""The Redis backend's asyncio face (D-059) against a real redis-server and a three-master
cluster: ``AsyncCache(redis_cache)`` is an ``AsyncRedisCache`` whose calls are RedisCache's
operations awaited on redis-py's asyncio client, so the same calls give the same results as
the blocking RedisCache (a state machine over both); a blocked pull is an awaited BLPOP, woken
by a push; a cancelled pull loses no item; claims and compute-once run on the asyncio client;
the generated methods are readable source with Cache's signatures; the asyncio twin of a
client keeps its connection settings."""

from __future__ import annotations

import asyncio
import inspect
import pathlib
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import diskcache_oxide as dco
import pytest
from diskcache_oxide import _api
from diskcache_oxide.aio import AsyncCache, AsyncClaims, aget_or_compute
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

redis = pytest.importorskip("redis")

redis_asyncio = pytest.importorskip("redis.asyncio")
from diskcache_oxide.remote import (  # noqa: E402
    AsyncRedisCache,
    RedisCache,
    UnsupportedError,
    asyncio_client,
    blocking_client,
)

pytestmark = pytest.mark.oxide


@pytest.fixture
def namespace() -> str:
    return "a" + uuid.uuid4().hex[:12]


@pytest.fixture(params=["server", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    """The session server's URL, then the session cluster's: each test runs on both."""
    if request.param == "server":
        return str(request.getfixturevalue("redis_url"))
    return str(request.getfixturevalue("redis_cluster_url")) + "?cluster=1"


@pytest.fixture
def cache(url: str, namespace: str) -> Iterator[RedisCache]:
    with RedisCache(url, namespace=namespace) as handle:
        yield handle
        handle.clear()


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


# ----- the same calls, blocking and awaited ------------------------------------------------------

KEYS = st.sampled_from(["a", "b", 7, b"k", (1, "t"), "q-500000000000000", "q-x", 500000000000001])
VALUES = st.one_of(
    st.integers(-(2**70), 2**70),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.none(),
)
TAGS = st.sampled_from([None, "red", 3])
PREFIXES = st.sampled_from([None, "q"])
SIDES = st.sampled_from(["front", "back"])


class SameAwaited(RuleBasedStateMachine):
    """Each rule makes one call on a blocking RedisCache and, with AsyncCache's name, on the
    asyncio face of another namespace's RedisCache; the results (or the exception classes)
    must be equal."""

    url = ""

    @initialize()
    def open(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.blocking = RedisCache(self.url, namespace="sb" + uuid.uuid4().hex[:10])
        self.other = RedisCache(self.url, namespace="sa" + uuid.uuid4().hex[:10])
        self.awaited = AsyncCache(self.other)

    def teardown(self) -> None:
        if hasattr(self, "loop"):
            self.loop.run_until_complete(self.awaited.close())
            self.loop.close()
            for handle in (self.blocking, self.other):
                handle.clear()
                handle.close()

    def both(self, call: str, *args: Any, aio: str | None = None, **kwargs: Any) -> Any:
        results = []
        try:
            results.append(("ok", getattr(self.blocking, call)(*args, **kwargs)))
        except Exception as error:
            results.append(("raised", type(error)))
        try:
            awaitable = getattr(self.awaited, aio or call)(*args, **kwargs)
            results.append(("ok", self.loop.run_until_complete(awaitable)))
        except Exception as error:
            results.append(("raised", type(error)))
        assert results[0] == results[1], (call, args, kwargs, results)
        return results[0][1]

    @rule(key=KEYS, value=VALUES, tag=TAGS)
    def set(self, key: Any, value: Any, tag: Any) -> None:
        self.both("set", key, value, tag=tag)

    @rule(key=KEYS, value=VALUES)
    def setitem(self, key: Any, value: Any) -> None:
        self.both("__setitem__", key, value, aio="setitem")

    @rule(key=KEYS, value=VALUES)
    def add(self, key: Any, value: Any) -> None:
        self.both("add", key, value)

    @rule(key=KEYS, tag=st.booleans())
    def get(self, key: Any, tag: bool) -> None:
        self.both("get", key, default="missing", tag=tag)

    @rule(key=KEYS)
    def getitem_contains(self, key: Any) -> None:
        self.both("__getitem__", key, aio="getitem")
        self.both("__contains__", key, aio="contains")

    @rule(key=KEYS)
    def delete(self, key: Any) -> None:
        self.both("delete", key)

    @rule(key=KEYS)
    def delitem(self, key: Any) -> None:
        self.both("__delitem__", key, aio="delitem")

    @rule(key=KEYS, tag=st.booleans())
    def pop(self, key: Any, tag: bool) -> None:
        self.both("pop", key, tag=tag)

    @rule(key=KEYS, delta=st.integers(-5, 5), default=st.sampled_from([0, None, 10]))
    def incr_decr(self, key: Any, delta: int, default: Any) -> None:
        self.both("incr", key, delta, default)
        self.both("decr", key, delta, default)

    @rule(key=KEYS)
    def touch(self, key: Any) -> None:
        self.both("touch", key, 1000)

    @rule(value=VALUES, prefix=PREFIXES, side=SIDES, tag=TAGS)
    def push(self, value: Any, prefix: Any, side: Any, tag: Any) -> None:
        self.both("push", value, prefix=prefix, side=side, tag=tag)

    @rule(prefix=PREFIXES, side=SIDES, tag=st.booleans())
    def pull(self, prefix: Any, side: Any, tag: bool) -> None:
        self.both("pull", prefix=prefix, side=side, tag=tag)

    @rule(prefix=PREFIXES, side=SIDES)
    def peek(self, prefix: Any, side: Any) -> None:
        self.both("peek", prefix=prefix, side=side)

    @rule(values=st.lists(VALUES, max_size=3), prefix=PREFIXES, side=SIDES)
    def push_many(self, values: list[Any], prefix: Any, side: Any) -> None:
        self.both("push_many", values, prefix=prefix, side=side)

    @rule(n=st.integers(0, 3), prefix=PREFIXES, side=SIDES, tag=st.booleans())
    def pull_many(self, n: int, prefix: Any, side: Any, tag: bool) -> None:
        self.both("pull_many", n, prefix=prefix, side=side, tag=tag)

    @rule(last=st.booleans(), tag=st.booleans())
    def peekitem(self, last: bool, tag: bool) -> None:
        self.both("peekitem", last, tag=tag)

    @rule(pairs=st.lists(st.tuples(KEYS, VALUES), max_size=3), tag=TAGS)
    def set_many(self, pairs: list[tuple[Any, Any]], tag: Any) -> None:
        self.both("set_many", pairs, tag=tag)

    @rule(keys=st.lists(KEYS, max_size=3))
    def many(self, keys: list[Any]) -> None:
        self.both("get_many", keys, default="missing")
        self.both("delete_many", keys[:1])

    @rule(tag=TAGS)
    def evict(self, tag: Any) -> None:
        self.both("evict", tag)

    @rule()
    def expire_clear_stats(self) -> None:
        self.both("expire")
        self.both("stats")

    @rule()
    def clear(self) -> None:
        self.both("clear")

    @invariant()
    def same_keys(self) -> None:
        if hasattr(self, "loop"):
            assert len(self.blocking) == self.loop.run_until_complete(self.awaited.length())
            assert list(self.blocking.iterkeys()) == self.loop.run_until_complete(
                self.awaited.keys()
            )
            assert list(self.blocking.iterkeys(reverse=True, prefix="q")) == (
                self.loop.run_until_complete(self.awaited.keys(reverse=True, prefix="q"))
            )


def test_the_same_calls_awaited_give_the_same_results(url: str) -> None:
    machine = type("SameAwaitedHere", (SameAwaited,), {"url": url})
    settings(
        max_examples=40,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )(machine).TestCase().runTest()


def test_async_cache_of_a_redis_cache_is_its_asyncio_face(cache: RedisCache) -> None:
    async def main() -> None:
        async with AsyncCache(cache) as acache:
            assert isinstance(acache, AsyncRedisCache)
            assert acache.cache is cache and acache.namespace == cache.namespace
            assert isinstance(acache.client, (redis_asyncio.Redis, redis_asyncio.RedisCluster))
            await acache.set("k", b"bytes", tag="t")
            assert cache.get("k", tag=True) == (b"bytes", "t")
            assert (await acache.read("k")).read() == b"bytes"
            cache.set("n", 1)
            assert await acache.incr("n", 4) == 5
            keys = [key async for key in acache]
            assert keys == list(cache) == ["k", "n"]
        assert cache.get("n") == 5  # closing the face left the RedisCache's own client open

    run(main())


def test_what_redis_cannot_hold_raises_on_both_faces(cache: RedisCache) -> None:
    async def main() -> None:
        acache = AsyncCache(cache)
        with pytest.raises(UnsupportedError, match="maxmemory"):
            await acache.cull()
        with pytest.raises(UnsupportedError, match="JobQueue"):
            acache.transact()  # a context manager on AsyncCache: refused when called
        await acache.close()

    with pytest.raises(UnsupportedError, match="maxmemory"):
        cache.cull()
    with pytest.raises(UnsupportedError, match="Claims"):
        cache.transact()
    run(main())
    with pytest.raises(UnsupportedError, match="maxmemory"):
        AsyncRedisCache("redis://127.0.0.1:1", size_limit=1)


# ----- the blocked pull on the asyncio client ----------------------------------------------------


def test_a_blocked_async_pull_is_woken_by_a_push(cache: RedisCache) -> None:
    async def main() -> None:
        async with AsyncCache(cache) as acache:
            waiting = asyncio.ensure_future(acache.pull(prefix="jobs", timeout=60))
            await asyncio.sleep(0.05)  # let it reach its BLPOP (a push before it is not missed)
            assert not waiting.done()
            # The push comes from another thread's blocking client, as from another process.
            await asyncio.to_thread(cache.push, {"job": 1}, "jobs")
            assert await waiting == ("jobs-500000000000000", {"job": 1})
            assert cache.peek(prefix="jobs") == (None, None)

    run(main())


def test_a_blocked_async_pull_holds_no_thread(cache: RedisCache) -> None:
    async def main() -> None:
        async with AsyncCache(cache) as acache:
            before = threading.active_count()
            pulls = [acache.pull(prefix="idle", timeout=0.3) for _ in range(20)]
            assert await asyncio.gather(*pulls) == [(None, None)] * 20
            assert threading.active_count() == before
            assert asyncio.get_running_loop()._default_executor is None  # type: ignore[attr-defined]

    run(main())


def test_a_cancelled_blocked_pull_takes_nothing(cache: RedisCache) -> None:
    async def main() -> None:
        async with AsyncCache(cache) as acache:
            waiting = asyncio.ensure_future(acache.pull(prefix="jobs", timeout=60))
            await asyncio.sleep(0.05)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
        cache.push("after", prefix="jobs")
        assert cache.pull(prefix="jobs") == ("jobs-500000000000000", "after")

    run(main())


def test_cancelled_pulls_lose_no_item(cache: RedisCache) -> None:
    # Pulls cancelled at every moment of their work (waiting, reading, taking) while items
    # arrive: each item is pulled by a caller that returned, or is still in the queue (given
    # back by a cancelled caller that had taken it); none is lost and none is delivered twice.
    total = 60

    async def main() -> tuple[list[Any], list[Any]]:
        async with AsyncCache(cache) as acache:
            got: list[Any] = []

            async def pull() -> None:
                item = await acache.pull(prefix="w", timeout=5)
                if item != (None, None):
                    got.append(item[1])

            for number in range(total):
                await acache.push(number, prefix="w")
                task = asyncio.ensure_future(pull())
                for _ in range(number % 4):
                    await asyncio.sleep(0)
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            await acache._settle()  # the takes of cancelled callers, given back
            left = [value for _key, value in await acache.pull_many(total, prefix="w")]
            return got, left

    got, left = run(main())
    assert sorted(got + left) == list(range(total))


def test_a_cancelled_pull_many_gives_its_items_back(cache: RedisCache) -> None:
    async def main(yields: int) -> list[Any]:
        async with AsyncCache(cache) as acache:
            await acache.push_many(["a", "b", "c"], prefix="m")
            task = asyncio.ensure_future(acache.pull_many(3, prefix="m"))
            for _ in range(yields):
                await asyncio.sleep(0)
            task.cancel()
            (result,) = await asyncio.gather(task, return_exceptions=True)
        # close() waited for the cancelled take to end and give its items back.
        if isinstance(result, BaseException):
            result = cache.pull_many(3, prefix="m")
        return [value for _key, value in result]

    for yields in range(6):  # cancelled at each step of its work, or after it
        assert run(main(yields)) == ["a", "b", "c"]  # all of them, in order


# ----- claims and compute-once on the asyncio client ---------------------------------------------


def test_get_or_compute_runs_on_the_asyncio_client(cache: RedisCache) -> None:
    calls: list[int] = []

    async def paid() -> str:
        calls.append(1)
        await asyncio.sleep(0.1)
        return "value"

    async def main() -> None:
        results = await asyncio.gather(*(aget_or_compute(cache, "k", paid) for _ in range(8)))
        assert results == ["value"] * 8 and calls == [1]
        # Storage, claims and waits were awaited: no thread was started for them.
        assert asyncio.get_running_loop()._default_executor is None  # type: ignore[attr-defined]
        acache = AsyncCache(cache)
        assert await acache.get_or_compute("k", paid, outcome=True) == (
            "value",
            dco.Outcome.CACHED,
        )
        await acache.close()

    run(main())
    assert cache.get("k") == "value"


def test_async_claims_on_the_asyncio_client(url: str, namespace: str) -> None:
    async def main() -> None:
        async with AsyncRedisCache(url, namespace=namespace) as acache:
            claims = AsyncClaims(acache)
            claim = await claims.try_acquire("k", lease=30)
            assert claim is not None and await claim.held()
            assert await claims.try_acquire("k") is None
            (listed,) = await claims.list()
            assert listed[0] == "k" and listed[1].token == claim.token
            assert (await claims.holder("k")).token == claim.token  # type: ignore[union-attr]
            asyncio.get_running_loop().call_later(0.1, asyncio.ensure_future, claim.release())
            again = await claims.acquire("k", timeout=30)  # woken by the release
            assert again is not None and again.token != claim.token
            assert await again.extend(10)
            async with again:
                pass
            assert await claims.holder("k") is None
            assert acache.cache.namespace == namespace  # a blocking twin on the same URL

    run(main())


def test_a_cancelled_callers_turn_still_stores_on_the_asyncio_client(cache: RedisCache) -> None:
    async def main() -> None:
        started = asyncio.Event()

        async def slow() -> str:
            started.set()
            await asyncio.sleep(0.2)
            return "paid"

        acache = AsyncCache(cache)
        caller = asyncio.ensure_future(acache.get_or_compute("k", slow))
        await started.wait()
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        from diskcache_oxide.aio import drain_turns

        await drain_turns()
        assert await acache.get("k") == "paid"
        await acache.close()

    run(main())


# ----- the generated faces -----------------------------------------------------------------------


def _redis_calls() -> list[tuple[type, str, str]]:
    faces: list[tuple[type, str, str]] = []
    for call in _api.CALLS:
        if call.redis is None or call.redis.written:
            continue
        faces.append((RedisCache, call.name, call.name))
        if call.aio is not None or call.redis.op is None:
            faces.append((AsyncRedisCache, call.aio or call.name, call.name))
    return faces


@pytest.mark.parametrize(
    ("face", "name", "source"),
    _redis_calls(),
    ids=lambda v: v if isinstance(v, str) else getattr(v, "__name__", str(v)),
)
def test_a_redis_member_has_caches_signature_and_operation(
    face: type, name: str, source: str
) -> None:
    member = getattr(face, name)
    expected = inspect.signature(getattr(dco.Cache, source))
    signature = inspect.signature(member)
    shape = [(p.name, p.kind, p.default) for p in signature.parameters.values()]
    assert shape == [(p.name, p.kind, p.default) for p in expected.parameters.values()]
    # Written by `make api`: the file is one the generator writes (_faces/ or remote/_face*.py).
    from diskcache_oxide import _generate

    written = {path.resolve() for path in _generate.generated()}
    assert pathlib.Path(member.__code__.co_filename).resolve() in written
    remote = _api.BY_NAME[source].redis
    assert remote is not None
    if remote.op is None:
        return
    # The operation takes the namespace, then Cache's parameters with Cache's defaults.
    from diskcache_oxide.remote import _ops

    op = inspect.signature(getattr(_ops, remote.op))
    params = list(op.parameters.values())
    assert params[0].name == "ns"
    assert [(p.name, p.default) for p in params[1:]] == [
        (p.name, p.default) for p in list(expected.parameters.values())[1:]
    ]
    awaited = face is AsyncRedisCache
    assert inspect.iscoroutinefunction(member) == awaited


def test_a_generated_redis_method_reads_as_source() -> None:
    text = inspect.getsource(RedisCache.get)
    assert "return self._link.run(_ops.get(self, key, default, read, expire_time, tag, retry))" in (
        text
    )
    assert inspect.getdoc(dco.Cache.get) in (inspect.getdoc(RedisCache.get) or "")
    text = inspect.getsource(AsyncRedisCache.get)
    assert "async def get(" in text and "return await self._alink.run(_ops.get(" in text
    text = inspect.getsource(AsyncRedisCache.transact)
    assert "raise _ops.UnsupportedError(" in text


# ----- the asyncio twin of a client --------------------------------------------------------------


def test_the_asyncio_twin_keeps_the_connection_settings(redis_server: Any, redis_url: str) -> None:
    blocking = redis.Redis.from_url(redis_url.rsplit("/", 1)[0] + "/3", socket_timeout=4.5)
    twin = asyncio_client(blocking)
    assert isinstance(twin, redis_asyncio.Redis)
    kwargs = twin.get_connection_kwargs()
    assert (kwargs["db"], kwargs["socket_timeout"], kwargs["port"]) == (
        3,
        4.5,
        blocking.get_connection_kwargs()["port"],
    )
    back = blocking_client(twin)
    assert back.get_connection_kwargs()["db"] == 3
    unix = redis.Redis.from_url(redis_server.unix_url)
    unix_twin = asyncio_client(unix)
    assert unix_twin.get_connection_kwargs()["path"] == redis_server.unix_path

    async def main() -> None:
        cache = RedisCache(unix, namespace="unix" + uuid.uuid4().hex[:6])
        cache.set("k", "v")
        async with AsyncCache(cache) as acache:
            assert await acache.get("k") == "v"
        await twin.aclose()
        await unix_twin.aclose()
        cache.clear()

    run(main())
    with pytest.raises(TypeError, match="takes a Redis or RedisCluster client"):
        asyncio_client("redis://127.0.0.1")


def test_the_asyncio_twin_of_a_cluster_client(redis_cluster_url: str, namespace: str) -> None:
    cache = RedisCache(redis_cluster_url + "?cluster=1", namespace=namespace)

    async def main() -> None:
        async with AsyncCache(cache) as acache:
            assert isinstance(acache.client, redis_asyncio.RedisCluster)
            await acache.set("k", 1)
            assert await acache.get("k") == 1
        async with AsyncRedisCache(redis_cluster_url + "?cluster=1", namespace=namespace) as again:
            assert await again.get("k") == 1
            assert isinstance(blocking_client(again.client), redis.cluster.RedisCluster)

    run(main())
    cache.clear()
    cache.close()


def test_keys_page_through_a_large_namespace_on_both_faces(cache: RedisCache) -> None:
    # 450 keys are three pages of the index: the blocking face iterates lazily, the awaited
    # one lists them, both in insertion order (and reversed), none skipped or repeated.
    keys = [f"k{number:04d}" for number in range(450)]
    cache.set_many([(key, 0) for key in keys])
    assert list(cache) == keys and list(reversed(cache)) == keys[::-1]
    assert list(cache.iterkeys(prefix="k01")) == keys[100:200]

    async def main() -> tuple[list[Any], list[Any], list[Any]]:
        async with AsyncCache(cache) as acache:
            forward = await acache.keys()
            backward = [key async for key in acache.iterkeys(reverse=True)]
            return forward, backward, await acache.keys(prefix="k01")

    forward, backward, prefixed = run(main())
    assert forward == keys and backward == keys[::-1] and prefixed == keys[100:200]


def test_a_cancelled_try_acquire_leaves_no_claim(cache: RedisCache) -> None:
    from diskcache_oxide import _asyncio

    async def main(yields: int) -> None:
        async with AsyncCache(cache) as acache:
            claims = acache.claims()
            task = asyncio.ensure_future(claims.try_acquire("k", lease=60))
            for _ in range(yields):
                await asyncio.sleep(0)
            task.cancel()
            (result,) = await asyncio.gather(task, return_exceptions=True)
            while _asyncio._giving_back:  # a claim taken after all, being released
                await asyncio.gather(*_asyncio._giving_back, return_exceptions=True)
            holder = await claims.holder("k")
            if isinstance(result, BaseException):
                assert holder is None  # taken after the cancel, then released
            else:
                assert holder is not None and holder.token == result.token  # type: ignore[union-attr]
                assert await result.release()  # type: ignore[union-attr]

    for yields in range(5):
        run(main(yields))


def test_the_asyncio_twin_of_a_tls_client_is_tls() -> None:
    # Made, not connected: the twin's connections are TLS with the same certificate settings.
    blocking = redis.Redis.from_url(
        "rediss://user:secret@127.0.0.1:1/2", ssl_cert_reqs="none", ssl_check_hostname=False
    )
    twin = asyncio_client(blocking)
    pool = twin.connection_pool
    assert pool.connection_class is redis_asyncio.connection.SSLConnection
    kwargs = pool.connection_kwargs
    assert (kwargs["username"], kwargs["password"], kwargs["db"]) == ("user", "secret", 2)
    assert (kwargs["ssl_cert_reqs"], kwargs["ssl_check_hostname"]) == ("none", False)
    back = blocking_client(twin)
    assert back.connection_pool.connection_class is redis.connection.SSLConnection


def test_an_asyncio_client_is_used_as_it_is(url: str, namespace: str) -> None:
    async def main() -> None:
        if "cluster=1" in url:
            client = redis_asyncio.RedisCluster.from_url(url.split("?")[0])
        else:
            client = redis_asyncio.Redis.from_url(url)
        acache = AsyncRedisCache(client, namespace=namespace)
        assert acache.client is client
        await acache.set("k", [1, 2])
        await acache.close()  # not this cache's client: left open
        assert await AsyncRedisCache(client, namespace=namespace).get("k") == [1, 2]
        await AsyncRedisCache(client, namespace=namespace).clear()
        await client.aclose()
        with pytest.raises(ValueError, match="decode_responses=False"):
            AsyncRedisCache(redis_asyncio.Redis(decode_responses=True))

    run(main())
