"""A Redis pull is one script (D-064) against real redis-servers: each item goes to exactly one
worker with one round trip, counted on the server (INFO commandstats), alone and with four
processes racing; an item this process cannot read is left at the front (a pickle on
``pickle=False``, by its frame's kind byte, in the script) or put back exactly where it was (a
type this process has not registered, a decoder that raises: taken, then ``restore``); a
damaged frame is removed and raised, or logged and passed with ``on_decode_error='miss'``.
Tests that take ``url`` run on a single server and on a three-master cluster."""

from __future__ import annotations

import logging
import multiprocessing
import time
import uuid
from collections.abc import Iterator
from typing import Any

import diskcache_oxide as dco
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

redis = pytest.importorskip("redis")

from diskcache_oxide.remote import RedisCache, _ops  # noqa: E402

pytestmark = pytest.mark.oxide

START = 500_000_000_000_000


def skey(prefix: str, n: int) -> str:
    return f"{prefix}-{n:015d}"


@pytest.fixture
def namespace() -> str:
    return "p" + uuid.uuid4().hex[:12]


@pytest.fixture(params=["server", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    if request.param == "server":
        return str(request.getfixturevalue("redis_url"))
    return str(request.getfixturevalue("redis_cluster_url")) + "?cluster=1"


@pytest.fixture
def make(url: str, namespace: str) -> Iterator[Any]:
    """``make(**settings)``: a RedisCache on the test's namespace (all of them cleared and
    closed after the test)."""
    made: list[RedisCache] = []

    def factory(**settings: Any) -> RedisCache:
        cache = RedisCache(url, namespace=namespace, **settings)
        made.append(cache)
        return cache

    yield factory
    made[0].clear()
    for cache in made:
        cache.close()


class Widget:
    """A type only some processes know: pickled on pickle=True, or registered by name."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Widget) and other.size == self.size

    def __hash__(self) -> int:
        return self.size


def _register(decode: Any = Widget) -> None:
    dco.register_type(Widget, "tests.redis_pull.Widget", lambda w: w.size, decode)


def _raw(cache: RedisCache, prefix: str, key: str) -> dict[str, Any]:
    """Everything the server holds about the item ``key`` (but its TTL): its hash, its scores
    in the index, the expiry index and its queue, and its tag."""
    number = key.rsplit("-", 1)[1].encode()
    member = b"q:s" + prefix.encode() + b":" + number
    client, base = cache.client, cache._base
    return {
        "entry": client.hgetall(base + b"e:" + member),
        "index": client.zscore(base + b"i", member),
        "expiry": client.zscore(base + b"x", member),
        "queue": client.zscore(base + b"Q:s" + prefix.encode(), number),
        "tag": client.hget(base + b"t", member),
        "tagged": client.sismember(base + b"g:" + dco._core.encode_key("t"), member),
    }


def _evalsha_calls(server: Any) -> int:
    client = redis.Redis.from_url(server.url)
    try:
        return int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))
    finally:
        client.close()


# ----- one script per item ---------------------------------------------------------------------


def test_an_uncontended_pull_is_one_script(make_redis_server: Any) -> None:
    server = make_redis_server()
    with RedisCache(server.url, namespace="one") as cache:
        cache.push_many(range(100), prefix="q")
        cache.pull(prefix="warm")  # the pull script loaded: no NOSCRIPT in the count
        before = _evalsha_calls(server)
        got = [cache.pull(prefix="q") for _ in range(101)]
        assert _evalsha_calls(server) - before == 101  # 100 items and the empty pull
        assert [value for _, value in got[:100]] == list(range(100))
        assert got[100] == (None, None)


@pytest.mark.slow
def test_four_processes_get_each_item_exactly_once_with_one_script_each(
    make_redis_server: Any,
) -> None:
    from redis_pull_workers import drain_until_empty

    server = make_redis_server()
    count, workers = 2000, 4
    cache = RedisCache(server.url, namespace="race")
    pushed = []
    for start in range(0, count, 500):
        pushed += cache.push_many(range(start, start + 500), prefix="q")
    ctx = multiprocessing.get_context("spawn")
    out, barrier = ctx.Queue(), ctx.Barrier(workers + 1)
    procs = [
        ctx.Process(target=drain_until_empty, args=(server.url, "race", "q", out, barrier))
        for _ in range(workers)
    ]
    for proc in procs:
        proc.start()
    try:
        barrier.wait(60)  # every worker connected, its scripts loaded
        before = _evalsha_calls(server)
        barrier.wait(60)
        taken = [out.get(timeout=120) for _ in procs]
    finally:
        for proc in procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
    scripts = _evalsha_calls(server) - before
    everything = [key for keys in taken for key in keys]
    assert len(everything) == len(set(everything)) == count
    assert set(everything) == set(pushed)
    # One script per item and one empty pull per worker: no worker ever lost a race and
    # looked again (the old peek + take did about 5 per item here).
    assert scripts == count + workers
    assert len(cache) == 0
    cache.close()


# ----- what this process cannot read ----------------------------------------------------------


def test_a_pickle_among_safe_items_waits_at_the_front_for_a_pickle_worker(
    make: Any, caplog: pytest.LogCaptureFixture
) -> None:
    trusting = make(pickle=True)
    safe = make()
    missing = make(on_decode_error="miss")
    keys = [trusting.push(value, prefix="w") for value in ("a", Widget(3), "b", "c")]
    left = _raw(trusting, "w", keys[1])
    assert safe.pull(prefix="w") == (keys[0], "a")
    for _ in range(2):  # it stays, untouched: every try raises again
        with pytest.raises(dco.UnsafeValueError):
            safe.pull(prefix="w")
        assert _raw(trusting, "w", keys[1]) == left
    with pytest.raises(dco.UnsafeValueError):
        safe.pull_many(5, prefix="w")
    with caplog.at_level(logging.WARNING, logger="diskcache_oxide"):
        assert missing.pull(prefix="w") == (None, None)
        assert missing.pull(prefix="w", default="empty?") == "empty?"
    assert any("cannot decode" in record.getMessage() for record in caplog.records)
    with pytest.raises(dco.UnsafeValueError):
        safe.peek(prefix="w")
    assert len(safe) == 3 and _raw(trusting, "w", keys[1]) == left
    # a worker that can read it takes it, and the order is kept for everyone
    assert trusting.pull(prefix="w") == (keys[1], Widget(3))
    assert safe.pull_many(5, prefix="w") == [(keys[2], "b"), (keys[3], "c")]


def test_pull_many_stops_before_a_pickle_and_keeps_what_it_took(make: Any) -> None:
    trusting = make(pickle=True)
    safe = make()
    keys = trusting.push_many(["a", "b", Widget(1), "c"], prefix="w")
    assert safe.pull_many(10, prefix="w") == [(keys[0], "a"), (keys[1], "b")]
    with pytest.raises(dco.UnsafeValueError):
        safe.pull_many(10, prefix="w")
    assert trusting.pull_many(10, prefix="w") == [(keys[2], Widget(1)), (keys[3], "c")]


def test_a_pickle_is_taken_from_the_back_too(make: Any) -> None:
    trusting = make(pickle=True)
    safe = make()
    keys = trusting.push_many(["a", Widget(2)], prefix="w")
    with pytest.raises(dco.UnsafeValueError):
        safe.pull(prefix="w", side="back")
    assert safe.pull(prefix="w") == (keys[0], "a")
    assert trusting.pull(prefix="w", side="back") == (keys[1], Widget(2))


def test_an_unregistered_type_is_put_back_exactly_where_it_was(make: Any) -> None:
    cache = make()
    missing = make(on_decode_error="miss")
    _register()
    try:
        keys = [
            cache.push("a", prefix="w"),
            cache.push(Widget(7), prefix="w", expire=3600, tag="t"),
            cache.push("b", prefix="w"),
        ]
    finally:
        dco.unregister_type(Widget)
    held = _raw(cache, "w", keys[1])
    order = list(cache.iterkeys())
    assert cache.pull(prefix="w") == (keys[0], "a")
    for _ in range(2):
        with pytest.raises(dco.UnknownTypeError):
            cache.pull(prefix="w")
        # taken, not decoded, restored: the same number, revision, expiry, tag and place
        assert _raw(cache, "w", keys[1]) == held
    assert missing.pull(prefix="w") == (None, None)
    assert missing.pull_many(3, prefix="w") == []
    with pytest.raises(dco.UnknownTypeError):
        cache.pull_many(3, prefix="w")
    assert _raw(cache, "w", keys[1]) == held
    assert list(cache.iterkeys()) == order[1:]
    assert 0 < cache.client.pttl(cache._base + b"e:q:sw:" + keys[1][-15:].encode()) <= 3_600_000
    _register()
    try:
        item, expires, tag = cache.pull(prefix="w", expire_time=True, tag=True)
    finally:
        dco.unregister_type(Widget)
    assert item == (keys[1], Widget(7)) and tag == "t"
    assert expires == pytest.approx(time.time() + 3600, abs=120)
    assert cache.pull(prefix="w") == (keys[2], "b")


def test_a_raising_decoder_puts_the_item_back_and_raises(make: Any) -> None:
    cache = make()

    def refuse(size: int) -> Widget:
        raise ValueError(f"widget {size} refused")

    _register()
    try:
        keys = cache.push_many(["a", Widget(5), "b"], prefix="w")
    finally:
        dco.unregister_type(Widget)
    held = _raw(cache, "w", keys[1])
    _register(refuse)
    try:
        assert cache.pull(prefix="w") == (keys[0], "a")
        with pytest.raises(ValueError, match="widget 5 refused"):
            cache.pull(prefix="w")
        with pytest.raises(ValueError, match="widget 5 refused"):
            cache.pull_many(5, prefix="w")
        assert _raw(cache, "w", keys[1]) == held
    finally:
        dco.unregister_type(Widget)
    _register()
    try:
        assert cache.pull_many(5, prefix="w") == [(keys[1], Widget(5)), (keys[2], "b")]
    finally:
        dco.unregister_type(Widget)


def test_an_item_whose_number_was_taken_meanwhile_goes_back_to_the_front(make: Any) -> None:
    """The window between a pull's script and its restore, run step by step: a push to the
    front takes the number the pulled item had; the item goes back before it, still first."""
    cache = make()
    other = make()
    _register()
    try:
        first = cache.push(Widget(9), prefix="w")
    finally:
        dco.unregister_type(Widget)
    behind = cache.push("behind", prefix="w")
    op = _ops.pull(cache, "w")
    request = next(op)
    assert request.name == "pull"
    reply = cache._link.send(request)  # the item is taken
    assert other.push("pushed meanwhile", prefix="w", side="front") == first
    request = op.send(reply)
    assert request.name == "restore"
    with pytest.raises(dco.UnknownTypeError):
        op.send(cache._link.send(request))
    assert list(cache.iterkeys(prefix="w")) == [skey("w", START - 1), first, behind]
    _register()
    try:
        assert cache.pull(prefix="w") == (skey("w", START - 1), Widget(9))
    finally:
        dco.unregister_type(Widget)
    assert cache.pull(prefix="w") == (first, "pushed meanwhile")


def test_a_waiting_pull_under_miss_does_not_spin_on_an_item_it_puts_back(
    make_redis_server: Any,
) -> None:
    """A restore leaves no wake-up token: one would wake the restoring worker's own blocked
    pull (``on_decode_error='miss'``, ``timeout=``) into taking and putting the item back
    again at once, for the whole timeout. It tries once per push token and once per slice."""
    server = make_redis_server()
    cache = RedisCache(server.url, namespace="spin", on_decode_error="miss")
    _register()
    try:
        key = cache.push(Widget(4), prefix="w")  # leaves one wake-up token
    finally:
        dco.unregister_type(Widget)
    cache._slice = 0.2
    before = _evalsha_calls(server)
    assert cache.pull(prefix="w", timeout=1.0) == (None, None)
    tries = (_evalsha_calls(server) - before) // 2  # a pull and a restore each
    assert 1 <= tries <= 2 + 1.0 / 0.2, tries
    _register()
    try:
        assert cache.pull(prefix="w") == (key, Widget(4))
    finally:
        dco.unregister_type(Widget)
    cache.close()


# ----- damaged frames ---------------------------------------------------------------------------


def _damage(cache: RedisCache, key: str, frame: bytes = b"DCO\x01\x03\0\0\0\0x") -> None:
    member = b"q:sd:" + key[-15:].encode()
    cache.client.hset(cache._base + b"e:" + member, "v", frame)


def test_a_damaged_frame_among_good_ones_is_removed_and_raises(make: Any) -> None:
    cache = make()
    keys = cache.push_many(["g0", "bad", "g1", "g2"], prefix="d")
    _damage(cache, keys[1])
    assert cache.pull(prefix="d") == (keys[0], "g0")
    with pytest.raises(dco.CorruptValueError):
        cache.pull(prefix="d")
    assert keys[1] not in cache
    assert cache.pull(prefix="d") == (keys[2], "g1")
    assert cache.pull_many(5, prefix="d") == [(keys[3], "g2")]


def test_pull_many_stops_before_a_damaged_frame_which_the_next_call_reports(make: Any) -> None:
    cache = make()
    keys = cache.push_many(["g0", "bad", "g1"], prefix="d")
    _damage(cache, keys[1])
    # As a directory does (D-012): the items taken are returned, the damaged one stays first
    assert cache.pull_many(5, prefix="d") == [(keys[0], "g0")]
    assert keys[1] in cache
    with pytest.raises(dco.CorruptValueError):
        cache.pull_many(5, prefix="d")
    assert cache.pull_many(5, prefix="d") == [(keys[2], "g1")]


def test_damaged_frames_under_miss_are_logged_and_passed(
    make: Any, caplog: pytest.LogCaptureFixture
) -> None:
    cache = make(on_decode_error="miss")
    keys = cache.push_many([f"v{i}" for i in range(5)], prefix="d")
    _damage(cache, keys[1])
    _damage(cache, keys[3])
    with caplog.at_level(logging.WARNING, logger="diskcache_oxide"):
        assert cache.pull_many(10, prefix="d") == [
            (keys[0], "v0"),
            (keys[2], "v2"),
            (keys[4], "v4"),
        ]
    assert sum("damaged" in record.getMessage() for record in caplog.records) == 2
    assert len(cache) == 0


def test_a_damaged_pickle_frame_on_a_safe_cache_is_removed_too(make: Any) -> None:
    """The script leaves a frame of kind 6 for a pickle worker; if its bytes are damaged no
    worker can read it, so the safe pull removes exactly that version and raises."""
    cache = make()
    keys = cache.push_many(["x", "good"], prefix="d")
    _damage(cache, keys[0], b"DCO\x01\x06\0\0\0\0not a pickle")
    with pytest.raises(dco.CorruptValueError):
        cache.pull(prefix="d")
    assert keys[0] not in cache
    assert cache.pull(prefix="d") == (keys[1], "good")


# ----- expired items ----------------------------------------------------------------------------


def test_a_pull_passes_over_expired_items_and_leaves_them(make: Any) -> None:
    cache = make()
    gone = cache.push("expired", prefix="e")
    live = cache.push("live", prefix="e")
    assert cache.touch(gone, expire=-1)
    assert cache.pull(prefix="e") == (live, "live")
    assert cache.client.zscore(cache._base + b"Q:se", gone[-15:].encode()) is not None
    assert len(cache) == 1  # counted until something removes it, as in a directory (D-037)


# ----- the same as a directory, with items some handles cannot read -----------------------------


class Pickled:
    """Stored only as a pickle (never registered): a pickle=True handle pushes it."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pickled) and other.n == self.n

    def __hash__(self) -> int:
        return self.n


HANDLES = st.sampled_from(["safe", "trusting", "missing"])
SIDES = st.sampled_from(["front", "back"])


class UnreadableLikeADirectory(RuleBasedStateMachine):
    """Pushes of plain values, pickles and a custom type that is registered and unregistered
    as the run goes, pulled by a safe, a trusting and an ``on_decode_error='miss'`` handle, on
    a directory and on Redis: every call returns the same or raises the same class on both,
    so an item that cannot be read stays first in line on Redis exactly as on a directory."""

    url = ""

    @initialize()
    def open(self) -> None:
        import tempfile

        directory = tempfile.mkdtemp()
        namespace = "um" + uuid.uuid4().hex[:10]
        self.registered = False
        self.handles: dict[str, tuple[Any, Any]] = {
            "safe": (
                dco.Cache(directory, eviction_policy="none"),
                RedisCache(self.url, namespace=namespace),
            ),
            "trusting": (
                dco.Cache(directory, eviction_policy="none", pickle=True),
                RedisCache(self.url, namespace=namespace, pickle=True),
            ),
            "missing": (
                dco.Cache(directory, eviction_policy="none", on_decode_error="miss"),
                RedisCache(self.url, namespace=namespace, on_decode_error="miss"),
            ),
        }

    def teardown(self) -> None:
        if self.registered:
            dco.unregister_type(Widget)
        if hasattr(self, "handles"):
            self.handles["safe"][1].clear()
            for local, remote in self.handles.values():
                local.close()
                remote.close()

    def both(self, handle: str, call: str, *args: Any, **kwargs: Any) -> Any:
        results = []
        for backend in self.handles[handle]:
            try:
                results.append(("ok", getattr(backend, call)(*args, **kwargs)))
            except Exception as error:
                results.append(("raised", type(error)))
        assert results[0] == results[1], (handle, call, args, kwargs, results)
        return results[0][1]

    @rule(value=st.one_of(st.integers(0, 9), st.text(max_size=3)), side=SIDES)
    def push_plain(self, value: Any, side: str) -> None:
        self.both("safe", "push", value, prefix="u", side=side)

    @rule(n=st.integers(0, 9), side=SIDES)
    def push_pickle(self, n: int, side: str) -> None:
        self.both("trusting", "push", Pickled(n), prefix="u", side=side)

    @rule(n=st.integers(0, 9), side=SIDES)
    def push_widget(self, n: int, side: str) -> None:
        if not self.registered:
            _register()
        try:
            self.both("safe", "push", Widget(n), prefix="u", side=side)
        finally:
            if not self.registered:
                dco.unregister_type(Widget)

    @rule()
    def toggle_registration(self) -> None:
        if self.registered:
            dco.unregister_type(Widget)
        else:
            _register()
        self.registered = not self.registered

    @rule(handle=HANDLES, side=SIDES)
    def pull(self, handle: str, side: str) -> None:
        self.both(handle, "pull", prefix="u", side=side)

    @rule(handle=HANDLES, side=SIDES, n=st.integers(1, 4))
    def pull_many(self, handle: str, side: str, n: int) -> None:
        self.both(handle, "pull_many", n, prefix="u", side=side)

    @rule(handle=HANDLES, side=SIDES)
    def peek(self, handle: str, side: str) -> None:
        self.both(handle, "peek", prefix="u", side=side)

    @invariant()
    def same_items(self) -> None:
        if hasattr(self, "handles"):
            local, remote = self.handles["safe"]
            # (a directory's iterkeys is in key order, Redis's in insertion order)
            assert sorted(local.iterkeys()) == sorted(remote.iterkeys())


def test_items_some_handles_cannot_read_behave_as_on_a_directory(url: str) -> None:
    machine = type("Machine", (UnreadableLikeADirectory,), {"url": url})
    run = settings(
        max_examples=60,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )(machine)
    run.TestCase().runTest()


def test_a_wait_is_rounded_up_to_the_millisecond() -> None:
    """Rounded down, a BLPOP would end just before the deadline and the pull would spend one
    more take and a 1 ms BLPOP on the sliver left (seen as an eighth try in
    test_a_waiting_pull_under_miss_does_not_spin_on_an_item_it_puts_back)."""
    assert _ops.blpop_seconds(0.1994) == "0.200"
    assert _ops.blpop_seconds(0.2) == "0.200"
    assert _ops.blpop_seconds(2.007) == "2.007"  # not 2.008 from the float's error
    assert _ops.blpop_seconds(0.0004) == "0.001"
    assert _ops.blpop_seconds(0.0) == "0.001"  # BLPOP 0 would wait forever
