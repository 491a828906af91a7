"""The reader app in a real headless Chromium: taps, closed pages, two lanes, a killed worker.

Each test starts the web app and, where it says so, worker processes on a directory of its
own (tests/reader/conftest.py), with short delays and leases so that the races happen within
seconds. The claims' leases are shorter than the paid steps: the library's heartbeat renews
a claim while its step runs.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from reader_harness import READER_ROOT, FakeLLM, wait_for

pytestmark = pytest.mark.slow

By: Any = None


def by() -> Any:
    global By
    if By is None:
        from selenium.webdriver.common.by import By as _By

        By = _By
    return By


def tap(page: Any, article_id: int) -> int:
    """Press the card's Queue button; returns the job id the app answered with."""
    button = page.find_element(by().ID, f"queue-{article_id}")
    # Into the middle of the window, clear of the sticky header with the meter.
    page.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
    button.click()
    wait_for(f"the tap on article {article_id}", lambda: button.text == "Queued", timeout=10)
    return int(button.get_attribute("data-job"))


def article_text(page: Any) -> list[str]:
    return [p.text for p in page.find_elements(by().CSS_SELECTOR, "#text p, #text h2")]


def wait_for_text(page: Any, timeout: float = 20.0) -> Any:
    article = page.find_element(by().ID, "article")
    wait_for(
        "the article's text",
        lambda: article.get_attribute("data-pending") == "no",
        timeout=timeout,
    )
    return article


def test_only_taps_enter_the_queue_and_the_worker_takes_them_oldest_first(
    page: Any, reader: Any
) -> None:
    """Tap 10 cards, browse (open three articles, one of them tapped), then start the worker:
    it takes exactly the 10 tapped jobs, in tap order, skips the one the direct lane cached,
    and takes nothing else."""
    run = reader(delay=0.2, worker=False)
    page.get(run.url)
    tapped = [7, 3, 12, 25, 1, 18, 30, 9, 14, 21]
    jobs = [tap(page, article_id) for article_id in tapped]
    assert jobs == sorted(jobs) and len(set(jobs)) == 10
    again = page.execute_script(  # a second tap on a waiting article adds nothing
        "return fetch('/tap/3', {method: 'POST', headers: {Accept: 'application/json'}})"
        ".then(r => r.json())"
    )
    assert again == {"job": jobs[1], "article": 3}

    browsed = [5, 14, 27]
    for article_id in browsed:
        page.get(f"{run.url}article/{article_id}")
        wait_for_text(page)
    page.get(run.url)
    counts = run.store.jobs.counts()
    assert (counts.ready, counts.scheduled, counts.leased, counts.dead) == (10, 0, 0, 0)

    run.start_worker()
    wait_for("the worker to finish 10 jobs", lambda: len(run.events("done")) >= 10)
    time.sleep(3 * run.settings.poll)  # it would have taken anything else by now
    takes = run.events("take")
    assert [t["article"] for t in takes] == tapped
    assert [t["job"] for t in takes] == jobs
    outcomes = {d["article"]: d["outcome"] for d in run.events("done")}
    assert outcomes == {a: "cached" if a == 14 else "paid" for a in tapped}
    assert len(run.events("tap")) == 11

    worker_paid = [p["article"] for p in run.payments() if p["lane"] == "worker"]
    direct_paid = [p["article"] for p in run.payments() if p["lane"] == "direct"]
    assert worker_paid == [a for a in tapped if a != 14]
    assert direct_paid == browsed
    counts = run.store.jobs.counts()
    assert (counts.ready, counts.scheduled, counts.leased, counts.dead) == (0, 0, 0, 0)
    meter = run.meter()
    assert (meter["paid"], meter["cached"], meter["lost"]) == (12, 12, 0)


