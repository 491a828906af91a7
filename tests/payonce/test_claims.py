"""Claims with a lease: owner tokens, expiry, takeover, visibility across threads/processes."""

from __future__ import annotations

import multiprocessing
import threading
import time
from typing import Any

import payonce_workers as pw
import pytest
from backends import address

#: The conformance suite: each test with a cache runs on a directory, a Redis server and a
#: cluster (claims.backend_of gives RedisClaims there).
pytestmark = [pytest.mark.oxide, pytest.mark.backends]

dc = pytest.importorskip("diskcache_oxide")
from diskcache_oxide.aio import AsyncClaims, acompute_once  # noqa: E402
from diskcache_oxide.claims import Claims  # noqa: E402

SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture
def cache(make_cache: Any) -> Any:
    """The cache under test: a directory, a Redis server's namespace or a cluster's (the
    conformance suite runs this module on each)."""
    return make_cache("c", eviction_policy="none")


def test_acquire_is_exclusive_and_release_frees(cache: Any) -> None:
    claims = Claims(cache)
    first = claims.try_acquire("a", lease=10)
    assert first is not None
    assert claims.try_acquire("a", lease=10) is None
    assert claims.try_acquire("b", lease=10) is not None  # other keys are independent
    info = claims.holder("a")
    assert info is not None and info.token == first.token
    assert info.expires > time.time() + 9
    assert first.held()
    assert first.release() is True
    assert first.release() is False  # already released
    assert claims.holder("a") is None
    second = claims.try_acquire("a", lease=10)
    assert second is not None and second.token != first.token


def test_only_the_owner_releases_or_extends(cache: Any) -> None:
    claims = Claims(cache)
    claim = claims.try_acquire(("article", 7), lease=10)
    assert claim is not None
    assert claims.release(("article", 7), "forged-token") is False
    assert claims.extend(("article", 7), "forged-token", 100) is False
    assert claim.held()
    assert claims.release(("article", 7), claim.token) is True


def test_extend_pushes_the_expiry(cache: Any) -> None:
    claims = Claims(cache)
    claim = claims.try_acquire("k", lease=0.3)
    assert claim is not None
    time.sleep(0.2)
    assert claim.extend(0.5)
    time.sleep(0.2)  # past the first TTL, within the extension
    assert claims.try_acquire("k", lease=1) is None
    assert claim.held()


def test_expired_claim_is_taken_by_anyone_and_lost_by_its_owner(cache: Any) -> None:
    claims = Claims(cache)
    stale = claims.try_acquire("k", lease=0.1)
    assert stale is not None
    time.sleep(0.15)
    assert not stale.held()
    assert stale.extend() is False  # cannot revive an expired claim
    fresh = claims.try_acquire("k", lease=10)
    assert fresh is not None
    assert stale.release() is False  # the old owner cannot release the new claim
    assert fresh.held()


def test_context_manager_and_hold(cache: Any) -> None:
    claims = Claims(cache)
    with claims.hold("k", lease=10) as claim:
        assert claim.held()
        with pytest.raises(dc.ClaimTimeout):
            claims.hold("k", lease=10, timeout=0.05)
    assert claims.holder("k") is None
    with pytest.raises(RuntimeError), claims.hold("k", lease=10):
        raise RuntimeError("boom")
    assert claims.holder("k") is None  # released on an exception too


def test_acquire_waits_for_a_release(cache: Any) -> None:
    claims = Claims(cache)
    claim = claims.try_acquire("k", lease=10)
    assert claim is not None
    threading.Timer(0.1, claim.release).start()
    started = time.monotonic()
    got = claims.acquire("k", lease=10, timeout=5)
    assert got is not None
    assert 0.05 < time.monotonic() - started < 3


def test_namespaces_and_user_keys_are_separate(cache: Any) -> None:
    cache.set("k", "user value")
    a, b = Claims(cache, "a"), Claims(cache, "b")
    assert a.try_acquire("k", lease=10) is not None
    assert b.try_acquire("k", lease=10) is not None
    assert cache.get("k") == "user value"


def test_bad_arguments(cache: Any) -> None:
    claims = Claims(cache)
    for ttl in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            claims.try_acquire("k", lease=ttl)
    with pytest.raises(TypeError):
        claims.try_acquire("k", lease="1")
    with pytest.raises(TypeError):
        Claims("not a cache")  # type: ignore[arg-type]


