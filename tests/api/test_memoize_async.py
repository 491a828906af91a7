"""``memoize`` on an ``async def`` (issue 33, point 3): the decorator returns a coroutine
function that awaits the wrapped one and stores its result, with the cache's calls run in a
worker thread so the event loop is never blocked on disk or network. python-diskcache caches
the coroutine object instead (its issue #356); ours used to refuse to store it.

On every backend of the conformance suite, and across two processes."""

from __future__ import annotations

import asyncio
import inspect
import multiprocessing
import threading
from typing import Any

import diskcache_oxide
import pytest
from backends import address
from diskcache_oxide import NullCache, memoize_stampede
from diskcache_oxide._keying import memoize_on

pytestmark = pytest.mark.backends


def test_an_async_function_is_memoized_as_one(cache: Any) -> None:
    calls: list[int] = []

    @cache.memoize(expire=60)
    async def fetch(x: int) -> dict[str, int]:
        """Fetch x."""
        calls.append(x)
        await asyncio.sleep(0)
        return {"x": x}

    assert inspect.iscoroutinefunction(fetch)
    assert fetch.__name__ == "fetch" and fetch.__doc__ == "Fetch x."
    assert asyncio.run(fetch(1)) == {"x": 1}
    assert asyncio.run(fetch(1)) == {"x": 1}
    assert asyncio.run(fetch(2)) == {"x": 2}
    assert calls == [1, 2]
    # the stored value is the result, under the key __cache_key__ names
    assert cache[fetch.__cache_key__(1)] == {"x": 1}
    assert fetch.__cache_key__(1)[0].endswith(
        "test_an_async_function_is_memoized_as_one.<locals>.fetch"
    )


def test_many_calls_from_one_loop_each_get_their_result(cache: Any) -> None:
    @cache.memoize()
    async def square(x: int) -> int:
        await asyncio.sleep(0.001)
        return x * x

    async def main() -> list[int]:
        return await asyncio.gather(*(square(i % 7) for i in range(40)))

    assert asyncio.run(main()) == [(i % 7) ** 2 for i in range(40)]
    assert all(cache[square.__cache_key__(i)] == i * i for i in range(7))


def test_an_exception_is_raised_and_nothing_stored(cache: Any) -> None:
    @cache.memoize()
    async def fails(x: int) -> int:
        raise ValueError(f"no {x}")

    with pytest.raises(ValueError, match="no 3"):
        asyncio.run(fails(3))
    assert fails.__cache_key__(3) not in cache


def test_expire_zero_or_less_only_looks_up(cache: Any) -> None:
    calls: list[int] = []

    @cache.memoize(expire=0)
    async def f(x: int) -> int:
        calls.append(x)
        return x

    assert asyncio.run(f(1)) == 1
    assert asyncio.run(f(1)) == 1
    assert calls == [1, 1]
    cache.set(f.__cache_key__(5), "stored")
    assert asyncio.run(f(5)) == "stored"


def test_memoize_stampede_on_an_async_function(cache: Any) -> None:
    calls: list[int] = []

    @memoize_stampede(cache, expire=60)
    async def slow(x: int) -> int:
        calls.append(x)
        await asyncio.sleep(0)
        return x + 1

    assert inspect.iscoroutinefunction(slow)
    assert asyncio.run(slow(1)) == 2
    assert asyncio.run(slow(1)) == 2
    assert calls == [1]


def test_memoize_stampede_recomputes_early_in_a_task(cache: Any) -> None:
    calls: list[int] = []

    # beta this large recomputes on every hit: the hit returns the old result at once and a
    # task stores the new one.
    @memoize_stampede(cache, expire=60, beta=1e9)
    async def counter(x: int) -> int:
        calls.append(x)
        await asyncio.sleep(0.001)
        return len(calls)

    async def main() -> tuple[int, int]:
        first = await counter(0)
        second = await counter(0)
        for _ in range(200):
            await asyncio.sleep(0.005)
            if len(calls) == 2 and cache[counter.__cache_key__(0)][0] == 2:
                break
        return first, second

    assert asyncio.run(main()) == (1, 1)
    assert cache[counter.__cache_key__(0)][0] == 2


def test_the_cache_is_called_off_the_event_loop(cache: Any) -> None:
    loop_threads: list[int] = []
    cache_threads: list[int] = []

    class Watched:
        """The cache, noting which thread each call comes from."""

        def get(self, *args: Any, **kwargs: Any) -> Any:
            cache_threads.append(threading.get_ident())
            return cache.get(*args, **kwargs)

        def set(self, *args: Any, **kwargs: Any) -> Any:
            cache_threads.append(threading.get_ident())
            return cache.set(*args, **kwargs)

    @memoize_on(Watched(), None, False, None, None, ())
    async def f(x: int) -> int:
        loop_threads.append(threading.get_ident())
        return x

    assert asyncio.run(f(1)) == 1
    assert len(cache_threads) == 2 and loop_threads
    assert loop_threads[0] not in cache_threads


def test_null_cache_memoize_awaits_the_function_every_time() -> None:
    calls: list[int] = []

    @NullCache().memoize()
    async def f(x: int) -> int:
        calls.append(x)
        return x

    assert inspect.iscoroutinefunction(f)
    assert asyncio.run(f(1)) == 1
    assert asyncio.run(f(1)) == 1
    assert calls == [1, 1]


def test_a_fanout_cache_memoizes_an_async_function(tmp_path: Any) -> None:
    with diskcache_oxide.FanoutCache(str(tmp_path / "f"), shards=4) as fanout:

        @fanout.memoize()
        async def f(x: int) -> int:
            return x * 3

        assert asyncio.run(f(4)) == 12
        assert fanout[f.__cache_key__(4)] == 12


def _worker(address: str, start: Any, results: Any) -> None:
    cache = diskcache_oxide.open(address)
    ran: list[int] = []

    @cache.memoize(name="shared")
    async def compute(x: int) -> str:
        ran.append(x)
        await asyncio.sleep(0.001)
        return f"value {x}"

    async def main() -> list[str]:
        return await asyncio.gather(*(compute(i) for i in range(20)))

    start.wait(30)
    got = asyncio.run(main())
    cache.close()
    results.put((got, ran))


def test_two_processes_share_the_results(cache: Any) -> None:
    where = address(cache)
    spawn = multiprocessing.get_context("spawn")
    start = spawn.Barrier(2)
    results = spawn.Queue()
    workers = [spawn.Process(target=_worker, args=(where, start, results)) for _ in range(2)]
    for worker in workers:
        worker.start()
    reports = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(30)
    expected = [f"value {i}" for i in range(20)]
    assert all(got == expected for got, _ in reports)
    ran: list[int] = []

    @cache.memoize(name="shared")
    async def compute(x: int) -> str:
        ran.append(x)
        return "recomputed"

    # every result is stored, whichever process computed it, and a third caller computes nothing
    assert all(cache[compute.__cache_key__(i)] == f"value {i}" for i in range(20))
    assert asyncio.run(compute(7)) == "value 7"
    assert ran == []
