"""The Redis backend (issue 21, D-058) against a real redis-server: the same calls on a
directory ``Cache`` and a ``RedisCache`` give the same results (a state machine over both),
the queue delivers each item once across processes and blocks on the server, the stored bytes
are the engine's frames, pickles are refused without ``pickle=True``, and namespaces isolate.
The servers are the session's (tests/conftest.py: ``redis_url``, ``redis_cluster_url``):
every test that takes ``url`` runs on a single server and on a three-master cluster."""

from __future__ import annotations

import io
import multiprocessing
import queue as queues
import time
import uuid
from typing import Any

import diskcache_oxide as dco
import pytest
from diskcache_oxide import _core
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

redis = pytest.importorskip("redis")

from diskcache_oxide.remote import RedisCache, UnsupportedError  # noqa: E402

pytestmark = pytest.mark.oxide


@pytest.fixture
def namespace() -> str:
    return "t" + uuid.uuid4().hex[:12]


@pytest.fixture(params=["server", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    """The session server's URL, then the session cluster's (``?cluster=1`` makes a
    RedisCluster client): each test that takes it runs on both."""
    if request.param == "server":
        return str(request.getfixturevalue("redis_url"))
    return str(request.getfixturevalue("redis_cluster_url")) + "?cluster=1"


@pytest.fixture
def cache(url: str, namespace: str) -> Any:
    with RedisCache(url, namespace=namespace) as handle:
        yield handle
        handle.clear()


# ----- the same calls on both backends --------------------------------------------------------

KEYS = st.sampled_from(["a", "b", 7, b"k", (1, "t"), "q-500000000000000", "q-x", 500000000000001])
VALUES = st.one_of(
    st.integers(-(2**70), 2**70),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.booleans(), max_size=2),
    st.none(),
)
TAGS = st.sampled_from([None, "red", 3])
PREFIXES = st.sampled_from([None, "q", "q-x"])
SIDES = st.sampled_from(["front", "back"])


def both(machine: Any, call: str, *args: Any, **kwargs: Any) -> Any:
    results = []
    for handle in (machine.directory, machine.redis):
        try:
            results.append(("ok", getattr(handle, call)(*args, **kwargs)))
        except Exception as error:  # the same exception class on both
            results.append(("raised", type(error)))
    assert results[0] == results[1], (call, args, kwargs, results)
    return results[0][1]


class SameOnBoth(RuleBasedStateMachine):
    url = ""

    @initialize()
    def open(self) -> None:
        import tempfile

        self.directory = dco.Cache(tempfile.mkdtemp(), eviction_policy="none")
        self.redis = RedisCache(self.url, namespace="sm" + uuid.uuid4().hex[:10])

    def teardown(self) -> None:
        if hasattr(self, "redis"):
            self.redis.clear()
            self.redis.close()
            self.directory.close()

    @rule(key=KEYS, value=VALUES, tag=TAGS)
    def set(self, key: Any, value: Any, tag: Any) -> None:
        both(self, "set", key, value, tag=tag)

    @rule(key=KEYS, value=VALUES)
    def add(self, key: Any, value: Any) -> None:
        both(self, "add", key, value)

    @rule(key=KEYS, tag=st.booleans())
    def get(self, key: Any, tag: bool) -> None:
        both(self, "get", key, default="missing", tag=tag)

    @rule(key=KEYS)
    def delete(self, key: Any) -> None:
        both(self, "delete", key)

    @rule(key=KEYS, tag=st.booleans())
    def pop(self, key: Any, tag: bool) -> None:
        both(self, "pop", key, tag=tag)

    @rule(key=KEYS, delta=st.integers(-5, 5), default=st.sampled_from([0, None, 10]))
    def incr(self, key: Any, delta: int, default: Any) -> None:
        both(self, "incr", key, delta, default)

    @rule(key=KEYS)
    def touch(self, key: Any) -> None:
        both(self, "touch", key, 1000)

    @rule(value=VALUES, prefix=PREFIXES, side=SIDES, tag=TAGS)
    def push(self, value: Any, prefix: Any, side: Any, tag: Any) -> None:
        both(self, "push", value, prefix=prefix, side=side, tag=tag)

    @rule(prefix=PREFIXES, side=SIDES, tag=st.booleans())
    def pull(self, prefix: Any, side: Any, tag: bool) -> None:
        both(self, "pull", prefix=prefix, side=side, tag=tag)

    @rule(prefix=PREFIXES, side=SIDES)
    def peek(self, prefix: Any, side: Any) -> None:
        both(self, "peek", prefix=prefix, side=side)

    @rule(values=st.lists(VALUES, max_size=3), prefix=PREFIXES, side=SIDES)
    def push_many(self, values: list[Any], prefix: Any, side: Any) -> None:
        both(self, "push_many", values, prefix=prefix, side=side)

    @rule(n=st.integers(0, 3), prefix=PREFIXES, side=SIDES, tag=st.booleans())
    def pull_many(self, n: int, prefix: Any, side: Any, tag: bool) -> None:
        both(self, "pull_many", n, prefix=prefix, side=side, tag=tag)

    @rule(last=st.booleans(), tag=st.booleans())
    def peekitem(self, last: bool, tag: bool) -> None:
        both(self, "peekitem", last, tag=tag)

    @rule(pairs=st.lists(st.tuples(KEYS, VALUES), max_size=3), tag=TAGS)
    def set_many(self, pairs: list[tuple[Any, Any]], tag: Any) -> None:
        both(self, "set_many", pairs, tag=tag)

    @rule(key=KEYS, value=VALUES, tag=TAGS)
    def set_expiring(self, key: Any, value: Any, tag: Any) -> None:
        both(self, "set", key, value, expire=10**6, tag=tag)

    @rule()
    def expire_all(self) -> None:
        both(self, "expire", now=time.time() + 2 * 10**6)

    @rule()
    def clear(self) -> None:
        both(self, "clear")

    @rule(tag=TAGS)
    def evict(self, tag: Any) -> None:
        both(self, "evict", tag)

    @rule(keys=st.lists(KEYS, max_size=3))
    def many(self, keys: list[Any]) -> None:
        both(self, "get_many", keys, default="missing")
        both(self, "delete_many", keys[:1])

    @invariant()
    def same_keys(self) -> None:
        if hasattr(self, "redis"):
            assert len(self.directory) == len(self.redis)
            assert list(self.directory) == list(self.redis)
            assert list(self.directory.iterkeys(prefix="q")) == list(
                self.redis.iterkeys(prefix="q")
            )


def test_the_same_calls_give_the_same_results(url: str) -> None:
    machine = type("SameOnBothHere", (SameOnBoth,), {"url": url})
    run = settings(
        max_examples=60,
        stateful_step_count=40,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )(machine)
    run.TestCase().runTest()


def test_the_shapes_of_results_match_a_directory(tmp_path: Any, cache: RedisCache) -> None:
    directory = dco.Cache(str(tmp_path / "d"), eviction_policy="none")
    for handle in (directory, cache):
        handle.set("e", 1, expire=100, tag="t")
    for flags in ({}, {"expire_time": True}, {"tag": True}, {"expire_time": True, "tag": True}):
        mine, theirs = cache.get("e", **flags), directory.get("e", **flags)
        assert type(mine) is type(theirs)
        if isinstance(mine, tuple):
            assert len(mine) == len(theirs) and mine[0] == theirs[0]
            if "tag" in flags:
                assert mine[-1] == theirs[-1] == "t"
            if "expire_time" in flags:
                assert abs(mine[1] - theirs[1]) < 1.0
        assert cache.get("nope", **flags) == directory.get("nope", **flags)
        assert cache.pull(**flags) == directory.pull(**flags)
        assert cache.peek(default=5, **flags) == directory.peek(default=5, **flags)
    with pytest.raises(KeyError):
        cache["nope"]
    with pytest.raises(KeyError):
        del cache["nope"]
    with pytest.raises(KeyError):
        cache.incr("nope", default=None)
    cache["x"] = b"bytes"
    assert "x" in cache and "nope" not in cache and cache["x"] == b"bytes"
    handle = cache.get("x", read=True)
    assert isinstance(handle, io.BytesIO) and handle.read() == b"bytes"
    assert cache.read("x").read() == b"bytes"
    cache.set("f", io.BytesIO(b"from a file"), read=True)
    assert cache["f"] == b"from a file"
    assert cache.incr("n", 2.5) == 2.5 and cache.decr("n") == 1.5


def test_keys_a_directory_holds_as_one_are_one_entry(tmp_path: Any, cache: RedisCache) -> None:
    """2.0 and 2 are one key in a directory (SQLite compares them equal), for small ints that
    have a queue-shaped member on Redis and for other numbers alike."""
    directory = dco.Cache(str(tmp_path / "d"))
    for backend in (directory, cache):
        backend.set(2.0, "small")
        backend.set(-3.0, "negative")
        assert backend.get(2) == "small" and 2 in backend
        assert backend.get(-3) == "negative"
        assert len(backend) == 2
    directory.close()


def test_expiry_and_the_bulk_removal(cache: RedisCache) -> None:
    cache.set("short", 1, expire=0.05)
    cache.push("item", prefix="q", expire=0.05)
    cache.push("kept", prefix="q")
    cache.set("long", 2, expire=100)
    assert cache.touch("long", None) and cache.get("long", expire_time=True) == (2, None)
    time.sleep(0.1)
    assert cache.get("short") is None and "short" not in cache
    assert cache.peek(prefix="q") == ("q-500000000000001", "kept")  # expired: passed over
    assert cache.expire() == 2
    assert list(cache) == ["q-500000000000001", "long"]
    assert cache.pull(prefix="q") == ("q-500000000000001", "kept")
    cache.set("later", 1, expire=1000)
    assert cache.expire(now=time.time() + 2000) == 1
    cache.set("far", 1, expire=10**12)  # beyond 14 significant digits of ms
    assert cache.get("far", expire_time=True)[1] > time.time() + 10**11
    cache.set("forever", 1, expire=float("inf"))
    assert cache.get("forever", expire_time=True) == (1, None)
    with pytest.raises(ValueError, match="NaN"):
        cache.set("nan", 1, expire=float("nan"))


def test_tags_stats_memoize_and_clear(cache: RedisCache) -> None:
    cache.set_many({"a": 1, "b": 2}, tag="batch")
    cache.push(3, prefix="jobs", tag="batch")
    cache.set("c", 3, tag="other")
    assert cache.get("b", tag=True) == (2, "batch")
    assert cache.evict("batch") == 3 and list(cache) == ["c"]
    assert cache.stats(enable=True, reset=True) == (0, 0)
    cache.get("c")
    cache.get("nope")
    assert cache.stats(enable=False) == (1, 1)
    calls = []

    @cache.memoize(tag="m")
    def double(x: int) -> int:
        calls.append(x)
        return 2 * x

    assert double(4) == double(4) == 8 and calls == [4]
    assert double.__cache_key__(4) in list(cache)
    assert cache.clear() == 2 and len(cache) == 0


def test_queue_semantics_as_the_seed_page_has_them(cache: RedisCache) -> None:
    for episode in (510, 511, 512):
        cache.push({"episode": episode}, prefix="transcode")
    assert cache.pull(prefix="transcode") == ("transcode-500000000000000", {"episode": 510})
    assert cache.peek(prefix="transcode", side="back") == (
        "transcode-500000000000002",
        {"episode": 512},
    )
    cache.set("transcode-settings", "not an item")
    cache.set("transcode-hd-500000000000000", "another queue's item")
    assert cache.push(0, prefix="transcode", side="front") == "transcode-500000000000000"
    assert cache.pull(prefix="transcode", expire_time=True, tag=True) == (
        ("transcode-500000000000000", 0),
        None,
        None,
    )
    assert cache.push(1) == 500000000000000 and cache.push(0, side="front") == 499999999999999
    cache.set("full-999999999999999", "last")
    with pytest.raises(OverflowError, match="every number at its back end"):
        cache.push("one more", prefix="full")
    assert cache.get("full-999999999999999") == "last"
    cache.set(0, "first int")
    with pytest.raises(OverflowError, match="front end"):
        cache.push("x", side="front")


# ----- the same bytes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", [0, 2**80, 1.5, "héllo", b"\0\xff", None, (1, [2.0, {"x": b"y"}]), {"a": {1, 2}}]
)
def test_values_are_stored_as_the_engines_frames(cache: RedisCache, value: Any) -> None:
    cache.set("k", value)
    raw = cache.client.hget(cache._base + b"e:k:" + _core.encode_key("k"), "v")
    assert raw == _core.encode_value(value)
    back = _core.decode_value(raw)
    assert back == value and type(back) is type(value)
    assert cache.get("k") == value


