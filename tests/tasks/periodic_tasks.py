"""The periodic tasks the schedule tests run: ``diskcache-oxide worker STORE periodic_tasks``.

Its app's store is ``DCO_TASKS_DIR`` (a directory or a Redis URL); every run of a tick leaves a
marker file ``NAME.TICK.PID.NS`` in ``DCO_TASKS_MARKERS``; the period is ``DCO_TASKS_PERIOD``
seconds (a short one, so that a test sees ten ticks in a few seconds).
"""

from __future__ import annotations

import os
import pathlib
import tempfile
import time

from diskcache_oxide import Tasks

tasks = Tasks(os.environ.get("DCO_TASKS_DIR") or tempfile.mkdtemp())
PERIOD = float(os.environ.get("DCO_TASKS_PERIOD") or 0.3)
MARKERS = os.environ.get("DCO_TASKS_MARKERS") or tempfile.mkdtemp()


def _mark(name: str, tick: float) -> None:
    pathlib.Path(MARKERS, f"{name}.{tick:.6f}.{os.getpid()}.{time.monotonic_ns()}").touch()


@tasks.periodic(every=PERIOD, retries=0)
def skipping(tick: float) -> float:
    """Missed ticks are counted, not run (the default)."""
    _mark("skipping", tick)
    return tick


@tasks.periodic(every=PERIOD, missed="catch_up", max_catch_up=2, retries=0)
def catching_up(tick: float) -> float:
    """The two most recent missed ticks run; older ones are counted."""
    _mark("catching_up", tick)
    return tick
