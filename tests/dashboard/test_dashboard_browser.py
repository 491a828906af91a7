"""The dashboard in headless Chromium: every section shows the directory's figures, the page
updates itself without a reload, and the retry, bury and purge buttons exist and work only
with ``--allow-actions``. Screenshots go to target/dashboard-artifacts/."""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import Filled
from diskcache_oxide import Cache, JobQueue, admin
from diskcache_oxide.claims import Claims

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
    # Bury a queued job, after the page asks: it moves to the dead letters, with the reason
    # as its error.
    ready = job_row(page, "mail", "ready", filled.ready)
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


@pytest.fixture
def other_site(tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """``other_site(url)``: the address of a page on another origin (a second local HTTP
    server, on another port) that frames ``url`` full size, as a clickjacking page would."""
    root = tmp_path / "other-site"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()

    def page_framing(url: str) -> str:
        (root / "frame.html").write_text(
            "<!doctype html><title>another site</title>"
            f'<iframe id="victim" src="{url}" width="1240" height="900"></iframe>'
        )
        return f"http://127.0.0.1:{httpd.server_address[1]}/frame.html"

    try:
        yield page_framing
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def framed_document(page: Any) -> str:
    """Inside the frame: 'dashboard' once the dashboard drew itself there, 'refused' once
    the browser put its error page in its place, '' while it loads."""
    return str(
        page.execute_script(
            "if (document.readyState !== 'complete') return '';"
            "if (location.href.startsWith('chrome-error:')) return 'refused';"
            "const d = document.getElementById('dashboard');"
            "return d && d.dataset.drawn ? 'dashboard' : '';"
        )
    )


def test_another_site_cannot_frame_the_dashboard(
    page: Any, filled: Filled, serve: Any, other_site: Callable[[str], str]
) -> None:
    server = serve(filled.directory, "--allow-actions")
    page.get(other_site(server.url))
    frame = wait_for("the frame", lambda: css(page, "#victim"))
    page.switch_to.frame(frame)
    try:
        seen = wait_for("the frame to load or be refused", lambda: framed_document(page))
        # The click a clickjacking page tricks its visitor into, on whatever the frame shows.
        for button in all_css(page, "button.bury"):
            button.click()
            try:
                page.switch_to.alert.accept()
            except Exception:  # no question asked
                pass
    finally:
        page.switch_to.default_content()
    assert seen == "refused", "the dashboard was drawn inside another site's frame"
    with admin.open_cache(filled.directory) as cache:
        row = admin.job(cache, filled.ready)
        assert row is not None and row.state == "ready", "a job was buried from the frame"
        assert admin.info(cache)["jobs"]["mail"]["dead"] == 1


def test_bury_and_purge_ask_first(page: Any, filled: Filled, serve: Any) -> None:
    server = serve(filled.directory, "--allow-actions")
    open_dashboard(page, server.url)
    ready = job_row(page, "mail", "ready", filled.ready)
    click(page, f"{ready} button.bury")
    question = wait_for("the question", lambda: page.switch_to.alert)
    assert f"job {filled.ready}" in question.text and "'mail'" in question.text
    question.dismiss()
    click(page, 'article[data-job-queue="mail"] button.purge')
    wait_for("the question", lambda: page.switch_to.alert).dismiss()
    # Two redraws later nothing was sent: the job is still queued, the dead job still there.
    for _ in range(2):
        drawn = attr(page, "#dashboard", "data-drawn")
        wait_for("a redraw", lambda d=drawn: attr(page, "#dashboard", "data-drawn") != d)
    assert all_css(page, ready) and all_css(page, job_row(page, "mail", "dead", filled.dead))
    with admin.open_cache(filled.directory) as cache:
        row = admin.job(cache, filled.ready)
        assert row is not None and row.state == "ready"
        assert admin.info(cache)["jobs"]["mail"]["dead"] == 1


def test_a_deleted_directory_says_so_on_the_page(
    page: Any, filled: Filled, serve: Any, artifacts: Path
) -> None:
    server = serve(filled.directory)
    open_dashboard(page, server.url)
    assert not fresh(lambda: css(page, "#problem").is_displayed())
    shutil.rmtree(filled.directory)
    wait_for("the message", lambda: "deleted or moved" in text(page, "#problem"))
    # Both read in one script: the page polls every second, and two separate reads could
    # straddle a poll (seen once in a clean-clone run on a loaded machine).
    shown, live = page.execute_script(
        "return [document.getElementById('problem').textContent,"
        " document.getElementById('live').textContent];"
    )
    assert "deleted or moved" in shown and str(filled.directory) in shown
    assert live.strip() == "offline"
    screenshot(page, artifacts / "dashboard-directory-gone.png")
    # A reload shows the same message, not an error page.
    page.get(server.url)
    wait_for("the message", lambda: "deleted or moved" in text(page, "#problem"))
    assert "Traceback" not in page.page_source


def test_long_lists_are_paged_on_the_page(
    page: Any, tmp_path: Path, serve: Any, artifacts: Path
) -> None:
    directory = tmp_path / "lists"
    with Cache(str(directory)) as cache:
        with cache.transact():
            for n in range(120):
                cache.push(n, prefix=f"pq-{n:03}")
            for n in range(25):
                JobQueue(cache, f"jq-{n:02}").put(n)
        claims = Claims(cache)
        for n in range(120):
            assert claims.try_acquire(f"key-{n:03}", lease=600) is not None
    server = serve(directory)
    open_dashboard(page, server.url)
    assert len(all_css(page, "#queues tbody tr")) == 50
    assert "1–50 of 120" in text(page, "#queues .pager")
    assert len(all_css(page, "#jobs article.job-queue")) == 10
    assert "1–10 of 25" in text(page, "#jobs .pager")
    assert len(all_css(page, "#claims tbody tr")) == 50
    assert attr(page, '[data-stat="queues"]', "data-value") == "120"
    assert attr(page, '[data-stat="job-queues"]', "data-value") == "25"
    screenshot(page, artifacts / "dashboard-paged.png")
    click(page, "#queues .pager a.next")
    wait_for("the second page", lambda: "51–100 of 120" in text(page, "#queues .pager"))
    assert attr(page, "#queues tbody tr", "data-queue") == "pq-050"
    click(page, "#jobs .pager a.next")
    wait_for("the second page", lambda: "11–20 of 25" in text(page, "#jobs .pager"))
    assert attr(page, "#jobs article.job-queue", "data-job-queue") == "jq-10"
    # The other list stayed on its page, and it lives on through the polls.
    assert "51–100 of 120" in text(page, "#queues .pager")
    drawn = attr(page, "#dashboard", "data-drawn")
    wait_for("a redraw", lambda: attr(page, "#dashboard", "data-drawn") != drawn)
    assert attr(page, "#queues tbody tr", "data-queue") == "pq-050"
    click(page, "#queues .pager a.first")
    wait_for("the first page", lambda: "1–50 of 120" in text(page, "#queues .pager"))
