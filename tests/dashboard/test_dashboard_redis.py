"""The dashboard on a Redis namespace (D-062): its JSON and page in-process (Starlette's
TestClient) on a real server and a cluster, its refusals and actions, a server that stops
answering while it serves, and one real ``diskcache-oxide serve URL`` in headless Chromium
showing the namespace's data."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import FilledRedis, fill_redis, namespace_url

pytest.importorskip("httpx", reason="Starlette's TestClient needs httpx: requirements-dev.txt")

with warnings.catch_warnings():
    # Starlette 1.10 would rather have httpx2, which the registry here does not serve.
    warnings.filterwarnings("ignore", "Using `httpx` with `starlette.testclient`")
    from starlette.testclient import TestClient  # noqa: E402

from diskcache_oxide.dashboard import create_app  # noqa: E402

pytestmark = pytest.mark.oxide

HOST = {"base_url": "http://127.0.0.1:8000"}


@pytest.fixture(params=["server", "cluster"])
def on_redis(request: pytest.FixtureRequest) -> FilledRedis:
    if request.param == "server":
        url = namespace_url(request.getfixturevalue("redis_url"))
    else:
        url = namespace_url(request.getfixturevalue("redis_cluster_url"), cluster=True)
    return fill_redis(url)


@pytest.fixture
def server(redis_url: str) -> FilledRedis:
    return fill_redis(namespace_url(redis_url))


@pytest.fixture
def acting(server: FilledRedis) -> Iterator[tuple[TestClient, str]]:
    with TestClient(create_app(server.url, allow_actions=True), **HOST) as c:
        match = re.search(r'name="dashboard-token" content="([^"]+)"', c.get("/").text)
        assert match is not None
        yield c, match.group(1)


def test_state(on_redis: FilledRedis) -> None:
    with TestClient(create_app(on_redis.url), **HOST) as client:
        state: dict[str, Any] = client.get("/api/state").json()
    assert state["backend"] == "redis" and state["namespace"] == "ops"
    assert state["directory"].startswith("redis://") and state["directory"].endswith("ops")
    stats = state["stats"]
    assert stats["count"] == 10 and stats["claims"] == 1 and stats["queues"] == 2
    assert stats["volume"] is None and stats["size_limit"] is None  # a directory's figures
    assert {q["prefix"]: q["depth"] for q in state["queues"]} == {None: 3, "emails": 3}
    fronts = {q["prefix"]: q["front"] for q in state["queues"]}
    assert fronts == {None: "{'seven': 7}", "emails": "{'to': 'user0@example.org'}"}
    (claim,) = state["claims"]
    assert claim["key"] == repr(on_redis.claim_key) and "token" not in claim
    assert state["settings"]["namespace"] == "ops"
    assert stats["job_queues"] == 2
    assert [q["name"] for q in state["job_queues"]] == ["mail", "reports"]


def test_page_names_the_namespace(server: FilledRedis) -> None:
    with TestClient(create_app(server.url), **HOST) as client:
        page = client.get("/")
    assert page.status_code == 200 and 'content=""' in page.text  # read-only: no token
    assert f'id="directory">{server.url}<' in page.text


def test_state_pages(server: FilledRedis) -> None:
    with TestClient(create_app(server.url), **HOST) as client:
        first = client.get("/api/state?queues_limit=1").json()
        (only,) = first["queues"]
        assert only["prefix"] is None and first["pages"]["queues"]["next"] == "1"
        second = client.get("/api/state?queues_limit=1&queues_after=1").json()
        assert [q["prefix"] for q in second["queues"]] == ["emails"]


def test_actions_are_refused_read_only(server: FilledRedis) -> None:
    with TestClient(create_app(server.url), **HOST) as client:
        assert client.post("/api/jobs/1/retry").status_code == 403
        assert client.post("/api/purge", json={"queue": "mail"}).status_code == 403


def test_actions_on_a_job_that_is_not_there_or_not_dead(
    acting: tuple[TestClient, str], server: FilledRedis
) -> None:
    client, token = acting
    headers = {"X-Dashboard-Token": token}
    missing = client.post("/api/jobs/999999/retry", headers=headers)
    assert missing.status_code == 404 and missing.json()["error"] == "no job 999999"
    alive = client.post(f"/api/jobs/{server.ready}/retry", headers=headers)
    assert alive.status_code == 409
    state = client.get("/api/state").json()
    # Even with actions on, no claim's token reaches the page (issue 29 §6): a release names
    # the claim and the server looks its token up.
    assert "token" not in state["claims"][0]


def test_actions_on_redis(acting: tuple[TestClient, str], server: FilledRedis) -> None:
    client, token = acting
    headers = {"X-Dashboard-Token": token}
    retried = client.post(f"/api/jobs/{server.dead}/retry", headers=headers)
    assert retried.status_code == 200, retried.text
    buried = client.post(f"/api/jobs/{server.ready}/bury", headers=headers)
    assert buried.status_code == 200, buried.text
    purged = client.post("/api/purge", json={"queue": "mail"}, headers=headers).json()
    assert purged["purged"] == 1
    (mail,) = [q for q in client.get("/api/state").json()["job_queues"] if q["name"] == "mail"]
    assert mail["counts"]["dead"] == 0


def test_state_lists_jobs_on_redis(server: FilledRedis) -> None:
    with TestClient(create_app(server.url), **HOST) as client:
        state = client.get("/api/state").json()
    (mail,) = [q for q in state["job_queues"] if q["name"] == "mail"]
    assert {s: [j["id"] for j in jobs] for s, jobs in mail["jobs"].items()} == {
        "ready": [server.ready],
        "leased": [server.leased],
        "scheduled": [server.scheduled],
        "dead": [server.dead],
    }


def test_a_server_that_stops_answering_is_said_on_the_page(
    make_redis_server: Callable[..., Any],
) -> None:
    own = make_redis_server()
    filled = fill_redis(namespace_url(own.url))
    with TestClient(create_app(filled.url), **HOST) as client:
        assert client.get("/api/state").status_code == 200
        own.stop()
        down = client.get("/api/state")
        assert down.status_code == 503
        assert "Is the Redis server running?" in down.json()["error"]
        page = client.get("/")
        assert page.status_code == 503 and "Is the Redis server running?" in page.text
        own.start()  # back (empty: it kept nothing), and the dashboard with it
        again = client.get("/api/state")
        assert again.status_code == 200 and again.json()["stats"]["count"] == 0


def test_a_paused_server_times_out_into_the_page(make_redis_server: Callable[..., Any]) -> None:
    # SIGSTOP: the server keeps its socket open and answers nothing. A poll gives up after the
    # dashboard's socket timeout (a few seconds), and says why, instead of hanging.
    own = make_redis_server()
    filled = fill_redis(namespace_url(own.url))
    with TestClient(create_app(filled.url), **HOST) as client:
        own.pause()
        try:
            down = client.get("/api/state")
        finally:
            own.resume()
        assert down.status_code == 503
        assert "Timeout" in down.json()["error"] or "timed out" in down.json()["error"]
        again = client.get("/api/state")
        assert again.status_code == 200 and again.json()["stats"]["count"] == 10


def test_serve_refuses_a_server_that_does_not_answer(tmp_path: Path) -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "diskcache_oxide", "serve", "redis://127.0.0.1:1/0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("Error: cannot reach the Redis server of redis://127.0.0.1:1")
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_chromium_shows_the_namespace(
    page: Any, server: FilledRedis, serve: Any, artifacts: Path
) -> None:
    from test_dashboard_browser import attr, open_dashboard, screenshot, text

    running = serve(server.url)
    assert f"dashboard of {server.url} at http://" in running.output()
    open_dashboard(page, running.url)
    assert text(page, "#directory") == server.url
    assert text(page, '[data-stat="count"] .value') == "10"
    assert text(page, '[data-stat="volume"] .value') == "–"
    assert "does not apply on Redis" in (attr(page, '[data-stat="volume"]', "title") or "")
    assert text(page, '[data-stat="claims"] .value') == "1"
    assert text(page, '#queues tr[data-queue="emails"] .depth') == "3"
    assert text(page, '#queues tr[data-queue="-"] .front') == "{'seven': 7}"
    assert text(page, '#claims tr[data-namespace="default"] .key') == repr(server.claim_key)
    assert text(page, '[data-stat="job-queues"] .value') == "2"
    # It redraws from the server: a new entry shows up without a reload.
    import diskcache_oxide

    with diskcache_oxide.open(server.url) as cache:
        cache["new"] = 1
    from test_dashboard_browser import wait_for

    wait_for("the new count", lambda: text(page, '[data-stat="count"] .value') == "11")
    screenshot(page, artifacts / "dashboard-redis.png")


def test_claims_are_paged_across_namespaces(on_redis: FilledRedis) -> None:
    import diskcache_oxide
    from diskcache_oxide import Claims

    with diskcache_oxide.open(on_redis.url) as cache:
        for n in range(3):
            assert Claims(cache, namespace="builds").acquire(f"b{n}", lease=600) is not None
        held = Claims(cache, namespace="builds").acquire("gone", lease=600)
        assert held is not None
        held.release()
    with TestClient(create_app(on_redis.url), **HOST) as client:
        seen = []
        after = None
        while True:
            query = "claims_limit=2" + (f"&claims_after={after}" if after else "")
            state = client.get(f"/api/state?{query}").json()
            assert state["pages"]["claims"]["total"] == 4  # the released one is gone
            seen += [(c["namespace"], c["key"]) for c in state["claims"]]
            after = state["pages"]["claims"]["next"]
            if after is None:
                break
    assert sorted(seen) == [
        ("builds", "'b0'"),
        ("builds", "'b1'"),
        ("builds", "'b2'"),
        ("default", repr(on_redis.claim_key)),
    ]
