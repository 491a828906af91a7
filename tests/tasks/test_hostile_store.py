"""Tasks, schedules and metrics against a store someone wrote junk into (issue 29, §4).

Whoever can write the store can forge a result (documented); they must not stop the workers or
blind the operator with one bad key. Each test writes the junk a hand (or a bug) could leave,
with the real engine on a directory and on a real redis-server, then reads it back through
the dashboard's app, the metrics server of a real worker process, the scheduler or a waiter.
"""

from __future__ import annotations

import logging
import re
import signal
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from diskcache_oxide.tasks import _metrics
from diskcache_oxide.tasks._app import open_store
from tasks_support import Worker

pytestmark = [pytest.mark.oxide, pytest.mark.backends("directory", "redis")]

prometheus_parser = pytest.importorskip(
    "prometheus_client.parser", reason="the metrics tests need prometheus-client"
)
pytest.importorskip("starlette", reason="the dashboard's tests need starlette")
pytest.importorskip("httpx", reason="Starlette's TestClient needs httpx: requirements-dev.txt")
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Using `httpx` with `starlette.testclient`")
    from starlette.testclient import TestClient  # noqa: E402

from diskcache_oxide.dashboard import create_app  # noqa: E402

HOST = {"base_url": "http://127.0.0.1:8000"}
P = _metrics.PREFIX


