"""Process bodies for tests/payonce/test_pay_once_outcome.py (spawned, so importable).

Each body waits until ``start_at`` (epoch seconds) so that the processes call at once, then
asks get_or_compute for the value of one key with ``outcome=True`` and ``pass_claim=True``;
the paid function counts its calls in the store and checks, from inside, that the claim it
was handed is the live claim on the key. Each returns ``(value, outcome name, token)``,
``token`` being the handed claim's (None unless this caller computed).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from diskcache_oxide import Cache, Claim, Claims, get_or_compute
from diskcache_oxide.aio import AsyncCache, AsyncClaim, aget_or_compute, drain_turns

KEY = ("article", 7)
CALLS = "calls"


def _open(directory: str) -> Cache:
    # The test's cache: a directory, or a Redis URL with its namespace (backends.address).
    if "://" in directory:
        import diskcache_oxide

        return diskcache_oxide.open(directory, eviction_policy="none")  # type: ignore[no-any-return]
    return Cache(directory, eviction_policy="none")


def _sleep_until(start_at: float) -> None:
    time.sleep(max(0.0, start_at - time.time()))


def ready() -> bool:
    return True


def sync_caller(directory: str, start_at: float, seconds: float) -> tuple[Any, str, str | None]:
    cache = _open(directory)
    handed: list[str] = []

    def paid(article: int, *, claim: Claim) -> str:
        cache.incr(CALLS, retry=True)
        holder = Claims(cache).holder(KEY)
        assert holder is not None and holder.token == claim.token
        assert claim.held() and claim.extend()
        handed.append(claim.token)
        time.sleep(seconds)
        return f"clean text of {article}"

    _sleep_until(start_at)
    value, outcome = get_or_compute(cache, KEY, paid, 7, outcome=True, pass_claim=True)
    return value, outcome.value, handed[0] if handed else None


async def _async_callers(
    directory: str, start_at: float, seconds: float, callers: int
) -> list[tuple[Any, str, str | None]]:
    acache = AsyncCache(_open(directory))

    async def one() -> tuple[Any, str, str | None]:
        handed: list[str] = []

        async def paid(article: int, *, claim: AsyncClaim) -> str:
            await acache.incr(CALLS, retry=True)
            holder = await acache.claims().holder(KEY)
            assert holder is not None and holder.token == claim.token
            assert await claim.held() and await claim.extend()
            handed.append(claim.token)
            await asyncio.sleep(seconds)
            return f"clean text of {article}"

        value, outcome = await aget_or_compute(acache, KEY, paid, 7, outcome=True, pass_claim=True)
        return value, outcome.value, handed[0] if handed else None

    await asyncio.sleep(max(0.0, start_at - time.time()))
    results = await asyncio.gather(*(one() for _ in range(callers)))
    await drain_turns(timeout=30)
    return list(results)


def async_callers(
    directory: str, start_at: float, seconds: float, callers: int
) -> list[tuple[Any, str, str | None]]:
    return asyncio.run(_async_callers(directory, start_at, seconds, callers))
