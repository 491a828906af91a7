"""The app's directory, shared by the web app and the worker (separate processes):

- ``cache/``: a diskcache_oxide ``Cache`` holding the cleaned articles (and the results of
  the worker's tasks), and in tables of their own the claims on them and the queue of taps
  (``JobQueue`` named ``taps``, where ``reader.worker.clean`` tasks wait);
- ``ledger/``: a ``Deque`` with one entry per paid call, appended when the call is made;
- ``journal/``: a ``Deque`` of what happened besides payments (taps, jobs taken and what
  became of them, views lost to a closed page), read by the tests and the ledger page.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from diskcache_oxide import Cache, Deque, JobQueue

from .config import Settings

QUEUE = "taps"


class Store:
    """Handles on one app directory; open one per process."""

    def __init__(self, directory: str | os.PathLike[str], settings: Settings) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.settings = settings
        # No eviction: the worker (`diskcache-oxide worker`, which opens a directory so) keeps
        # the tasks' results here beside the cleaned articles, and a store that evicts could
        # lose them. Claims and jobs live in tables of their own in any case, which no
        # eviction, cull, size limit or clear() touches.
        self.cache = Cache(str(self.directory / "cache"), eviction_policy="none")
        self.jobs = JobQueue(
            self.cache, QUEUE, lease=settings.job_lease, max_attempts=settings.max_attempts
        )
        self.ledger = Deque(directory=self.directory / "ledger")
        self.journal = Deque(directory=self.directory / "journal")

    def note(self, event: str, **fields: Any) -> None:
        """Append an event to the journal (with the time and this process's id)."""
        self.journal.append({"event": event, "at": time.time(), "pid": os.getpid(), **fields})

    def events(self, event: str | None = None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = list(self.journal)
        return items if event is None else [x for x in items if x["event"] == event]

    def payments(self) -> list[dict[str, Any]]:
        return list(self.ledger)

    def close(self) -> None:
        self.cache.close()
        self.ledger.cache.close()
        self.journal.cache.close()
