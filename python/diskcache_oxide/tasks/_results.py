"""A task's result: where it is kept, how a waiter is woken, and :class:`TaskResult`.

The worker stores a finished task's record in the cache at ``result_key(id)`` (kept
``result_expire`` seconds), *then* settles the job, *then* pushes a token onto the task's wake
queue (``wake_prefix(id)``). A waiter checks the job and the record, and if the task has not
finished, blocks in the cache's own blocking pull on that wake queue (D-013 on a directory: it
sleeps until the directory is written to; on Redis, the server's blocking pop). A waiter that
gets the token pushes it back before it returns, so every other waiter wakes too. Because the
record is written before the job is settled, a job that is gone and has no record means the
result expired (or the id was never a task's here).

The only re-check that is not a wake is a backstop every :data:`RECHECK` seconds, for a job
that reached the dead letters without a worker recording it (its last lease ran out: the
worker was killed), which nobody wakes for.

Whoever can write the store can put junk on a wake queue (a pickle, an unknown type: a value
this process cannot decode). A pull cannot take it, so it stays in front of any token; a
waiter that meets it checks the task every :data:`JUNK_POLL` seconds instead, until its
timeout, rather than raise (issue 29).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..errors import DecodeError, UnsupportedTypeError
from ._errors import ResultTimeout, TaskCancelled, TaskError, TaskFailed
from ._payload import ERROR_LIMIT, result_key, wake_prefix

if TYPE_CHECKING:
    from collections.abc import Generator

    from ..jobs import JobQueue

__all__ = ["RECHECK", "STATUSES", "Status", "TaskResult", "store_record", "wake"]


class TasksApp(Protocol):
    """What a result reads of its :class:`~diskcache_oxide.tasks.Tasks`: a protocol, so that
    this module need not import the one that imports it (tests/api/test_layers.py)."""

    @property
    def where(self) -> str: ...
    @property
    def cache(self) -> Any: ...
    @property
    def jobs(self) -> JobQueue[Any]: ...
    @property
    def default_result_expire(self) -> float | None: ...


#: A task's statuses. ``failed``: it raised on its last attempt (its job is in the dead
#: letters, the record keeps the traceback); ``dead``: its job is in the dead letters with no
#: failure recorded by a worker (its last lease ran out, or no worker could decode or find
#: it); ``unknown``: no job and no result (the result expired, or the id is not a task's here).
Status = Literal["queued", "running", "succeeded", "failed", "dead", "cancelled", "unknown"]
STATUSES: tuple[Status, ...] = (
    "queued",
    "running",
    "succeeded",
    "failed",
    "dead",
    "cancelled",
    "unknown",
)

#: Seconds between a waiter's re-checks when nothing wakes it (see the module's docstring).
RECHECK = 2.0

_TOKEN = 1

#: Seconds between a waiter's checks while junk on its wake queue keeps it from being woken.
JUNK_POLL = 0.05

#: Job ids are positive 64-bit ints on every store (SQLite's rowids, Redis's INCR): an id
#: outside them is no task's, on a directory as on Redis, without asking the store (a
#: directory's engine would raise OverflowError on an id past 64 bits).
_ID_RANGE = range(1, 2**63)


def store_record(cache: Any, task_id: int, record: dict[str, Any], expire: float | None) -> None:
    """Keep a task's result record for ``expire`` seconds (None: until deleted).

    A succeeded record whose value the store cannot hold is kept as a failure instead
    (``UnsupportedTypeError``), so that the waiter learns why.
    """
    try:
        cache.set(result_key(task_id), record, expire=expire)
    except UnsupportedTypeError as error:
        if record.get("status") != "succeeded":
            raise
        cache.set(
            result_key(task_id),
            failure_record(
                "UnsupportedTypeError", f"the task's result cannot be stored: {error}", "", 0
            ),
            expire=expire,
        )


def failure_record(type_name: str, message: str, traceback: str, attempts: int) -> dict[str, Any]:
    """The record of a task that failed for good."""
    return {
        "status": "failed",
        "type": type_name,
        "message": message,
        "traceback": traceback,
        "attempts": attempts,
    }


#: Seconds a wake token lives: the waiters blocked when it is pushed pass it on within
#: milliseconds, and a later waiter finds the record before it looks for a token.
TOKEN_EXPIRE = 60.0


def wake(cache: Any, task_id: int) -> None:
    """Wake the task's waiters: a token on its wake queue (it expires on its own)."""
    cache.push(_TOKEN, prefix=wake_prefix(task_id), expire=TOKEN_EXPIRE)


