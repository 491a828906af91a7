"""What the Redis backend does when the server misbehaves (issue 21 point 7, D-061), against
real redis-server processes on 127.0.0.1 started by the test (tests/helpers/redis_servers.py),
each stopped by pid:

- a connection dropped after the request was sent (a cutting proxy in the test): the write ran
  and its reply is lost; the link repeats it with the same request token and the server
  replays the reply, so nothing is done twice (each kind of write, the asyncio link, a user's
  client with redis-py's own retry, and a state machine against a model); a read repeats
  plainly; a connection that always drops ends in a ``ServerConnectionError`` that says
  whether the call may have run;
- a server that stops answering (SIGSTOP): the call ends with a ``ServerTimeout`` naming the
  timeout setting, after about the socket timeout (measured, not asserted);
- a server restarted (SIGKILL, AOF with ``appendfsync always``) in the middle of a 4-process
  drain: every acknowledged push is pulled; duplicates are counted and reported;
- a cluster master killed while the cluster fails over: with ``replicas=1`` every
  acknowledged push survives; without it, writes the replica never received are lost.

No timing assertions: durations are printed (``-s``) for the decision record.
"""

from __future__ import annotations

import collections
import multiprocessing
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import diskcache_oxide as dco
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

redis = pytest.importorskip("redis")

import redis_servers  # noqa: E402
from diskcache_oxide.errors import CacheError  # noqa: E402
from diskcache_oxide.remote import (  # noqa: E402
    NotReplicatedError,
    RedisCache,
    ServerConnectionError,
    ServerTimeout,
)
from diskcache_oxide.remote.claims import RedisClaims  # noqa: E402

pytestmark = pytest.mark.oxide


def _namespace() -> str:
    return "f" + uuid.uuid4().hex[:12]


def _sha(link: Any, name: str) -> bytes:
    return str(link._scripts[name].sha).encode()


def _loaded(link: Any) -> Any:
    """``link`` with every script loaded on the server, so a cut request is the script's run
    and not a NOSCRIPT reply (redis-py loads a script on its first NOSCRIPT)."""
    for script in link._scripts.values():
        link.client.script_load(script.script)
    return link


def _queue(cache: RedisCache) -> list[Any]:
    """Every value left in the int queue (peeked, so the count is what the server holds)."""
    out = []
    while True:
        key, value = cache.pull()
        if key is None:
            return out
        out.append(value)


# ----- b. a connection dropped after the request was sent --------------------------------------


#: The fault tests that run on Valkey too (issue 33): a cut reply, a restart with AOF mid-drain,
#: SIGSTOP, WAIT with replicas. The rest stay on Redis: they test our client and link, which
#: do the same on either server (docs/testing.md).
ON_BOTH_SERVERS = pytest.mark.parametrize("server_program", ["redis", "valkey"], indirect=True)


@pytest.fixture
def proxied(request: pytest.FixtureRequest, server_program: str) -> Any:
    """``(cache over a cutting proxy, cache straight to the server, proxy)`` in one namespace,
    on the session's Redis or Valkey server (``server_program``)."""
    redis_url = str(request.getfixturevalue(f"{server_program}_url"))
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    namespace = _namespace()
    with redis_servers.CuttingProxy(port) as proxy:
        through = RedisCache(proxy.url, namespace=namespace, timeout=5.0, reconnect_for=0.5)
        direct = RedisCache(redis_url, namespace=namespace, timeout=5.0)
        _loaded(through._link)  # connected, scripts loaded: the cut meets the call under test
        yield through, direct, proxy
        through.close()
        direct.close()


def _cut_push(through: RedisCache, direct: RedisCache, proxy: Any) -> None:
    proxy.cut(_sha(through._link, "push"))
    key = through.push("once")
    assert direct.peek() == (key, "once")
    assert _queue(direct) == ["once"]


def _cut_pull(through: RedisCache, direct: RedisCache, proxy: Any) -> None:
    key = direct.push("taken")
    direct.push("behind it")
    proxy.cut(_sha(through._link, "pull"))
    # Repeated without the token, the pull script would remove and return the next item: the
    # first would be pulled by nobody (its reply was lost) and the second by this call.
    assert through.pull() == (key, "taken")
    assert _queue(direct) == ["behind it"]


class _Widget:
    def __init__(self, size: int) -> None:
        self.size = size