def test_closing_the_page_loses_the_view_not_the_work(page: Any, reader: Any) -> None:
    """Open 20 articles and close each page as soon as its paid turn has started (half by
    navigating away, half by closing the tab): 20 paid, 20 cached, 0 lost."""
    run = reader(delay=2.0, worker=False)
    page.get(run.url)
    feed = page.current_window_handle
    closed_at: dict[int, float] = {}
    for article_id in range(1, 21):

        def started(article_id: int = article_id) -> bool:
            return any(p["article"] == article_id for p in run.payments())

        if article_id % 2:
            page.get(f"{run.url}article/{article_id}")
            wait_for(f"the turn of article {article_id}", started, timeout=10, every=0.02)
            page.get(run.url)  # navigate away
        else:
            page.switch_to.new_window("tab")
            page.get(f"{run.url}article/{article_id}")
            wait_for(f"the turn of article {article_id}", started, timeout=10, every=0.02)
            page.close()  # close the tab
            page.switch_to.window(feed)
        closed_at[article_id] = time.time()

    wait_for("every view to be lost", lambda: len(run.events("view-lost")) == 20, timeout=10)
    wait_for("every turn to end", lambda: run.meter()["running"] == 0, timeout=20)
    meter = run.meter()
    payments = {p["article"]: p for p in run.payments()}
    # Each page was gone well before its turn could end: within a fraction of the turn.
    fractions = [(closed_at[a] - payments[a]["at"]) / run.settings.delay for a in range(1, 21)]
    assert max(fractions) < 0.6, fractions
    assert sorted(e["article"] for e in run.events("view-lost")) == list(range(1, 21))
    assert (meter["paid"], meter["cached"], meter["lost"]) == (20, 20, 0), meter
    for article_id in range(1, 21):
        value = run.cached(article_id)
        assert value is not None and value["turn"] == payments[article_id]["turn"]
    print(
        f"\nclosed pages: paid {meter['paid']}, cached {meter['cached']}, lost {meter['lost']}, "
        f"views lost {meter['views_lost']}, pages closed at {min(fractions):.2f}-"
        f"{max(fractions):.2f} of a {run.settings.delay} s turn"
    )


def test_opening_an_article_the_worker_is_paying_for_pays_once(page: Any, reader: Any) -> None:
    """Both directions of the race. The worker is mid-turn on a tapped article when the
    reader opens it: the page waits for the worker's result (one payment, same text). The
    reader is mid-turn when the worker takes the tap: the worker does not wait, gives the job
    back and finds it cached later (one payment). Each turn (3 s) outlasts its claim's lease
    (2 s): the heartbeat keeps the claim, so nobody else pays meanwhile."""
    run = reader(delay=3.0, claim_lease=2.0)
    page.get(run.url)
    feed = page.current_window_handle

    job = tap(page, 8)
    wait_for("the worker's turn", lambda: run.payments(), timeout=10)
    page.get(f"{run.url}article/8")
    article = wait_for_text(page, timeout=15)
    assert article.get_attribute("data-how") == "waited"
    value = run.cached(8)
    assert value is not None and value["lane"] == "worker"
    assert article_text(page) == value["paragraphs"] and len(value["paragraphs"]) >= 5
    assert article.get_attribute("data-turn") == value["turn"]
    wait_for("the worker's job to end", lambda: run.events("done"))
    assert [(d["job"], d["outcome"]) for d in run.events("done")] == [(job, "paid")]
    assert [(p["article"], p["lane"]) for p in run.payments()] == [(8, "worker")]

    # Now the other way round: the direct lane pays, the tap arrives mid-turn.
    page.get(run.url)
    page.switch_to.new_window("tab")
    page.get(f"{run.url}article/9")
    wait_for("the direct lane's turn", lambda: len(run.payments()) == 2, timeout=10)
    reading = page.current_window_handle
    page.switch_to.window(feed)
    job = tap(page, 9)
    page.switch_to.window(reading)
    article = wait_for_text(page, timeout=15)
    assert article.get_attribute("data-how") == "paid"

    def outcomes() -> list[str]:
        return [d["outcome"] for d in run.events("done") if d["job"] == job]

    wait_for("the worker to finish the job", lambda: "cached" in outcomes(), timeout=15)
    # Given back while the reader's turn ran, then found cached: never paid for twice.
    assert set(outcomes()) == {"deferred", "cached"} and outcomes()[-1] == "cached"
    # The worker returned at once (if_computing="skip"), not when the reader's turn ended.
    done = [d for d in run.events("done") if d["job"] == job]
    taken = [t for t in run.events("take") if t["job"] == job]
    assert done[0]["outcome"] == "deferred"
    assert done[0]["at"] - taken[0]["at"] < 0.5 * run.settings.delay
    assert [(p["article"], p["lane"]) for p in run.payments()] == [(8, "worker"), (9, "direct")]
    value = run.cached(9)
    assert value is not None and article_text(page) == value["paragraphs"]
    meter = run.meter()
    assert (meter["paid"], meter["cached"], meter["lost"]) == (2, 2, 0)
    assert run.deprecations() == []  # both lanes, in the app and the worker