class Point:
    def __init__(self, x: int) -> None:
        self.x = x

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Point) and other.x == self.x


def test_a_pickle_is_refused_without_pickle_true(url: str, namespace: str) -> None:
    safe = RedisCache(url, namespace=namespace)
    with pytest.raises(dco.UnsupportedTypeError):
        safe.set("p", Point(1))
    trusting = RedisCache(url, namespace=namespace, pickle=True)
    trusting.set("p", Point(1))
    trusting.push(Point(2), prefix="q")
    assert trusting.get("p") == Point(1)
    with pytest.raises(dco.UnsafeValueError):
        safe.get("p")
    with pytest.raises(dco.UnsafeValueError):
        safe.pull(prefix="q")
    assert trusting.peek(prefix="q") == ("q-500000000000000", Point(2))  # left for a reader
    missing = RedisCache(url, namespace=namespace, on_decode_error="miss")
    assert missing.get("p") is None and missing.pull(prefix="q") == (None, None)
    assert trusting.pull(prefix="q") == ("q-500000000000000", Point(2))
    safe.clear()


def test_a_damaged_item_is_removed_and_raises(cache: RedisCache) -> None:
    cache.push("damaged", prefix="q")
    cache.push("fine", prefix="q")
    key = cache._base + b"e:q:sq:500000000000000"
    cache.client.hset(key, "v", b"DCO\x01\x03\0\0\0\0x")
    with pytest.raises(dco.CorruptValueError):
        cache.pull(prefix="q")
    assert cache.pull(prefix="q") == ("q-500000000000001", "fine")