def _cut_restore(through: RedisCache, direct: RedisCache, proxy: Any) -> None:
    dco.register_type(_Widget, "tests.faults.Widget", lambda w: w.size, _Widget)
    try:
        key = direct.push(_Widget(3))
    finally:
        dco.unregister_type(_Widget)
    proxy.cut(_sha(through._link, "restore"))
    # The pull takes the item, cannot decode it and puts it back; repeated without the token,
    # the restore would find its number taken (by its own first run) and put a second copy
    # at the front.
    with pytest.raises(dco.UnknownTypeError):
        through.pull()
    assert len(direct) == 1
    dco.register_type(_Widget, "tests.faults.Widget", lambda w: w.size, _Widget)
    try:
        got_key, widget = direct.pull()
    finally:
        dco.unregister_type(_Widget)
    assert got_key == key and widget.size == 3


def _cut_replace(through: RedisCache, direct: RedisCache, proxy: Any) -> None:
    direct.set("n", 10)
    proxy.cut(_sha(through._link, "replace"))
    assert through.incr("n", 5) == 15
    assert direct.get("n") == 15


def _cut_add(through: RedisCache, direct: RedisCache, proxy: Any) -> None:
    proxy.cut(_sha(through._link, "set"))
    assert through.add("a", 1) is True
    assert direct.get("a") == 1


def _cut_pop(through: RedisCache, direct: RedisCache, proxy: Any) -> None:
    direct.set("p", 7)
    proxy.cut(_sha(through._link, "pop"))
    assert through.pop("p") == 7
    assert "p" not in direct


def _cut_delete(through: RedisCache, direct: RedisCache, proxy: Any) -> None:
    direct.set("d", 1)
    proxy.cut(_sha(through._link, "delete"))
    assert through.delete("d") is True


def _cut_acquire(through: RedisCache, direct: RedisCache, proxy: Any) -> None:
    claims = RedisClaims(through)
    _loaded(claims._link)
    proxy.cut(_sha(claims._link, "claim_acquire"))
    # Repeated without the token, the acquire would find the claim taken (by this very call)
    # and say no: the caller would wait on itself until the lease ran out.
    assert claims.try_acquire("jobs", "k", 30.0, "token-1", "host", 1) is True
    holder = RedisClaims(direct).holder("jobs", "k")
    assert holder is not None and holder[0] == "token-1"


@ON_BOTH_SERVERS
@pytest.mark.parametrize(
    "case",
    [
        _cut_push,
        _cut_pull,
        _cut_restore,
        _cut_replace,
        _cut_add,
        _cut_pop,
        _cut_delete,
        _cut_acquire,
    ],
    ids=lambda case: case.__name__[5:],
)
def test_a_write_whose_reply_is_lost_is_done_once(proxied: Any, case: Callable[..., None]) -> None:
    through, direct, proxy = proxied
    case(through, direct, proxy)
    assert proxy.cut_count == 1  # the request ran and its reply was lost, once


def test_redis_pys_default_retry_repeats_a_command_whose_reply_was_lost(redis_url: str) -> None:
    """Why writes carry a token: a ``redis.Redis(...)`` made with redis-py 6's defaults
    (``Retry(ExponentialWithJitterBackoff(base=1, cap=10), 3)`` on ConnectionError and
    TimeoutError) sends a command again after a lost reply, so a plain RPUSH is done twice."""
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    key = "dup-" + uuid.uuid4().hex
    with redis_servers.CuttingProxy(port) as proxy:
        client = redis.Redis(host="127.0.0.1", port=proxy.port)
        assert client.get_retry() is not None and client.get_retry().get_retries() == 3
        client.ping()
        proxy.cut(b"RPUSH")
        client.rpush(key, "x")
        client.close()
    assert redis_servers.command(port, "LLEN", key) == 2


def test_a_users_client_with_redis_pys_retry_does_not_double_a_push(redis_url: str) -> None:
    """The same lost reply on a RedisCache over such a client: redis-py repeats the script
    with the same token, and the server replays the reply."""
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    namespace = _namespace()
    with redis_servers.CuttingProxy(port) as proxy:
        client = redis.Redis(host="127.0.0.1", port=proxy.port)
        through = RedisCache(client, namespace=namespace)
        _loaded(through._link)
        proxy.cut(_sha(through._link, "push"))
        key = through.push("once")
        client.close()
        assert proxy.cut_count == 1
    direct = RedisCache(redis_url, namespace=namespace)
    assert direct.peek() == (key, "once")
    assert _queue(direct) == ["once"]


