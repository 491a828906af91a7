"""Where a task's body runs: a child process per slot (``process``), a thread (``thread``),
or the worker's event loop (``async``, in :mod:`._worker`). Each says how a task past its
``timeout`` is ended (D-063):

- process: the child is killed (SIGKILL) and a new one started; nothing survives of the task.
- thread: Python cannot kill a thread. The worker fails the job at its timeout and raises
  :class:`TaskTimeout` inside the thread at its next Python instruction; a thread blocked in a
  C call (a socket read, ``time.sleep``) goes on until the call returns, and what it returns
  is thrown away.
"""

from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from ._child import child_main
from ._errors import TaskTimeout
from ._execute import Current, Outcome, error_outcome, run_call

__all__ = ["ChildStartError", "ProcessPool", "Running", "ThreadPool"]

_log = logging.getLogger("diskcache_oxide.tasks")

#: How often a waiting slot looks at its task's deadline and at a release by the shutdown.
SLICE = 0.1


class ChildStartError(RuntimeError):
    """A process-pool child could not be started: the worker stops (exit code 1)."""


class Running:
    """A task a slot is running: its job, its task, and the lock that keeps the slot, the
    heartbeat and the shutdown from settling it twice."""

    def __init__(self, job: Any, task: Any, args: Any, kwargs: Any) -> None:
        self.job = job
        self.task = task
        self.args = args
        self.kwargs = kwargs
        self.lock = threading.Lock()
        self.settled = False
        self.started = time.monotonic()
        self.extended = self.started
        self.future: Any = None  # the async pool's running coroutine

    @property
    def current(self) -> Current:
        """What :func:`~._execute.current` gives the task's body."""
        job = self.job
        return Current(job.id, self.task.name, job.attempts, job.max_attempts)

    @property
    def deadline(self) -> float | None:
        return None if self.task.timeout is None else self.started + self.task.timeout


class ThreadPool:
    """Runs each task in a thread of its own, so that the slot can stop waiting for it."""

    def prepare(self, slot: int) -> None:
        """Nothing to start ahead of the first task."""

    def execute(self, slot: int, run: Running) -> Outcome:
        box: list[Outcome] = []

        def body() -> None:
            try:
                box.append(("ok", run_call(run.task, run.args, run.kwargs, run.current)))
            except BaseException as error:  # TaskTimeout raised in here too
                box.append(error_outcome(error))

        thread = threading.Thread(target=body, daemon=True, name=f"task-{run.job.id}")
        thread.start()
        while thread.is_alive():
            thread.join(SLICE)
            if not thread.is_alive():
                break
            if run.settled:
                return ("released",)
            deadline = run.deadline
            if deadline is not None and time.monotonic() >= deadline:
                ident = thread.ident
                if ident is not None:
                    import ctypes  # here, not at the top: importing the package must not

                    ctypes.pythonapi.PyThreadState_SetAsyncExc(
                        ctypes.c_ulong(ident), ctypes.py_object(TaskTimeout)
                    )
                return ("timeout",)
        return box[0] if box else ("crashed", "the task's thread ended without an outcome")

    def close(self) -> None:
        """Threads still running are daemons: they end with the process."""


class _Child:
    def __init__(self, process: Any, conn: Any) -> None:
        self.process = process
        self.conn = conn
        self.done = 0


class _Spawner:
    """One thread that starts every child of a pool and lives until the pool closes.

    A child asks the kernel to kill it when its parent dies (``PR_SET_PDEATHSIG``,
    :mod:`._pdeath`), and Linux sends that signal when the *thread* that forked the child
    exits. A slot's thread ends before the pool stops its idle child at shutdown, and a
    child started from it would be killed then, mid-goodbye; started from here, a child
    dies with the supervisor and not before."""

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def call(self, func: Callable[[], Any]) -> Any:
        """Run ``func`` in the spawner's thread (started on first use) and return its
        result, or raise what it raised."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, daemon=True, name="child-spawner"
                )
                self._thread.start()
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._requests.put((func, future))
        return future.result()

    def _loop(self) -> None:
        while True:
            request = self._requests.get()
            if request is None:
                return
            func, future = request
            try:
                future.set_result(func())
            except BaseException as error:
                future.set_exception(error)

    def close(self) -> None:
        """End the thread (once the children are stopped: they die with it on Linux)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._requests.put(None)
            thread.join(5)


