"""The dashboard in headless Chromium: every section shows the directory's figures, the page
updates itself without a reload, and the retry, bury and purge buttons exist and work only
with ``--allow-actions``. Screenshots go to target/dashboard-artifacts/."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_support import Filled
from diskcache_oxide import Cache, JobQueue, admin

pytestmark = pytest.mark.slow


def wait_for(what: str, check: Callable[[], Any], timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
        except Exception:  # an element redrawn under us: look again
            result = None
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def css(page: Any, selector: str) -> Any:
    from selenium.webdriver.common.by import By

    return page.find_element(By.CSS_SELECTOR, selector)


def all_css(page: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    found: list[Any] = page.find_elements(By.CSS_SELECTOR, selector)
    return found


def fresh(read: Callable[[], Any]) -> Any:
    """``read()`` again if the page redrew the element under it (it redraws every second)."""
    from selenium.common.exceptions import StaleElementReferenceException

    for _ in range(20):
        try:
            return read()
        except StaleElementReferenceException:
            time.sleep(0.05)
    return read()


def text(page: Any, selector: str) -> str:
    return str(fresh(lambda: css(page, selector).text))


def attr(page: Any, selector: str, name: str) -> str | None:
    value = fresh(lambda: css(page, selector).get_attribute(name))
    return None if value is None else str(value)


def seconds(page: Any, selector: str) -> float:
    return float(attr(page, selector, "data-seconds") or "nan")


def click(page: Any, selector: str) -> None:
    fresh(lambda: css(page, selector).click())


def open_dashboard(page: Any, url: str) -> None:
    page.get(url)
    wait_for("the first draw", lambda: attr(page, "#dashboard", "data-drawn"))


def screenshot(page: Any, path: Path) -> None:
    height = page.execute_script("return document.documentElement.scrollHeight")
    page.set_window_size(1280, max(800, int(height) + 140))  # the window's bars too
    time.sleep(0.3)
    page.save_screenshot(str(path))
    page.set_window_size(1280, 1000)


def post(url: str, headers: dict[str, str] | None = None, body: bytes = b"") -> int:
    request = urllib.request.Request(url, data=body, method="POST", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def job_row(page: Any, queue: str, state: str, job_id: int) -> str:
    return f'table[data-job-queue="{queue}"][data-state="{state}"] tr[data-job-id="{job_id}"]'


def test_every_section_shows_its_figures(
    page: Any, filled: Filled, serve: Any, artifacts: Path
) -> None:
    server = serve(filled.directory)
    open_dashboard(page, server.url)
    with admin.open_cache(filled.directory) as cache:
        info = admin.info(cache)
        (claim,) = admin.claims(cache)
    # Stats.
    assert attr(page, '[data-stat="count"]', "data-value") == str(info["count"])
    assert text(page, '[data-stat="count"] .value') == "10"
    assert attr(page, '[data-stat="claims"]', "data-value") == "1"
    assert text(page, '[data-stat="eviction"] .value') == "none"
    assert text(page, '[data-stat="job-queues"] .value') == "2"
    assert text(page, "#mode") == "read-only"
    # Queues, with depth and oldest age.
    assert text(page, '#queues tr[data-queue="emails"] .depth') == "3"
    assert text(page, '#queues tr[data-queue="-"] .depth') == "3"
    assert text(page, '#queues tr[data-queue="-"] .prefix') == "(int keys)"
    assert 0 <= seconds(page, '#queues tr[data-queue="emails"] .oldest') < 120
    # Jobs by state: counts, then one row in each state's table.
    counts = {
        state: attr(page, f'article[data-job-queue="mail"] [data-count="{state}"]', "data-value")
        for state in ("ready", "leased", "scheduled", "dead")
    }
    assert counts == {"ready": "1", "leased": "1", "scheduled": "1", "dead": "1"}
    ready = job_row(page, "mail", "ready", filled.ready)
    assert "waiting" in text(page, f"{ready} .value")
    leased = job_row(page, "mail", "leased", filled.leased)
    assert attr(page, f"{leased} .attempts", "data-attempts") == "1"
    assert text(page, f"{leased} .attempts") == "1 / 1"
    assert 0 <= seconds(page, f"{leased} .lease-age") < 120
    assert 480 < seconds(page, f"{leased} .lease-left") <= 600
    scheduled = job_row(page, "mail", "scheduled", filled.scheduled)
    assert 3480 < seconds(page, f"{scheduled} .due-in") <= 3600
    dead = job_row(page, "mail", "dead", filled.dead)
    assert text(page, f"{dead} .error") == "RuntimeError('smtp said no')"
    assert "monthly" in text(page, job_row(page, "reports", "ready", filled.other) + " .value")
    # Claims, with holder and lease left.
    row = "#claims tr[data-claim-key=\"'report:2025'\"]"
    assert text(page, f"{row} .holder") == f"{claim.host}:{claim.pid}"
    assert claim.host == socket.gethostname()
    assert 480 < seconds(page, f"{row} .lease-left") <= 600
    # Read-only: no buttons at all.
    assert all_css(page, "button") == []
    screenshot(page, artifacts / "dashboard-read-only.png")


def test_live_updates_without_a_reload(page: Any, filled: Filled, serve: Any) -> None:
    server = serve(filled.directory)
    open_dashboard(page, server.url)
    page.execute_script("window.__same_page = true")
    depth = '#queues tr[data-queue="emails"] .depth'
    assert text(page, depth) == "3"
    with Cache(str(filled.directory)) as cache:
        cache.push({"to": "late@example.org"}, prefix="emails")
        wait_for("the depth to become 4", lambda: text(page, depth) == "4", timeout=5)
        cache.push("new", prefix="fresh")
        wait_for("a new queue", lambda: text(page, '#queues tr[data-queue="fresh"] .depth') == "1")
        new_job = JobQueue(cache, "mail").put("another")
        wait_for(
            "the new job",
            lambda: all_css(page, job_row(page, "mail", "ready", new_job)),
        )
        assert cache.pull(prefix="emails")[0] is not None
        wait_for("the depth to go back to 3", lambda: text(page, depth) == "3", timeout=5)
    assert page.execute_script("return window.__same_page") is True  # never reloaded
    assert text(page, "#live") == "live"


def test_no_actions_without_the_flag(page: Any, filled: Filled, serve: Any) -> None:
    server = serve(filled.directory)
    open_dashboard(page, server.url)
    assert all_css(page, "button") == []
    assert attr(page, 'meta[name="dashboard-token"]', "content") == ""
    for path, body in (
        (f"api/jobs/{filled.dead}/retry", b""),
        (f"api/jobs/{filled.ready}/bury", b""),
        ("api/purge", json.dumps({"queue": "mail"}).encode()),
    ):
        assert post(server.url + path, {"Content-Type": "application/json"}, body) == 403
    # The page's own fetch gets the same answer.
    status = page.execute_async_script(
        "const done = arguments[0];"
        f"fetch('api/jobs/{filled.dead}/retry', {{method: 'POST'}}).then(r => done(r.status));"
    )
    assert status == 403
    with admin.open_cache(filled.directory) as cache:
        assert admin.info(cache)["jobs"]["mail"] == {
            "ready": 1,
            "scheduled": 1,
            "leased": 1,
            "dead": 1,
        }


def test_actions_with_the_flag(page: Any, filled: Filled, serve: Any, artifacts: Path) -> None:
    server = serve(filled.directory, "--allow-actions")
    open_dashboard(page, server.url)
    assert text(page, "#mode") == "actions on"
    dead = job_row(page, "mail", "dead", filled.dead)
    css(page, f"{dead} button.retry")  # there before anything is clicked
    screenshot(page, artifacts / "dashboard-actions.png")
    # Without the page's token, an action is refused (another site cannot send it).
    assert post(server.url + f"api/jobs/{filled.dead}/retry") == 403
    # Retry the dead job: it moves to the queued table.
    click(page, f"{dead} button.retry")
    wait_for(
        "the job to be queued", lambda: all_css(page, job_row(page, "mail", "ready", filled.dead))
    )
    assert all_css(page, dead) == []
    assert f"job {filled.dead} is back in 'mail'" in text(page, "#notice")
    with admin.open_cache(filled.directory) as cache:
        retried = admin.job(cache, filled.dead)
        assert retried is not None and retried.state == "ready" and retried.attempts == 0
    # Bury a queued job: it moves to the dead letters, with the reason as its error.
    ready = job_row(page, "mail", "ready", filled.ready)
    # The page asks first; dismissed, nothing is buried.
    click(page, f"{ready} button.bury")
    wait_for("the confirmation", lambda: page.switch_to.alert)
    page.switch_to.alert.dismiss()
    with admin.open_cache(filled.directory) as cache:
        kept = admin.job(cache, filled.ready)
        assert kept is not None and kept.state == "ready"
    click(page, f"{ready} button.bury")
    wait_for("the confirmation", lambda: page.switch_to.alert)
    page.switch_to.alert.accept()
    buried = job_row(page, "mail", "dead", filled.ready)
    wait_for("the job to be dead", lambda: all_css(page, buried))
    assert text(page, f"{buried} .error") == "buried from the dashboard"
    screenshot(page, artifacts / "dashboard-after-actions.png")
    # Purge the dead letters, after the page asks.
    click(page, 'article[data-job-queue="mail"] button.purge')
    wait_for("the confirmation", lambda: page.switch_to.alert)
    page.switch_to.alert.accept()
    wait_for(
        "no dead jobs",
        lambda: all_css(page, 'p.empty [data-job-queue="mail"][data-state="dead"]'),
    )
    assert "deleted 1 dead jobs of 'mail'" in text(page, "#notice")
    with admin.open_cache(filled.directory) as cache:
        assert admin.job(cache, filled.ready) is None
        assert admin.info(cache)["jobs"]["mail"]["dead"] == 0


def test_another_site_cannot_frame_the_dashboard(page: Any, filled: Filled, serve: Any) -> None:
    # Clickjacking: a page on another origin (another port) frames the dashboard running with
    # --allow-actions, hoping the operator clicks inside the frame. The browser must refuse to
    # show the dashboard in the frame at all, so there is nothing to click.
    import http.server
    import threading

    from selenium.webdriver.common.by import By

    server = serve(filled.directory, "--allow-actions")
    framing = f'<html><body><iframe id="f" src="{server.url}" width="900" height="700"></iframe>'

    class Attacker(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(framing.encode())

        def log_message(self, *args: Any) -> None:
            pass

    attacker = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
    threading.Thread(target=attacker.serve_forever, daemon=True).start()
    try:
        page.get(f"http://127.0.0.1:{attacker.server_address[1]}/")
        time.sleep(1.5)  # the frame's load, refused or not
        page.switch_to.frame(page.find_element(By.ID, "f"))
        try:
            assert page.find_elements(By.CSS_SELECTOR, "#dashboard") == []
            assert page.find_elements(By.CSS_SELECTOR, "button.bury") == []
        finally:
            page.switch_to.default_content()
    finally:
        attacker.shutdown()
    with admin.open_cache(filled.directory) as cache:
        row = admin.job(cache, filled.ready)
        assert row is not None and row.state == "ready"
