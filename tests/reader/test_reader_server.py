"""The reader's processes without a browser: a server stopped mid-turn still stores what it
paid for, and ``python -m reader`` (what ``make reader`` runs) starts both processes, prints
the address and stops both."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from reader_harness import READER_ROOT, ReaderRun, wait_for

pytestmark = pytest.mark.slow


def test_a_server_stopped_mid_turn_drains_it_first(reader: Any) -> None:
    run: ReaderRun = reader(delay=2.0, worker=False)
    opening = urllib.request.Request(run.url + "api/article/3", method="POST")
    with pytest.raises(OSError):  # the reader gives up on the page after 0.3 s
        urllib.request.urlopen(opening, timeout=0.3)
    wait_for("the view to be lost", lambda: run.events("view-lost"), timeout=5)
    assert run.app is not None
    run.app.send_signal(signal.SIGTERM)
    # uvicorn shuts down (the lifespan's end drains the turns), then re-raises the SIGTERM.
    assert run.app.wait(timeout=30) in (0, -signal.SIGTERM)
    assert run.cached(3) is not None
    [payment] = run.payments()
    value = run.cached(3)
    assert value is not None and value["turn"] == payment["turn"]
    assert run.deprecations() == []


def test_python_m_reader_starts_app_and_worker_and_prints_the_address(tmp_path: Path) -> None:
    env = dict(os.environ, READER_PORT="0", READER_DELAY="0")
    env["PYTHONPATH"] = str(READER_ROOT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "reader", str(tmp_path / "data")],
        cwd=READER_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, app and worker included
    )
    pids: list[int] = []
    try:
        assert proc.stdout is not None
        url = None
        deadline = time.monotonic() + 30
        lines: list[str] = []
        while "worker pid" not in "".join(lines) and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            match = re.search(r"running at (http://127\.0\.0\.1:\d+/)", line)
            url = match.group(1) if match else url
        pids += [int(p) for p in re.findall(r"(?:app|worker) pid (\d+)", "".join(lines))]
        assert url is not None, "".join(lines)
        with urllib.request.urlopen(url, timeout=5) as response:
            assert b"Queue" in response.read()
        request = urllib.request.Request(
            url + "tap/4", method="POST", headers={"Accept": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.status == 200
        assert len(pids) == 2, lines

        def cached() -> bool:
            with urllib.request.urlopen(url + "api/meter", timeout=5) as response:
                return b'"cached":1' in response.read()

        wait_for("the worker to clean the tapped article", cached, timeout=20)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        for pid in pids:
            wait_for(f"process {pid} to exit", lambda pid=pid: not _alive(pid), timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        try:  # the app and the worker, if it could not stop them
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False
