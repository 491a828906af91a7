"""How a task is named: ``module.qualname``, by compute-once's rule (D-045), so that the
process that calls ``delay()`` and the worker that runs the task agree on the name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..claims import stable_name

__all__ = ["task_name"]


def task_name(func: Callable[..., Any], name: str | None) -> str:
    """The name ``func`` is queued under: ``name`` if given, else compute-once's
    :func:`~diskcache_oxide.claims.stable_name` (``module.qualname``, the same when the module
    runs as ``python -m``).

    :raises ValueError: for a function of a script run by its path without ``name=``, since
        a worker, which imports modules, could never find it by that name
    """
    if name is not None:
        if not isinstance(name, str) or not name or "\0" in name:
            raise ValueError(f"name must be a non-empty str without NUL characters, not {name!r}")
        return name
    try:
        return stable_name(func)
    except ValueError:
        raise ValueError(
            f"the task {func.__qualname__} is defined in a script run by its path (its module "
            "is __main__), so a worker, which imports modules by name, could not find it: give "
            "it a name with @tasks.task(name='app.tasks.NAME') and define the same function in "
            "a module the worker imports, or run the script with python -m"
        ) from None
