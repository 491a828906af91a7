"""Running one call of a task and describing its outcome; importing the task modules. Shared
by the worker's three pools and the process pool's children."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import importlib
import os
import resource
import sys
import threading
import traceback
from typing import Any, NamedTuple

__all__ = [
    "Current",
    "Outcome",
    "current",
    "error_outcome",
    "import_modules",
    "memory_bytes",
    "outcome_of",
    "run_call",
]

#: ("ok", value) | ("error", type name, message, traceback) | ("timeout",) |
#: ("crashed", why) | ("released",) | ("requeue", delay)
Outcome = tuple[Any, ...]


class Current(NamedTuple):
    """The task a worker is running (:func:`current`)."""

    #: the task's id (its job's id, as ``TaskResult.id``)
    id: int
    #: the task's name
    name: str
    #: this attempt's number, 1 for the first
    attempt: int
    #: attempts in all (0: no limit)
    max_attempts: int


_current: contextvars.ContextVar[Current | None] = contextvars.ContextVar(
    "diskcache_oxide.tasks.current", default=None
)


def current() -> Current | None:
    """The task this code runs in, as a worker runs it (its id, name and attempt), or None
    outside one (a task called directly, as its unit tests do). For a task that records what
    it does under its own id, as rq's ``get_current_job()``."""
    return _current.get()


def import_modules(modules: list[str]) -> None:
    """Import the task modules, with the working directory first on ``sys.path`` (as a
    script's directory is), so that ``app.tasks`` is found where the worker was started."""
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    for name in modules:
        importlib.import_module(name)


def run_call(task: Any, args: Any, kwargs: Any, running: Current | None = None) -> Any:
    """Call the task's function, :func:`current` giving ``running`` meanwhile; an ``async
    def`` one on an event loop of its own."""
    token = _current.set(running)
    try:
        if task.is_async:
            return asyncio.run(task.func(*args, **kwargs))
        return task.func(*args, **kwargs)
    finally:
        _current.reset(token)


#: Frames of the worker's own machinery, left out of a task's traceback.
_OURS = tuple(
    os.path.dirname(path) + os.sep
    for path in (__file__, asyncio.__file__, concurrent.futures.__file__)
) + (threading.__file__,)


def error_outcome(error: BaseException) -> Outcome:
    """The outcome of a call that raised ``error``: its type name, message, and traceback
    text without the worker's own frames (the task's code is what the reader wants); a
    :class:`~._errors.Requeue` gives ``("requeue", delay)``."""
    from ._errors import Requeue

    if isinstance(error, Requeue):
        return ("requeue", error.delay)
    described = traceback.TracebackException.from_exception(error)
    described.stack = traceback.StackSummary.from_list(
        [frame for frame in described.stack if not frame.filename.startswith(_OURS)]
    )
    return ("error", type(error).__name__, str(error), "".join(described.format()))


def outcome_of(
    task: Any, name: str, args: Any, kwargs: Any, running: Current | None = None
) -> Outcome:
    """Run a call and describe how it ended (never raises but for SystemExit and the like)."""
    if task is None:
        return ("error", "LookupError", f"no task named {name!r} in this worker", "")
    try:
        return ("ok", run_call(task, args, kwargs, running))
    except Exception as error:
        return error_outcome(error)


def memory_bytes() -> int:
    """This process's resident memory now (Linux), or its peak where that is unknown."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak if sys.platform == "darwin" else peak * 1024)