def test_the_async_link_repeats_a_write_whose_reply_was_lost(redis_url: str) -> None:
    """The same on redis-py's asyncio client: AsyncLink repeats with the token."""
    import asyncio

    import redis.asyncio
    from diskcache_oxide import _core
    from diskcache_oxide.remote._io import AsyncLink
    from diskcache_oxide.remote._requests import Script
    from diskcache_oxide.remote._scripts import SCRIPTS

    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    base = b"dco:{" + _namespace().encode() + b"}:"

    async def main(proxy: Any) -> Any:
        client = redis.asyncio.Redis.from_url(proxy.url)
        link = AsyncLink(client, base, SCRIPTS)
        for script in link._scripts.values():
            await client.script_load(script.script)
        proxy.cut(_sha(link, "push"))
        numbers = await link.send(Script("push", (b"i", "back", "", b"", _core.encode_value(1))))
        await client.aclose()
        return numbers

    with redis_servers.CuttingProxy(port) as proxy:
        numbers = asyncio.run(main(proxy))
        assert proxy.cut_count == 1
    assert numbers == [b"500000000000000"]
    assert redis_servers.command(port, "ZCARD", base + b"Q:i") == 1


def test_a_connection_that_always_drops_ends_in_a_clear_error(proxied: Any) -> None:
    through, direct, proxy = proxied
    proxy.cut(_sha(through._link, "push"), -1)
    with pytest.raises(ServerConnectionError) as raised:
        through.push("maybe")
    error = raised.value
    assert isinstance(error, redis.ConnectionError) and isinstance(error, CacheError)
    assert "may or may not have been applied" in str(error)
    assert "tries in" in str(error) and "(reconnect_for)" in str(error)
    assert proxy.cut_count > 1  # repeated (50, 100, 200 ms apart) until reconnect_for ran out
    # Every try ran on the server; the first pushed, the repeats replayed its reply.
    assert _queue(direct) == ["maybe"]

    direct.set("r", 1)
    proxy.cut(_sha(through._link, "get"), -1)
    with pytest.raises(ServerConnectionError, match="safe to call again"):
        through.get("r")


def test_a_connection_killed_between_calls_is_made_again(make_redis_server: Any) -> None:
    server = make_redis_server()
    cache = RedisCache(server.url, namespace=_namespace(), timeout=5.0)
    cache.set("k", 1)
    killed = server.command("CLIENT", "KILL", "TYPE", "normal")
    assert killed >= 1
    assert cache.get("k") == 1  # the pool saw the closed connection and opened another
    cache.close()


def test_a_connection_killed_during_a_blocked_pull(make_redis_server: Any) -> None:
    """CLIENT KILL while ``pull(timeout=)`` waits on the server: the wait is a plain BLPOP of
    a wake-up token, safe to repeat, so the pull either goes on or raises a connection error a
    worker loop catches; what it does is reported."""
    server = make_redis_server()
    namespace = _namespace()
    cache = RedisCache(server.url, namespace=namespace, timeout=5.0)
    cache.peek()
    outcome: list[Any] = []

    def pull() -> None:
        try:
            outcome.append(cache.pull(timeout=3.0))
        except Exception as exc:  # noqa: BLE001 - reported below
            outcome.append(exc)

    thread = threading.Thread(target=pull)
    thread.start()
    time.sleep(0.3)
    server.command("CLIENT", "KILL", "TYPE", "normal")
    thread.join(10.0)
    print(f"\nblocked pull, connection killed: {outcome!r}")
    assert len(outcome) == 1
    result = outcome[0]
    assert result == (None, None) or isinstance(result, redis.ConnectionError)
    cache.close()


