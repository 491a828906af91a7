"""Fixtures for the dashboard's tests: a filled directory (tests/cli/cli_support.py), the
dashboard as a real ``diskcache-oxide serve`` process, and headless Chromium.

The browser tests drive Debian's ``chromium`` and ``chromium-driver`` (``make browser``
installs them, as for tests/reader) with selenium, and are skipped, saying why, when they are
missing. Each server is started on a free port (``--port 0``; it prints its address), in a
process group of its own, and stopped by pid at the end of its test whatever happened.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from browser import browser_missing, headless_chromium
from cli_support import Filled, fill

HERE = Path(__file__).resolve().parent

REPO = HERE.parents[1]
ARTIFACTS = REPO / "target" / "dashboard-artifacts"

for needed in ("starlette", "uvicorn", "jinja2"):
    pytest.importorskip(needed, reason=f"the dashboard's tests need {needed}: requirements-dev.txt")


@dataclass
class Server:
    """A running ``diskcache-oxide serve``: its process, address and log."""

    proc: subprocess.Popen[bytes]
    url: str
    log: Path
    lines: list[str] = field(default_factory=list)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def _start(directory: Path, log: Path, *flags: str) -> Server:
    out = open(log, "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "diskcache_oxide", "serve", str(directory), "--port", "0", *flags],
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, killed as one in stop()
    )
    out.close()
    server = Server(proc, "", log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if " at http://" in text:
            server.url = text.split(" at ")[1].split()[0]
            return server
        if proc.poll() is not None:
            raise AssertionError(f"the dashboard exited ({proc.returncode}):\n{text}")
        time.sleep(0.05)
    server.stop()
    raise AssertionError(f"the dashboard printed no address in 30 s:\n{log.read_text()}")


@pytest.fixture
def filled(tmp_path: Path) -> Filled:
    return fill(tmp_path / "cache")


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """``serve(directory, *flags)``: a started dashboard; every one is stopped afterwards."""
    servers: list[Server] = []

    def start(directory: Path, *flags: str) -> Server:
        server = _start(directory, tmp_path / f"serve-{len(servers)}.log", *flags)
        servers.append(server)
        return server

    try:
        yield start
    finally:
        for server in servers:
            server.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    reason = browser_missing()
    if reason is not None:
        pytest.skip(reason)
    yield from headless_chromium()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """The browser, on a blank page after the test."""
    yield browser
    browser.set_window_size(1280, 1000)
    browser.get("about:blank")


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
