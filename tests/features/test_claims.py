"""Claims with a TTL: owner tokens, expiry, takeover, visibility across threads/processes."""

from __future__ import annotations

import multiprocessing
import threading
import time
from typing import Any

import payonce_workers as pw
import pytest

pytestmark = pytest.mark.oxide

dc = pytest.importorskip("diskcache_oxide")
from diskcache_oxide.claims import Claims  # noqa: E402

SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture
def cache(tmp_path: Any) -> Any:
    with dc.Cache(str(tmp_path / "c"), eviction_policy="none") as c:
        yield c


def test_acquire_is_exclusive_and_release_frees(cache: Any) -> None:
    claims = Claims(cache)
    first = claims.try_acquire("a", ttl=10)
    assert first is not None
    assert claims.try_acquire("a", ttl=10) is None
    assert claims.try_acquire("b", ttl=10) is not None  # other keys are independent
    info = claims.holder("a")
    assert info is not None and info.token == first.token
    assert info.expires > time.time() + 9
    assert first.held()
    assert first.release() is True
    assert first.release() is False  # already released
    assert claims.holder("a") is None
    second = claims.try_acquire("a", ttl=10)
    assert second is not None and second.token != first.token


def test_only_the_owner_releases_or_extends(cache: Any) -> None:
    claims = Claims(cache)
    claim = claims.try_acquire(("article", 7), ttl=10)
    assert claim is not None
    assert claims.release(("article", 7), "forged-token") is False
    assert claims.extend(("article", 7), "forged-token", 100) is False
    assert claim.held()
    assert claims.release(("article", 7), claim.token) is True


def test_extend_pushes_the_expiry(cache: Any) -> None:
    claims = Claims(cache)
    claim = claims.try_acquire("k", ttl=0.3)
    assert claim is not None
    time.sleep(0.2)
    assert claim.extend(0.5)
    time.sleep(0.2)  # past the first TTL, within the extension
    assert claims.try_acquire("k", ttl=1) is None
    assert claim.held()


def test_expired_claim_is_taken_by_anyone_and_lost_by_its_owner(cache: Any) -> None:
    claims = Claims(cache)
    stale = claims.try_acquire("k", ttl=0.1)
    assert stale is not None
    time.sleep(0.15)
    assert not stale.held()
    assert stale.extend() is False  # cannot revive an expired claim
    fresh = claims.try_acquire("k", ttl=10)
    assert fresh is not None
    assert stale.release() is False  # the old owner cannot release the new claim
    assert fresh.held()


def test_context_manager_and_hold(cache: Any) -> None:
    claims = Claims(cache)
    with claims.hold("k", ttl=10) as claim:
        assert claim.held()
        with pytest.raises(dc.ClaimTimeout):
            claims.hold("k", ttl=10, wait=0.05)
    assert claims.holder("k") is None
    with pytest.raises(RuntimeError), claims.hold("k", ttl=10):
        raise RuntimeError("boom")
    assert claims.holder("k") is None  # released on an exception too


def test_acquire_waits_for_a_release(cache: Any) -> None:
    claims = Claims(cache)
    claim = claims.try_acquire("k", ttl=10)
    assert claim is not None
    threading.Timer(0.1, claim.release).start()
    started = time.monotonic()
    got = claims.acquire("k", ttl=10, wait=5)
    assert got is not None
    assert 0.05 < time.monotonic() - started < 3


def test_namespaces_and_user_keys_are_separate(cache: Any) -> None:
    cache.set("k", "user value")
    a, b = Claims(cache, "a"), Claims(cache, "b")
    assert a.try_acquire("k", ttl=10) is not None
    assert b.try_acquire("k", ttl=10) is not None
    assert cache.get("k") == "user value"


def test_bad_arguments(cache: Any) -> None:
    claims = Claims(cache)
    for ttl in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            claims.try_acquire("k", ttl=ttl)
    with pytest.raises(TypeError):
        claims.try_acquire("k", ttl="1")
    with pytest.raises(TypeError):
        Claims("not a cache")  # type: ignore[arg-type]


def test_exactly_one_of_many_threads_wins(cache: Any) -> None:
    claims = Claims(cache)
    barrier = threading.Barrier(16)
    wins: list[Any] = []

    def race() -> None:
        barrier.wait(10)
        got = claims.try_acquire("hot", ttl=10)
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
    claim = claims.try_acquire("shared", ttl=30)
    assert claim is not None
    with SPAWN.Pool(1) as pool:
        # held here: the other process cannot take it, nor release it with a wrong token
        assert pool.apply(pw.try_claim, (cache.directory, "shared")) is False
        # but the owner's token works from there
        assert pool.apply(pw.release_claim, (cache.directory, "shared", claim.token)) is True
        assert pool.apply(pw.try_claim, (cache.directory, "shared")) is True
