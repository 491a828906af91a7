"""The worker command in real processes: SIGTERM and SIGINT with a grace period, a second
signal, SIGKILL and the lease, timeouts on each pool, the async pool, recycling, and a task
module that fails to import.

A representative subset also runs on a Redis server and a Redis Cluster (the conformance
harness, tests/helpers/backends.py): SIGTERM on the process pool, SIGKILL and the lease, and the
async pool. The worker there is started as ``diskcache-oxide worker 'redis://...?namespace=NS'
sample_tasks``."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import diskcache_oxide as dc
import pytest
from tasks_support import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.oxide]

#: The pools on a directory, and the process pool on each Redis backend too (as the harness
#: does for a module marked ``backends``, DCO_BACKENDS=directory,... keeps only those named).
_ONLY = [name for name in os.environ.get("DCO_BACKENDS", "").split(",") if name]
POOLS_AND_BACKENDS = pytest.mark.parametrize(
    ("pool", "backend"),
    [
        (pool, backend)
        for pool, backend in [
            ("process", "directory"),
            ("thread", "directory"),
            ("async", "directory"),
            ("process", "redis"),
            ("process", "cluster"),
        ]
        if not _ONLY or backend in _ONLY
    ],
    indirect=["backend"],
)


def _runs(markers: Path, name: str, event: str) -> list[Path]:
    return sorted(markers.glob(f"{name}.{event}.*"))


@POOLS_AND_BACKENDS
def test_sigterm_mid_task_lets_it_finish_within_the_grace(
    app: ModuleType, store: str, markers: Path, start_worker: Any, pool: str
) -> None:
    worker = start_worker(store, "--pool", pool, "--grace", "30")
    result = app.sleepy.delay(str(markers), "t", 1.0)
    wait_for(lambda: _runs(markers, "t", "start"), what="the task to start")
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    assert result.get(timeout=0) == "t"  # finished, not cut short
    assert len(_runs(markers, "t", "end")) == 1
    assert "taking no more tasks" in worker.log


@POOLS_AND_BACKENDS
def test_sigterm_past_the_grace_releases_the_task(
    app: ModuleType, store: str, markers: Path, start_worker: Any, pool: str
) -> None:
    worker = start_worker(store, "--pool", pool, "--grace", "0.3")
    result = app.sleepy.delay(str(markers), "r", 30.0)
    wait_for(lambda: _runs(markers, "r", "start"), what="the task to start")
    worker.signal(signal.SIGINT)
    assert worker.wait() == 0
    info = app.tasks.jobs.get(result.id)
    # Released: ready again at once, its attempt not counted.
    assert (info.state, info.attempts) == ("ready", 0)
    assert info.due <= time.time()
    assert result.status == "queued"
    assert "released 1 running task(s)" in worker.log
    assert _runs(markers, "r", "end") == []


def test_a_second_signal_stops_at_once(
    app: ModuleType, store: str, markers: Path, start_worker: Any
) -> None:
    worker = start_worker(store, "--pool", "process", "--grace", "600")
    result = app.sleepy.delay(str(markers), "s", 30.0)
    wait_for(lambda: _runs(markers, "s", "start"), what="the task to start")
    worker.signal(signal.SIGTERM)
    worker.wait_for_log("taking no more tasks")
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 4
    assert app.tasks.jobs.get(result.id).state == "ready"


@pytest.mark.backends
def test_a_sigkilled_worker_s_task_comes_back_after_its_lease(
    app: ModuleType, store: str, markers: Path, start_worker: Any
) -> None:
    first = start_worker(store, "--pool", "process")
    result = app.sleepy.delay(str(markers), "k", 2.0)  # lease 1.5 s, retries 1
    wait_for(lambda: _runs(markers, "k", "start"), what="the task to start")
    first.signal(signal.SIGKILL)
    first.wait()
    assert app.tasks.jobs.get(result.id).state == "leased"  # until its lease runs out
    second = start_worker(store, "--pool", "process")
    assert result.get(timeout=60) == "k"
    assert len(_runs(markers, "k", "start")) == 2  # run once more
    assert len(_runs(markers, "k", "end")) == 1  # the killed run never finished
    second.wait_for_log("sample_tasks.sleepy id=")
    assert "attempt=2/2" in second.log
    second.signal(signal.SIGTERM)
    assert second.wait() == 0


def test_the_heartbeat_keeps_a_task_longer_than_its_lease(
    app: ModuleType, store: str, markers: Path, start_worker: Any
) -> None:
    workers = [start_worker(store, "--pool", "thread") for _ in range(2)]
    result = app.sleepy.delay(str(markers), "h", 4.0)  # four times its lease of 1.5 s
    assert result.get(timeout=60) == "h"
    assert len(_runs(markers, "h", "start")) == 1  # never taken by the other worker
    for worker in workers:
        worker.signal(signal.SIGTERM)
    assert [worker.wait() for worker in workers] == [0, 0]


@pytest.mark.parametrize(
    ("pool", "task"),
    [("process", "too_slow"), ("thread", "too_slow_python"), ("async", "async_too_slow")],
)
def test_a_task_past_its_timeout_is_ended_and_fails_an_attempt(
    app: ModuleType, store: str, start_worker: Any, pool: str, task: str
) -> None:
    result = getattr(app, task).delay(30.0)
    worker = start_worker(store, "--pool", pool, "--burst")
    with pytest.raises(dc.TaskFailed) as caught:
        result.get(timeout=60)
    assert caught.value.type_name == "TaskTimeout"
    assert "ran past its timeout of 0.5 s" in caught.value.message
    (dead,) = app.tasks.jobs.dead()
    assert (dead.id, dead.attempts) == (result.id, 1)
    assert worker.wait() == 0
    assert "timeout, dead" in worker.log


@pytest.mark.backends
def test_async_tasks_on_the_async_pool(app: ModuleType, store: str, start_worker: Any) -> None:
    results = [app.async_add.delay(i, i) for i in range(20)] + [app.add.delay(1, 1)]
    worker = start_worker(store, "--pool", "async", "--concurrency", "8", "--burst")
    assert [r.get(timeout=60) for r in results] == [2 * i for i in range(20)] + [2]
    assert worker.wait() == 0


def test_recycling_process_children(app: ModuleType, store: str, start_worker: Any) -> None:
    results = [app.add.delay(i, 0) for i in range(5)]
    worker = start_worker(store, "--max-tasks-per-child", "2", "--burst")
    assert [r.get(timeout=60) for r in results] == list(range(5))
    assert worker.wait() == 0
    assert worker.log.count("recycling child") == 2
    memory = start_worker(store, "--max-memory-per-child", "1", "--burst")
    assert app.add.delay(1, 2).get(timeout=60) == 3
    assert memory.wait() == 0
    assert "recycling child" in memory.log and "limit 1.0 MiB" in memory.log


def test_a_module_that_fails_to_import(store: str, tmp_path: Path, start_worker: Any) -> None:
    (tmp_path / "broken_tasks.py").write_text("raise RuntimeError('no database here')\n")
    worker = start_worker(store, modules=("broken_tasks",))
    assert worker.wait() == 3
    assert "cannot import the task module 'broken_tasks': RuntimeError: no database here" in (
        worker.log
    )
    missing = start_worker(store, modules=("no_such_tasks",))
    assert missing.wait() == 3
    assert "ModuleNotFoundError" in missing.log
    (tmp_path / "no_tasks.py").write_text("x = 1\n")
    empty = start_worker(store, modules=("no_tasks",))
    assert empty.wait() == 3
    assert "declare no task" in empty.log


def test_bad_usage_exits_2(store: str, start_worker: Any) -> None:
    worker = start_worker(store, "--pool", "thread", "--max-tasks-per-child", "3")
    assert worker.wait() == 2
    assert "need --pool process" in worker.log


def test_a_child_that_dies_mid_task_fails_the_attempt(
    app: ModuleType, store: str, start_worker: Any
) -> None:
    result = app.crash.delay(9)
    after = app.add.delay(1, 1)
    worker = start_worker(store, "--pool", "process", "--burst")
    with pytest.raises(dc.TaskFailed) as caught:
        result.get(timeout=60)
    assert caught.value.type_name == "WorkerCrashed"
    assert "exited with code 9" in caught.value.message
    assert after.get(timeout=60) == 2  # a new child took over
    assert worker.wait() == 0


def test_jobs_that_are_not_this_worker_s_tasks(
    app: ModuleType, store: str, start_worker: Any
) -> None:
    jobs = app.tasks.jobs
    unknown = jobs.put({"task": "elsewhere.job", "args": [], "kwargs": {}}, max_attempts=1)
    foreign = jobs.put("not a task call", max_attempts=1)
    worker = start_worker(store, "--pool", "thread", "--burst")
    assert worker.wait() == 0
    dead = {info.id: info.error for info in jobs.dead()}
    assert "no task named 'elsewhere.job' in this worker: import its module" in dead[unknown]
    assert "not a task call" in dead[foreign]
    with pytest.raises(dc.TaskFailed, match="TaskDead"):
        app.tasks.result(unknown).get(timeout=0)


@pytest.mark.parametrize("pool", ["process", "thread", "async"])
def test_current_names_the_running_task_and_requeue_spends_no_attempt(
    app: ModuleType, store: str, tmp_path: Path, start_worker: Any, pool: str
) -> None:
    """``tasks.current()`` inside a run gives its id, name and attempt, on every pool (None
    outside a worker); a task that raises ``Requeue`` is run again without spending an
    attempt, so a ``retries=0`` task still succeeds on its second run."""
    from diskcache_oxide.tasks import current

    assert current() is None
    who = app.who_am_i.delay()
    markers = tmp_path / "markers"
    markers.mkdir()
    later = app.not_yet.delay(str(markers))
    worker = start_worker(store, "--pool", pool, "--burst")
    assert who.get(timeout=60) == [who.id, "sample_tasks.who_am_i", 1, 3]
    assert later.get(timeout=60) == "done"
    assert worker.wait() == 0
    assert "requeued" in worker.log