class _LostReplies(RuleBasedStateMachine):
    """Calls through a cutting proxy against a model: any call may have its reply lost after
    the server ran it (``cut``); the results and the server's state must be the model's, as if
    nothing had been cut. ``url`` is set by the test."""

    url = ""

    def __init__(self) -> None:
        super().__init__()
        port = int(self.url.rsplit(":", 1)[1].split("/")[0])
        namespace = _namespace()
        self.proxy = redis_servers.CuttingProxy(port)
        self.through = RedisCache(self.proxy.url, namespace=namespace, timeout=5.0)
        self.direct = RedisCache(self.url, namespace=namespace, timeout=5.0)
        _loaded(self.through._link)
        self.queue: list[tuple[Any, int]] = []
        self.entries: dict[str, int] = {}

    def _arm(self, cut: bool, script: str) -> None:
        self.proxy.cut(_sha(self.through._link, script) if cut else b"", 1 if cut else 0)

    @rule(value=st.integers(0, 99), cut=st.booleans())
    def push(self, value: int, cut: bool) -> None:
        self._arm(cut, "push")
        self.queue.append((self.through.push(value), value))

    @rule(cut=st.booleans())
    def pull(self, cut: bool) -> None:
        self._arm(cut, "pull")
        expected = self.queue.pop(0) if self.queue else (None, None)
        assert self.through.pull() == expected

    @rule(key=st.sampled_from("abc"), delta=st.integers(-3, 3), cut=st.booleans())
    def incr(self, key: str, delta: int, cut: bool) -> None:
        self._arm(cut, "replace")
        self.entries[key] = self.entries.get(key, 0) + delta
        assert self.through.incr(key, delta) == self.entries[key]

    @rule(key=st.sampled_from("abc"), value=st.integers(0, 9), cut=st.booleans())
    def add(self, key: str, value: int, cut: bool) -> None:
        self._arm(cut, "set")
        expected = key not in self.entries
        if expected:
            self.entries[key] = value
        assert self.through.add(key, value) is expected

    @rule(key=st.sampled_from("abc"), cut=st.booleans())
    def pop(self, key: str, cut: bool) -> None:
        self._arm(cut, "pop")
        assert self.through.pop(key) == self.entries.pop(key, None)

    @rule(key=st.sampled_from("abc"), cut=st.booleans())
    def delete(self, key: str, cut: bool) -> None:
        self._arm(cut, "delete")
        assert self.through.delete(key) is (self.entries.pop(key, None) is not None)

    @invariant()
    def the_server_holds_the_model(self) -> None:
        assert self.direct.peek() == (self.queue[0] if self.queue else (None, None))
        assert {k: self.direct.get(k) for k in "abc" if k in self.direct} == self.entries

    def teardown(self) -> None:
        self.through.close()
        self.direct.close()
        self.proxy.close()


def test_calls_whose_replies_are_lost_match_a_model(redis_url: str) -> None:
    machine = type("LostReplies", (_LostReplies,), {"url": redis_url})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=15,
            stateful_step_count=12,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )


# ----- a. a server restarted with its AOF in the middle of a 4-process drain -------------------


@dataclass(frozen=True)
class Drain:
    """One kind of drain for the restart test: ``worker`` is the body of the 4 processes
    (tests/helpers/redis_fault_workers.py: ``(url, namespace, worker, out, ready, stop,
    settings)``, reporting ``(worker, taken, errors)`` on ``out``); ``open`` gives the producer
    its handle (with the same ``settings``)
    and ``add`` adds the item ``i``, returning once the server acknowledged it; ``leased``:
    the items are leased jobs, which come back when a worker did not finish them."""

    worker: Callable[..., None]
    open: Callable[[str, str, dict[str, Any]], Any]
    add: Callable[[Any, int], Any]
    leased: bool = False


def _drains() -> dict[str, Drain]:
    from diskcache_oxide import JobQueue
    from redis_fault_workers import JOB_LEASE, cache_queue_drain, job_queue_drain

    return {
        "job-queue": Drain(
            worker=job_queue_drain,
            open=lambda url, namespace, settings: JobQueue(
                RedisCache(url, namespace=namespace, **{"timeout": 5.0, **settings}),
                "drain",
                lease=JOB_LEASE,
                max_attempts=0,
            ),
            # A put repeated after an error finds the first by its unique key while that one
            # is ready or leased, so it adds nothing.
            add=lambda jobs, i: jobs.put(i, unique=f"item-{i}"),
            leased=True,
        ),
        "cache-queue": Drain(
            worker=cache_queue_drain,
            open=lambda url, namespace, settings: RedisCache(
                url, namespace=namespace, **{"timeout": 5.0, **settings}
            ),
            add=lambda cache, i: cache.push(i),
        ),
    }


#: Items pushed in the restart test; the server is killed and started again after half.
DRAIN_ITEMS = 400


