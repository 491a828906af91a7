"""The reader's two lanes (reader/pay.py) in one process, without a browser or a server: the
worker lane skips an article someone else is paying for without waiting, the direct lane
waits for it, a turn longer than its claim's lease is paid once (the heartbeat), and neither
lane gets a DeprecationWarning from the library."""

from __future__ import annotations

import asyncio
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from diskcache_oxide import Claims
from reader import pay
from reader.config import Settings
from reader.feed import Feed
from reader.store import Store

FEED = Feed.load()


@pytest.fixture(autouse=True)
def _no_deprecations() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        yield


def _store(path: Path, delay: float, claim_lease: float = 10.0) -> Store:
    return Store(path, Settings(delay=delay, claim_lease=claim_lease))


def _open(store: Store, article_id: int) -> pay.Opened:
    async def main() -> pay.Opened:
        acache = pay.async_cache(store)
        try:
            return await pay.open_article(store, acache, FEED.articles[article_id - 1])
        finally:
            pay.close_async_cache(acache)

    return asyncio.run(main())


def test_the_worker_lane_pays_once_then_finds_it_cached(tmp_path: Path) -> None:
    store = _store(tmp_path, delay=0)
    try:
        article = FEED.articles[0]
        assert pay.worker_article(store, article) == ("paid", 0.0)
        assert pay.worker_article(store, article) == ("cached", 0.0)
        assert _open(store, article.id).how == "cache"
        [payment] = store.payments()
        assert payment["token"] is not None and pay.holders(store) == {}
    finally:
        store.close()


def test_the_worker_lane_skips_an_article_someone_is_paying_for(tmp_path: Path) -> None:
    store = _store(tmp_path, delay=0, claim_lease=2.0)
    try:
        article = FEED.articles[1]
        claim = Claims(store.cache).try_acquire(pay.key(article.id), lease=30)
        assert claim is not None
        started = time.monotonic()
        assert pay.worker_article(store, article) == ("deferred", 2.0)
        assert time.monotonic() - started < 1.0  # at once, not when the claim ends
        assert store.payments() == [] and pay.holders(store)[article.id].token == claim.token
        claim.release()
        assert pay.worker_article(store, article) == ("paid", 0.0)
    finally:
        store.close()


def test_a_turn_longer_than_its_lease_is_paid_once(tmp_path: Path) -> None:
    """The worker's turn (1.2 s) outlasts its claim's lease (0.4 s); the heartbeat renews the
    claim, so the direct lane, opening the article meanwhile, waits for it instead of paying."""
    store = _store(tmp_path, delay=1.2, claim_lease=0.4)
    try:
        article = FEED.articles[2]
        outcome: list[tuple[str, float]] = []
        worker = threading.Thread(target=lambda: outcome.append(pay.worker_article(store, article)))
        worker.start()
        deadline = time.monotonic() + 10
        while not store.payments() and time.monotonic() < deadline:
            time.sleep(0.02)
        opened = _open(store, article.id)
        worker.join(timeout=10)
        assert outcome == [("paid", 0.0)]
        assert opened.how == "waited" and opened.value["lane"] == "worker"
        assert [p["lane"] for p in store.payments()] == ["worker"]
    finally:
        store.close()


def test_the_direct_lane_pays_then_reads_the_cache(tmp_path: Path) -> None:
    store = _store(tmp_path, delay=0)
    try:
        opened = _open(store, 4)
        assert opened.how == "paid" and opened.value["lane"] == "direct"
        assert _open(store, 4).how == "cache"
        assert pay.worker_article(store, FEED.articles[3]) == ("cached", 0.0)
        assert len(store.payments()) == 1
    finally:
        store.close()


def test_old_setting_names_are_refused() -> None:
    with pytest.raises(ValueError, match="READER_CLAIM_LEASE"):
        Settings.from_env({"READER_CLAIM_TTL": "5"})
    with pytest.raises(ValueError, match="READER_JOB_LEASE"):
        Settings.from_env({"READER_LEASE": "5"})
    settings = Settings.from_env({"READER_CLAIM_LEASE": "2", "READER_WAIT": "7"})
    assert (settings.claim_lease, settings.wait_timeout) == (2.0, 7.0)
    assert Settings.from_env({}).wait_timeout is None
