"""The tasks' metrics (D-063, point 5): real workers started through the command run tasks
that succeed, fail and retry; each serves its own counts at ``--metrics-port`` over HTTP on
127.0.0.1, and the store keeps every worker's totals (what the dashboard serves)."""

from __future__ import annotations

import importlib
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

import diskcache_oxide
import pytest
from diskcache_oxide import TaskFailed
from diskcache_oxide.tasks import _metrics
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from tasks_support import Worker, wait_for

client = pytest.importorskip("prometheus_client", reason="the metrics tests need it")
parser = pytest.importorskip(
    "prometheus_client.parser", reason="the metrics tests need prometheus-client"
)

pytestmark = pytest.mark.oxide
SLOW = pytest.mark.slow  # real worker processes

HERE = Path(__file__).parent
OK, BAD, FLAKY = "metrics_tasks.ok", "metrics_tasks.bad", "metrics_tasks.flaky"


@pytest.fixture
def mapp(store: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``metrics_tasks`` imported afresh, its app on the test's store."""
    monkeypatch.setenv("DCO_TASKS_DIR", store)
    monkeypatch.syspath_prepend(str(HERE))
    sys.modules.pop("metrics_tasks", None)
    return importlib.import_module("metrics_tasks")


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The samples of a ``/metrics`` page, parsed by prometheus_client's own parser."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    return samples(text)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict[Any, float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def counts(found: dict[Any, float], task: str) -> dict[str, float]:
    names = {m: f"diskcache_oxide_tasks_{m}_total" for m in _metrics.COUNTERS}
    return {m: value(found, name, task=task) for m, name in names.items()}


def summed(pages: Iterable[dict[Any, float]], task: str) -> dict[str, float]:
    total = dict.fromkeys(_metrics.COUNTERS, 0.0)
    for page in pages:
        for metric, count in counts(page, task).items():
            total[metric] += count
    return total


def metrics_url(worker: Worker) -> str:
    worker.wait_for_log("metrics at http://")
    found = re.search(r"metrics at (http://127\.0\.0\.1:\d+/metrics)", worker.log)
    assert found, worker.log
    return found.group(1)


@SLOW
@pytest.mark.backends
def test_two_workers_count_by_name_and_the_store_keeps_the_totals(
    mapp: ModuleType, store: str, start_worker: Any
) -> None:
    oks = [mapp.ok.delay(i) for i in range(6)]
    bads = [mapp.bad.delay(i) for i in range(3)]
    flakies = [mapp.flaky.delay(f"k{i}") for i in range(2)]
    later = mapp.ok.schedule((99,), delay=3600)  # stays scheduled: the depth's "scheduled"
    workers = [
        start_worker(store, "--metrics-port", "0", "-c", "2", modules=("metrics_tasks",))
        for _ in range(2)
    ]
    urls = [metrics_url(worker) for worker in workers]
    assert [r.get(timeout=60) for r in oks] == [i + 1 for i in range(6)]
    for r in bads:
        with pytest.raises(TaskFailed, match="bad input"):
            r.get(timeout=60)
    assert sorted(r.get(timeout=60) for r in flakies) == ["k0", "k1"]

    expected = {
        OK: {"started": 6, "succeeded": 6, "failed": 0, "retried": 0},
        BAD: {"started": 3, "succeeded": 0, "failed": 3, "retried": 0},
        FLAKY: {"started": 4, "succeeded": 2, "failed": 0, "retried": 2},
    }
    # Each worker counts what it ran; together, every run once. (A waiter wakes before the
    # worker counts its success, hence the polling.)
    for task, want in expected.items():
        wait_for(
            lambda task=task, want=want: summed([scrape(u) for u in urls], task) == want,
            what=f"the workers' counts of {task}",
        )
    pages = [scrape(u) for u in urls]
    for page in pages:
        # The depth of the queue each worker serves, read at the scrape.
        assert value(page, "diskcache_oxide_jobs", queue="default", state="scheduled") == 1
        assert value(page, "diskcache_oxide_jobs", queue="default", state="dead") == 3
        assert value(page, "diskcache_oxide_jobs", queue="default", state="leased") == 0
        assert value(page, "diskcache_oxide_jobs", queue="default", state="ready") == 0
    runs = sum(value(p, "diskcache_oxide_task_run_seconds_count", task=FLAKY) for p in pages)
    waits = sum(value(p, "diskcache_oxide_task_wait_seconds_count", task=OK) for p in pages)
    assert (runs, waits) == (4, 6)  # every run timed; the wait once per job

    for worker in workers:
        worker.signal(signal.SIGTERM)
    assert [worker.wait() for worker in workers] == [0, 0]
    # Flushed at exit: the store holds both workers' totals, for any process to read.
    cache = diskcache_oxide.open(store) if "://" in store else diskcache_oxide.Cache(store)
    try:
        totals = _metrics.read_totals(cache)
        assert {task: totals[task].counts for task in expected} == expected
        assert sum(totals[OK].buckets["wait"]) == 6
        assert sum(totals[FLAKY].buckets["run"]) == 4
        assert totals[FLAKY].observed == {"wait": 2, "run": 4}
        failure = totals[BAD].last_failure
        assert failure is not None and failure["final"] is True
        assert failure["error"].startswith("ValueError: bad input")
        assert totals[FLAKY].last_failure is not None
        assert totals[FLAKY].last_failure["final"] is False
        page = samples(_metrics.exposition(cache)[0].decode())
        assert counts(page, FLAKY) == expected[FLAKY]
        assert value(page, "diskcache_oxide_jobs", queue="default", state="scheduled") == 1
    finally:
        cache.close()
    assert later.status == "queued"


@SLOW
def test_metrics_port_without_prometheus_client_names_the_extra(
    mapp: ModuleType, store: str, tmp_path: Path
) -> None:
    # A fresh interpreter where prometheus_client cannot be imported.
    blocker = tmp_path / "blocked"
    blocker.mkdir()
    (blocker / "prometheus_client.py").write_text("raise ImportError('blocked by the test')\n")
    env = {"PYTHONPATH": f"{blocker}:{HERE}:{':'.join(sys.path)}", "DCO_TASKS_DIR": store}
    done = subprocess.run(
        [sys.executable, "-m", "diskcache_oxide", "worker", store, "metrics_tasks"]
        + ["--metrics-port", "0", "--burst"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "diskcache_oxide[metrics]" in done.stderr
    # Without the flag, the worker runs and still counts in the store.
    mapp.ok.delay(1)
    done = subprocess.run(
        [sys.executable, "-m", "diskcache_oxide", "worker", store, "metrics_tasks", "--burst"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    cache = diskcache_oxide.Cache(store)
    try:
        assert _metrics.read_totals(cache)[OK].counts["succeeded"] == 1
    finally:
        cache.close()


@SLOW
@pytest.mark.parametrize("pool", ["thread", "async"])
def test_each_pool_counts_in_the_store(
    mapp: ModuleType, store: str, start_worker: Any, pool: str
) -> None:
    mapp.ok.delay(1)
    mapp.bad.delay(2)
    mapp.flaky.delay("p")
    worker = start_worker(store, "--pool", pool, "--burst", modules=("metrics_tasks",))
    assert worker.wait() == 0, worker.log
    totals = mapp.tasks.totals()
    assert totals[OK].counts == {"started": 1, "succeeded": 1, "failed": 0, "retried": 0}
    assert totals[BAD].counts == {"started": 1, "succeeded": 0, "failed": 1, "retried": 0}
    assert totals[FLAKY].counts == {"started": 2, "succeeded": 1, "failed": 0, "retried": 1}


@SLOW
def test_a_metrics_port_in_use_stops_the_worker_saying_so(
    mapp: ModuleType, store: str, start_worker: Any
) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        worker = start_worker(store, "--metrics-port", port, modules=("metrics_tasks",))
        assert worker.wait() == 1
    assert f"cannot serve metrics on 127.0.0.1:{port}" in worker.log


class Recorders(RuleBasedStateMachine):
    """Three workers' recorders count and flush, in any order, into one real directory;
    whenever all have flushed, the store's totals are the sum of everything counted (a
    model), and each recorder's own Prometheus counters are what it counted."""

    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self.directory = tempfile.TemporaryDirectory()
        self.cache = diskcache_oxide.Cache(self.directory.name)
        self.recorders = [_metrics.Recorder(self.cache, prometheus=True) for _ in range(3)]
        self.model: dict[str, dict[str, int]] = {}
        self.own: list[dict[tuple[str, str], int]] = [{} for _ in self.recorders]
        self.runs: dict[str, int] = {}

    def teardown(self) -> None:
        self.cache.close()
        self.directory.cleanup()

    @rule(
        worker=st.integers(0, 2),
        metric=st.sampled_from(_metrics.COUNTERS),
        task=st.sampled_from(["a.x", "b.y:z", "c"]),
    )
    def count(self, worker: int, metric: str, task: str) -> None:
        self.recorders[worker].count(metric, task)
        counts = self.model.setdefault(task, dict.fromkeys(_metrics.COUNTERS, 0))
        counts[metric] += 1
        self.own[worker][(metric, task)] = self.own[worker].get((metric, task), 0) + 1

    @rule(
        worker=st.integers(0, 2),
        task=st.sampled_from(["a.x", "c"]),
        seconds=st.floats(0, 1000, allow_nan=False),
    )
    def observe(self, worker: int, task: str, seconds: float) -> None:
        self.recorders[worker].observe("run", task, seconds)
        self.runs[task] = self.runs.get(task, 0) + 1
        self.model.setdefault(task, dict.fromkeys(_metrics.COUNTERS, 0))

    @rule(worker=st.integers(0, 2))
    def flush(self, worker: int) -> None:
        self.recorders[worker].flush()

    @invariant()
    def totals_once_all_flushed(self) -> None:
        for recorder in self.recorders:
            recorder.flush()
        totals = _metrics.read_totals(self.cache)
        assert {task: entry.counts for task, entry in totals.items()} == self.model
        for task, runs in self.runs.items():
            assert sum(totals[task].buckets["run"]) == runs == totals[task].observed["run"]

    @invariant()
    def each_registry_holds_its_own(self) -> None:
        for recorder, own in zip(self.recorders, self.own, strict=True):
            page = samples(client.generate_latest(recorder.registry).decode())
            for (metric, task), number in own.items():
                name = f"diskcache_oxide_tasks_{metric}_total"
                assert value(page, name, task=task) == number


Recorders.TestCase.settings = settings(max_examples=25, stateful_step_count=15, deadline=None)
test_recorders_add_up = Recorders.TestCase
