"""Headless Chromium for the browser tests (tests/reader, tests/dashboard): Debian's chromium
and chromium-driver, driven by selenium. ``make browser`` (tests/helpers/setup_browser.sh)
installs them; without them the browser tests skip, saying why."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")

#: Arguments every test browser gets: headless, as root, with a fixed window and nothing that
#: talks to the network behind the test's back.
BASE_ARGS = (
    "--headless=new",
    "--no-sandbox",  # we run as root
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--window-size=1280,1000",
    "--no-first-run",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def browser_missing() -> str | None:
    """Why there is no test browser here, or None if there is one."""
    if CHROMIUM is None or CHROMEDRIVER is None:
        return (
            "headless Chromium is not installed (no chromium or chromedriver on PATH); "
            "`make browser` (tests/helpers/setup_browser.sh) installs Debian's chromium and "
            "chromium-driver"
        )
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -r requirements-dev.txt)"
    return None


def headless_chromium(extra_args: Sequence[str] = ()) -> Iterator[Any]:
    """A selenium driver on headless Chromium, quit at the end (a generator for a fixture)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert CHROMIUM is not None and CHROMEDRIVER is not None, browser_missing()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (*BASE_ARGS, *extra_args):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