def test_a_worker_killed_mid_turn_costs_one_more_payment(page: Any, reader: Any) -> None:
    """kill -9 the worker while it pays for an article: its heartbeat stops with it, so the
    claim runs out one claim lease later (2 s, shorter than the 4 s paid step), the job comes
    back after its job lease (5 s), and a new worker pays once more and caches it. The first
    payment shows as lost."""
    run = reader(delay=4.0, claim_lease=2.0, job_lease=5.0, worker=False)
    first = run.start_worker()
    page.get(run.url)
    job = tap(page, 11)
    wait_for("the worker's turn", lambda: run.payments(), timeout=10)
    assert run.store.jobs.counts().leased == 1
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    killed_at = time.time()
    claim = run.holder(11)
    assert claim is not None and claim.pid == first.pid  # its claim outlives it, for a while
    wait_for("the dead worker's claim to run out", lambda: run.holder(11) is None, timeout=10)
    claim_gone_at = time.time()
    # One claim lease after its last renewal, long before the paid step would have ended.
    assert claim_gone_at - killed_at < run.settings.claim_lease + 1.0
    assert run.meter()["running"] == 0 and run.cached(11) is None
    assert run.store.jobs.counts().leased == 1  # the job comes back after its own lease
    second = run.start_worker()

    wait_for("the article to be cached", lambda: run.cached(11), timeout=20)
    payments = run.payments()
    assert [(p["article"], p["pid"]) for p in payments] == [(11, first.pid), (11, second.pid)]
    takes = [t for t in run.events("take") if t["job"] == job]
    assert [(t["pid"], t["attempts"]) for t in takes] == [(first.pid, 1), (second.pid, 2)]
    assert takes[1]["at"] - takes[0]["at"] >= run.settings.job_lease - 0.5
    assert payments[1]["at"] >= claim_gone_at - 0.5
    assert takes[1]["at"] >= killed_at
    value = run.cached(11)
    assert value is not None and value["pid"] == second.pid
    wait_for("the job to finish", lambda: run.store.jobs.get(job) is None, timeout=10)

    page.get(f"{run.url}article/11")
    assert page.find_element(by().ID, "article").get_attribute("data-pending") == "no"
    assert article_text(page) == value["paragraphs"]
    meter = run.meter()
    assert (meter["paid"], meter["cached"], meter["lost"]) == (2, 1, 1), meter
    wait_for(
        "the meter on the page",
        lambda: page.find_element(by().ID, "meter-lost").text == "1",
        timeout=5,
    )


def test_screenshots_and_the_summary(
    page: Any, reader: Any, fake_llm: FakeLLM, artifacts: Path
) -> None:
    """Screenshots of the feed and of an opened article (with its LLM summary, from a fake
    OpenAI-compatible server) go to target/reader-artifacts/; with
    READER_UPDATE_SCREENSHOT=1 the feed's is copied to examples/reader/screenshot.png."""
    run = reader(delay=0.3, llm_url=fake_llm.url, llm_model="fake-model", llm_key="sk-test")
    page.get(run.url)
    for article_id in (2, 4, 6):
        tap(page, article_id)
    wait_for("the worker", lambda: len(run.events("done")) == 3, timeout=15)
    page.get(f"{run.url}article/1")
    wait_for_text(page)
    page.get(run.url)
    wait_for(
        "the meter on the feed",
        lambda: page.find_element(by().ID, "meter-cached").text == "4",
        timeout=5,
    )
    front = artifacts / "front.png"
    page.save_screenshot(str(front))

    page.get(f"{run.url}article/2")
    article = wait_for_text(page)
    summary = page.find_element(by().ID, "summary-text").text
    assert summary == FakeLLM.SUMMARY
    assert article.get_attribute("data-how") == "cache"
    opened = artifacts / "article.png"
    page.save_screenshot(str(opened))
    page.get(f"{run.url}ledger")
    page.save_screenshot(str(artifacts / "ledger.png"))
    for shot in (front, opened):
        data = shot.read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 20_000

    assert len(fake_llm.requests) == 4
    request = fake_llm.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == "Bearer sk-test"
    assert request["body"]["model"] == "fake-model"
    value = run.cached(2)
    assert value is not None and value["summary"] == FakeLLM.SUMMARY
    asked = [r["body"]["messages"][1]["content"] for r in fake_llm.requests]
    assert any(value["paragraphs"][0] in text for text in asked)
    assert len(run.payments("summary")) == 4

    if os.environ.get("READER_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(front, READER_ROOT / "screenshot.png")
