"""Recipes: differential against python-diskcache 5.6.3 where the API is shared, and the
locks' timeouts, owner checks and expiry (D-025), with real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import diskcache_oxide as dco
import pytest

diskcache = pytest.importorskip("diskcache")

pytestmark = pytest.mark.oxide


@pytest.fixture
def cache(tmp_path: Path) -> Any:
    opened = dco.Cache(str(tmp_path / "c"), eviction_policy="none")
    yield opened
    opened.close()


# ----------------------------------------------------------------------------- differential


def test_averager_matches_python_diskcache(tmp_path: Path) -> None:
    results = []
    for module, where in ((dco, "o"), (diskcache, "t")):
        cache = module.Cache(str(tmp_path / where))
        averager = module.Averager(cache, "latency", expire=60, tag="stats")
        seen = [averager.get()]
        for value in (0.1, 0.15, 0.11, 2, -1):
            averager.add(value)
            seen.append(averager.get())
        seen += [averager.pop(), averager.get(), averager.pop()]
        results.append(seen)
    assert results[0] == pytest.approx(results[1])
    assert results[0][-2:] == [None, None]


def test_throttle_matches_python_diskcache(tmp_path: Path) -> None:
    runs = []
    for module, where in ((dco, "o"), (diskcache, "t")):
        # Binary fractions only, so both libraries' float arithmetic stays exact.
        clock = [0.0]
        sleeps: list[float] = []

        def fake_sleep(seconds: float, clock: list[float] = clock, log: Any = sleeps) -> None:
            log.append(round(seconds, 6))
            clock[0] += seconds

        cache = module.Cache(str(tmp_path / where))

        @module.throttle(
            cache, 4, 1, name="t", time_func=lambda clock=clock: clock[0], sleep_func=fake_sleep
        )
        def call() -> int:
            return 1

        total = 0
        for step in range(12):
            total += call()
            clock[0] += 0.125 * (step % 3)
        runs.append((total, sleeps))
    assert runs[0] == runs[1]
    assert runs[0][1], "the rate was exceeded, so some calls slept"


def test_memoize_stampede_matches_python_diskcache(tmp_path: Path) -> None:
    calls: list[int] = []
    keys = []
    for module, where in ((dco, "o"), (diskcache, "t")):
        cache = module.Cache(str(tmp_path / where))

        @module.memoize_stampede(cache, expire=60, name="fib")
        def fib(number: int) -> int:
            calls.append(number)
            return number if number < 2 else fib(number - 1) + fib(number - 2)

        assert fib(20) == 6765
        keys.append(fib.__cache_key__(20))
    assert calls[: len(calls) // 2] == calls[len(calls) // 2 :]
    assert keys[0] == keys[1]


def _most_inside_barrier(module: Any, cache: Any) -> int:
    inside = [0]
    most = [0]

    @module.barrier(cache, module.Lock, name="b")
    def work() -> None:
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.002)
        inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return most[0]


def test_barrier_matches_python_diskcache(tmp_path: Path) -> None:
    for module, where in ((dco, "o"), (diskcache, "t")):
        assert _most_inside_barrier(module, module.Cache(str(tmp_path / where))) == 1


@pytest.mark.parametrize("name", ["Lock", "RLock", "BoundedSemaphore"])
def test_lock_calls_match_python_diskcache(tmp_path: Path, name: str) -> None:
    for module, where in ((dco, "o"), (diskcache, "t")):
        cache = module.Cache(str(tmp_path / where))
        lock = getattr(module, name)(cache, "k")
        lock.acquire()
        lock.release()
        with lock:
            if name == "Lock":
                assert lock.locked()
        if name == "Lock":
            assert not lock.locked()


# ----------------------------------------------------------------------------- memoize_stampede


def test_memoize_stampede_recomputes_early_in_the_background(cache: Any) -> None:
    results = iter(range(100))

    @dco.memoize_stampede(cache, expire=0.5, beta=1000)
    def value() -> int:
        time.sleep(0.01)
        return next(results)

    assert value() == 0
    assert value() == 0  # early: answered from the cache, a thread recomputes
    deadline = time.monotonic() + 5
    while value() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert value() >= 1


def test_memoize_stampede_requires_parentheses(cache: Any) -> None:
    with pytest.raises(TypeError):
        dco.memoize_stampede(cache, 1, name=len)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- locks


def in_thread(call: Any) -> Any:
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(call())
        except Exception as exc:
            result.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return result[0]


@pytest.mark.parametrize("name", ["Lock", "RLock", "BoundedSemaphore"])
def test_blocking_false_and_timeout(cache: Any, name: str) -> None:
    lock = getattr(dco, name)(cache, "k")
    assert lock.acquire(blocking=False) is True
    assert in_thread(lambda: lock.acquire(blocking=False)) is False
    start = time.monotonic()
    assert in_thread(lambda: lock.acquire(timeout=0.2)) is False
    assert 0.15 <= time.monotonic() - start < 2
    lock.release()
    assert in_thread(lambda: lock.acquire(timeout=0.2)) is True


@pytest.mark.parametrize("name", ["Lock", "RLock", "BoundedSemaphore"])
def test_bad_timeouts(cache: Any, name: str) -> None:
    lock = getattr(dco, name)(cache, "k")
    with pytest.raises(ValueError, match="non-blocking"):
        lock.acquire(blocking=False, timeout=1)
    with pytest.raises(ValueError, match="non-negative"):
        lock.acquire(timeout=-2)
    with pytest.raises(ValueError, match="expire"):
        getattr(dco, name)(cache, "k", expire=0)


@pytest.mark.parametrize("name", ["Lock", "RLock", "BoundedSemaphore"])
def test_release_checks_the_owner(cache: Any, name: str) -> None:
    lock = getattr(dco, name)(cache, "k")
    with pytest.raises(RuntimeError, match="not held"):
        lock.release()
    lock.acquire()
    error = in_thread(lock.release)
    assert isinstance(error, RuntimeError)
    lock.release()
    with pytest.raises(RuntimeError, match="cannot release"):
        lock.release()


def test_lock_is_not_reentrant_but_rlock_is(cache: Any) -> None:
    lock = dco.Lock(cache, "plain")
    assert lock.acquire()
    assert lock.acquire(timeout=0.05) is False
    lock.release()
    rlock = dco.RLock(cache, "re")
    for _ in range(3):
        assert rlock.acquire(timeout=0)
    assert in_thread(lambda: rlock.acquire(blocking=False)) is False
    rlock.release()
    rlock.release()
    assert in_thread(lambda: rlock.acquire(blocking=False)) is False
    rlock.release()
    assert len(cache) == 0


def test_expired_lock_is_taken_and_late_release_raises(cache: Any) -> None:
    lock = dco.Lock(cache, "k", expire=0.2)
    assert lock.acquire()
    assert lock.extend() is True
    time.sleep(0.3)
    assert not lock.locked()
    assert in_thread(lambda: lock.acquire(blocking=False)) is True
    with pytest.raises(RuntimeError, match="held by another owner"):
        lock.release()
    assert lock.extend() is False


def test_default_expire_and_none(cache: Any) -> None:
    assert dco.LOCK_EXPIRE == 60.0
    lock = dco.Lock(cache, "k")
    lock.acquire()
    _, expire_time = cache.get("k", expire_time=True)
    assert 55 < expire_time - time.time() <= 60
    lock.release()
    forever = dco.Lock(cache, "k", expire=None)
    forever.acquire()
    assert cache.get("k", expire_time=True)[1] is None
    forever.release()


def test_semaphore_slots_and_per_holder_expiry(cache: Any) -> None:
    semaphore = dco.BoundedSemaphore(cache, "s", value=2, expire=1.0)
    assert semaphore.acquire(blocking=False)
    assert in_thread(lambda: semaphore.acquire(blocking=False)) is True
    assert semaphore.acquire(blocking=False) is False
    time.sleep(0.5)
    semaphore.release()
    assert semaphore.acquire(blocking=False)  # the slot this thread gave back
    time.sleep(0.7)
    # The other thread's slot (1.2 s old) expired; this thread's (0.7 s old) still holds.
    assert in_thread(lambda: semaphore.acquire(blocking=False)) is True
    assert semaphore.acquire(blocking=False) is False
    semaphore.release()
    with pytest.raises(ValueError, match="value"):
        dco.BoundedSemaphore(cache, "s", value=0)


def test_recipes_on_a_fanout_cache(tmp_path: Path) -> None:
    fanout = dco.FanoutCache(str(tmp_path / "f"), shards=3, eviction_policy="none")
    lock = dco.Lock(fanout, "k")
    assert lock.acquire(blocking=False)
    assert in_thread(lambda: lock.acquire(blocking=False)) is False
    lock.release()
    averager = dco.Averager(fanout, "a")
    averager.add(2)
    averager.add(4)
    assert averager.get() == 3
    fanout.close()


# ----------------------------------------------------------------------------- processes

_COUNTER = """
import sys, time
import diskcache_oxide as dco
cache = dco.Cache(sys.argv[1], eviction_policy="none")
lock = dco.Lock(cache, "lock")
for _ in range(int(sys.argv[2])):
    with lock:
        value = cache.get("counter", 0)
        time.sleep(0.0005)
        cache.set("counter", value + 1)
