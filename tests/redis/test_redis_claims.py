"""Claims and compute-once on Redis (issue 21, D-058): ``RedisClaims`` under the pay-once
protocol of ``_payonce`` (D-052), against the session's real server and three-master cluster
(every test that takes ``url`` runs on both): tokens guard extend and release, a claim is
refused while held and free once its lease ran out, a waiter is woken by a release at once,
get_or_compute computes once across processes, and a cancelled async caller's turn still
stores its value."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
import uuid
from typing import Any

import pytest

redis = pytest.importorskip("redis")

import redis_claim_workers as rw  # noqa: E402
from diskcache_oxide import (  # noqa: E402
    COMPUTING,
    Claims,
    ClaimTimeout,
    Outcome,
    compute_once,
    get_or_compute,
)
from diskcache_oxide.aio import AsyncClaim, AsyncClaims, aget_or_compute, drain_turns  # noqa: E402
from diskcache_oxide.claims import backend_of  # noqa: E402
from diskcache_oxide.remote import RedisCache  # noqa: E402
from diskcache_oxide.remote.claims import RedisClaims  # noqa: E402

pytestmark = pytest.mark.oxide

SPAWN = multiprocessing.get_context("spawn")


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


def test_backend_of_a_redis_cache_is_redis_claims(cache: Any) -> None:
    assert isinstance(backend_of(cache), RedisClaims)
    assert isinstance(Claims(cache).backend, RedisClaims)
    with pytest.raises(TypeError, match="Cache or a RedisCache"):
        backend_of(object())  # type: ignore[arg-type]


def test_acquire_extend_release_check_the_token(cache: Any) -> None:
    claims = Claims(cache)
    claim = claims.try_acquire("k", lease=30)
    assert claim is not None and claim.held()
    held = claims.holder("k")
    assert held is not None and held.token == claim.token and held.pid > 0
    assert held.expires - held.acquired == pytest.approx(30, abs=0.01)
    assert claims.try_acquire("k") is None
    assert not claims.extend("k", "not-the-token", 60)
    assert not claims.release("k", "not-the-token")
    assert claim.extend(60)
    renewed = claims.holder("k")
    assert renewed is not None and renewed.expires > held.expires
    assert [key for key, _info in claims.list()] == ["k"]
    assert claim.release()
    assert not claim.release() and not claim.extend() and not claim.held()
    assert claims.holder("k") is None and claims.list() == []
    # namespaces of claims are separate; the key's frame names the key
    other = Claims(cache, namespace="other")
    first, second = claims.try_acquire(("t", 1)), other.try_acquire(("t", 1))
    assert first is not None and second is not None
    assert claims.list()[0][0] == ("t", 1)
    assert claims.break_claim(("t", 1)) and not claims.break_claim(("t", 1))
    assert other.holder(("t", 1)) is not None
    assert second.release()


def test_refused_while_held_and_admitted_after_the_lease_runs_out(cache: Any) -> None:
    claims = Claims(cache)
    first = claims.try_acquire("k", lease=0.3)
    assert first is not None
    assert claims.try_acquire("k", lease=5) is None
    with pytest.raises(ClaimTimeout):
        claims.hold("k", timeout=0.05)
    time.sleep(0.4)
    assert claims.holder("k") is None
    second = claims.try_acquire("k", lease=5)
    assert second is not None
    assert not first.release() and not first.extend()  # its lease ran out: not ours any more
    assert second.held() and second.release()


def test_a_waiter_is_woken_by_the_release(cache: Any) -> None:
    claims = Claims(cache)
    claim = claims.try_acquire("k", lease=30)
    assert claim is not None
    threading.Timer(0.2, claim.release).start()
    started = time.monotonic()
    # one wait of up to 10 s: a release ends it at once, not after the timeout
    assert claims.backend.wait_for_change(claims.namespace, "k", 10.0, True)
    assert time.monotonic() - started < 1.0
    taken = claims.acquire("k", lease=30, timeout=5)
    assert taken is not None
    threading.Timer(0.2, taken.release).start()
    started = time.monotonic()
    assert claims.acquire("k", lease=30, timeout=10) is not None
    assert time.monotonic() - started < 1.0


def test_several_waiters_are_all_woken(cache: Any) -> None:
    claims = Claims(cache)
    claim = claims.try_acquire("k", lease=30)
    assert claim is not None
    took: list[float] = []

    def wait() -> None:
        started = time.monotonic()
        claims.backend.wait_for_change(claims.namespace, "k", 10.0, True)
        took.append(time.monotonic() - started)

    threads = [threading.Thread(target=wait) for _ in range(3)]
    for thread in threads:
        thread.start()
    time.sleep(0.3)
    claim.release()
    for thread in threads:
        thread.join(timeout=15)
    assert len(took) == 3 and max(took) < 1.5


def test_a_waiter_is_woken_by_a_lease_that_runs_out(cache: Any) -> None:
    claims = Claims(cache)
    assert claims.try_acquire("k", lease=0.3) is not None
    started = time.monotonic()
    assert claims.backend.wait_for_change(claims.namespace, "k", 10.0, False)
    assert time.monotonic() - started < 1.0
    assert claims.try_acquire("k") is not None


def test_get_or_compute_and_compute_once(cache: Any) -> None:
    assert get_or_compute(cache, "k", lambda: 42, outcome=True) == (42, Outcome.COMPUTED)
    assert get_or_compute(cache, "k", lambda: 0, outcome=True) == (42, Outcome.CACHED)
    assert cache.get("k") == 42
    claim = Claims(cache).try_acquire("busy", lease=30)
    assert claim is not None
    got = get_or_compute(cache, "busy", lambda: 1, if_computing="skip", outcome=True)
    assert got == (COMPUTING, Outcome.SKIPPED)

    def finish() -> None:
        cache.set("busy", "theirs")
        claim.release()

    threading.Timer(0.2, finish).start()
    assert get_or_compute(cache, "busy", lambda: "mine", outcome=True) == (
        "theirs",
        Outcome.WAITED,
    )
    calls: list[int] = []

    @compute_once(cache, name="double")
    def double(n: int) -> int:
        calls.append(n)
        return 2 * n

    assert double(4) == 8 and double(4) == 8 and calls == [4]


def test_async_claims_and_get_or_compute(cache: Any) -> None:
    async def main() -> None:
        claims = AsyncClaims(cache)
        claim = await claims.try_acquire("k", lease=30)
        assert claim is not None and await claim.held()
        assert await claims.try_acquire("k") is None
        asyncio.get_running_loop().call_later(0.2, lambda: claim.claim.release())
        started = time.monotonic()
        again = await claims.acquire("k", lease=30, timeout=10)
        assert again is not None and time.monotonic() - started < 1.0
        async with again:
            assert [key for key, _info in await claims.list()] == ["k"]
        assert await claims.holder("k") is None

        async def paid() -> str:
            return "paid"

        assert await aget_or_compute(cache, "v", paid, outcome=True) == ("paid", Outcome.COMPUTED)
        assert await aget_or_compute(cache, "v", paid, outcome=True) == ("paid", Outcome.CACHED)

    asyncio.run(main())


def test_a_cancelled_async_callers_turn_still_stores_its_value(cache: Any) -> None:
    async def main() -> None:
        started = asyncio.Event()
        tokens: list[str] = []

        async def slow(*, claim: AsyncClaim) -> str:
            tokens.append(claim.token)
            started.set()
            await asyncio.sleep(0.3)
            return "paid"

        caller = asyncio.ensure_future(aget_or_compute(cache, "k", slow, pass_claim=True))
        await started.wait()
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        await drain_turns(timeout=10)
        assert cache.get("k") == "paid"
        assert await aget_or_compute(cache, "k", slow, outcome=True) == ("paid", Outcome.CACHED)
        assert len(tokens) == 1
        assert Claims(cache).holder("k") is None

    asyncio.run(main())


@pytest.mark.slow
@pytest.mark.parametrize("body", ["sync", "mixed"])
def test_across_processes_one_computes_and_the_others_wait(
    cache: Any, url: str, namespace: str, body: str
) -> None:
    callers = [rw.sync_caller] * 3 if body == "sync" else [rw.sync_caller, rw.async_caller] * 2
    with SPAWN.Pool(len(callers)) as pool:
        for _ in callers:  # the workers are up before the clock starts
            pool.apply(rw.ready)
        start_at = time.time() + 1.5
        pending = [pool.apply_async(fn, (url, namespace, start_at, 0.6)) for fn in callers]
        results = [p.get(timeout=60) for p in pending]
    outcomes = sorted(outcome for _value, outcome, _token in results)
    assert outcomes == ["computed"] + ["waited"] * (len(results) - 1)
    assert {value for value, _outcome, _token in results} == {"clean text of 7"}
    [token] = [token for _value, outcome, token in results if outcome == "computed"]
    assert token is not None and len(token) == 32
    assert cache.get(rw.CALLS) == 1
    assert cache.get(rw.KEY) == "clean text of 7"
    assert Claims(cache).list() == []


def test_a_claim_names_the_key_its_value_does(cache: Any) -> None:
    claims = Claims(cache)
    claim = claims.try_acquire(2, lease=30)
    assert claim is not None
    assert claims.try_acquire(2.0) is None  # one entry in the cache, one claim
    assert claims.try_acquire("q-000000000000002") is not None
    assert sorted(map(str, (key for key, _info in claims.list()))) == ["2", "q-000000000000002"]
    assert claim.release()
