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
    "working_directory_last",
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


def working_directory_last() -> None:
    """Put the working directory at the end of ``sys.path``, after the installed packages.

    ``python -m`` and ``python -c`` put it first (``''`` or its path at ``sys.path[0]``),
    and so did the worker: a ``redis.py`` or ``json.py`` that someone planted in a shared
    directory the worker was started in then shadowed the real package. At the end, the
    user's own modules there (``app/tasks.py``, run as ``diskcache-oxide worker DIR
    app.tasks``) are still found, as ``python -m`` users expect, but no longer before an
    installed package of the same name. Entries the user put on the path (``PYTHONPATH``)
    are left where they are."""
    here = os.getcwd()
    if sys.path and sys.path[0] in ("", os.curdir, here):
        del sys.path[0]
    if not any(
        os.path.abspath(entry or os.curdir) == here for entry in sys.path if isinstance(entry, str)
    ):
        sys.path.append(here)


def import_modules(modules: list[str]) -> None:
    """Import the task modules, the working directory searched last
    (:func:`working_directory_last`), so that ``app.tasks`` is found where the worker was
    started without the working directory shadowing an installed package."""
    working_directory_last()
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
