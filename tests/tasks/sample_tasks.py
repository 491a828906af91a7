"""The task module the worker tests run: ``diskcache-oxide worker DIR sample_tasks``.

Its app's store is the directory in ``DCO_TASKS_DIR`` (each test imports a fresh copy with its
own; the worker serves the directory it is given). Tasks that the tests watch leave marker
files in the directory they are passed: ``NAME.start.PID`` when a run starts and
``NAME.end.PID`` when it ends.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import tempfile
import time

from diskcache_oxide import Tasks

tasks = Tasks(os.environ.get("DCO_TASKS_DIR") or tempfile.mkdtemp())


def _mark(markers: str, name: str, event: str) -> None:
    pathlib.Path(markers, f"{name}.{event}.{os.getpid()}.{time.monotonic_ns()}").touch()


@tasks.task
def add(a: int, b: int) -> int:
    return a + b


@tasks.task
def counted(i: int) -> int:
    """Counts its runs in the store, so that a test can see each ran once."""
    tasks.cache.incr(("runs", i))
    return i * 2


@tasks.task(retries=0)
def boom(text: str) -> None:
    raise ValueError(f"bad input: {text}")


@tasks.task(retries=1, lease=1.5)
def sleepy(markers: str, name: str, seconds: float) -> str:
    """Sleeps, leaving a start marker and (if it gets there) an end marker."""
    _mark(markers, name, "start")
    time.sleep(seconds)
    _mark(markers, name, "end")
    return name


@tasks.task(retries=0, timeout=0.5)
def too_slow(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@tasks.task(retries=0, timeout=0.5)
def too_slow_python(seconds: float) -> float:
    """Spins in Python, where the thread pool's TaskTimeout reaches it."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return seconds


@tasks.task
async def async_add(a: int, b: int) -> int:
    await asyncio.sleep(0.05)
    return a + b


@tasks.task(retries=0, timeout=0.5)
async def async_too_slow(seconds: float) -> float:
    await asyncio.sleep(seconds)
    return seconds


@tasks.task(result_expire=0.5)
def short_lived(x: int) -> int:
    return x


@tasks.task
def unstorable() -> object:
    return object()


@tasks.task(unique=True)
def once_at_a_time(key: str) -> str:
    return key


@tasks.task(retries=0)
def crash(code: int) -> None:
    """Ends its process at once, as a segfault or the OOM killer would."""
    os._exit(code)


@tasks.task(retries=2)
def who_am_i() -> list[object]:
    """What ``current()`` says inside a worker's run: id, name, attempt, max_attempts."""
    from diskcache_oxide.tasks import current

    found = current()
    assert found is not None
    return [found.id, found.name, found.attempt, found.max_attempts]


@tasks.task(retries=0)
def not_yet(markers: str) -> str:
    """Gives its job back (no attempt spent) on its first run, then succeeds: ``Requeue``."""
    from diskcache_oxide.tasks import Requeue

    if not list(pathlib.Path(markers).glob("not_yet.start.*")):
        _mark(markers, "not_yet", "start")
        raise Requeue(delay=0.2)
    return "done"
