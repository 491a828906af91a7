"""The exceptions of tasks: a task that failed, was cancelled, or whose result did not come
in time. Each derives from :class:`~diskcache_oxide.CacheError`, as every exception of the
package does."""

from __future__ import annotations

from ..errors import CacheError

__all__ = ["Requeue", "ResultTimeout", "TaskCancelled", "TaskError", "TaskFailed", "TaskTimeout"]


class TaskError(CacheError):
    """Base class of the tasks' exceptions."""


class TaskFailed(TaskError):
    """The task failed for good: it raised (or ran past its ``timeout``, or its worker
    died) on its last attempt, and its job is in the dead letters.

    :ivar task_id: the task's id (its job's id)
    :ivar type_name: the exception's type name, as ``ValueError`` (``TaskTimeout`` for a task
        ended at its timeout, ``TaskDead`` for a job that went to the dead letters without a
        worker recording why, as when its last lease ran out)
    :ivar message: ``str()`` of the exception
    :ivar traceback: the worker's traceback text ('' when there was none)
    """

    def __init__(self, task_id: int, type_name: str, message: str, traceback: str = "") -> None:
        super().__init__(task_id, type_name, message, traceback)
        self.task_id = task_id
        self.type_name = type_name
        self.message = message
        self.traceback = traceback

    def __str__(self) -> str:
        text = f"task {self.task_id} failed: {self.type_name}: {self.message}"
        if self.traceback:
            text += f"\n\nThe worker's traceback:\n{self.traceback.rstrip()}"
        return text


class TaskCancelled(TaskError):
    """The task was cancelled while it was queued (:meth:`TaskResult.cancel`): it never ran."""


class ResultTimeout(TaskError, TimeoutError):
    """:meth:`TaskResult.get` waited ``timeout`` seconds and the task had not finished. The
    task is not touched: wait again, or :meth:`~TaskResult.cancel` it."""


class TaskTimeout(TaskError):
    """Raised inside a task of the thread pool that ran past its ``timeout`` (at its next
    Python instruction), and the type name recorded for every task ended at its timeout."""


class Requeue(TaskError):
    """Raised by a task to give its job back to the queue, ready again after ``delay``
    seconds, without spending an attempt (as :meth:`diskcache_oxide.JobQueue.release`): for
    a task that finds it cannot do its work yet (another process holds what it needs) and
    should not wait for it. The worker logs it as ``requeued``; no result is stored.

    :ivar delay: seconds before the task may be taken again (>= 0)
    """

    def __init__(self, delay: float = 0.0) -> None:
        delay = float(delay)
        if not delay >= 0:
            raise ValueError(f"Requeue(delay=) must be >= 0 seconds, not {delay!r}")
        super().__init__(delay)
        self.delay = delay

    def __str__(self) -> str:
        return f"requeued, ready again in {self.delay:g} s"
