"""The tasks declared in this process, by name: written by ``@tasks.task`` (``_app``) and read
by the metrics (``_metrics``, for a worker's own names) and by
:func:`~diskcache_oxide.tasks.registered`. Its own module so that the metrics read it without
importing ``_app``, which imports them (tests/api/test_layers.py)."""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["declared", "declare"]

_declared: dict[str, Any] = {}
_lock = threading.Lock()


def declare(name: str, task: Any) -> None:
    """Record ``task`` under ``name``; a name declared again is the later declaration's."""
    with _lock:
        _declared[name] = task


def declared() -> dict[str, Any]:
    """The tasks declared so far, by name (a copy)."""
    with _lock:
        return dict(_declared)
