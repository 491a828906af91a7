"""The task module of the metrics tests (tests/tasks/test_metrics.py and
tests/dashboard/test_dashboard_metrics.py): tasks that succeed, fail, and fail once then
succeed. Its app's store is the one in ``DCO_TASKS_DIR``, as for ``sample_tasks``."""

from __future__ import annotations

import os
import tempfile

from diskcache_oxide import Tasks

tasks = Tasks(os.environ.get("DCO_TASKS_DIR") or tempfile.mkdtemp())


@tasks.task
def ok(x: int) -> int:
    return x + 1


@tasks.task(retries=0)
def bad(x: int) -> None:
    raise ValueError(f"bad input: {x}")


@tasks.task(retries=2, backoff=0)
def flaky(key: str) -> str:
    """Fails on its first attempt (counted in the store), then succeeds: one retry."""
    if tasks.cache.incr(("flaky", key)) == 1:
        raise RuntimeError(f"first attempt of {key}")
    return key