def _start_safely(process: Any, set_safe_path: bool) -> None:
    """Start a spawned child with ``PYTHONSAFEPATH=1`` (Python 3.11+) in its environment.

    The child starts as ``python -c "from multiprocessing.spawn import spawn_main; ..."``,
    in the worker's working directory, and ``-c`` puts that directory first on its path
    until the child takes the supervisor's path: a ``multiprocessing.py`` or ``pickle.py``
    planted there would be imported first. The variable keeps it off; the child removes it
    again from its environment (``child_main``) so that what its tasks start is not
    changed. Only the spawner's thread forks, so setting it for this moment is safe."""
    if not set_safe_path:
        process.start()
        return
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        process.start()
    finally:
        os.environ.pop("PYTHONSAFEPATH", None)


class ProcessPool:
    """One child process per slot (started with ``spawn``: a fresh interpreter that imports
    the task modules), recycled after ``max_tasks`` tasks or once its memory passes
    ``max_memory`` bytes, and killed when its task runs past its timeout. Each child dies
    with the supervisor, even a SIGKILLed one (:mod:`._pdeath`): the children are forked by
    one thread that outlives them (:class:`_Spawner`)."""

    def __init__(self, modules: list[str], max_tasks: int | None, max_memory: int | None) -> None:
        self._modules = modules
        self._max_tasks = max_tasks
        self._max_memory = max_memory
        self._children: dict[int, _Child] = {}
        self._context = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._spawner = _Spawner()

    def prepare(self, slot: int) -> None:
        """Start the slot's child now, so that the first task does not wait for it."""
        self._child(slot)

    def _child(self, slot: int) -> _Child:
        child = self._children.get(slot)
        if child is not None and child.process.is_alive():
            return child
        ours, theirs = self._context.Pipe()
        ours_safe_path = "PYTHONSAFEPATH" not in os.environ
        process = self._context.Process(
            target=child_main,
            args=(theirs, self._modules, os.getpid(), ours_safe_path),
            name=f"diskcache-oxide-worker-{slot}",
            daemon=True,
        )
        self._spawner.call(lambda: _start_safely(process, ours_safe_path))
        theirs.close()
        if not ours.poll(120):
            process.kill()
            raise ChildStartError("a child process did not start within 120 s")
        try:
            hello = ours.recv()
        except EOFError:
            raise ChildStartError(
                f"a child process exited while starting (exit code {process.exitcode})"
            ) from None
        if hello[0] != "ready":
            process.kill()
            raise ChildStartError(f"a child process could not import the task modules: {hello[1]}")
        child = _Child(process, ours)
        with self._lock:
            self._children[slot] = child
        return child

    def _stop(self, slot: int, *, kill: bool) -> None:
        with self._lock:
            child = self._children.pop(slot, None)
        if child is None:
            return
        if not kill:
            try:
                child.conn.send(None)
            except OSError:
                pass
            child.process.join(5)
        if child.process.is_alive():
            child.process.kill()
        child.process.join(5)
        child.conn.close()

    def execute(self, slot: int, run: Running) -> Outcome:
        child = self._child(slot)
        try:
            child.conn.send((run.task.name, run.args, run.kwargs, run.current))
        except Exception as error:
            return error_outcome(error)
        while not child.conn.poll(SLICE):
            if run.settled:
                self._stop(slot, kill=True)
                return ("released",)
            deadline = run.deadline
            if deadline is not None and time.monotonic() >= deadline:
                self._stop(slot, kill=True)
                return ("timeout",)
        try:
            outcome, memory = child.conn.recv()
        except (EOFError, OSError):
            child.process.join(5)
            code = child.process.exitcode
            self._stop(slot, kill=True)
            return ("crashed", f"its worker's child process exited with code {code}")
        child.done += 1
        if self._max_tasks is not None and child.done >= self._max_tasks:
            _log.info("recycling child pid=%s after %d tasks", child.process.pid, child.done)
            self._stop(slot, kill=False)
        elif self._max_memory is not None and memory > self._max_memory:
            _log.info(
                "recycling child pid=%s at %.1f MiB (limit %.1f MiB)",
                child.process.pid,
                memory / 2**20,
                self._max_memory / 2**20,
            )
            self._stop(slot, kill=False)
        return outcome  # type: ignore[no-any-return]

    def close(self) -> None:
        """Stop every child (those still running a task are killed), then the spawner."""
        for slot in list(self._children):
            self._stop(slot, kill=False)
        self._spawner.close()
