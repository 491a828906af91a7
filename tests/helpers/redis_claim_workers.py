"""Process bodies for tests/redis/test_redis_claims.py (spawned, so importable): the Redis
form of outcome_workers.py. Each body waits until ``start_at`` (epoch seconds) so that the
processes call at once, then asks get_or_compute (sync) or aget_or_compute (async) for one
key of a RedisCache with ``outcome=True`` and ``pass_claim=True``; the paid function counts
its calls in the namespace and checks that the claim it was handed is the live claim. Each
returns ``(value, outcome name, token)``, ``token`` the handed claim's (None unless this
caller computed)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

KEY = ("article", 7)
CALLS = "calls"


def ready() -> bool:
    return True


def _open(url: str, namespace: str) -> Any:
    from diskcache_oxide.remote import RedisCache

    cache = RedisCache(url, namespace=namespace)
    cache.get("warm-up")  # connected and the scripts loaded before the race
    return cache


def sync_caller(
    url: str, namespace: str, start_at: float, seconds: float
) -> tuple[Any, str, str | None]:
    from diskcache_oxide import Claim, Claims, get_or_compute

    cache = _open(url, namespace)
    Claims(cache).holder("warm-up")
    handed: list[str] = []

    def paid(article: int, *, claim: Claim) -> str:
        cache.incr(CALLS)
        holder = Claims(cache).holder(KEY)
        assert holder is not None and holder.token == claim.token
        assert claim.held() and claim.extend()
        handed.append(claim.token)
        time.sleep(seconds)
        return f"clean text of {article}"

    time.sleep(max(0.0, start_at - time.time()))
    value, outcome = get_or_compute(cache, KEY, paid, 7, outcome=True, pass_claim=True)
    return value, outcome.value, handed[0] if handed else None


def async_caller(
    url: str, namespace: str, start_at: float, seconds: float
) -> tuple[Any, str, str | None]:
    from diskcache_oxide.aio import AsyncClaim, aget_or_compute, drain_turns

    cache = _open(url, namespace)

    async def main() -> tuple[Any, str, str | None]:
        handed: list[str] = []

        async def paid(article: int, *, claim: AsyncClaim) -> str:
            cache.incr(CALLS)
            assert await claim.held() and await claim.extend()
            handed.append(claim.token)
            await asyncio.sleep(seconds)
            return f"clean text of {article}"

        await asyncio.sleep(max(0.0, start_at - time.time()))
        value, outcome = await aget_or_compute(cache, KEY, paid, 7, outcome=True, pass_claim=True)
        await drain_turns(timeout=30)
        return value, outcome.value, handed[0] if handed else None

    return asyncio.run(main())