class TaskResult:
    """A queued task's handle: its id, its status, its result.

    Returned by :meth:`Task.delay` and :meth:`Task.schedule`; or made for an id kept
    elsewhere with :meth:`Tasks.result`. Any process that opens the same store may wait on it.
    ``await result`` waits from asyncio.
    """

    __slots__ = ("_tasks", "id")

    def __init__(self, tasks: TasksApp, task_id: int) -> None:
        self._tasks = tasks
        #: The task's id: its job's id in the JobQueue (never reused).
        self.id = task_id

    def __repr__(self) -> str:
        return f"TaskResult(id={self.id})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TaskResult) and (other._tasks, other.id) == (self._tasks, self.id)

    def __hash__(self) -> int:
        return hash(self.id)

    # ---- state ----------------------------------------------------------------------------

    def _state(self) -> tuple[Status, dict[str, Any] | None, Any]:
        # The job first, then the record: the worker writes the record before it settles
        # the job, so a job that is gone with no record means there is none to wait for.
        if self.id not in _ID_RANGE:
            return "unknown", None, None
        info = self._tasks.jobs.get(self.id)
        if info is not None and info.state != "dead":
            return ("running" if info.state == "leased" else "queued"), None, info
        record = self._tasks.cache.get(result_key(self.id))
        if isinstance(record, dict) and record.get("status") in STATUSES:
            return record["status"], record, info
        if info is not None:
            return "dead", None, info
        return "unknown", None, None

    @property
    def status(self) -> Status:
        """One of :data:`STATUSES`: queued (waiting, or scheduled for later, or waiting to
        retry), running, succeeded, failed, dead, cancelled, or unknown."""
        return self._state()[0]

    def ready(self) -> bool:
        """True once the task has finished (succeeded, failed, dead or cancelled)."""
        return self.status not in ("queued", "running", "unknown")

    def _outcome(self) -> tuple[bool, Any]:
        """(True, value) once finished, raising for a failure; (False, None) while not."""
        status, record, info = self._state()
        if status in ("queued", "running"):
            return False, None
        if status == "succeeded":
            assert record is not None
            return True, record.get("value")
        if status == "failed":
            assert record is not None
            raise TaskFailed(
                self.id,
                str(record.get("type", "")),
                str(record.get("message", "")),
                str(record.get("traceback", "")),
            )
        if status == "dead":
            raise TaskFailed(
                self.id,
                "TaskDead",
                (info.error or "its job went to the dead letters")[:ERROR_LIMIT],
            )
        if status == "cancelled":
            raise TaskCancelled(f"task {self.id} was cancelled before it ran")
        raise TaskError(
            f"no task {self.id} in {self._tasks.where}: its result expired (results are kept "
            "result_expire seconds) or it is not a task's id in this store"
        )

    # ---- waiting --------------------------------------------------------------------------

    def _wait_once(self, seconds: float) -> tuple[bool, Any]:
        done, value = self._outcome_or_failure()
        if done:
            return done, value
        cache = self._tasks.cache
        try:
            key, _ = cache.pull(prefix=wake_prefix(self.id), timeout=seconds)
        except DecodeError:
            return self._poll(seconds)
        if key is None:
            return False, None
        done, value = self._outcome_or_failure()
        if done:
            # Pass the token on, so that every other waiter wakes too. (Not while the task is
            # unfinished, as after an operator's requeue: the waiter would spin on it.)
            wake(cache, self.id)
        return done, value

    def _poll(self, seconds: float) -> tuple[bool, Any]:
        """Wait up to ``seconds`` by checking the task every :data:`JUNK_POLL` seconds: for
        a wake queue with junk in front, which no pull can pass."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            time.sleep(min(JUNK_POLL, left))
            done, value = self._outcome_or_failure()
            if done:
                return done, value
        return False, None

    def _outcome_or_failure(self) -> tuple[bool, Any]:
        try:
            return self._outcome()
        except TaskError as error:
            return True, error

    @staticmethod
    def _unwrap(value: Any) -> Any:
        if isinstance(value, TaskError):
            raise value
        return value

    def get(self, timeout: float | None = None) -> Any:
        """The task's return value, waiting up to ``timeout`` seconds (None: as long as it
        takes; 0: do not wait). Woken by the worker that finishes it, in any process.

        :raises TaskFailed: it failed for good (type name, message and traceback attached)
        :raises TaskCancelled: it was cancelled before it ran
        :raises ResultTimeout: it had not finished within ``timeout``
        :raises TaskError: there is no such task (its result expired)
        """
        deadline = None if timeout is None else time.monotonic() + max(0.0, float(timeout))
        while True:
            remaining = RECHECK if deadline is None else deadline - time.monotonic()
            done, value = self._wait_once(max(0.0, min(RECHECK, remaining)))
            if done:
                return self._unwrap(value)
            if deadline is not None and time.monotonic() >= deadline:
                raise ResultTimeout(f"task {self.id} had not finished after {timeout} s")

    async def aget(self, timeout: float | None = None) -> Any:
        """:meth:`get` from asyncio: the blocking waits run in the loop's executor, a slice at
        a time, so a cancelled waiter stops within one slice (0.5 s)."""
        deadline = None if timeout is None else time.monotonic() + max(0.0, float(timeout))
        while True:
            remaining = 0.5 if deadline is None else deadline - time.monotonic()
            done, value = await asyncio.to_thread(self._wait_once, max(0.0, min(0.5, remaining)))
            if done:
                return self._unwrap(value)
            if deadline is not None and time.monotonic() >= deadline:
                raise ResultTimeout(f"task {self.id} had not finished after {timeout} s")

    def __await__(self) -> Generator[Any, None, Any]:
        return self.aget().__await__()

    # ---- cancelling -----------------------------------------------------------------------

    def cancel(self) -> bool:
        """Remove the task if it is still queued (or scheduled); True if it was.

        A running task is not interrupted (False): nothing stops code in another process
        safely; a task taken by a worker at the very moment of the cancel may still run. A
        cancelled task's ``get()`` raises :class:`TaskCancelled`.
        """
        if self.id not in _ID_RANGE:
            return False
        jobs = self._tasks.jobs
        info = jobs.get(self.id)
        if info is None or info.state != "ready":
            return False
        if not jobs.delete(self.id):
            return False
        cache = self._tasks.cache
        expire = self._tasks.default_result_expire
        # add(): a worker that took the job in the same instant keeps its own record.
        cache.add(result_key(self.id), {"status": "cancelled"}, expire=expire)
        wake(cache, self.id)
        return True
