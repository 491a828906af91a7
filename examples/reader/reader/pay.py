"""Every pay-once call of the reader, in one module.

Both lanes clean an article through the same compute-once on the same key, ``("clean", id)``,
in the shared cache directory: whichever lane comes first takes the claim and pays; the other
waits for the stored result (the direct lane) or leaves the job for later (the worker).

- the direct lane (the web app, asyncio): :func:`open_article`, through
  ``AsyncCache.get_or_compute`` (``diskcache_oxide.aio``), whose turn runs shielded: a reader
  who closes the page cancels the request, not the paid turn, and the result is cached anyway;
- the worker lane (its own process, synchronous): :func:`worker_article`, through
  ``diskcache_oxide.get_or_compute``;
- :func:`cached` and :func:`holder` for the meter; :func:`drain` for the app's shutdown.

Written against diskcache_oxide's pay-once API as it is today; the places where that API made
us work around it are marked ``LIBRARY GAP``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from diskcache_oxide import ClaimInfo, Claims, get_or_compute
from diskcache_oxide.aio import AsyncCache, drain_turns, pending_turns

from . import paid
from .feed import Article
from .store import Store

#: The direct lane's paid steps run here, not in the loop's small default executor, so that
#: many open pages (each a turn sleeping through READER_DELAY) do not queue up behind each
#: other or behind the cache calls.
PAID_POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="reader-paid")


def key(article_id: int) -> tuple[str, int]:
    """The cache key of an article's cleaned text (and of the claim on it)."""
    return ("clean", article_id)


def cached(store: Store, article_id: int) -> dict[str, Any] | None:
    """The cleaned article if it is stored, else None."""
    value: dict[str, Any] | None = store.cache.get(key(article_id), retry=True)
    return value


def holder(store: Store, article_id: int) -> ClaimInfo | None:
    """Who is paying for the article right now (None if nobody is)."""
    # LIBRARY GAP: compute-once has no "is someone computing this key?" call. We rely on an
    # implementation detail, that get_or_compute's claim lives in Claims(cache) (namespace
    # "default") under the same key as the value.
    return Claims(store.cache).holder(key(article_id))


def _pay(store: Store, article: Article, lane: str) -> dict[str, Any]:
    """The paid step, run by whichever caller won the claim (in a thread)."""
    # LIBRARY GAP: the function never sees its claim, so it can neither renew it (no
    # heartbeat: READER_CLAIM_TTL must outlast the slowest turn, LLM call included) nor name
    # it. We look the claim up to record its token in the ledger; while fn runs, the live
    # claim on the key is ours.
    info = holder(store, article.id)
    token = info.token if info is not None and info.pid == os.getpid() else None
    return paid.paid_turn(store, article, lane, token)


@dataclasses.dataclass(frozen=True)
class Opened:
    """What the direct lane got: the cleaned article and how (``cache``: stored already;
    ``paid``: this request's turn paid for it; ``waited``: another caller's turn did)."""

    value: dict[str, Any]
    how: str


def async_cache(store: Store) -> AsyncCache:
    return AsyncCache(store.cache)


async def open_article(store: Store, acache: AsyncCache, article: Article) -> Opened:
    """The direct lane: the stored text at once, else one paid turn across both lanes.

    Cancelling this (the reader closed the page) loses the view, not the work: the turn, once
    started, runs in a shielded task that the library keeps alive until it has stored its
    result.
    """
    value: dict[str, Any] | None = await acache.get(key(article.id), retry=True)
    if value is not None:
        return Opened(value, "cache")
    paid_here = False

    # LIBRARY GAP: AsyncCache.get_or_compute needs a coroutine function (a plain one fails
    # inside the turn with "object dict can't be used in 'await' expression"), takes no
    # arguments (so a closure it is), and does not say whether this caller computed or waited
    # (so a flag).
    async def turn() -> dict[str, Any]:
        nonlocal paid_here
        paid_here = True
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(PAID_POOL, _pay, store, article, "direct")

    settings = store.settings
    # LIBRARY GAP: `ttl` is the claim's lifetime (not the value's, which is `expire`) and
    # `wait` is what the queue calls name `timeout`.
    value = await acache.get_or_compute(
        key(article.id), turn, ttl=settings.claim_ttl, wait=settings.wait
    )
    return Opened(value, "paid" if paid_here else "waited")


def worker_article(store: Store, article: Article) -> tuple[str, float]:
    """The worker lane, for one tapped article: ``("cached", 0)`` if it is stored already,
    ``("paid", 0)`` or ``("waited", 0)`` after the compute-once, or ``("deferred", seconds)``
    if another caller is paying for it right now (give the job back for that long)."""
    if cached(store, article.id) is not None:
        return "cached", 0.0
    # LIBRARY GAP: compute-once has no "skip if someone else is computing it" option; called
    # now, get_or_compute would block this serial worker until the direct lane's turn ends.
    # So we peek at the claim first (racy, but losing the race only means we wait as usual).
    # We defer instead of dropping the job: if that holder dies, the job comes back after its
    # claim expired and is paid for then.
    info = holder(store, article.id)
    if info is not None:
        return "deferred", max(0.2, min(info.expires - time.time(), 2.0))
    paid_here = False

    def turn() -> dict[str, Any]:
        nonlocal paid_here
        paid_here = True
        return _pay(store, article, "worker")

    settings = store.settings
    # LIBRARY GAP: the sync side has only the free function; Cache has no get_or_compute
    # method (AsyncCache has one), so the two lanes are spelled differently.
    get_or_compute(store.cache, key(article.id), turn, ttl=settings.claim_ttl, wait=settings.wait)
    return ("paid" if paid_here else "waited"), 0.0


async def drain(timeout: float | None) -> int:
    """Let the running loop's paid turns finish; returns how many were still running after."""
    # LIBRARY GAP: nothing drains the turns unless the app remembers to: without this in the
    # ASGI lifespan, a server stopped mid-turn cancels the turn and the payment is lost.
    await drain_turns(timeout)
    return pending_turns()
