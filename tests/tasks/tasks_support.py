"""Helpers of the task tests: a worker process started through the command, and waiting
for what other processes do."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


class Worker:
    """A worker process started through the command, its stderr kept in a file."""

    def __init__(self, process: subprocess.Popen[bytes], log: Path) -> None:
        self.process = process
        self.log_path = log

    @property
    def log(self) -> str:
        return self.log_path.read_text()

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def wait(self, timeout: float = 60) -> int:
        return self.process.wait(timeout)

    def wait_for_log(self, text: str, timeout: float = 60) -> None:
        end = time.monotonic() + timeout
        while text not in self.log:
            if time.monotonic() > end or self.process.poll() is not None:
                raise AssertionError(f"{text!r} never appeared in the log:\n{self.log}")
            time.sleep(0.05)


def wait_for(predicate: Callable[[], Any], timeout: float = 60, what: str = "") -> Any:
    """Poll ``predicate`` until it is truthy (for events in other processes)."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        time.sleep(0.05)
