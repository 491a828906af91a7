"""What get_or_compute says it did (outcome=True) and the claim it hands fn (pass_claim=True),
sync and async, in one process and across processes, on the real engine (D-052)."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
from typing import Any

import outcome_workers as ow
import pytest
from backends import address
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

#: The conformance suite: each test with a cache runs on a directory, a Redis server and a
#: cluster (claims.backend_of gives RedisClaims there).
pytestmark = [pytest.mark.oxide, pytest.mark.backends]

dc = pytest.importorskip("diskcache_oxide")
from diskcache_oxide import COMPUTING, Claim, Claims, NullCache, Outcome  # noqa: E402
from diskcache_oxide.aio import (  # noqa: E402
    AsyncCache,
    AsyncClaim,
    acompute_once,
    aget_or_compute,
    drain_turns,
)

SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture
def cache(make_cache: Any) -> Any:
    """The cache under test: a directory, a Redis server's namespace or a cluster's (the
    conformance suite runs this module on each)."""
    return make_cache("c", eviction_policy="none")


# ---- sync, one process ------------------------------------------------------------------------


def test_the_plain_call_still_returns_the_bare_value(cache: Any) -> None:
    assert dc.get_or_compute(cache, "k", lambda: 42) == 42
    assert cache.get_or_compute("k", lambda: 0) == 42


def test_computed_then_cached(cache: Any) -> None:
    assert cache.get_or_compute("k", lambda: 42, outcome=True) == (42, Outcome.COMPUTED)
    assert cache.get_or_compute("k", lambda: 0, outcome=True) == (42, Outcome.CACHED)
    assert dc.get_or_compute(cache, "k", lambda: 0, outcome=True) == (42, Outcome.CACHED)


def test_waited_for_the_holder_that_stores_the_value(cache: Any) -> None:
    claim = Claims(cache).try_acquire("k", lease=30)
    assert claim is not None

    def holder_finishes() -> None:
        time.sleep(0.2)
        cache.set("k", "theirs")
        claim.release()

    threading.Thread(target=holder_finishes).start()
    assert cache.get_or_compute("k", lambda: "mine", outcome=True) == ("theirs", Outcome.WAITED)


def test_a_waiter_whose_holder_gives_up_computes(cache: Any) -> None:
    claim = Claims(cache).try_acquire("k", lease=30)
    assert claim is not None
    threading.Timer(0.2, claim.release).start()  # released with no value: it failed
    assert cache.get_or_compute("k", lambda: "mine", outcome=True) == ("mine", Outcome.COMPUTED)


def test_skipped_while_another_computes(cache: Any) -> None:
    claim = Claims(cache).try_acquire("k", lease=30)
    assert claim is not None
    got = cache.get_or_compute("k", lambda: 1, if_computing="skip", outcome=True)
    assert got == (COMPUTING, Outcome.SKIPPED)
    assert cache.get_or_compute("k", lambda: 1, if_computing="skip") is COMPUTING
    claim.release()


def test_fn_is_handed_its_live_claim(cache: Any) -> None:
    seen: list[Claim] = []

    def paid(n: int, *, claim: Claim) -> int:
        holder = Claims(cache).holder("k")
        assert holder is not None and holder.token == claim.token
        assert claim.key == "k" and claim.lease == 5.0
        assert claim.held() and claim.extend() and claim.extend(lease=7)
        seen.append(claim)
        return n * 2

    assert cache.get_or_compute("k", paid, 21, lease=5, pass_claim=True) == 42
    [claim] = seen
    assert not claim.held() and Claims(cache).holder("k") is None  # released after the store
    assert cache.get_or_compute("k", paid, 0, pass_claim=True) == 42  # a hit: not called
    assert len(seen) == 1


def test_a_function_without_claim_is_not_handed_one(cache: Any) -> None:
    with pytest.raises(TypeError, match="claim"):
        cache.get_or_compute("k", lambda: 1, pass_claim=True)
    assert Claims(cache).holder("k") is None and "k" not in cache


def test_compute_once_hands_the_claim_outside_the_key(cache: Any) -> None:
    tokens: list[str] = []

    @dc.compute_once(cache, name="double", pass_claim=True)
    def double(n: int, *, claim: Claim) -> int:
        tokens.append(claim.token)
        return n * 2

    assert double(4) == 8 and double(4) == 8
    assert len(tokens) == 1
    assert double.__cache_key__(4) == ("double", 4, None)


def test_a_null_cache_computes_every_time() -> None:
    null = NullCache()
    assert null.get_or_compute("k", lambda: 1, outcome=True) == (1, Outcome.COMPUTED)
    assert null.get_or_compute("k", lambda *, claim: claim, pass_claim=True) is None


@hsettings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["call", "delete", "set"]), st.integers(0, 3))))
def test_outcome_says_whether_fn_ran(tmp_path_factory: Any, steps: list[tuple[str, int]]) -> None:
    """Across any sequence of stores, deletes and calls on a few keys: a call reports CACHED
    exactly when the key held a value, and then returns it without calling fn; otherwise it
    reports COMPUTED, having called fn once."""
    with dc.Cache(str(tmp_path_factory.mktemp("h")), eviction_policy="none") as c:
        model: dict[int, int] = {}
        for step, (op, key) in enumerate(steps):
            if op == "set":
                c.set(key, -step)
                model[key] = -step
            elif op == "delete":
                c.delete(key)
                model.pop(key, None)
            else:
                calls: list[int] = []

                def fn(s: int = step, called: list[int] = calls) -> int:
                    called.append(s)
                    return s

                value, outcome = c.get_or_compute(key, fn, outcome=True)
                if key in model:
                    assert (value, outcome, calls) == (model[key], Outcome.CACHED, [])
                else:
                    assert (value, outcome, calls) == (step, Outcome.COMPUTED, [step])
                    model[key] = step


# ---- async, one process -----------------------------------------------------------------------


def test_async_outcomes_and_claims(cache: Any) -> None:
    async def main() -> None:
        acache = AsyncCache(cache)
        handed: list[Any] = []

        async def coroutine(*, claim: AsyncClaim) -> str:
            assert isinstance(claim, AsyncClaim)
            assert await claim.held() and await claim.extend()
            handed.append(claim)
            await asyncio.sleep(0.2)
            return "async"

        def plain(*, claim: Claim) -> str:
            assert isinstance(claim, Claim) and claim.held()
            handed.append(claim)
            return "plain"

        first, second = await asyncio.gather(
            aget_or_compute(acache, "a", coroutine, outcome=True, pass_claim=True),
            acache.get_or_compute("a", coroutine, outcome=True, pass_claim=True),
        )
        assert sorted([first[1], second[1]], key=str) == [Outcome.COMPUTED, Outcome.WAITED]
        assert first[0] == second[0] == "async"
        assert await acache.get_or_compute("a", coroutine, outcome=True) == (
            "async",
            Outcome.CACHED,
        )
        assert await acache.get_or_compute("p", plain, outcome=True, pass_claim=True) == (
            "plain",
            Outcome.COMPUTED,
        )
        assert await acache.get_or_compute("p", plain) == "plain"
        assert len(handed) == 2
        async with await acache.claims().hold("b", lease=30):
            skipped = await aget_or_compute(acache, "b", plain, if_computing="skip", outcome=True)
        assert skipped == (COMPUTING, Outcome.SKIPPED)

    asyncio.run(main())


def test_a_cancelled_callers_turn_is_cached_and_reported_as_such(cache: Any) -> None:
    async def main() -> None:
        acache = AsyncCache(cache)
        started = asyncio.Event()
        tokens: list[str] = []

        async def slow(*, claim: AsyncClaim) -> str:
            tokens.append(claim.token)
            started.set()
            await asyncio.sleep(0.3)
            return "paid"

        caller = asyncio.ensure_future(acache.get_or_compute("k", slow, pass_claim=True))
        await started.wait()
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        await drain_turns(timeout=10)
        assert await acache.get_or_compute("k", slow, outcome=True) == ("paid", Outcome.CACHED)
        assert len(tokens) == 1

    asyncio.run(main())


def test_acompute_once_hands_an_async_claim(cache: Any) -> None:
    async def main() -> None:
        held: list[bool] = []

        @acompute_once(cache, name="once", pass_claim=True)
        async def once(n: int, *, claim: AsyncClaim) -> int:
            held.append(await claim.held())
            return n + 1

        assert await once(1) == 2 and await once(1) == 2
        assert held == [True]

    asyncio.run(main())


# ---- across processes -------------------------------------------------------------------------


def _check_one_computed(results: list[tuple[Any, str, str | None]], cache: Any) -> None:
    outcomes = sorted(outcome for _value, outcome, _token in results)
    assert outcomes == ["computed"] + ["waited"] * (len(results) - 1)
    assert {value for value, _outcome, _token in results} == {"clean text of 7"}
    [token] = [token for _value, outcome, token in results if outcome == "computed"]
    assert token is not None and len(token) == 32
    assert cache.get(ow.CALLS) == 1
    assert cache.get(ow.KEY) == "clean text of 7"


@pytest.mark.slow
def test_across_processes_one_computes_and_the_others_wait(cache: Any) -> None:
    with SPAWN.Pool(3) as pool:
        for _ in range(3):  # the workers are up before the clock starts
            pool.apply(ow.ready)
        start_at = time.time() + 1.0
        pending = [
            pool.apply_async(ow.sync_caller, (address(cache), start_at, 0.6)) for _ in range(3)
        ]
        results = [p.get(timeout=60) for p in pending]
    _check_one_computed(results, cache)
    assert cache.get_or_compute(ow.KEY, lambda: 0, outcome=True)[1] is Outcome.CACHED


@pytest.mark.slow
def test_across_processes_async_and_sync_callers_share_one_computation(cache: Any) -> None:
    with SPAWN.Pool(2) as pool:
        pool.apply(ow.ready)
        pool.apply(ow.ready)
        start_at = time.time() + 1.0
        many = pool.apply_async(ow.async_callers, (address(cache), start_at, 0.6, 3))
        one = pool.apply_async(ow.sync_caller, (address(cache), start_at, 0.6))
        results = [*many.get(timeout=60), one.get(timeout=60)]
    _check_one_computed(results, cache)