@ON_BOTH_SERVERS
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["cache-queue", "job-queue"])
@pytest.mark.parametrize("outage", ["within-reconnect_for", "beyond-reconnect_for"])
def test_a_restart_with_aof_mid_drain(make_redis_server: Any, kind: str, outage: str) -> None:
    """The server is SIGKILLed after half the items were added and started again 2 s later
    on its data directory (AOF, ``appendfsync always``), under 4 worker processes draining
    the cache's queue or a JobQueue.

    Within ``reconnect_for`` (10 s by default) the calls in flight are repeated with their
    request tokens: no acknowledged item is lost and none is pulled twice. Beyond it (the
    workers and the producer set ``reconnect_for=0.3``) their calls raise and their loops carry
    on: a pull that raised may have taken an item on the server (the queue has no lease: a
    taken item is gone), and a push that raised and was made again may be there twice; so
    each lost item needs a worker's error and each duplicate a producer's repeat."""
    drain = _drains()[kind]
    settings: dict[str, Any] = {}
    if outage == "beyond-reconnect_for":
        settings["reconnect_for"] = 0.3
    server = make_redis_server(appendonly=True, appendfsync="always")
    namespace = _namespace()
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    ready = ctx.Semaphore(0)
    stop = ctx.Event()
    workers = [
        ctx.Process(
            target=drain.worker,
            args=(server.url, namespace, n, out, ready, stop, settings),
        )
        for n in range(4)
    ]
    for worker in workers:
        worker.start()
    acknowledged: list[int] = []
    in_doubt: list[int] = []  # an add that raised and was made again by the producer
    downtime: list[float] = []

    def restart() -> None:
        while len(acknowledged) < DRAIN_ITEMS // 2:
            time.sleep(0.005)
        began = time.monotonic()
        server.kill()  # SIGKILL: nothing written on the way out; the AOF has every ack
        # Down for 2 s: the calls in flight are repeated by the link (within reconnect_for,
        # 10 s) and the workers' blocked BLPOPs fail and their loops carry them over.
        time.sleep(2.0)
        server.start()  # same port and data directory: the AOF is loaded again
        downtime.append(time.monotonic() - began)

    try:
        for _ in workers:
            assert ready.acquire(timeout=60), "a worker did not start"
        producer = drain.open(server.url, namespace, settings)
        restarter = threading.Thread(target=restart)
        restarter.start()
        for i in range(DRAIN_ITEMS):
            while True:
                try:
                    drain.add(producer, i)
                except (redis.ConnectionError, redis.TimeoutError):
                    in_doubt.append(i)  # as a user's producer would: wait and add it again
                    time.sleep(0.05)
                    continue
                acknowledged.append(i)
                break
        restarter.join(60)
        stop.set()
        reports = [out.get(timeout=60) for _ in workers]
    finally:
        stop.set()
        for worker in workers:
            worker.join(10)
            if worker.is_alive():
                worker.kill()
                worker.join(5)
    pulled = [value for _, taken, _ in reports for value in taken]
    counts = collections.Counter(pulled)
    lost = sorted(set(acknowledged) - set(counts))
    duplicates = {value: count for value, count in counts.items() if count > 1}
    errors = [error for _, _, worker_errors in reports for error in worker_errors]
    kinds = sorted({error.split(":")[0] for error in errors})
    print(
        f"\nrestart mid-drain ({kind}, {outage}): {len(acknowledged)} acknowledged, "
        f"{len(pulled)} pulled by 4 workers ({[len(taken) for _, taken, _ in reports]}), "
        f"lost {lost}, duplicates {duplicates}, adds in doubt {in_doubt}, "
        f"down {downtime[0]:.2f} s, worker errors {len(errors)}: {kinds}"
    )
    if drain.leased:
        # A lease brings back every job a worker took and did not finish (a take whose reply
        # never came, a finish that raised): no acknowledged job is lost, even beyond
        # reconnect_for. A job runs again only by the lease rules: after a worker's call
        # failed, or when a producer's put in doubt added it after the first had finished.
        extra_runs = sum(count - 1 for count in counts.values())
        assert not lost
        if outage == "within-reconnect_for":
            assert not duplicates and not errors
        else:
            assert extra_runs <= len(errors) + len(in_doubt)
        return
    # Without a lease an item taken is gone, so the only way to pull a value twice is to push
    # it twice: a producer's repeat after an error that left its first push in doubt.
    assert set(duplicates) <= set(in_doubt)
    if outage == "within-reconnect_for":
        assert not lost and not duplicates
    else:
        assert len(lost) <= sum(1 for e in errors if "reconnect_for" in e or "onnection" in e)


