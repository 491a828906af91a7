"""Fixtures of the task tests: a fresh copy of ``sample_tasks`` on a store of the test's own,
and workers started through the command (``python -m diskcache_oxide worker``).

The store is a location of the conformance harness (tests/helpers/backends.py): a directory,
or on a module or test marked ``backends`` a Redis URL naming a fresh namespace on the
session's server or cluster, which the worker command opens as it is given."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import backends
import pytest
from tasks_support import Worker

HERE = Path(__file__).parent


@pytest.fixture
def store(tmp_path: Path, backend: backends.Backend, request: pytest.FixtureRequest) -> str:
    """Where the test's tasks live: a directory, or a ``redis://...?namespace=...`` URL."""
    path = tmp_path / "store"
    path.mkdir()
    return backends.location(backend, str(path), request)


@pytest.fixture
def app(store: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``sample_tasks`` imported afresh, its app on the test's store."""
    monkeypatch.setenv("DCO_TASKS_DIR", store)
    monkeypatch.syspath_prepend(str(HERE))
    sys.modules.pop("sample_tasks", None)
    return importlib.import_module("sample_tasks")


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    path = tmp_path / "markers"
    path.mkdir()
    return path


@pytest.fixture
def periodic(
    store: str, markers: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[[float], ModuleType]:
    """``periodic(period)``: ``periodic_tasks`` imported afresh on the test's store, its
    markers in ``markers``; the workers started after it inherit the same settings."""

    def load(period: float) -> ModuleType:
        monkeypatch.setenv("DCO_TASKS_DIR", store)
        monkeypatch.setenv("DCO_TASKS_MARKERS", str(markers))
        monkeypatch.setenv("DCO_TASKS_PERIOD", repr(period))
        monkeypatch.syspath_prepend(str(HERE))
        sys.modules.pop("periodic_tasks", None)
        return importlib.import_module("periodic_tasks")

    return load


@pytest.fixture
def start_worker(tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []

    def start(store: str, *args: str, modules: tuple[str, ...] = ("sample_tasks",)) -> Worker:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(HERE), *filter(None, [env.get("PYTHONPATH", "")])])
        log = tmp_path / f"worker-{len(started)}.log"
        with open(log, "wb") as err:
            process = subprocess.Popen(
                [sys.executable, "-m", "diskcache_oxide", "worker", store, *modules, *args],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
                cwd=tmp_path,
            )
        worker = Worker(process, log)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        if worker.process.poll() is None:
            worker.process.send_signal(signal.SIGKILL)
            worker.process.wait(30)
