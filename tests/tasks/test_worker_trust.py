"""The worker command against what it cannot trust (issue 29, point 3; D-063): a store URL
with a password (never written to the log), a store that can never work (one line, exit 1
at once) or that is down (tried again, one line per attempt), job content that would forge
log lines, a supervisor SIGKILLed while its child holds the GIL, and a working directory
holding modules that would shadow installed ones.

Every worker here is the real command in a subprocess, against a real redis-server (started
with a password where the test is about one) or a directory."""

from __future__ import annotations

import importlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import redis_servers
from tasks_support import Worker, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.oxide]

HERE = Path(__file__).parent
PASSWORD = "Tr0ub4dor-and-3-horse-staples"


def _protected(make_redis_server: Callable[..., Any]) -> Any:
    """A server of the test's own that wants ``PASSWORD``. It is set once the server
    answers: the fixture's readiness check is a PING without AUTH."""
    server = make_redis_server()
    server.command("CONFIG", "SET", "requirepass", PASSWORD)
    return server


def _sample_tasks(store: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``sample_tasks`` imported afresh, its app on ``store``."""
    monkeypatch.setenv("DCO_TASKS_DIR", store)
    monkeypatch.syspath_prepend(str(HERE))
    sys.modules.pop("sample_tasks", None)
    return importlib.import_module("sample_tasks")


def _no_traceback(worker: Worker) -> None:
    assert "Traceback" not in worker.log, worker.log


# ---- credentials ---------------------------------------------------------------------------


def test_the_password_is_never_logged(
    make_redis_server: Callable[..., Any], start_worker: Callable[..., Worker]
) -> None:
    server = _protected(make_redis_server)
    url = f"redis://:{PASSWORD}@127.0.0.1:{server.port}/0?namespace=trust"
    worker = start_worker(url, "--burst", "--pool", "thread")
    assert worker.wait(60) == 0, worker.log
    assert f"store=redis://:***@127.0.0.1:{server.port}/0" in worker.log
    assert PASSWORD not in worker.log
    # redis-py also reads ?password=: it is masked too.
    query = f"redis://127.0.0.1:{server.port}/0?namespace=trust&password={PASSWORD}"
    second = start_worker(query, "--burst", "--pool", "thread")
    assert second.wait(60) == 0, second.log
    assert "password=***" in second.log
    assert PASSWORD not in second.log


def test_the_cannot_open_line_masks_the_password(
    start_worker: Callable[..., Worker],
) -> None:
    worker = start_worker(f"redis://:{PASSWORD}@127.0.0.1:notaport/0")
    assert worker.wait(30) == 1, worker.log
    assert "cannot open redis://:***@127.0.0.1:notaport/0" in worker.log
    assert "port is not a number" in worker.log
    assert PASSWORD not in worker.log
    _no_traceback(worker)


# ---- a store that can never work, and one that is down --------------------------------------


@pytest.mark.parametrize("given", ["wrong", "none", "user"])
def test_refused_credentials_exit_1_at_once_in_one_line(
    make_redis_server: Callable[..., Any], start_worker: Callable[..., Worker], given: str
) -> None:
    server = _protected(make_redis_server)
    userinfo = {"wrong": ":not-the-password@", "none": "", "user": f"nobody:{PASSWORD}@"}[given]
    began = time.monotonic()
    worker = start_worker(f"redis://{userinfo}127.0.0.1:{server.port}/0", "--pool", "thread")
    assert worker.wait(30) == 1, worker.log
    took = time.monotonic() - began
    lines = [line for line in worker.log.splitlines() if "ERROR" in line]
    assert len(lines) == 1, worker.log
    assert "cannot open" in lines[0] and "AuthenticationError" in lines[0], lines
    assert "check the user and password" in lines[0]
    assert "not-the-password" not in worker.log and PASSWORD not in worker.log
    _no_traceback(worker)
    print(f"refused ({given}): exit 1 after {took:.2f} s")


def test_tls_to_a_plain_server_exits_1_at_once(
    make_redis_server: Callable[..., Any], start_worker: Callable[..., Worker]
) -> None:
    server = _protected(make_redis_server)
    worker = start_worker(f"rediss://:{PASSWORD}@127.0.0.1:{server.port}/0", "--pool", "thread")
    # Without the check, the TLS handshake waits for the client's 60 s socket timeout.
    assert worker.wait(30) == 1, worker.log
    assert "speaks plain Redis, not TLS: use redis://" in worker.log
    assert PASSWORD not in worker.log
    _no_traceback(worker)


def test_a_host_that_does_not_resolve_exits_1(start_worker: Callable[..., Worker]) -> None:
    host = "no-such-host.invalid"  # RFC 2606: never resolves
    try:
        socket.getaddrinfo(host, 6379)
    except socket.gaierror as error:
        if error.errno != socket.EAI_NONAME:
            pytest.skip(f"the name server here does not say 'no such name': {error}")
    worker = start_worker(f"redis://:{PASSWORD}@{host}:6379/0", "--pool", "thread")
    assert worker.wait(30) == 1, worker.log
    assert f"the host name '{host}' does not resolve" in worker.log
    _no_traceback(worker)


def _acl_server(make_redis_server: Callable[..., Any], port: int | None = None) -> Any:
    """A server whose default user may only PING (the fixture's readiness check) and whose
    user ``worker`` has ``PASSWORD``: from its first moment, so that a restart never meets
    a worker in a window without the password."""
    return make_redis_server(
        port=port,
        extra=["--user", "default", "on", "nopass", "+ping"]
        + ["--user", "worker", "on", f">{PASSWORD}", "~*", "&*", "+@all"],
    )


def test_a_server_down_at_start_is_tried_again_until_it_answers(
    make_redis_server: Callable[..., Any], start_worker: Callable[..., Worker]
) -> None:
    port = redis_servers.free_port()
    url = f"redis://worker:{PASSWORD}@127.0.0.1:{port}/0?namespace=trust"
    worker = start_worker(url, "--pool", "thread")
    worker.wait_for_log("(attempt 1)", timeout=60)
    line = next(line for line in worker.log.splitlines() if "(attempt 1)" in line)
    assert "WARNING cannot reach redis://worker:***@" in line and "trying again in 1 s" in line
    _acl_server(make_redis_server, port)
    worker.wait_for_log("worker started", timeout=90)
    worker.signal(15)
    assert worker.wait(60) == 0, worker.log
    assert PASSWORD not in worker.log
    _no_traceback(worker)


def test_a_server_that_goes_down_is_one_line_per_attempt(
    make_redis_server: Callable[..., Any],
    start_worker: Callable[..., Worker],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = _acl_server(make_redis_server)
    url = f"redis://worker:{PASSWORD}@127.0.0.1:{server.port}/0?namespace=trust"
    worker = start_worker(url, "--pool", "thread")
    worker.wait_for_log("worker started")
    server.kill()
    worker.wait_for_log("a call to the store failed (", timeout=90)
    server.start()
    app = _sample_tasks(url, monkeypatch)
    assert app.add.delay(2, 3).get(timeout=90) == 5  # the worker went on once it came back
    worker.signal(15)
    assert worker.wait(60) == 0, worker.log
    failed = [line for line in worker.log.splitlines() if "a call to the store failed" in line]
    assert failed and all("trying again in" in line for line in failed), worker.log
    assert PASSWORD not in worker.log
    _no_traceback(worker)


# ---- a child that holds the GIL dies with its SIGKILLed supervisor ---------------------------


@pytest.mark.parametrize("task", ["spin", "c_call"])
def test_a_child_holding_the_gil_dies_with_its_sigkilled_supervisor(
    tmp_path: Path,
    start_worker: Callable[..., Worker],
    monkeypatch: pytest.MonkeyPatch,
    task: str,
) -> None:
    """D-063 promises that a SIGKILLed supervisor leaves no child behind. A watcher thread
    in the child cannot keep that promise while the task holds the GIL; the kernel's
    parent-death signal can."""
    store = tmp_path / "store"
    store.mkdir()
    markers = tmp_path / "markers"
    monkeypatch.setenv("DCO_TASKS_DIR", str(store))
    monkeypatch.syspath_prepend(str(HERE))
    sys.modules.pop("gil_tasks", None)
    app = importlib.import_module("gil_tasks")
    worker = start_worker(str(store), "--pool", "process", modules=("gil_tasks",))
    getattr(app, task).delay(str(markers))
    found = wait_for(lambda: list(markers.glob(f"{task}.*")), what="the task to start")
    pid = int(found[0].name.split(".")[1])
    time.sleep(0.5)  # well into the loop or the call
    assert redis_servers.pid_alive(pid)
    worker.process.kill()
    worker.process.wait(30)
    killed = time.monotonic()
    try:
        while redis_servers.pid_alive(pid) and time.monotonic() - killed < 5.0:
            time.sleep(0.005)
        took = time.monotonic() - killed
        assert not redis_servers.pid_alive(pid), f"the child {pid} outlived its supervisor"
        print(f"{task}: the child was gone {took * 1000:.1f} ms after its supervisor's SIGKILL")
    finally:
        if redis_servers.pid_alive(pid):  # the child of our worker, by its pid
            os.kill(pid, signal.SIGKILL)


# ---- job content cannot forge log lines ------------------------------------------------------

#: What a hostile job carries: a newline, then a line as the worker writes one, then a colour,
#: a bell and an OSC 52 clipboard write.
FORGED = (
    "x\n2031-01-01 00:00:00,000 INFO sample_tasks.add id=424242 attempt=1/3 0.001s succeeded"
    "\x1b[31m\x07\x1b]52;c;cHduZWQ=\x07"
)


@pytest.mark.parametrize("pool", ["process", "thread", "async"])
def test_job_content_cannot_forge_a_log_line(
    tmp_path: Path,
    start_worker: Callable[..., Worker],
    monkeypatch: pytest.MonkeyPatch,
    pool: str,
) -> None:
    store = tmp_path / "store"
    store.mkdir()
    app = _sample_tasks(str(store), monkeypatch)
    jobs = app.tasks.jobs
    # A task name from the store, kwargs that the TypeError quotes, an exception's text.
    jobs.put({"task": FORGED, "args": [], "kwargs": {}}, max_attempts=1)
    jobs.put({"task": "sample_tasks.add", "args": [1], "kwargs": {FORGED: 2}}, max_attempts=1)
    app.boom.delay(FORGED)
    worker = start_worker(str(store), "--pool", pool, "--burst")
    assert worker.wait(60) == 0, worker.log
    raw = worker.log_path.read_bytes()
    assert b"\x1b" not in raw and b"\x07" not in raw, raw
    lines = worker.log.splitlines()
    assert not [line for line in lines if line.startswith("2031-")], worker.log
    assert not [line for line in lines if line.endswith("succeeded")], worker.log
    assert worker.log.count("\\n2031-01-01 00:00:00,000 INFO") >= 3, worker.log  # escaped
    assert "\\x1b[31m\\x07" in worker.log


# ---- the working directory does not shadow installed packages -------------------------------

#: Modules someone planted in a shared directory: each leaves a marker when imported.
PLANTED = ("redis", "json", "multiprocessing", "pickle")

USER_TASKS = """
import os

from diskcache_oxide import Tasks

tasks = Tasks(os.environ["DCO_TASKS_DIR"])


@tasks.task
def where_am_i() -> str:
    return __file__
"""


@pytest.mark.parametrize("how", ["command", "python -m"])
def test_the_working_directory_does_not_shadow_installed_packages(
    tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Started in a shared directory holding a planted ``redis.py`` (and ``json.py``,
    ``multiprocessing.py``, ``pickle.py``), the worker imports none of them, in itself or
    in its children, yet still finds the user's own task module there, as ``python -m``
    users expect."""
    shared = tmp_path / "shared"
    shared.mkdir()
    # python -m puts the working directory first before any code of ours runs, and the
    # package and the command import pickle, json and multiprocessing then: that much is
    # the user's choice (the guide says to run the command, or python -P -m). redis is
    # imported once the worker runs, and must not come from there either way.
    for name in PLANTED if how == "command" else ("redis",):
        (shared / f"{name}.py").write_text(
            f"import pathlib\npathlib.Path({str(shared)!r}, 'planted-{name}').touch()\n"
            f"raise ImportError('the planted {name}.py was imported')\n"
        )
    (shared / "user_tasks.py").write_text(USER_TASKS)
    url = f"{redis_url}?namespace=shared{os.getpid()}"
    monkeypatch.setenv("DCO_TASKS_DIR", url)
    # Loaded by its path here: the shared directory must not go on this process's path.
    spec = importlib.util.spec_from_file_location("user_tasks", shared / "user_tasks.py")
    assert spec is not None and spec.loader is not None
    app = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "user_tasks", app)
    spec.loader.exec_module(app)
    result = app.where_am_i.delay()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    if how == "command":  # the console script, whose sys.path[0] is its bin directory
        command = [str(Path(sys.executable).parent / "diskcache-oxide")]
    else:  # python -m puts the working directory first; the -m part is the user's choice
        command = [sys.executable, "-m", "diskcache_oxide"]
    log = tmp_path / "worker.log"
    with open(log, "wb") as err:
        process = subprocess.Popen(
            [*command, "worker", url, "user_tasks", "--pool", "process", "--burst"],
            cwd=shared,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    worker = Worker(process, log)
    try:
        assert worker.wait(120) == 0, worker.log
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)
    assert result.get(timeout=0) == str(shared / "user_tasks.py")  # found, in the child
    assert sorted(path.name for path in shared.glob("planted-*")) == [], worker.log
