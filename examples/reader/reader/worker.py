"""The worker lane: its own process, serial, oldest tap first.

    python -m reader.worker DIR

Every job it takes was put there by a reader's tap (``POST /tap/{id}``), so it defers
requested work to a convenient moment and never chooses work itself: it has no code that
adds jobs. Each job goes through the same compute-once as the direct lane (``pay``); an
article the direct lane has cached already is skipped, and one the direct lane is paying for
right now is given back for later, at once, without waiting for that turn. The job is leased:
if this process dies mid-turn, its heartbeat stops, the article's claim runs out one claim
lease later, and the job comes back after its job lease.

SIGTERM or SIGINT stop it after the current job.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from types import FrameType

from . import pay
from .config import Settings
from .feed import Feed
from .store import Store

log = logging.getLogger("reader.worker")


def run(store: Store, feed: Feed, stop: threading.Event) -> None:
    while not stop.is_set():
        job = store.jobs.take(timeout=store.settings.poll)
        if job is None:
            continue
        store.note("take", job=job.id, article=job.value, attempts=job.attempts)
        article = feed.get(job.value) if isinstance(job.value, int) else None
        if article is None:
            job.fail(f"no article {job.value!r} in the feed")
            store.note("done", job=job.id, article=job.value, outcome="unknown")
            continue
        started = time.monotonic()
        with job:  # finished on success, failed (and retried) if the turn raises
            outcome, retry_in = pay.worker_article(store, article)
            if outcome == "deferred":
                job.release(delay=retry_in)
        store.note("done", job=job.id, article=article.id, outcome=outcome)
        log.info(
            "job %d, article %d: %s (%.2f s)",
            job.id,
            article.id,
            outcome,
            time.monotonic() - started,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The reader's queue worker.")
    parser.add_argument("directory", help="the app's directory")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    store = Store(args.directory, Settings.from_env())
    try:
        store.note("worker-start")
        log.info("worker ready, pid %d", os.getpid())
        run(store, Feed.load(store.settings.articles), stop)
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
