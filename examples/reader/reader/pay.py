"""Every pay-once call of the reader, in one module.

Both lanes clean an article through the same compute-once on the same key, ``("clean", id)``,
in the shared cache directory: whichever lane comes first takes the claim and pays; the other
waits for the stored result (the direct lane) or leaves the article to whoever is paying for
it (the worker).

- the direct lane (the web app, asyncio): :func:`open_article`, through
  ``AsyncCache.get_or_compute``, whose turn runs shielded: a reader who closes the page
  cancels the request, not the paid turn, and the result is cached anyway. The paid step is a
  plain function, run in the cache's executor (:func:`async_cache` gives it one of its own);
- the worker lane (its own process, synchronous): :func:`worker_article`, through
  ``Cache.get_or_compute(..., if_computing="skip")``;
- :func:`cached` and :func:`holders` for the meter. The app's lifespan enters
  ``diskcache_oxide.aio.turns_lifespan``, which finishes the running turns before the server
  exits.

While a paid step runs, the library's heartbeat renews its claim, so the claim's lease
(``READER_CLAIM_LEASE``) only bounds how long a crashed holder blocks an article, however
long the step takes. Both lanes ask ``get_or_compute`` for its ``outcome`` (cached, computed
here, waited for, skipped) and have it hand the paid step its claim (``pass_claim``), whose
token goes into the ledger.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from diskcache_oxide import Claim, ClaimInfo, Claims, Outcome
from diskcache_oxide.aio import AsyncCache

from . import paid
from .feed import Article
from .store import Store

#: Threads of the direct lane's executor: its cache calls and its paid steps (each one
#: sleeping through READER_DELAY) run there, so that many open pages do not queue up behind
#: each other in the loop's small default executor.
DIRECT_THREADS = 16


def key(article_id: int) -> tuple[str, int]:
    """The cache key of an article's cleaned text (and of the claim on it)."""
    return ("clean", article_id)


def cached(store: Store, article_id: int) -> dict[str, Any] | None:
    """The cleaned article if it is stored, else None."""
    value: dict[str, Any] | None = store.cache.get(key(article_id), retry=True)
    return value


def holders(store: Store) -> dict[int, ClaimInfo]:
    """The articles being paid for right now, and who holds each one's claim."""
    found: dict[int, ClaimInfo] = {}
    for claimed, info in Claims(store.cache).list():
        if isinstance(claimed, tuple) and len(claimed) == 2 and claimed[0] == "clean":
            found[claimed[1]] = info
    return found


def _pay(store: Store, article: Article, lane: str, *, claim: Claim) -> dict[str, Any]:
    """The paid step, run by whichever caller won the claim (in a thread); the ledger records
    the claim's token, by which the meter tells a running turn from a lost one."""
    return paid.paid_turn(store, article, lane, claim.token)


#: How each lane names what ``get_or_compute`` did.
_DIRECT = {Outcome.CACHED: "cache", Outcome.COMPUTED: "paid", Outcome.WAITED: "waited"}
_WORKER = {Outcome.CACHED: "cached", Outcome.COMPUTED: "paid", Outcome.WAITED: "cached"}


@dataclasses.dataclass(frozen=True)
class Opened:
    """What the direct lane got: the cleaned article and how (``cache``: stored already;
    ``paid``: this request's turn paid for it; ``waited``: another caller's turn did)."""

    value: dict[str, Any]
    how: str


def async_cache(store: Store) -> AsyncCache:
    """The direct lane's face of the cache, with an executor of its own (``DIRECT_THREADS``);
    :func:`close_async_cache` shuts it down."""
    pool = ThreadPoolExecutor(max_workers=DIRECT_THREADS, thread_name_prefix="reader-direct")
    return AsyncCache(store.cache, executor=pool)


def close_async_cache(acache: AsyncCache) -> None:
    if isinstance(acache.executor, ThreadPoolExecutor):
        acache.executor.shutdown(wait=False)


async def open_article(store: Store, acache: AsyncCache, article: Article) -> Opened:
    """The direct lane: the stored text at once, else one paid turn across both lanes.

    Cancelling this (the reader closed the page) loses the view, not the work: the turn, once
    started, runs in a shielded task that the library keeps alive until it has stored its
    result.
    """
    settings = store.settings
    value, outcome = await acache.get_or_compute(
        key(article.id),
        _pay,
        store,
        article,
        "direct",
        lease=settings.claim_lease,
        timeout=settings.wait_timeout,
        outcome=True,
        pass_claim=True,
    )
    return Opened(value, _DIRECT[outcome])


def worker_article(store: Store, article: Article) -> tuple[str, float]:
    """The worker lane, for one tapped article: ``("cached", 0)`` if it is stored (already,
    or by the time the claim was ours), ``("paid", 0)`` after paying for it, or
    ``("deferred", seconds)`` if another caller is paying for it right now: the worker does
    not wait for it, and gives the job back for that long."""
    settings = store.settings
    _value, outcome = store.cache.get_or_compute(
        key(article.id),
        _pay,
        store,
        article,
        "worker",
        lease=settings.claim_lease,
        if_computing="skip",
        outcome=True,
        pass_claim=True,
    )
    if outcome is Outcome.SKIPPED:
        # Given back rather than finished: if that caller's turn fails or its process dies,
        # the tap is still honoured. One claim lease from now, the article is cached, still
        # being paid for (deferred again), or free because its holder died (paid then).
        return "deferred", settings.claim_lease
    return _WORKER[outcome], 0.0
