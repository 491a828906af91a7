"""The package's logger, looked up when something is logged.

Importing :mod:`logging` (with the traceback, string and weakref modules under it) cost a
seventh of ``import diskcache_oxide`` when each module bound its logger at import, and the
package logs only on rare paths: a lost claim, a failed renewal, a cache closed with work
pending (issue 33).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging

__all__ = ["log"]


def log() -> logging.Logger:
    """The ``diskcache_oxide`` logger (logging keeps one per name, so this is cheap)."""
    import logging

    return logging.getLogger("diskcache_oxide")
