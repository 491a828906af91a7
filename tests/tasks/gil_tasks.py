"""Tasks that never let go of the GIL, for the test that a process-pool child dies with its
SIGKILLed supervisor (tests/tasks/test_worker_trust.py). Each leaves a marker
``NAME.PID`` in the directory it is passed just before it starts holding the GIL.

The app's store is the directory in ``DCO_TASKS_DIR``, as in sample_tasks.
"""

from __future__ import annotations

import os
import pathlib
import sys
import tempfile

from diskcache_oxide import Tasks

tasks = Tasks(os.environ.get("DCO_TASKS_DIR") or tempfile.mkdtemp())


def _mark(markers: str, name: str) -> None:
    pathlib.Path(markers).mkdir(exist_ok=True)
    pathlib.Path(markers, f"{name}.{os.getpid()}").touch()


@tasks.task(retries=0, lease=600)
def spin(markers: str) -> None:
    """A tight pure-Python loop that keeps the GIL: with a switch interval of 1,000 s no
    other thread of the process (the child's watcher) is let in."""
    sys.setswitchinterval(1000.0)
    _mark(markers, "spin")
    while True:
        pass


@tasks.task(retries=0, lease=600)
def c_call(markers: str) -> int:
    """One long C call, which holds the GIL until it returns (hours)."""
    _mark(markers, "c_call")
    return sum(range(10**15))