# ----- c. a server that stops answering ------------------------------------------------------


@ON_BOTH_SERVERS
def test_a_stopped_server_times_out_with_an_error_naming_the_setting(
    make_redis_server: Any,
) -> None:
    server = make_redis_server()
    namespace = _namespace()
    cache = RedisCache(server.url, namespace=namespace, timeout=0.5)
    cache.set("k", 1)
    cache.push("warm")  # the scripts are loaded (else the paused push is only a NOSCRIPT)
    assert cache.pull()[1] == "warm"
    server.pause()
    try:
        # The push goes first, on the connection the set opened: it is sent, then times out.
        began = time.monotonic()
        with pytest.raises(ServerTimeout) as write:
            cache.push("late")
        write_took = time.monotonic() - began
        began = time.monotonic()
        with pytest.raises(ServerTimeout) as read:
            cache.get("k")
        read_took = time.monotonic() - began
    finally:
        server.resume()
    for error in (read.value, write.value):
        assert isinstance(error, redis.TimeoutError) and isinstance(error, CacheError)
        assert "0.5 s" in str(error) and "RedisCache(timeout=...)" in str(error)
    assert "safe to call again" in str(read.value)
    assert "may or may not have been applied" in str(write.value)
    # The push was sent before the timeout: whether the resumed server still runs it (it reads
    # the request before it sees the closed connection) is reported.
    after = RedisCache(server.url, namespace=namespace, timeout=5.0)
    left = _queue(after)
    print(
        f"\nSIGSTOP, socket timeout 0.5 s: get raised after {read_took:.2f} s, push after "
        f"{write_took:.2f} s; after SIGCONT the timed-out push is in the queue: {left!r}"
    )
    assert left == ["late"]
    assert after.get("k") == 1
    cache.close()
    after.close()


# ----- d. replicas: WAIT, and a cluster master killed while the cluster fails over -------------


@pytest.fixture
def master_and_replica(make_redis_server: Any) -> tuple[Any, Any]:
    """A server and one replica of it (``--replicaof``), synced and online."""
    master = make_redis_server(name="master", extra=["--repl-diskless-sync-delay", "0"])
    replica = make_redis_server(
        name="replica", extra=["--replicaof", "127.0.0.1", str(master.port)]
    )
    deadline = time.monotonic() + 20
    while True:
        # The master counts a replica for WAIT once it is online on the master's side (after
        # its first ACK), not when the replica says its link is up.
        fields = redis_servers.info_fields(master.command("INFO", "replication"))
        if "state=online" in fields.get("slave0", ""):
            return master, replica
        assert time.monotonic() < deadline, f"the replica did not sync: {fields}"
        time.sleep(0.05)


@ON_BOTH_SERVERS
def test_replicas_waits_after_writes_and_says_when_a_write_may_not_survive(
    master_and_replica: tuple[Any, Any], caplog: pytest.LogCaptureFixture
) -> None:
    master, replica = master_and_replica
    namespace = _namespace()
    # A generous replica_timeout where the replica is up (the machine may be loaded), a short
    # one where it is stopped and the wait must run out.
    cache = RedisCache(master.url, namespace=namespace, replicas=1, replica_timeout=10.0)
    short = RedisCache(master.url, namespace=namespace, replicas=1, replica_timeout=0.3)
    key = cache.push("kept")  # WAIT 1: the replica has it when push returns
    assert RedisCache(replica.url, namespace=namespace).peek() == (key, "kept")
    cache.set("k", 1)
    replica.pause()
    try:
        with pytest.raises(NotReplicatedError) as raised:
            short.push("unsure")
        assert raised.value.acknowledged == 0 and isinstance(raised.value, CacheError)
        assert "may not survive a failover" in str(raised.value)
        assert "replica_timeout=0.3" in str(raised.value)
        assert short.get("k") == 1  # reads send no WAIT
        # A pull hands the item over: it returns it (with a warning) rather than raise
        # and lose it for the caller.
        with caplog.at_level("WARNING", logger="diskcache_oxide.remote"):
            assert short.pull() == (key, "kept")
        assert "may be delivered again" in caplog.text
    finally:
        replica.resume()
    # The write that raised ran on the master: the error says it may not survive, not that it
    # did not happen.
    assert cache.pull()[1] == "unsure"


