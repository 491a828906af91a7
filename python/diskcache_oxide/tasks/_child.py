"""The body of a process-pool child: it imports the task modules and runs the calls its
worker sends it over a pipe, one at a time, and sends back each outcome (D-063).

The child ignores SIGINT and SIGTERM: a Ctrl-C in a terminal reaches the whole process group,
and the worker, not the child, decides when a running task stops (after its grace period).
It exits when the pipe closes, when the worker sends None, or when its worker dies: on Linux
the kernel kills it at once (``PR_SET_PDEATHSIG``, :mod:`._pdeath`), even while its task holds
the GIL; elsewhere a watcher thread sees the worker gone within half a second. So a SIGKILLed
worker leaves no child behind.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

from ._execute import import_modules, memory_bytes, outcome_of
from ._pdeath import die_with_parent

__all__ = ["child_main"]


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(1)


def child_main(conn: Any, modules: list[str], parent: int, safe_path_ours: bool = False) -> None:
    """Run calls from ``conn`` until told to stop (see the module's docstring).
    ``safe_path_ours``: the pool set ``PYTHONSAFEPATH`` for this child's start only
    (:func:`~._pools._start_safely`), so it is taken out of the environment its tasks see."""
    if safe_path_ours:
        os.environ.pop("PYTHONSAFEPATH", None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if not die_with_parent(parent):  # no prctl here: a thread, which needs the GIL, watches
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    try:
        import_modules(modules)
    except Exception as error:  # the worker imported them; say what differs here
        conn.send(("import-error", f"{type(error).__name__}: {error}"))
        return
    from ._app import registered

    conn.send(("ready", os.getpid()))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        name, args, kwargs, running = message
        task = registered().get(name)
        outcome = outcome_of(task, name, args, kwargs, running)
        try:
            conn.send((outcome, memory_bytes()))
        except Exception as error:  # the return value cannot be pickled back
            conn.send(
                (
                    (
                        "error",
                        "UnsupportedTypeError",
                        f"the result of {name} cannot be sent back to the worker: {error}",
                        "",
                    ),
                    memory_bytes(),
                )
            )
