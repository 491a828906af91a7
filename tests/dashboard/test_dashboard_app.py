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


def assert_not_frameable(answer: Any) -> None:
    assert answer.headers.get("x-frame-options") == "DENY", answer.request.url
    policy = answer.headers.get("content-security-policy", "")
    assert "frame-ancestors 'none'" in policy, answer.request.url


def test_no_response_can_be_framed(acting: tuple[TestClient, str], filled: Filled) -> None:
    client, token = acting
    headers = {"X-Dashboard-Token": token}
    answers = [
        client.get("/"),
        client.get("/api/state"),
        client.get("/static/dashboard.js"),
        client.get("/no/such/page"),
        client.get(f"/api/jobs/{filled.dead}/retry"),  # 405
        client.get("/api/state", headers={"Host": "attacker.example"}),  # 400
        client.post(f"/api/jobs/{filled.dead}/retry"),  # 403: no token
        client.post("/api/jobs/999/bury", headers=headers),  # 404
        client.post("/api/purge", headers=headers, content=b"nope"),  # 400
    ]
    assert sorted({a.status_code for a in answers}) == [200, 400, 403, 404, 405]
    for answer in answers:
        assert_not_frameable(answer)


def test_an_out_of_range_job_id_is_not_found(
    acting: tuple[TestClient, str], filled: Filled
) -> None:
    client, token = acting
    headers = {"X-Dashboard-Token": token}
    for path in (
        "/api/jobs/99999999999999999999999/bury",
        "/api/jobs/99999999999999999999999/retry",
        f"/api/jobs/{2**63}/bury",
    ):
        answer = client.post(path, headers=headers)
        assert answer.status_code == 404, path
        assert answer.json()["error"].startswith("no job 9")
    assert client.get("/api/job/99999999999999999999999").status_code == 404
    with admin.open_cache(filled.directory) as cache:
        assert admin.job(cache, 2**70) is None
        assert admin.job(cache, -1) is None
        assert admin.bury_job(cache, 2**70) is False


def test_the_read_only_state_carries_no_claim_tokens(
    client: TestClient, acting: tuple[TestClient, str], filled: Filled
) -> None:
    answer = client.get("/api/state")
    (claim,) = answer.json()["claims"]
    assert claim["key"] == repr(filled.claim_key) and "token" not in claim
    assert filled.claim_token not in answer.text
    assert filled.claim_token not in client.get("/").text
    # With actions on too (issue 29): the release button names the claim, and the server
    # breaks it by key, so no page carries a token.
    acting_client, _ = acting
    acted = acting_client.get("/api/state")
    assert acted.json()["claims"][0]["key"] == repr(filled.claim_key)
    assert "token" not in acted.json()["claims"][0]
    assert filled.claim_token not in acted.text
    assert filled.claim_token not in acting_client.get("/").text


def test_a_deleted_directory_is_reported_not_raised(filled: Filled) -> None:
    import shutil

    with TestClient(create_app(filled.directory), **HOST) as client:
        assert client.get("/api/state").status_code == 200
        shutil.rmtree(filled.directory)
        answer = client.get("/api/state")
        assert answer.status_code == 503
        error = answer.json()["error"]
        assert str(filled.directory) in error and "deleted or moved" in error
        page = client.get("/")
        assert page.status_code == 503
        assert "deleted or moved" in page.text and "Traceback" not in page.text
        assert_not_frameable(page)


def test_an_action_on_a_deleted_directory_says_so(
    acting: tuple[TestClient, str], filled: Filled
) -> None:
    import shutil

    client, token = acting
    shutil.rmtree(filled.directory)
    headers = {"X-Dashboard-Token": token}
    for answer in (
        client.post(f"/api/jobs/{filled.ready}/bury", headers=headers),
        client.post("/api/purge", headers=headers, json={"queue": "mail"}),
    ):
        assert answer.status_code == 503
        assert "deleted or moved" in answer.json()["error"]


def test_an_unexpected_error_is_not_frameable_either(
    filled: Filled, monkeypatch: pytest.MonkeyPatch
) -> None:
    import diskcache_oxide.dashboard as dashboard

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(dashboard, "snapshot", broken)
    app = create_app(filled.directory)
    with TestClient(app, raise_server_exceptions=False, **HOST) as client:
        answer = client.get("/api/state")
    assert answer.status_code == 500
    assert answer.json() == {"error": "the dashboard failed: RuntimeError; its log says more"}
    assert_not_frameable(answer)
