"""Declaring, queueing and waiting on tasks: names, the safe format at ``delay()``,
TaskResult (status, get, cancel, await), failures and result expiry. The tasks run in real
worker processes started with ``--burst`` (they exit once no job is due)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import diskcache_oxide as dc
import pytest
from diskcache_oxide.tasks import STATUSES

pytestmark = [pytest.mark.oxide, pytest.mark.backends]


def test_names_are_module_qualname(app: ModuleType) -> None:
    assert app.add.name == "sample_tasks.add"
    assert app.add(2, 3) == 5  # calling it runs it here
    assert app.async_add.is_async


def test_a_task_of_a_script_run_by_its_path_needs_a_name(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(
        "import tempfile\n"
        "from diskcache_oxide import Tasks\n"
        "tasks = Tasks(tempfile.mkdtemp())\n"
        "try:\n"
        "    @tasks.task\n"
        "    def work(): pass\n"
        "except ValueError as error:\n"
        "    print(error)\n"
        "@tasks.task(name='app.tasks.work')\n"
        "def named(): pass\n"
        "print(named.name)\n"
    )
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout
    assert "defined in a script run by its path" in out
    assert "name='app.tasks.NAME'" in out
    assert out.strip().endswith("app.tasks.work")


def test_an_argument_that_cannot_be_stored_is_refused_at_delay(app: ModuleType) -> None:
    with pytest.raises(dc.UnsupportedTypeError, match="sample_tasks.add: an argument cannot"):
        app.add.delay(object(), 1)
    with pytest.raises(dc.UnsupportedTypeError):
        app.add.schedule((1,), {"b": Point(1)}, delay=1)
    assert len(app.tasks.jobs) == 0  # nothing was queued


class Point:
    def __init__(self, x: int) -> None:
        self.x = x


def test_pickle_true_opts_in(tmp_path: Path) -> None:
    tasks = dc.Tasks(str(tmp_path), pickle=True)

    @tasks.task(name="tests.pickled")
    def pickled(p: Point) -> int:
        return p.x

    result = pickled.delay(Point(4))
    assert tasks.jobs.get(result.id).value["args"][0].x == 4


def test_status_cancel_and_a_wait_that_times_out(app: ModuleType) -> None:
    result = app.add.delay(1, 2)
    assert result.status == "queued" and result.status in STATUSES
    with pytest.raises(dc.ResultTimeout):
        result.get(timeout=0.1)
    assert result.cancel() is True
    assert result.status == "cancelled"
    assert result.cancel() is False
    with pytest.raises(dc.TaskCancelled):
        result.get()
    assert len(app.tasks.jobs) == 0


def test_schedule_and_unique(app: ModuleType) -> None:
    later = app.add.schedule((1, 2), delay=60)
    assert app.tasks.jobs.counts().scheduled == 1
    assert later.status == "queued"
    first = app.once_at_a_time.delay("k")
    assert app.once_at_a_time.delay("k") == first
    assert app.once_at_a_time.delay("other") != first
    with pytest.raises(TypeError, match="one of delay= and eta="):
        app.add.schedule((1, 2))


def test_results_failures_and_await(app: ModuleType, store: str, start_worker: Any) -> None:
    ok = [app.add.delay(i, 1) for i in range(3)]
    failing = app.boom.delay("x")
    unstorable = app.unstorable.delay()
    expiring = app.short_lived.delay(7)
    worker = start_worker(store, "--pool", "thread", "--burst")
    assert [r.get(timeout=60) for r in ok] == [1, 2, 3]

    with pytest.raises(dc.TaskFailed) as caught:
        failing.get(timeout=60)
    error = caught.value
    assert (error.type_name, error.message) == ("ValueError", "bad input: x")
    assert 'raise ValueError(f"bad input: {text}")' in error.traceback
    assert "diskcache_oxide" not in error.traceback  # the worker's frames are left out
    assert failing.status == "failed"
    dead = app.tasks.jobs.dead()
    assert [info.id for info in dead] == [failing.id]  # where the CLI and dashboard show it
    assert dead[0].error == "ValueError: bad input: x"

    with pytest.raises(dc.TaskFailed, match="cannot be stored"):
        unstorable.get(timeout=60)

    async def awaited() -> Any:
        return await app.add.delay(20, 1), await app.async_add.delay(1, 1)

    assert asyncio.run(asyncio.wait_for(awaited(), 60)) == (21, 2)

    assert expiring.get(timeout=60) == 7
    time.sleep(0.6)  # past its result_expire
    assert expiring.status == "unknown"
    with pytest.raises(dc.TaskError, match="its result expired"):
        expiring.get(timeout=0)
    assert worker.wait() == 0
    assert "sample_tasks.add id=" in worker.log and "attempt=1/3" in worker.log


def test_a_waiter_in_another_process_is_woken(
    app: ModuleType, store: str, start_worker: Any
) -> None:
    result = app.add.delay(40, 2)
    # The waiter's backstop re-check is pushed out to an hour, so it can only return by
    # being woken: by the token the worker pushes on the task's wake queue.
    waiter = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, diskcache_oxide as dc, diskcache_oxide.tasks._results as r;"
            "r.RECHECK = 3600.0;"
            f"result = dc.Tasks(sys.argv[1]).result({result.id});"
            "print(result.status, flush=True);"
            "print(result.get())",
            store,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert waiter.stdout is not None
        assert waiter.stdout.readline().strip() == "queued"  # it waits before the worker starts
        worker = start_worker(store, "--pool", "thread", "--burst")
        out, _ = waiter.communicate(timeout=60)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    assert out.strip() == "42"
    assert result.get(timeout=0) == 42
    assert worker.wait() == 0


def test_tasks_takes_a_cache_a_path_or_a_file_url(tmp_path: Path) -> None:
    cache = dc.Cache(str(tmp_path / "a"), eviction_policy="none")
    on_cache = dc.Tasks(cache)
    assert on_cache.cache is cache and on_cache.jobs.cache is cache
    on_url = dc.Tasks(f"file://{tmp_path / 'b'}", queue="mail")
    assert on_url.cache.directory == str(tmp_path / "b")
    assert on_url.cache.eviction_policy == "none"
    assert on_url.jobs.queues == ("mail",)


def test_schedule_with_eta_and_a_timedelta(app: ModuleType) -> None:
    import datetime

    soon = app.add.schedule((1, 2), eta=datetime.datetime.now() + datetime.timedelta(hours=1))
    later = app.add.schedule([3, 4], {"b": 5}, delay=datetime.timedelta(minutes=5))
    jobs = app.tasks.jobs
    assert jobs.counts().scheduled == 2
    assert jobs.get(soon.id).due > time.time() + 3000
    assert jobs.get(later.id).value == {
        "task": "sample_tasks.add",
        "args": [3, 4],
        "kwargs": {"b": 5},
    }


def test_bad_declarations_say_what_to_do(app: ModuleType) -> None:
    with pytest.raises(TypeError, match="unknown options"):
        app.tasks.task(retry=3)(lambda: None)
    with pytest.raises(ValueError, match="retries must be"):
        app.tasks.task(retries=-1)(lambda: None)