def test_a_pull_puts_back_what_it_cannot_decode_even_if_no_replica_acknowledges(
    master_and_replica: tuple[Any, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """D-064: the pull took the item and its restore ran on the master; with the replica
    stopped the restore is not acknowledged, which is logged, and the pull still raises the
    decode error (the reason it failed), not NotReplicatedError."""
    master, replica = master_and_replica
    namespace = _namespace()
    dco.register_type(_Widget, "tests.faults.Widget", lambda w: w.size, _Widget)
    try:
        key = RedisCache(master.url, namespace=namespace).push(_Widget(1))
    finally:
        dco.unregister_type(_Widget)
    short = RedisCache(master.url, namespace=namespace, replicas=1, replica_timeout=0.3)
    replica.pause()
    try:
        with caplog.at_level("WARNING", logger="diskcache_oxide.remote"):
            with pytest.raises(dco.UnknownTypeError):
                short.pull()
        assert "put back on the master" in caplog.text
    finally:
        replica.resume()
    dco.register_type(_Widget, "tests.faults.Widget", lambda w: w.size, _Widget)
    try:
        got_key, widget = RedisCache(master.url, namespace=namespace).pull()
    finally:
        dco.unregister_type(_Widget)
    assert got_key == key and widget.size == 1


def test_the_async_link_waits_for_replicas_too(master_and_replica: tuple[Any, Any]) -> None:
    import asyncio

    import redis.asyncio
    from diskcache_oxide import _core
    from diskcache_oxide.remote._io import AsyncLink
    from diskcache_oxide.remote._requests import Script
    from diskcache_oxide.remote._scripts import SCRIPTS

    master, replica = master_and_replica
    base = b"dco:{" + _namespace().encode() + b"}:"

    async def main() -> tuple[Any, Any]:
        client = redis.asyncio.Redis.from_url(master.url)
        link = AsyncLink(client, base, SCRIPTS, replicas=1, replica_timeout=10.0)
        short = AsyncLink(client, base, SCRIPTS, replicas=1, replica_timeout=0.3)
        push = Script("push", (b"i", "back", "", b"", _core.encode_value("a")))
        numbers = await link.send(push)
        replica.pause()
        try:
            with pytest.raises(NotReplicatedError):
                await short.send(push)
        finally:
            replica.resume()
        await client.aclose()
        return numbers, redis_servers.command(replica.port, "ZCARD", base + b"Q:i")

    numbers, on_replica = asyncio.run(main())
    assert numbers == [b"500000000000000"] and on_replica >= 1


def _slot_nodes(cluster: Any, namespace: str) -> tuple[Any, Any]:
    """The master of the namespace's slot and its replica, once the nodes' gossip agrees."""
    from redis.crc import key_slot

    slot = key_slot(b"dco:{" + namespace.encode() + b"}:i")
    deadline = time.monotonic() + 20
    while True:
        master, replica = redis_servers.slot_master_and_replica(cluster, slot)
        if replica is not None:
            return master, replica
        assert time.monotonic() < deadline, "the slot's master has no replica"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("replicas", [0, 1])
def test_a_forced_failover_loses_the_writes_the_replica_never_got(
    make_redis_cluster: Any, replicas: int
) -> None:
    """Made reproducible: the namespace's replica is stopped (SIGSTOP) and its replication
    connection killed, so writes after that reach the master only; then the master is killed
    (SIGKILL) and the replica takes over (``CLUSTER FAILOVER TAKEOVER``). Without ``replicas``
    those writes were acknowledged and are lost; with ``replicas=1`` none of them was
    acknowledged (each raised NotReplicatedError) and every acknowledged write survives."""
    cluster = make_redis_cluster(replicas=1)
    namespace = _namespace()
    url = cluster.url + "?cluster=1"
    settings: dict[str, Any] = {"namespace": namespace, "replicas": replicas, "timeout": 2.0}
    first = RedisCache(url, replica_timeout=10.0, **settings)  # the replica is up
    cache = RedisCache(url, replica_timeout=0.3, **settings)  # it will be stopped
    before = [first.push(f"before-{i}") and f"before-{i}" for i in range(20)]
    cluster.wait_replicated()
    master, replica = _slot_nodes(cluster, namespace)
    replica.pause()
    acknowledged_after, refused_after = [], []
    try:
        assert master.command("CLIENT", "KILL", "TYPE", "replica") == 1
        for i in range(10):
            try:
                cache.push(f"after-{i}")
            except NotReplicatedError:
                refused_after.append(f"after-{i}")
                continue
            acknowledged_after.append(f"after-{i}")
        master.kill()
    finally:
        replica.resume()
    assert replica.command("CLUSTER", "FAILOVER", "TAKEOVER") == "OK"
    began = time.monotonic()
    cluster.wait_for_failover()
    from redis.crc import key_slot

    slot = key_slot(b"dco:{" + namespace.encode() + b"}:i")
    assert redis_servers.slot_master_and_replica(cluster, slot)[0] is replica
    # A new client, from a live node (the first master may be the one killed).
    reader = RedisCache(f"redis://{replica.address}?cluster=1", namespace=namespace, timeout=2.0)
    left = _queue(reader)
    print(
        f"\nforced failover, replicas={replicas}: {len(acknowledged_after)} writes after the "
        f"replica stopped were acknowledged, {len(refused_after)} raised NotReplicatedError; "
        f"after the takeover ({time.monotonic() - began:.2f} s) the queue holds {len(left)}: "
        f"lost acknowledged {sorted(set(before + acknowledged_after) - set(left))}"
    )
    assert set(before) <= set(left)
    if replicas:
        assert not acknowledged_after and len(refused_after) == 10
    else:
        assert len(acknowledged_after) == 10
        # asynchronous replication: acknowledged, then lost with the master
        assert not set(acknowledged_after) & set(left)
    assert not set(refused_after) & set(left)
    first.close()
    cache.close()
    reader.close()


@pytest.mark.slow
def test_a_master_killed_mid_pushes_fails_over_and_keeps_every_waited_push(
    make_redis_cluster: Any,
) -> None:
    """A producer pushes with ``replicas=1`` while the namespace's master is SIGKILLed; the
    cluster promotes its replica (after ``cluster-node-timeout``, 2 s here) and the client
    follows the new topology. The killed master is started again and rejoins as the new
    master's replica, so waited pushes are acknowledged again. Every acknowledged push is
    pulled; a value is there twice only where the producer repeated a push that raised."""
    cluster = make_redis_cluster(replicas=1)
    namespace = _namespace()
    url = cluster.url + "?cluster=1"
    cache = RedisCache(url, namespace=namespace, replicas=1, replica_timeout=2.0, timeout=2.0)
    master, replica = _slot_nodes(cluster, namespace)
    acknowledged: list[int] = []
    in_doubt: list[int] = []
    errors: collections.Counter[str] = collections.Counter()
    done = threading.Event()

    def produce() -> None:
        i = 0
        while not done.is_set():
            try:
                cache.push(i)
            except (redis.RedisError, redis.exceptions.RedisClusterException, CacheError) as exc:
                errors[type(exc).__name__] += 1
                in_doubt.append(i)  # pushed again: there may be two of it now
                time.sleep(0.05)
                continue
            acknowledged.append(i)
            i += 1

    def acknowledged_more(count: int) -> None:
        goal = len(acknowledged) + count
        deadline = time.monotonic() + 60
        while len(acknowledged) < goal and time.monotonic() < deadline:
            time.sleep(0.005)

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        acknowledged_more(50)
        began = time.monotonic()
        master.kill()
        at_kill = len(acknowledged)
        cluster.wait_for_failover()
        failover = time.monotonic() - began
        at_failover = len(acknowledged)
        master.start()  # its nodes.conf makes it rejoin as a replica of the promoted one
        cluster.wait_ready(30)
        rejoined = time.monotonic() - began
        at_rejoin = len(acknowledged)
        acknowledged_more(50)
    finally:
        done.set()
        producer.join(120)
    assert not producer.is_alive()
    promoted, _ = _slot_nodes(cluster, namespace)
    assert promoted is replica
    left = _queue(cache)  # the producer's own client, which followed the new topology
    counts = collections.Counter(left)
    lost = sorted(set(acknowledged) - set(counts))
    duplicates = {value: count for value, count in counts.items() if count > 1}
    print(
        f"\nmaster killed mid-pushes, replicas=1: failover after {failover:.2f} s, old master "
        f"back as a replica after {rejoined:.2f} s; acknowledged {at_kill} at the kill, "
        f"{at_failover} at the failover, {at_rejoin} at the rejoin, {len(acknowledged)} in all, "
        f"{len(left)} in the queue, lost {lost}, duplicates {duplicates}, errors while it "
        f"failed over {dict(errors)}"
    )
    assert not lost
    assert set(duplicates) <= set(in_doubt)
    cache.close()
