"""get_or_compute / compute_once: one computation across threads; waiters, failures, death."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

#: The conformance suite: each test with a cache runs on a directory, a Redis server and a
#: cluster (claims.backend_of gives RedisClaims there).
pytestmark = [pytest.mark.oxide, pytest.mark.backends]

dc = pytest.importorskip("diskcache_oxide")
from diskcache_oxide.claims import Claims  # noqa: E402


@pytest.fixture
def cache(make_cache: Any) -> Any:
    """The cache under test: a directory, a Redis server's namespace or a cluster's (the
    conformance suite runs this module on each)."""
    return make_cache("c", eviction_policy="none")


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

    results = run_threads(12, lambda i: dc.get_or_compute(cache, "k", fn, lease=10, timeout=10))
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
            return dc.get_or_compute(cache, "k", fails, lease=30)
        assert started.wait(10)
        begun = time.monotonic()
        value = dc.get_or_compute(cache, "k", succeeds, lease=30, timeout=10)
        return value, time.monotonic() - begun

    results = run_threads(2, lane)
    assert isinstance(results[0], RuntimeError)
    value, waited = results[1]
    assert value == "second try"
    assert waited < 5  # far less than the 30 s TTL: the waiter retried the claim
    assert cache.get("calls") == 2


def test_dead_winner_claim_expires_and_a_waiter_takes_over(cache: Any) -> None:
    # A "dead" winner: took the claim and never came back.
    assert Claims(cache).try_acquire("k", lease=0.3) is not None
    begun = time.monotonic()
    assert dc.get_or_compute(cache, "k", lambda: "taken over", lease=5, timeout=5) == "taken over"
    assert 0.25 < time.monotonic() - begun < 4


def test_wait_passing_raises_claim_timeout(cache: Any) -> None:
    claim = Claims(cache).try_acquire("k", lease=30)
    assert claim is not None
    begun = time.monotonic()
    with pytest.raises(dc.ClaimTimeout) as info:
        dc.get_or_compute(cache, "k", lambda: "never", lease=30, timeout=0.2)
    assert isinstance(info.value, TimeoutError)
    assert 0.15 < time.monotonic() - begun < 3
    claim.release()


def test_winner_result_reaches_a_waiter(cache: Any) -> None:
    claim = Claims(cache).try_acquire("k", lease=30)
    assert claim is not None

    def finish() -> None:
        cache.set("k", "from the winner")
        claim.release()

    threading.Timer(0.1, finish).start()
    assert dc.get_or_compute(cache, "k", lambda: pytest.fail("called"), timeout=5) == (
        "from the winner"
    )


def test_decorator(cache: Any) -> None:
    calls: list[int] = []

    @dc.compute_once(cache, lease=10, expire=60)
    def square(x: int) -> int:
        calls.append(x)
        return x * x

    assert [square(3), square(3), square(4)] == [9, 9, 16]
    assert calls == [3, 4]
    assert cache.get(square.__cache_key__(3)) == 9
    assert square.__wrapped__(5) == 25


def test_the_heartbeat_keeps_a_short_lease_alive_while_fn_runs(cache: Any) -> None:
    claims = Claims(cache)
    seen: list[Any] = []

    def slow() -> str:
        # Three leases long: without renewal, the claim would run out twice meanwhile.
        for _ in range(9):
            time.sleep(0.1)
            seen.append(claims.try_acquire("k", lease=5))
        return "done"

    assert cache.get_or_compute("k", slow, lease=0.3) == "done"
    assert seen == [None] * 9, "nobody could take the claim while its holder was computing"
    assert claims.holder("k") is None, "released once the value was stored"


def test_cache_get_or_compute_passes_arguments_to_fn(cache: Any) -> None:
    def add(a: int, b: int, *, scale: int = 1) -> int:
        return (a + b) * scale

    assert cache.get_or_compute(("sum", 2, 3), add, 2, 3, scale=10, expire=60) == 50
    assert cache.get(("sum", 2, 3)) == 50


def test_a_wrong_kind_of_callable_gets_a_clear_error(cache: Any) -> None:
    async def coroutine_function() -> int:
        return 1

    with pytest.raises(TypeError, match="must be a callable"):
        cache.get_or_compute("k", 42)
    with pytest.raises(TypeError, match="coroutine function"):
        cache.get_or_compute("k", coroutine_function)
    with pytest.raises(TypeError, match="returned an awaitable"):
        cache.get_or_compute("k", lambda: coroutine_function())
    assert Claims(cache).holder("k") is None, "a failed turn releases its claim"


def test_skip_returns_at_once_while_another_caller_computes(cache: Any) -> None:
    claim = Claims(cache).try_acquire("k", lease=30)
    assert claim is not None
    started = time.monotonic()
    got = cache.get_or_compute("k", lambda: pytest.fail("computed twice"), if_computing="skip")
    assert got is dc.COMPUTING
    assert time.monotonic() - started < 5
    claim.release()
    assert cache.get_or_compute("k", lambda: "mine", if_computing="skip") == "mine"


def test_a_waiter_wakes_when_the_value_is_stored(cache: Any) -> None:
    claim = Claims(cache).try_acquire("k", lease=30)
    assert claim is not None

    def store() -> None:
        cache.set("k", "stored elsewhere")
        claim.release()

    storer = threading.Timer(0.2, store)
    storer.start()
    started = time.monotonic()
    assert cache.get_or_compute("k", lambda: pytest.fail("computed twice")) == "stored elsewhere"
    storer.join()
    assert time.monotonic() - started < 5, "woken by the store, not by the 30 s lease"


_MODULE = """
import sys
import diskcache_oxide as dc

cache = dc.Cache(sys.argv[1])

@dc.compute_once(cache)
def summarize(article):
    return f"summary of {article}"

if __name__ == "__main__":
    print(repr(summarize.__cache_key__(7)))
"""


def test_compute_once_keys_are_the_same_run_as_main_or_imported(tmp_path: Any) -> None:
    import subprocess
    import sys

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "lanes.py").write_text(_MODULE)
    directory = str(tmp_path / "cache")
    run_as_main = subprocess.run(
        [sys.executable, "-m", "pkg.lanes", directory],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    imported = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.argv = ['x', sys.argv[1]]; import pkg.lanes as m; "
            "print(repr(m.summarize.__cache_key__(7)))",
            directory,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert run_as_main == imported == "('pkg.lanes.summarize', 7, None)"
    by_path = subprocess.run(
        [sys.executable, str(tmp_path / "pkg" / "lanes.py"), directory],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert by_path.returncode != 0
    assert "pass name='...' to compute_once" in by_path.stderr


def test_bad_options_are_refused_before_anything_is_claimed(cache: Any) -> None:
    with pytest.raises(ValueError, match="if_computing must be 'wait' or 'skip'"):
        cache.get_or_compute("k", lambda: 1, if_computing="never")
    with pytest.raises(ValueError, match="lease must be a finite number of seconds > 0"):
        cache.get_or_compute("k", lambda: 1, lease=0)
    with pytest.raises(TypeError, match="timeout must be a number of seconds"):
        cache.get_or_compute("k", lambda: 1, timeout="soon")
    assert Claims(cache).holder("k") is None and "k" not in cache
