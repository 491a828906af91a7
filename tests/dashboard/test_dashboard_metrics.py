"""The dashboard's tasks: ``/metrics`` (Prometheus's text, parsed by prometheus_client's
parser) and ``/api/tasks`` (the tasks section), read from what a real worker, started through
the command, left in the store (D-063, point 5). On a directory, a Redis server and a
cluster; the section drawn in headless Chromium on a directory."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import namespace_url

pytest.importorskip("httpx", reason="Starlette's TestClient needs httpx: requirements-dev.txt")
parser = pytest.importorskip(
    "prometheus_client.parser", reason="the metrics tests need prometheus-client"
)

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Using `httpx` with `starlette.testclient`")
    from starlette.testclient import TestClient  # noqa: E402

import diskcache_oxide  # noqa: E402
from diskcache_oxide.dashboard import create_app  # noqa: E402

HOST = {"base_url": "http://127.0.0.1:8000"}
TASKS = Path(__file__).resolve().parents[1] / "tasks"
OK, BAD, FLAKY = "metrics_tasks.ok", "metrics_tasks.bad", "metrics_tasks.flaky"


@pytest.fixture(params=["directory", "redis", "cluster"])
def ran(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store where a worker (``--burst``) ran 3 ok, 2 bad and 1 flaky task (it fails its
    first attempt), with one ok call scheduled an hour ahead."""
    if request.param == "directory":
        store = str(tmp_path / "store")
        os.mkdir(store)
    else:
        cluster = request.param == "cluster"
        server = request.getfixturevalue("redis_cluster_url" if cluster else "redis_url")
        store = namespace_url(server, f"m{uuid.uuid4().hex[:8]}", cluster=cluster)
    yield run_tasks(store)


def run_tasks(store: str) -> str:
    """Queue the calls :func:`ran` describes in ``store`` and run a ``--burst`` worker."""
    env = {**os.environ, "DCO_TASKS_DIR": store}
    env["PYTHONPATH"] = os.pathsep.join([str(TASKS), *filter(None, [env.get("PYTHONPATH")])])
    queue = (
        "import metrics_tasks as m\n"
        "for i in range(3): m.ok.delay(i)\n"
        "for i in range(2): m.bad.delay(i)\n"
        "m.flaky.delay('a')\n"
        "m.ok.schedule((9,), delay=3600)\n"
    )
    subprocess.run([sys.executable, "-c", queue], env=env, check=True, timeout=60)
    done = subprocess.run(
        [sys.executable, "-m", "diskcache_oxide", "worker", store, "metrics_tasks"]
        + ["--burst", "--pool", "thread"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return store


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def _value(found: dict[Any, float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_serves_every_worker_s_totals_and_the_depths(ran: str) -> None:
    with TestClient(create_app(ran), **HOST) as client:
        answer = client.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    found = _samples(answer.text)
    want = {
        OK: (3, 3, 0, 0),
        BAD: (2, 0, 2, 0),
        FLAKY: (2, 1, 0, 1),
    }
    for task, numbers in want.items():
        got = tuple(
            _value(found, f"diskcache_oxide_tasks_{metric}_total", task=task)
            for metric in ("started", "succeeded", "failed", "retried")
        )
        assert got == numbers, task
    assert _value(found, "diskcache_oxide_task_run_seconds_count", task=FLAKY) == 2
    assert _value(found, "diskcache_oxide_task_wait_seconds_count", task=OK) == 3
    assert _value(found, "diskcache_oxide_task_run_seconds_bucket", task=OK, le="+Inf") == 3
    depth = {
        state: _value(found, "diskcache_oxide_jobs", queue="default", state=state)
        for state in ("ready", "scheduled", "leased", "dead")
    }
    assert depth == {"ready": 0, "scheduled": 1, "leased": 0, "dead": 2}


def test_the_tasks_section_lists_names_counts_and_latest_failures(ran: str) -> None:
    with TestClient(create_app(ran), **HOST) as client:
        page = client.get("/")
        first = client.get("/api/tasks").json()
    assert 'id="tasks"' in page.text
    rows = {row["name"]: row for row in first["tasks"]}
    assert sorted(rows) == [BAD, FLAKY, OK]
    assert (rows[OK]["succeeded"], rows[BAD]["failed"], rows[FLAKY]["retried"]) == (3, 2, 1)
    assert rows[OK]["last_failure"] is None
    assert rows[BAD]["last_failure"]["error"].startswith("ValueError: bad input")
    assert rows[BAD]["last_failure"]["final"] is True
    assert rows[FLAKY]["last_failure"]["final"] is False
    assert rows[OK]["run_mean"] is not None
    # A rate needs two reads at least a second apart: the first read has none.
    assert rows[OK]["per_minute"]["succeeded"] is None


def test_an_empty_store_has_no_tasks_and_metrics_still_parse(tmp_path: Path) -> None:
    diskcache_oxide.Cache(str(tmp_path)).close()
    with TestClient(create_app(tmp_path), **HOST) as client:
        assert client.get("/api/tasks").json()["tasks"] == []
        answer = client.get("/metrics")
    assert answer.status_code == 200
    assert [f.name for f in parser.text_string_to_metric_families(answer.text)][-1] == (
        "diskcache_oxide_jobs"
    )


def test_metrics_without_prometheus_client_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    diskcache_oxide.Cache(str(tmp_path)).close()
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import fails as if absent
    with TestClient(create_app(tmp_path), **HOST) as client:
        answer = client.get("/metrics")
        assert client.get("/api/tasks").status_code == 200  # the section needs no extra
    assert answer.status_code == 501
    assert "diskcache_oxide[metrics]" in answer.text


@pytest.mark.slow
def test_the_page_draws_the_tasks_with_rates_and_failures(
    tmp_path: Path, serve: Any, page: Any, artifacts: Path
) -> None:
    from selenium.webdriver.common.by import By

    (tmp_path / "store").mkdir()
    store = run_tasks(str(tmp_path / "store"))
    server = serve(Path(store))
    page.get(server.url)

    def cell(task: str, column: str) -> str:
        try:
            found = page.find_element(By.CSS_SELECTOR, f'#tasks tr[data-task="{task}"] .{column}')
            return str(found.text)
        except Exception:  # not drawn yet, or redrawn under us
            return ""

    def drawn(predicate: Any, what: str) -> None:
        deadline = time.monotonic() + 30
        while not predicate():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.1)

    drawn(lambda: cell(BAD, "failed") == "2", "the bad task's failures")
    assert cell(OK, "succeeded") == "3" and cell(FLAKY, "retried") == "1"
    assert "ValueError: bad input" in cell(BAD, "last-failure")
    assert "dead" in cell(BAD, "last-failure")
    assert "retried" in cell(FLAKY, "last-failure")
    # Rates from the second read a second or more after the first: nothing ran since.
    drawn(lambda: cell(OK, "rate") == "0.0 / 0.0", "the rates")
    height = page.execute_script("return document.documentElement.scrollHeight")
    page.set_window_size(1280, max(800, int(height) + 140))
    drawn(lambda: cell(OK, "rate") == "0.0 / 0.0", "the redraw at the new size")
    page.save_screenshot(str(artifacts / "dashboard-tasks.png"))
