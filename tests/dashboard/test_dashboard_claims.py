"""The dashboard's claims with ``--allow-actions`` (issue 29, §6): ``/api/state`` carries no
claim's token, and the release action names the claim (namespace and key as the page shows
it); the server breaks it by key. On a directory and a real redis-server, with real
claims: the holder's renewal fails afterwards."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import fill, fill_redis, namespace_url

pytest.importorskip("httpx", reason="Starlette's TestClient needs httpx: requirements-dev.txt")
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Using `httpx` with `starlette.testclient`")
    from starlette.testclient import TestClient  # noqa: E402

import diskcache_oxide  # noqa: E402
from diskcache_oxide import admin  # noqa: E402
from diskcache_oxide.claims import Claims  # noqa: E402
from diskcache_oxide.dashboard import create_app  # noqa: E402

HOST = {"base_url": "http://127.0.0.1:8000"}
HEADER = "X-Dashboard-Token"


@pytest.fixture(params=["directory", "redis"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str, str]:
    """A filled store with one live claim: (where, the claim's key, its token)."""
    if request.param == "directory":
        filled = fill(tmp_path / "cache")
        return str(filled.directory), filled.claim_key, filled.claim_token
    url = namespace_url(request.getfixturevalue("redis_url"), f"c{tmp_path.name[-8:]}")
    on_redis = fill_redis(url)
    return url, on_redis.claim_key, on_redis.claim_token


@pytest.fixture
def acting(target: tuple[str, str, str]) -> Iterator[tuple[TestClient, str]]:
    with TestClient(create_app(target[0], allow_actions=True), **HOST) as client:
        found = re.search(r'name="dashboard-token" content="([^"]+)"', client.get("/").text)
        assert found is not None
        yield client, found.group(1)


def test_no_claim_token_reaches_the_page_with_actions_on(
    acting: tuple[TestClient, str], target: tuple[str, str, str]
) -> None:
    client, _ = acting
    answer = client.get("/api/state")
    (claim,) = answer.json()["claims"]
    assert claim["key"] == repr(target[1]) and "token" not in claim
    assert target[2] not in answer.text and target[2] not in client.get("/").text


def test_release_names_the_claim_and_the_server_breaks_it(
    acting: tuple[TestClient, str], target: tuple[str, str, str]
) -> None:
    client, page_token = acting
    (claim,) = client.get("/api/state").json()["claims"]
    body = {"namespace": claim["namespace"], "key": claim["key"]}
    assert client.post("/api/claims/release", json=body).status_code == 403  # no page token
    answer = client.post("/api/claims/release", json=body, headers={HEADER: page_token})
    assert answer.status_code == 200, answer.text
    assert "released the claim on 'report:2025'" in answer.json()["message"]
    assert client.get("/api/state").json()["claims"] == []
    with admin.open_cache(target[0]) as cache:
        assert admin.claim_count(cache) == 0
    again = client.post("/api/claims/release", json=body, headers={HEADER: page_token})
    assert again.status_code == 404 and "no live claim" in again.json()["error"]


def test_the_holder_loses_its_claim_when_the_page_releases_it(
    acting: tuple[TestClient, str], target: tuple[str, str, str]
) -> None:
    client, page_token = acting
    cache: Any = diskcache_oxide.open(target[0])
    try:
        held = Claims(cache, namespace="ops").acquire(("user", 1), lease=600)
        assert held is not None
        rows = client.get("/api/state").json()["claims"]
        (row,) = [r for r in rows if r["namespace"] == "ops"]
        assert row["key"] == "('user', 1)"
        body = {"namespace": "ops", "key": row["key"]}
        answer = client.post("/api/claims/release", json=body, headers={HEADER: page_token})
        assert answer.status_code == 200, answer.text
        assert held.extend(60) is False  # the holder's next renewal fails
    finally:
        cache.close()


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"namespace": "default"}, 'send {"namespace": NS, "key": KEY}'),
        ({"namespace": 1, "key": "'a'"}, 'send {"namespace": NS, "key": KEY}'),
        ({"namespace": "default", "key": "<object at 0x1>"}, "not a Python literal"),
        ({"namespace": "default", "key": "__import__('os')"}, "not a Python literal"),
        ({"namespace": "default", "key": "'\\x1b[2J'"}, "no live claim"),
    ],
)
def test_a_release_that_cannot_be_done_says_why(
    acting: tuple[TestClient, str], body: dict[str, Any], said: str
) -> None:
    client, page_token = acting
    answer = client.post("/api/claims/release", json=body, headers={HEADER: page_token})
    assert answer.status_code in (400, 404)
    assert said in answer.json()["error"]
    assert "\x1b" not in answer.text
    assert len(client.get("/api/state").json()["claims"]) == 1  # the live claim stays


def test_release_is_refused_without_actions(target: tuple[str, str, str]) -> None:
    with TestClient(create_app(target[0]), **HOST) as client:
        body = {"namespace": "default", "key": repr(target[1])}
        answer = client.post("/api/claims/release", json=body)
    assert answer.status_code == 403 and "--allow-actions" in answer.json()["error"]


@pytest.mark.slow
def test_the_page_releases_a_claim_by_name(
    page: Any, serve: Any, tmp_path: Path, artifacts: Path
) -> None:
    """In headless Chromium: the claims table has a release button (actions on), the page
    asks first, and the claim is gone; the page's source never held the token."""
    from selenium.webdriver.common.by import By
    from test_dashboard_browser import click, open_dashboard, wait_for

    filled = fill(tmp_path / "cache")
    server = serve(filled.directory, "--allow-actions")
    open_dashboard(page, server.url)
    row = "tr[data-claim-key=\"\\'report:2025\\'\"]"
    click(page, f"{row} button.release")
    question = wait_for("the question", lambda: page.switch_to.alert)
    assert "report:2025" in question.text
    question.accept()
    wait_for("the claim to go", lambda: not page.find_elements(By.CSS_SELECTOR, row))
    assert "released the claim on 'report:2025'" in page.find_element(By.ID, "notice").text
    assert filled.claim_token not in page.page_source
    with admin.open_cache(filled.directory) as cache:
        assert admin.claim_count(cache) == 0
    page.save_screenshot(str(artifacts / "dashboard-claim-released.png"))
