"""The dashboard's app in-process (Starlette's TestClient): its JSON, its refusals (no
--allow-actions, no token, a foreign Host) and its actions' answers. Fast: not marked slow."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from cli_support import Filled

pytest.importorskip("httpx", reason="Starlette's TestClient needs httpx: requirements-dev.txt")

with warnings.catch_warnings():
    # Starlette 1.10 would rather have httpx2, which the registry here does not serve.
    warnings.filterwarnings("ignore", "Using `httpx` with `starlette.testclient`")
    from starlette.testclient import TestClient  # noqa: E402

from diskcache_oxide import admin  # noqa: E402
from diskcache_oxide.dashboard import allowed_hosts, create_app  # noqa: E402

HOST = {"base_url": "http://127.0.0.1:8000"}


@pytest.fixture
def client(filled: Filled) -> Iterator[TestClient]:
    with TestClient(create_app(filled.directory), **HOST) as c:
        yield c


@pytest.fixture
def acting(filled: Filled) -> Iterator[tuple[TestClient, str]]:
    with TestClient(create_app(filled.directory, allow_actions=True), **HOST) as c:
        match = re.search(r'name="dashboard-token" content="([^"]+)"', c.get("/").text)
        assert match is not None
        yield c, match.group(1)


def test_state(client: TestClient, filled: Filled) -> None:
    state: dict[str, Any] = client.get("/api/state").json()
    assert state["actions"] is False and state["directory"] == str(filled.directory)
    assert state["stats"]["count"] == 10 and state["stats"]["claims"] == 1
    assert {q["prefix"]: q["depth"] for q in state["queues"]} == {None: 3, "emails": 3}
    (mail,) = [q for q in state["job_queues"] if q["name"] == "mail"]
    assert {s: [j["id"] for j in jobs] for s, jobs in mail["jobs"].items()} == {
        "ready": [filled.ready],
        "leased": [filled.leased],
        "scheduled": [filled.scheduled],
        "dead": [filled.dead],
    }
    assert state["claims"][0]["key"] == repr(filled.claim_key)


def test_page_and_static(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and 'content=""' in page.text  # no token when read-only
    assert '<script id="initial-state" type="application/json">' in page.text
    assert "http" not in re.sub(
        r"http://127\.0\.0\.1:8000/static/", "", page.text.split("<body>")[1]
    )
    assert client.get("/static/dashboard.js").status_code == 200
    assert client.get("/static/dashboard.css").status_code == 200


def test_read_only_refuses_every_action(client: TestClient, filled: Filled) -> None:
    for path in (f"/api/jobs/{filled.dead}/retry", f"/api/jobs/{filled.ready}/bury", "/api/purge"):
        answer = client.post(path, json={"queue": "mail"}, headers={"X-Dashboard-Token": "x"})
        assert answer.status_code == 403 and "--allow-actions" in answer.json()["error"]
    assert client.get(f"/api/jobs/{filled.dead}/retry").status_code == 405


def test_foreign_host_is_refused(client: TestClient) -> None:
    assert client.get("/api/state", headers={"Host": "attacker.example"}).status_code == 400
    assert client.get("/api/state", headers={"Host": "localhost:8000"}).status_code == 200


def test_actions_need_the_token(acting: tuple[TestClient, str], filled: Filled) -> None:
    client, token = acting
    assert client.post(f"/api/jobs/{filled.dead}/retry").status_code == 403
    wrong = client.post(f"/api/jobs/{filled.dead}/retry", headers={"X-Dashboard-Token": "no"})
    assert wrong.status_code == 403
    with admin.open_cache(filled.directory) as cache:
        row = admin.job(cache, filled.dead)
        assert row is not None and row.state == "dead"


def test_actions(acting: tuple[TestClient, str], filled: Filled) -> None:
    client, token = acting
    headers = {"X-Dashboard-Token": token}
    retried = client.post(f"/api/jobs/{filled.dead}/retry", headers=headers)
    assert retried.status_code == 200 and retried.json()["ok"] is True
    again = client.post(f"/api/jobs/{filled.dead}/retry", headers=headers)
    assert again.status_code == 409 and "not dead" in again.json()["error"]
    assert client.post("/api/jobs/999/bury", headers=headers).status_code == 404
    assert client.post(f"/api/jobs/{filled.leased}/bury", headers=headers).status_code == 200
    assert client.post(f"/api/jobs/{filled.leased}/bury", headers=headers).status_code == 409
    assert client.post("/api/purge", headers=headers, content=b"nope").status_code == 400
    purged = client.post("/api/purge", headers=headers, json={"queue": "mail"})
    assert purged.json()["purged"] == 1
    assert client.get("/api/state").json()["actions"] is True


def test_allowed_hosts() -> None:
    assert "localhost" in allowed_hosts("127.0.0.1") and "*" not in allowed_hosts("127.0.0.1")
    assert allowed_hosts("0.0.0.0") == ["*"]
    assert allowed_hosts("192.0.2.7")[0] == "192.0.2.7"


def test_no_other_site_may_frame_any_answer(client: TestClient, filled: Filled) -> None:
    # Clickjacking: a page on another origin framed the dashboard and a click in the frame
    # buried a job. Every answer, refusals and static files too, forbids framing.
    for answer in (
        client.get("/"),
        client.get("/api/state"),
        client.get("/static/dashboard.js"),
        client.post(f"/api/jobs/{filled.ready}/bury"),
    ):
        assert answer.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
        assert answer.headers["x-content-type-options"] == "nosniff"


def test_a_job_id_out_of_range_is_not_found(acting: tuple[TestClient, str]) -> None:
    client, token = acting
    headers = {"X-Dashboard-Token": token}
    for job_id in ("99999999999999999999999", str(2**63)):
        answer = client.post(f"/api/jobs/{job_id}/bury", headers=headers)
        assert answer.status_code == 404 and "no job" in answer.json()["error"]


def test_the_read_only_state_carries_no_claim_tokens(
    client: TestClient, acting: tuple[TestClient, str], filled: Filled
) -> None:
    read_only = client.get("/api/state")
    assert filled.claim_token not in read_only.text
    assert filled.claim_token not in client.get("/").text
    assert all("token" not in claim for claim in read_only.json()["claims"])
    acting_client, _ = acting
    assert acting_client.get("/api/state").json()["claims"][0]["token"] == filled.claim_token


def test_a_directory_deleted_while_serving_is_reported(filled: Filled) -> None:
    import shutil

    with TestClient(create_app(filled.directory), **HOST) as client:
        assert client.get("/api/state").status_code == 200
        shutil.rmtree(filled.directory)
        answer = client.get("/api/state")
        assert answer.status_code == 410 and "is gone" in answer.json()["error"]
        page = client.get("/")
        assert page.status_code == 410 and "is gone" in page.text