# ----- isolation and what Redis cannot hold ---------------------------------------------------


def test_namespaces_isolate(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.set("someone-elses", b"x")
    one = RedisCache(client, namespace="one-" + uuid.uuid4().hex[:8])
    two = RedisCache(client, namespace="two-" + uuid.uuid4().hex[:8])
    one.set("k", 1, tag="t")
    one.push("job")
    two.set("k", 2, tag="t")
    assert (one["k"], two["k"]) == (1, 2)
    assert two.pull() == (None, None)
    assert two.evict("t") == 1 and one["k"] == 1
    assert two.clear() == 0 and len(one) == 2
    assert one.clear() == 2
    assert client.get("someone-elses") == b"x"
    left = [key for key in client.keys("*") if key.startswith(one._base)]
    assert not [key for key in left if key[len(one._base) :][:2] in (b"e:", b"Q:", b"g:")]
    assert all(key.startswith(b"dco:{") for key in client.keys("*") if key != b"someone-elses")
    client.delete("someone-elses")


def test_what_redis_cannot_hold_says_what_to_use(cache: RedisCache, redis_url: str) -> None:
    with pytest.raises(UnsupportedError, match="JobQueue"):
        cache.transact()
    with pytest.raises(UnsupportedError, match="maxmemory"):
        cache.cull()
    with pytest.raises(UnsupportedError, match="maxmemory"):
        RedisCache(redis_url, size_limit=2**20)
    with pytest.raises(ValueError, match="braces"):
        RedisCache(redis_url, namespace="a{b}")
    with pytest.raises(ValueError, match="decode_responses"):
        RedisCache(redis.Redis.from_url(redis_url, decode_responses=True))


# ----- open() ---------------------------------------------------------------------------------


def test_open_picks_the_backend_from_the_url(tmp_path: Any, redis_url: str) -> None:
    directory = dco.open(str(tmp_path / "d"), eviction_policy="none")
    assert isinstance(directory, dco.Cache)
    directory.close()
    assert isinstance(dco.open((tmp_path / "e").as_uri()), dco.Cache)
    remote = dco.open(redis_url + "?namespace=opened")
    assert isinstance(remote, RedisCache) and remote.namespace == "opened"
    assert dco.open(redis_url, namespace="given").namespace == "given"
    client = redis.Redis.from_url(redis_url)
    assert dco.open(client, namespace="c").client is client
    with pytest.raises(ValueError, match="scheme"):
        dco.open("ftp://example.com/x")


def test_without_redis_py_the_package_imports_and_open_says_what_to_install() -> None:
    import subprocess
    import sys

    body = (
        "import sys\n"
        "class Refuse:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'redis' or name.startswith('redis.'):\n"
        "            raise ImportError('no redis here')\n"
        "sys.meta_path.insert(0, Refuse())\n"
        "import diskcache_oxide\n"
        "try:\n"
        "    diskcache_oxide.open('redis://127.0.0.1:1/0')\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    out = subprocess.run([sys.executable, "-c", body], capture_output=True, text=True, check=True)
    assert "pip install 'diskcache_oxide[redis]'" in out.stdout


# ----- across processes -----------------------------------------------------------------------


@pytest.mark.slow
def test_two_processes_pull_each_item_exactly_once(url: str, namespace: str) -> None:
    cache = RedisCache(url, namespace=namespace)
    pushed = {cache.push(n) for n in range(2000)}
    from redis_workers import drain

    ctx = multiprocessing.get_context("spawn")
    out, ready, start = ctx.Queue(), ctx.Semaphore(0), ctx.Event()
    args = (url, namespace, out, ready, start)
    workers = [ctx.Process(target=drain, args=args) for _ in "ab"]
    for worker in workers:
        worker.start()
    for _ in workers:
        assert ready.acquire(timeout=60)
    start.set()
    taken = [out.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(30)
    everything = taken[0] + taken[1]
    assert len(everything) == len(set(everything)) == 2000 and set(everything) == pushed
    assert all(taken), "both workers took some items"
    cache.clear()


def test_a_blocked_pull_is_woken_by_a_push_from_another_process(url: str, namespace: str) -> None:
    from redis_workers import blocked_pull

    ctx = multiprocessing.get_context("spawn")
    out, ready = ctx.Queue(), ctx.Event()
    worker = ctx.Process(target=blocked_pull, args=(url, namespace, out, ready))
    worker.start()
    assert ready.wait(30)
    time.sleep(0.5)  # the worker is blocked on the server by now
    cache = RedisCache(url, namespace=namespace)
    pushed_at = time.monotonic()
    cache.push({"job": 1}, prefix="jobs")
    try:
        item, waited = out.get(timeout=20)
    except queues.Empty:
        pytest.fail("the blocked pull was not woken")
    assert item == ("jobs-500000000000000", {"job": 1})
    assert time.monotonic() - pushed_at < 1.5  # woken by the push, not by a poll
    assert waited < 20
    worker.join(10)
    assert cache.peek(prefix="jobs") == (None, None)


def test_a_namespace_lives_in_one_cluster_slot(redis_cluster_url: str, namespace: str) -> None:
    import redis.cluster

    cache = RedisCache(redis_cluster_url + "?cluster=1", namespace=namespace)
    cache.set("a", 1, tag="t", expire=100)
    cache.set(("tuple", 2), 2)
    cache.push("job", prefix="jobs")
    client = cache.client
    assert isinstance(client, redis.cluster.RedisCluster)
    keys = client.keys(target_nodes=redis.cluster.RedisCluster.ALL_NODES)
    mine = [key for key in keys if key.startswith(cache._base)]
    assert len(mine) >= 6  # entries, index, expiries, tags, the queue, its wake-up list
    assert len({client.keyslot(key) for key in mine}) == 1
    cache.clear()


CALLS = (
    "get set add delete pop incr decr touch expire evict get_many set_many delete_many memoize "
    "iterkeys stats clear read push pull peek cull transact push_many pull_many peekitem "
    "__getitem__ __setitem__ "
    "__delitem__ __contains__ __len__ __iter__"
).split()


@pytest.mark.parametrize("name", CALLS)
def test_each_call_has_a_directorys_signature(name: str) -> None:
    import inspect

    def shape(call: Any) -> list[tuple[str, Any, Any]]:
        try:
            params = inspect.signature(call).parameters.values()
        except ValueError:  # a slot wrapper without a text signature
            return []
        return [(p.name, p.kind, p.default) for p in params]

    directory, remote = shape(getattr(dco.Cache, name)), shape(getattr(RedisCache, name))
    if directory:
        assert [(n, d) for n, _, d in directory] == [(n, d) for n, _, d in remote]


def test_a_blocked_pull_stays_inside_a_short_socket_timeout(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url, socket_timeout=0.3)
    cache = RedisCache(client, namespace="short-" + uuid.uuid4().hex[:8])
    began = time.monotonic()
    assert cache.pull(timeout=1.0) == (None, None)  # no TimeoutError from the socket
    assert 0.9 < time.monotonic() - began < 3


def test_the_seed_pages_cancelling_and_priorities(cache: RedisCache) -> None:
    for episode in (520, 521):
        cache.push({"episode": episode}, prefix="transcode", tag="upload:batch-7")
    cache.push({"episode": 522}, prefix="transcode")
    assert cache.evict("upload:batch-7") == 2
    assert cache.pull(prefix="transcode") == ("transcode-500000000000002", {"episode": 522})
    cache.push({"to": "sam@example.com"}, prefix="email")
    cache.push({"episode": 515}, prefix="transcode")
    cache.push({"episode": 516}, prefix="urgent")
    taken = []
    while True:
        for queue in ("urgent", "transcode", "email"):
            key, job = cache.pull(prefix=queue)
            if key is not None:
                taken.append((queue, job))
                break
        else:
            break
    assert taken == [
        ("urgent", {"episode": 516}),
        ("transcode", {"episode": 515}),
        ("email", {"to": "sam@example.com"}),
    ]
    assert "open" not in dco.__all__ and callable(dco.open)  # a star import keeps the builtin
