"""The worker lane, as a task: :func:`clean`, run by ``diskcache-oxide worker``.

    READER_DATA=DIR diskcache-oxide worker DIR/cache reader.worker --pool thread

(``python -m reader DIR`` starts it so, beside the web app). The worker serves the app's
cache directory, where the taps are queued; ``READER_DATA`` names the app's directory, whose
ledger and journal the task writes to. ``--pool thread`` runs the task in the worker's own
process, one at a time, oldest tap first, as the reader's worker always did: the ledger
records that process's pid.

Every task it runs was queued by a reader's tap (``POST /tap/{id}``, through :func:`put`), so
it defers requested work to a convenient moment and never chooses work itself: nothing here
queues a task but :func:`put`, and only the tap handler calls that. Each task goes through the
same compute-once as the direct lane (``pay``); an article the direct lane has cached already
is skipped, and one the direct lane is paying for right now is given back for later, at once,
without waiting for that turn (:class:`~diskcache_oxide.tasks.Requeue`: no attempt spent).
The task is leased (``READER_JOB_LEASE``): if the worker dies mid-turn, its heartbeat stops,
the article's claim runs out one claim lease later, and the task comes back after its lease.

SIGTERM or SIGINT stop the worker after the current task (within its grace period).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

from diskcache_oxide.tasks import Requeue, Tasks, current

from . import pay
from .config import Settings
from .feed import Feed
from .store import QUEUE, Store

log = logging.getLogger("reader.worker")

#: The settings of this process (the task's lease and attempts are declared from them).
SETTINGS = Settings.from_env()


class ReaderTasks(Tasks):
    """The reader's tasks, on the cache of the app's directory. Each process names that
    directory at run time, after this module is imported: the web app binds its
    :class:`Store` (:meth:`bind`); the worker opens one on ``READER_DATA``."""

    def __init__(self) -> None:
        super().__init__(None, queue=QUEUE)
        self._store: Store | None = None
        self._feed: Feed | None = None

    def bind(self, store: Store) -> None:
        """Queue on ``store``'s cache (the web app's, opened by its lifespan)."""
        self._store = store

    @property
    def bound(self) -> bool:
        """Whether a store is bound, or ``READER_DATA`` names one."""
        return self._store is not None or bool(os.environ.get("READER_DATA"))

    @property
    def store(self) -> Store:
        """The app's directory in this process."""
        if self._store is None:
            directory = os.environ.get("READER_DATA")
            if not directory:
                raise RuntimeError(
                    "the reader's tasks need the app's directory: run the worker with "
                    "READER_DATA=DIR (python -m reader DIR does), or bind() a Store"
                )
            self._store = Store(directory, SETTINGS)
        return self._store

    @property
    def feed(self) -> Feed:
        if self._feed is None:
            self._feed = Feed.load(self.store.settings.articles)
        return self._feed

    @property
    def cache(self) -> Any:
        return self.store.cache

    @property
    def where(self) -> str:
        return str(self.store.directory / "cache") if self.bound else "(the app's directory)"


tasks = ReaderTasks()


@tasks.task(
    lease=SETTINGS.job_lease,
    retries=SETTINGS.max_attempts - 1,
    unique=lambda article_id: f"article-{article_id}",
)
def clean(article_id: int) -> str:
    """Clean one tapped article through the worker lane's compute-once; returns what became
    of it (``paid``, or ``cached`` when someone else had paid), or gives the task back for a
    claim lease when another caller is paying for it right now."""
    store = tasks.store
    running = current()
    job_id = running.id if running is not None else None
    attempts = running.attempt if running is not None else 0
    store.note("take", job=job_id, article=article_id, attempts=attempts)
    article = tasks.feed.get(article_id) if isinstance(article_id, int) else None
    if article is None:
        store.note("done", job=job_id, article=article_id, outcome="unknown")
        raise LookupError(f"no article {article_id!r} in the feed")
    started = time.monotonic()
    # An exception here fails the attempt: retried after a backoff, at most
    # READER_MAX_ATTEMPTS takes in all, then the dead letters.
    outcome, retry_in = pay.worker_article(store, article)
    store.note("done", job=job_id, article=article.id, outcome=outcome)
    log.info(
        "job %s, article %d: %s (%.2f s)", job_id, article.id, outcome, time.monotonic() - started
    )
    if outcome == "deferred":
        raise Requeue(retry_in)
    return outcome


async def put(article_id: int) -> int:
    """Queue a tap: :func:`clean` for the article, oldest first. A second tap on an article
    whose task is still waiting or running adds nothing and gets the first's id."""
    result = await asyncio.to_thread(clean.delay, article_id)
    return result.id


if os.environ.get("READER_DATA"):
    # Imported by the worker (only its environment has READER_DATA): say so in the journal
    # (the tests wait for it).
    tasks.store.note("worker-start")
    log.info("worker ready, pid %d", os.getpid())
