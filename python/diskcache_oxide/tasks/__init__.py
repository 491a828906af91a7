"""Tasks and workers on the leased :class:`~diskcache_oxide.JobQueue` (issue 22, D-063).

``tasks = Tasks(directory_or_url)``; ``@tasks.task`` declares a function; ``f.delay(...)``
queues a call and returns a :class:`TaskResult`; ``@tasks.periodic(every=|cron=)`` declares one
that the workers run on a schedule, each tick once; ``diskcache-oxide worker DIR app.module``
runs them and counts what they do (``Tasks.totals()``, ``--metrics-port``). Built on
JobQueue's public API and the cache's get/set/push/pull only, so it runs on any store that
has both. See docs/guide-tasks.md.
"""

from __future__ import annotations

from ._app import PeriodicTask, Task, Tasks, registered
from ._errors import Requeue, ResultTimeout, TaskCancelled, TaskError, TaskFailed, TaskTimeout
from ._execute import Current, current
from ._metrics import TaskTotals
from ._results import STATUSES, TaskResult

__all__ = [
    "STATUSES",
    "Current",
    "PeriodicTask",
    "Requeue",
    "ResultTimeout",
    "Task",
    "TaskCancelled",
    "TaskError",
    "TaskFailed",
    "TaskResult",
    "TaskTimeout",
    "TaskTotals",
    "Tasks",
    "current",
    "registered",
]
