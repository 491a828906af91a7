"""What a task's job holds and what its result record holds: plain dicts, in the safe format
(or pickled where the store has ``pickle=True``), so any build and any backend reads them.

A job's value: ``{"task": name, "args": [...], "kwargs": {...}}``.

A result record, stored at :func:`result_key` for ``result_expire`` seconds:
``{"status": "succeeded", "value": v}``, ``{"status": "failed", "type": ..., "message": ...,
"traceback": ..., "attempts": n}`` or ``{"status": "cancelled"}``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["Call", "ERROR_LIMIT", "call_of", "make_call", "result_key", "wake_prefix"]

#: The prefix of the keys tasks keep in the cache (results and wake queues).
KEY_PREFIX = "diskcache_oxide.tasks"
#: The longest error text a job keeps (the traceback is in the result record, whole).
ERROR_LIMIT = 1000


def result_key(task_id: int) -> str:
    """The cache key of a task's result record."""
    return f"{KEY_PREFIX}.result.{task_id}"


def wake_prefix(task_id: int) -> str:
    """The queue prefix a task's waiters block on (:meth:`Cache.pull` with ``timeout=``)."""
    return f"{KEY_PREFIX}.wake.{task_id}"


class Call(NamedTuple):
    """A decoded job: the task's name and its arguments."""

    task: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def make_call(task: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The job value for a call."""
    return {"task": task, "args": list(args), "kwargs": dict(kwargs)}


def call_of(value: Any) -> Call:
    """The call in a job's value.

    :raises ValueError: for a value that is not a task's job (put by other code)
    """
    if (
        isinstance(value, dict)
        and isinstance(value.get("task"), str)
        and isinstance(value.get("args"), (list, tuple))
        and isinstance(value.get("kwargs"), dict)
        and all(isinstance(k, str) for k in value["kwargs"])
    ):
        return Call(value["task"], tuple(value["args"]), dict(value["kwargs"]))
    raise ValueError(
        f"the job's value is not a task call ({type(value).__name__}): put it on a queue that "
        "no task worker serves"
    )
