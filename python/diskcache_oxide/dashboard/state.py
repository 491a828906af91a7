"""What the dashboard shows, as plain data: one snapshot of a directory, served as JSON at
``/api/state`` and polled by the page every second. Needs nothing beyond the package."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from .. import admin
from ..core import Cache

__all__ = ["STATES", "snapshot"]

#: The job states, in the order the page shows them.
STATES: tuple[admin.JobState, ...] = ("ready", "leased", "scheduled", "dead")


def snapshot(cache: Cache, *, limit: int = 50, actions: bool = False) -> dict[str, Any]:
    """The cache's stats, its queues, each job queue's counts and first ``limit`` jobs of
    each state, and the live claims. ``actions`` tells the page whether to show buttons."""
    info = admin.info(cache)
    job_queues = []
    for name, counts in info["jobs"].items():
        job_queues.append(
            {
                "name": name,
                "counts": counts,
                "jobs": {
                    state: [asdict(row) for row in admin.jobs(cache, name, state, limit=limit)]
                    for state in STATES
                },
            }
        )
    return {
        "directory": info["directory"],
        "time": time.time(),
        "actions": actions,
        "limit": limit,
        "stats": {
            "count": info["count"],
            "volume": info["volume"],
            "hits": info["hits"],
            "misses": info["misses"],
            "claims": info["claims"],
            "eviction_policy": info["settings"]["eviction_policy"],
            "size_limit": info["settings"]["size_limit"],
            "statistics": info["settings"]["statistics"],
        },
        "settings": info["settings"],
        "queues": info["queues"],
        "job_queues": job_queues,
        "claims": [_claim(row, actions) for row in admin.claims(cache)],
    }


def _claim(row: admin.ClaimRow, actions: bool) -> dict[str, Any]:
    # A claim's token is what lets its holder release or extend it: a read-only page, which
    # anyone who can reach the port may load, does not carry it.
    shown = asdict(row)
    if not actions:
        shown.pop("token", None)
    return shown