def test_exactly_one_of_many_threads_wins(cache: Any) -> None:
    claims = Claims(cache)
    barrier = threading.Barrier(16)
    wins: list[Any] = []

    def race() -> None:
        barrier.wait(10)
        got = claims.try_acquire("hot", lease=10)
        if got is not None:
            wins.append(got)

    threads = [threading.Thread(target=race) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(wins) == 1


@pytest.mark.slow
def test_claim_is_visible_to_another_process(cache: Any) -> None:
    claims = Claims(cache)
    claim = claims.try_acquire("shared", lease=30)
    assert claim is not None
    with SPAWN.Pool(1) as pool:
        # held here: the other process cannot take it, nor release it with a wrong token
        assert pool.apply(pw.try_claim, (address(cache), "shared")) is False
        # but the owner's token works from there
        assert pool.apply(pw.release_claim, (address(cache), "shared", claim.token)) is True
        assert pool.apply(pw.try_claim, (address(cache), "shared")) is True


def _fill_and_empty(cache: Any) -> Any:
    """Take a claim, then fill the cache (with expiring and tagged entries) and empty it every
    way it can be emptied but culling; the claim."""
    claims = Claims(cache)
    claim = claims.try_acquire(("article", 1), lease=30)
    assert claim is not None
    for i in range(200):
        cache.set(i, b"x" * 2_000, expire=0.01 if i % 2 else None, tag="t")
    time.sleep(0.02)
    cache.expire()
    cache.evict("t")
    return claim


def test_clearing_evicting_and_expiring_the_cache_never_remove_a_live_claim(cache: Any) -> None:
    claims = Claims(cache)
    claim = _fill_and_empty(cache)
    cache.clear()
    assert len(cache) == 0
    held = claims.holder(("article", 1))
    assert held is not None and held.token == claim.token
    assert claims.try_acquire(("article", 1), lease=30) is None, "nobody else can take it"
    assert claims.list() == [(("article", 1), held)]


@pytest.mark.needs("culling")
def test_clearing_evicting_expiring_and_culling_the_cache_never_remove_a_live_claim(
    make_cache: Any,
) -> None:
    # A tiny size limit: filling the cache culls it again and again.
    cache = make_cache("small", size_limit=50_000, cull_limit=100)
    claims = Claims(cache)
    claim = _fill_and_empty(cache)
    cache.cull()
    cache.clear()
    assert len(cache) == 0
    held = claims.holder(("article", 1))
    assert held is not None and held.token == claim.token
    assert claims.try_acquire(("article", 1), lease=30) is None, "nobody else can take it"
    assert claims.list() == [(("article", 1), held)]


def test_a_waiter_for_a_claim_is_woken_by_its_release(cache: Any) -> None:
    claims = Claims(cache)
    held = claims.try_acquire("k", lease=30)
    assert held is not None
    releaser = threading.Timer(0.2, held.release)
    releaser.start()
    started = time.monotonic()
    got = claims.acquire("k", lease=30, timeout=10)
    releaser.join()
    assert got is not None
    # Woken by the release, not by the end of the 30 s lease or the 10 s limit.
    assert time.monotonic() - started < 5


def test_the_old_names_ttl_and_wait_are_refused(cache: Any) -> None:
    # D-045: removed before the first release, not kept as deprecated spellings.
    claims = Claims(cache)
    for call in (
        lambda: claims.try_acquire("k", ttl=10),
        lambda: claims.acquire("k", lease=10, wait=0.01),
        lambda: claims.hold("k", ttl=10),
        lambda: claims.extend("k", "token", ttl=10),
        lambda: dc.compute_once(cache, ttl=10),
        lambda: dc.compute_once(cache, wait=1),
        lambda: AsyncClaims(cache).acquire("k", wait=0.01),
        lambda: acompute_once(cache, ttl=10),
    ):
        with pytest.raises(TypeError, match="unexpected keyword argument '(ttl|wait)'"):
            call()  # a coroutine function refuses them when called, before any await
    assert claims.holder("k") is None, "no refused call took the claim"
    claim = claims.try_acquire("k", lease=10)
    assert claim is not None and not hasattr(claim, "ttl")
    claim.release()
    # get_or_compute passes keywords it does not know to fn, so ttl= is now fn's argument
    # (and fn here has none).
    with pytest.raises(TypeError, match="unexpected keyword argument 'ttl'"):
        cache.get_or_compute("k", lambda: 1, ttl=5)
    assert cache.get("k") is None and claims.holder("k") is None
    assert cache.get_or_compute("k", lambda ttl: ttl, ttl=5) == 5