"""

_HOLDER = """
import sys, time
import diskcache_oxide as dco
cache = dco.Cache(sys.argv[1], eviction_policy="none")
assert dco.Lock(cache, "lock", expire=float(sys.argv[2])).acquire(timeout=10)
print("held", flush=True)
time.sleep(60)
"""


@pytest.mark.slow
def test_lock_excludes_across_processes(tmp_path: Path) -> None:
    directory = str(tmp_path / "c")
    dco.Cache(directory, eviction_policy="none").close()
    rounds = 40
    workers = [
        subprocess.Popen([sys.executable, "-c", _COUNTER, directory, str(rounds)]) for _ in range(4)
    ]
    for worker in workers:
        assert worker.wait(timeout=120) == 0
    with dco.Cache(directory) as cache:
        assert cache["counter"] == 4 * rounds
        assert "lock" not in cache


@pytest.mark.slow
def test_lock_of_a_killed_holder_expires(tmp_path: Path) -> None:
    directory = str(tmp_path / "c")
    cache = dco.Cache(directory, eviction_policy="none")
    ttl = 1.0
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, directory, str(ttl)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        taken_at = time.time()
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
        lock = dco.Lock(cache, "lock", expire=ttl)
        assert lock.acquire(blocking=False) is False
        assert lock.acquire(timeout=10) is True
        assert time.time() - taken_at >= ttl * 0.8
        lock.release()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        cache.close()
