"""Fixtures for the reader app's tests (examples/reader).

The browser tests drive a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``,
installed by ``make browser``, i.e. tests/helpers/setup_browser.sh) with selenium. They are
skipped, with the reason, only when Chromium or its driver is not installed; ``make reader-test``
installs them first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import browser_missing, headless_chromium
from reader_harness import ARTIFACTS, REBOUND_NAME, FakeLLM, OtherSite, ReaderRun


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    reason = browser_missing()
    if reason is not None:
        pytest.skip(reason)
    # Chrome's back/forward cache keeps a page it navigated away from alive, with its fetch
    # still running (its view is not lost, only hidden). Off, so that navigating away closes
    # the page, as a tab close does. The resolver rule stands in for an attacker's DNS.
    yield from headless_chromium(
        [
            "--disable-features=BackForwardCache",
            f"--host-resolver-rules=MAP {REBOUND_NAME} 127.0.0.1",
        ]
    )


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """The browser, with one tab on a blank page before and after the test."""
    yield browser
    handles = browser.window_handles
    for handle in handles[1:]:
        browser.switch_to.window(handle)
        browser.close()
    browser.switch_to.window(handles[0])
    browser.get("about:blank")


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[Callable[..., ReaderRun]]:
    """Start the reader: ``reader(delay=..., claim_lease=..., job_lease=..., worker=True)``.
    Every process it started is stopped at the end of the test, whatever happened."""
    runs: list[ReaderRun] = []

    def start(
        *,
        delay: float = 0.2,
        claim_lease: float = 3.0,
        job_lease: float = 20.0,
        worker: bool = True,
        **extra: str,
    ) -> ReaderRun:
        settings = {
            "READER_DELAY": str(delay),
            "READER_CLAIM_LEASE": str(claim_lease),
            "READER_JOB_LEASE": str(job_lease),
            "READER_POLL": "0.5",
            **{f"READER_{k.upper()}": v for k, v in extra.items()},
        }
        directory = tmp_path / f"run{len(runs)}"
        directory.mkdir()
        run = ReaderRun(directory, settings)
        runs.append(run)
        run.start_app()
        if worker:
            run.start_worker()
        return run

    try:
        yield start
    finally:
        for run in runs:
            run.stop()


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    server = FakeLLM()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def other_site() -> Iterator[OtherSite]:
    site = OtherSite()
    try:
        yield site
    finally:
        site.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