@pytest.fixture
def opened(store: str) -> Iterator[Any]:
    """A handle on the test's store (a directory, or a namespace of the test's redis-server)."""
    cache = open_store(store)
    try:
        yield cache
    finally:
        cache.close()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in prometheus_parser.text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict[Any, float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def recorded(cache: Any, *names: str) -> _metrics.Recorder:
    """A worker's recorder for ``names`` that counted two starts and a success of each, a
    run of 0.2 s, and one failure of the first, flushed to the store."""
    recorder = _metrics.Recorder(cache, prometheus=False)
    for name in names:
        recorder.count("started", name)
        recorder.count("started", name)
        recorder.count("succeeded", name)
        recorder.observe("run", name, 0.2)
    recorder.failure(names[0], 7, 1, "ValueError: boom", False)
    recorder.flush()
    return recorder


# ---- one malformed entry: skipped and counted, the rest served ----------------------------


def test_junk_metric_entries_are_skipped_counted_and_the_rest_served(
    store: str, opened: Any
) -> None:
    recorded(opened, "app.good", "app.junk")
    # What a hand could write: an old-style key whose bucket is not a number, a counter
    # holding a str, a failure whose time is not a number, one whose id is bytes (which JSON
    # cannot carry), a registry with a non-name in it.
    opened.set(P + "wait.bucket.x:app.good", 1)
    opened.set(P + "started:app.junk", "junk")
    opened.set(P + "run.count:app.junk", -5)
    opened.set(P + "last_failure:app.junk", {"time": "junk", "id": 1, "attempt": 1})
    opened.set(
        P + "last_failure:app.good",
        {"time": 1e400, "id": b"x", "attempt": 1, "error": "e", "final": True},
    )
    registry = getattr(_metrics, "NAMES_KEY", None)  # the layout before issue 29 had none
    names = None if registry is None else opened.get(registry)
    if isinstance(names, dict):
        opened.set(registry, {"names": [*names["names"], 42, "", None]})

    with TestClient(create_app(store), **HOST) as client:
        metrics = client.get("/metrics")
        tasks = client.get("/api/tasks")
    assert metrics.status_code == 200, metrics.text
    found = samples(metrics.text)
    assert value(found, "diskcache_oxide_tasks_started_total", task="app.good") == 2
    assert value(found, "diskcache_oxide_tasks_succeeded_total", task="app.junk") == 1
    assert value(found, "diskcache_oxide_task_run_seconds_count", task="app.good") == 1
    assert value(found, "diskcache_oxide_tasks_bad_entries") >= 6
    assert tasks.status_code == 200, tasks.text
    shown = tasks.json()
    rows = {row["name"]: row for row in shown["tasks"]}
    assert sorted(rows) == ["app.good", "app.junk"]
    assert rows["app.good"]["started"] == 2 and rows["app.junk"]["started"] == 0
    assert rows["app.good"]["last_failure"] is None  # its id was bytes, its time infinite
    assert rows["app.junk"]["last_failure"] is None
    assert shown["bad"] >= 6


def test_a_counter_holding_junk_is_replaced_at_the_next_flush(
    opened: Any, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = _metrics.Recorder(opened, prometheus=False)
    opened.set(P + "started:app.t", "junk")
    opened.set(P + "succeeded:app.t", 2.5)
    recorder.count("started", "app.t")
    recorder.count("succeeded", "app.t")
    with caplog.at_level(logging.WARNING, "diskcache_oxide.tasks"):
        recorder.flush()
        recorder.count("started", "app.t")
        recorder.flush()
    # Replaced once, then counted on: one bad key does not stop every later flush.
    assert opened.get(P + "started:app.t") == 2
    assert not recorder.pending.counts
    replaced = [r for r in caplog.records if "held junk" in r.getMessage()]
    assert len(replaced) == 1, caplog.text
    assert "could not be written" not in caplog.text


# ---- 10,000 names: a bounded scrape, the worker's own names first -------------------------


def test_ten_thousand_names_make_a_bounded_scrape_with_the_worker_s_names_first(
    store: str, opened: Any
) -> None:
    hostile = [f"aaa.forged{i:05d}" for i in range(10_000)]
    # Written as a worker would have: a counter per name, and the registry listing them all.
    for start in range(0, len(hostile), 1000):
        opened.set_many({f"{P}started:{name}": 1 for name in hostile[start : start + 1000]})
    opened.set(_metrics.NAMES_KEY, {"names": hostile})
    bare = _metrics.read_report(opened)
    assert len(bare.totals) == _metrics.NAME_LIMIT
    assert bare.unreported == len(hostile) - _metrics.NAME_LIMIT

    recorded(opened, "zzz.mine")  # sorts after every forged name, and is still reported
    with TestClient(create_app(store), **HOST) as client:
        metrics = client.get("/metrics")
        tasks = client.get("/api/tasks")
    assert metrics.status_code == 200 and tasks.status_code == 200
    found = samples(metrics.text)
    assert value(found, "diskcache_oxide_tasks_started_total", task="zzz.mine") == 2
    reported = {labels for (name, labels) in found if name == "diskcache_oxide_tasks_started_total"}
    # At most the limit: task names this process registered (other test modules' apps, put
    # first as a worker's own) take slots without counters of their own in this store.
    assert len(reported) <= _metrics.NAME_LIMIT
    unreported = value(found, "diskcache_oxide_tasks_unreported_names")
    assert unreported >= len(hostile) + 1 - _metrics.NAME_LIMIT
    # Today's numbers were 26 MB and 3.4 s for /metrics, 1.75 MB for /api/tasks.
    assert len(metrics.content) < 1_000_000, len(metrics.content)
    assert len(tasks.content) < 100_000, len(tasks.content)
    shown = tasks.json()
    assert "zzz.mine" in {row["name"] for row in shown["tasks"]}
    # The same slots: names other modules registered in this process may take some of them.
    assert len(shown["tasks"]) <= _metrics.NAME_LIMIT
    assert len(shown["tasks"]) >= _metrics.NAME_LIMIT - 20
    assert shown["unreported"] == len(hostile) + 1 - len(shown["tasks"])


@pytest.mark.backends("redis")
def test_the_totals_on_redis_are_read_without_listing_the_namespace(opened: Any) -> None:
    recorded(opened, "app.a", "app.b")
    for start in range(0, 20_000, 2000):
        opened.set_many({f"other:{i}": i for i in range(start, start + 2000)})
    client = opened.client

    def calls() -> dict[str, int]:
        # Commands called inside a script count too: a listing shows as ZRANGE, SCAN...
        stats = client.info("commandstats")
        return {name: entry["calls"] for name, entry in stats.items()}

    before = calls()
    totals = _metrics.read_totals(opened)
    after = calls()
    made = {name: n - before.get(name, 0) for name, n in after.items() if n > before.get(name, 0)}
    assert sorted(totals) == ["app.a", "app.b"]
    assert totals["app.a"].counts["started"] == 2
    # The registry and the keys of its names, in a script or two: no listing of the keys.
    listing = {n: c for n, c in made.items() if any(w in n for w in ("scan", "range", "keys"))}
    assert not listing, made
    assert made.get("cmdstat_evalsha", 0) <= 3, made


# ---- the worker's metrics server: a Host check, a warning on a wildcard -------------------


def _metrics_url(worker: Worker) -> str:
    worker.wait_for_log("metrics at http://")
    found = re.search(r"metrics at http://[^:]+:(\d+)/metrics", worker.log)
    assert found, worker.log
    return f"http://127.0.0.1:{found.group(1)}/metrics"


def _get(url: str, host: str) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Host": host})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.mark.slow
@pytest.mark.backends("directory")
def test_the_worker_s_metrics_server_answers_only_to_its_own_host_names(
    app: ModuleType, store: str, start_worker: Any
) -> None:
    worker = start_worker(store, "--metrics-port", "0", "--pool", "thread")
    url = _metrics_url(worker)
    port = url.split(":")[2].split("/")[0]
    status, body = _get(url, f"127.0.0.1:{port}")
    assert status == 200 and b"diskcache_oxide_jobs" in body
    assert _get(url, f"localhost:{port}")[0] == 200
    # A DNS-rebinding page reaches the port under its own name: refused, no names read.
    status, body = _get(url, f"attacker.example:{port}")
    assert status == 400 and b"diskcache_oxide" not in body
    assert "reachable from other machines" not in worker.log
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0


@pytest.mark.slow
@pytest.mark.backends("directory")
def test_a_wildcard_metrics_host_is_warned_of(
    app: ModuleType, store: str, start_worker: Any
) -> None:
    worker = start_worker(
        store, "--metrics-port", "0", "--metrics-host", "0.0.0.0", "--pool", "thread"
    )
    url = _metrics_url(worker)
    assert "0.0.0.0" in worker.log and "reachable from other machines" in worker.log
    assert _get(url, "anything.example")[0] == 200  # bound to every address: any name
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0


# ---- a schedule's state: junk is said once and replaced, catch-up is bounded -------------


def _periodic(store: str, **schedule: Any) -> tuple[Any, Any]:
    """An app on ``store`` with one periodic task of ``schedule`` (a name of its own)."""
    import diskcache_oxide as dc

    tasks = dc.Tasks(store)
    name = f"hostile.beat{time.monotonic_ns()}"

    @tasks.periodic(name=name, **schedule)
    def beat(tick: float = 0.0) -> float:
        return tick

    return tasks, beat


def _queued(tasks: Any) -> list[float]:
    found = []
    while (job := tasks.jobs.take(timeout=0)) is not None:
        found.append(job.value["kwargs"]["tick"])
        tasks.jobs.finish(job)
    return found


@pytest.mark.parametrize(
    "junk",
    [{"last": "junk"}, {"last": float("inf")}, {"last": 1e300}, {"last": -5.0}, "junk", []],
    ids=["str", "inf", "far-future", "negative", "not-a-dict", "a-list"],
)
def test_a_junk_schedule_state_is_said_once_and_replaced_and_the_task_fires(
    store: str, junk: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from diskcache_oxide.tasks._schedules import STATE_PREFIX, Scheduler

    tasks, beat = _periodic(store, every=60)
    tasks.cache.set(STATE_PREFIX + beat.name, junk)
    scheduler = Scheduler(tasks.jobs, [beat])
    now = time.time()
    tick = beat.cadence.latest(now)
    with caplog.at_level(logging.INFO, "diskcache_oxide.tasks"):
        scheduler.run_pass(now)
        assert _queued(tasks) == [tick]
        assert tasks.cache.get(STATE_PREFIX + beat.name) == {"last": tick}
        scheduler.run_pass(now + 60)  # the next tick: the schedule goes on
        assert _queued(tasks) == [tick + 60]
    said = [r.getMessage() for r in caplog.records if "replaced" in r.getMessage()]
    assert len(said) == 1, caplog.text
    assert beat.name in said[0]
    assert beat.last_tick == tick + 60


def test_the_junk_a_schedule_state_held_is_logged_escaped(
    store: str, caplog: pytest.LogCaptureFixture
) -> None:
    from diskcache_oxide.tasks._schedules import STATE_PREFIX, Scheduler

    tasks, beat = _periodic(store, every=60)
    tasks.cache.set(STATE_PREFIX + beat.name, {"last": "\x1b[2J\nINFO forged line"})
    with caplog.at_level(logging.WARNING, "diskcache_oxide.tasks"):
        Scheduler(tasks.jobs, [beat]).run_pass()
    said = [r.getMessage() for r in caplog.records if "replaced" in r.getMessage()]
    assert len(said) == 1, caplog.text
    assert "\x1b" not in said[0] and "\n" not in said[0]
    assert "\\x1b[2J\\nINFO forged line" in said[0]


@pytest.mark.parametrize("schedule", [{"cron": "* * * * *"}, {"every": 60}], ids=["cron", "every"])
@pytest.mark.parametrize("missed", ["skip", "catch_up"])
def test_a_last_tick_of_1970_costs_what_a_recent_one_does(
    store: str, schedule: dict[str, Any], missed: str
) -> None:
    from diskcache_oxide.tasks._schedules import STATE_PREFIX, Scheduler

    pytest.importorskip("cronsim", reason="cron schedules need cronsim")
    tasks, beat = _periodic(store, missed=missed, max_catch_up=3, **schedule)
    tasks.cache.set(STATE_PREFIX + beat.name, {"last": 0})
    now = time.time()
    tick = beat.cadence.latest(now)
    Scheduler(tasks.jobs, [beat]).run_pass(now)
    fired = _queued(tasks)
    caught = [tick - 60 * i for i in (3, 2, 1)] if missed == "catch_up" else []
    assert fired == [*caught, tick]
    # Every minute since 1970 was missed; those not caught up are counted, not walked.
    assert beat.missed_count == round(tick / 60) - 1 - len(caught)


# ---- a waiter meets junk on its wake queue; an id past 64 bits ---------------------------


def _junk_on_the_wake_queue(store: str, task_id: int) -> None:
    """A value a handle without pickle cannot decode (a pickle), pushed where the worker's
    wake token goes: it stays in front of any token."""
    import argparse

    from diskcache_oxide.tasks._payload import wake_prefix

    writer = open_store(store, pickle=True)
    try:
        writer.push(argparse.Namespace(forged=True), prefix=wake_prefix(task_id))
    finally:
        writer.close()


def test_junk_on_the_wake_queue_is_ignored_until_the_timeout(app: ModuleType, store: str) -> None:
    from diskcache_oxide import ResultTimeout

    result = app.add.delay(1, 2)  # no worker: it stays queued
    _junk_on_the_wake_queue(store, result.id)
    began = time.monotonic()
    with pytest.raises(ResultTimeout):
        result.get(timeout=1)
    assert time.monotonic() - began >= 0.9


@pytest.mark.slow
def test_a_waiter_behind_junk_still_gets_the_result_a_worker_stores(
    app: ModuleType, store: str, start_worker: Any
) -> None:
    import asyncio

    result = app.add.delay(20, 22)
    _junk_on_the_wake_queue(store, result.id)
    worker = start_worker(store, "--pool", "thread")
    assert result.get(timeout=60) == 42
    assert asyncio.run(result.aget(timeout=10)) == 42
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0


@pytest.mark.parametrize("task_id", [2**70, 2**63, -(2**70), 0])
def test_an_id_no_store_can_hold_is_the_same_task_error_on_every_store(
    app: ModuleType, task_id: int
) -> None:
    from diskcache_oxide import TaskError

    result = app.tasks.result(task_id)
    assert result.status == "unknown" and not result.ready()
    with pytest.raises(TaskError, match=f"no task {task_id} in "):
        result.get()
    with pytest.raises(TaskError, match=f"no task {task_id} in "):
        result.get(timeout=0)
    assert result.cancel() is False
