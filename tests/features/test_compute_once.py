"""get_or_compute / compute_once: one computation across threads; waiters, failures, death."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

pytestmark = pytest.mark.oxide

dc = pytest.importorskip("diskcache_oxide")
from diskcache_oxide.claims import Claims  # noqa: E402


@pytest.fixture
def cache(tmp_path: Any) -> Any:
    with dc.Cache(str(tmp_path / "c"), eviction_policy="none") as c:
        yield c


def run_threads(n: int, target: Any) -> list[Any]:
    results: list[Any] = [None] * n
    barrier = threading.Barrier(n)

    def body(i: int) -> None:
        barrier.wait(10)
        try:
            results[i] = target(i)
        except BaseException as exc:
            results[i] = exc

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
        assert not t.is_alive()
    return results


def test_cached_value_is_returned_without_calling(cache: Any) -> None:
    cache.set("k", "stored")
    assert dc.get_or_compute(cache, "k", lambda: pytest.fail("called")) == "stored"


def test_computes_stores_and_releases(cache: Any) -> None:
    assert dc.get_or_compute(cache, "k", lambda: 41 + 1, expire=60) == 42
    assert cache.get("k") == 42
    assert Claims(cache).holder("k") is None
    assert cache.get("k", expire_time=True)[1] is not None


def test_none_is_a_value(cache: Any) -> None:
    calls = []
    for _ in range(3):
        assert dc.get_or_compute(cache, "k", lambda: calls.append(1)) is None
    assert calls == [1]


def test_many_threads_compute_once(cache: Any) -> None:
    def fn() -> str:
        cache.incr("calls")
        time.sleep(0.1)
        return "value"

    results = run_threads(12, lambda i: dc.get_or_compute(cache, "k", fn, ttl=10, wait=10))
    assert results == ["value"] * 12
    assert cache.get("calls") == 1


def test_failure_raises_in_the_winner_and_a_waiter_takes_over(cache: Any) -> None:
    started = threading.Event()

    def fails() -> str:
        cache.incr("calls")
        started.set()
        time.sleep(0.1)
        raise RuntimeError("paid call failed")

    def succeeds() -> str:
        cache.incr("calls")
        return "second try"

    def lane(i: int) -> Any:
        if i == 0:
            return dc.get_or_compute(cache, "k", fails, ttl=30)
        assert started.wait(10)
        begun = time.monotonic()
        value = dc.get_or_compute(cache, "k", succeeds, ttl=30, wait=10)
        return value, time.monotonic() - begun

    results = run_threads(2, lane)
    assert isinstance(results[0], RuntimeError)
    value, waited = results[1]
    assert value == "second try"
    assert waited < 5  # far less than the 30 s TTL: the waiter retried the claim
    assert cache.get("calls") == 2


def test_dead_winner_claim_expires_and_a_waiter_takes_over(cache: Any) -> None:
    # A "dead" winner: took the claim and never came back.
    assert Claims(cache).try_acquire("k", ttl=0.3) is not None
    begun = time.monotonic()
    assert dc.get_or_compute(cache, "k", lambda: "taken over", ttl=5, wait=5) == "taken over"
    assert 0.25 < time.monotonic() - begun < 4


def test_wait_passing_raises_claim_timeout(cache: Any) -> None:
    claim = Claims(cache).try_acquire("k", ttl=30)
    assert claim is not None
    begun = time.monotonic()
    with pytest.raises(dc.ClaimTimeout) as info:
        dc.get_or_compute(cache, "k", lambda: "never", ttl=30, wait=0.2)
    assert isinstance(info.value, TimeoutError)
    assert 0.15 < time.monotonic() - begun < 3
    claim.release()


def test_winner_result_reaches_a_waiter(cache: Any) -> None:
    claim = Claims(cache).try_acquire("k", ttl=30)
    assert claim is not None

    def finish() -> None:
        cache.set("k", "from the winner")
        claim.release()

    threading.Timer(0.1, finish).start()
    assert dc.get_or_compute(cache, "k", lambda: pytest.fail("called"), wait=5) == (
        "from the winner"
    )


def test_decorator(cache: Any) -> None:
    calls: list[int] = []

    @dc.compute_once(cache, ttl=10, expire=60)
    def square(x: int) -> int:
        calls.append(x)
        return x * x

    assert [square(3), square(3), square(4)] == [9, 9, 16]
    assert calls == [3, 4]
    assert cache.get(square.__cache_key__(3)) == 9
    assert square.__wrapped__(5) == 25
