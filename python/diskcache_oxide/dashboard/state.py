"""What the dashboard shows, as plain data: one snapshot of a directory or a Redis namespace
(D-062), served as JSON at ``/api/state`` and polled by the page every second. Needs nothing
beyond the package.

A snapshot costs what its pages hold, not what the directory holds (D-046): each list (the
queues on the keys, the job queues, the claims) is a page of at most its limit with the total
beside it and a cursor to the next page; each job queue on the page lists at most ``limit``
jobs per state, the state chosen in SQL; and every value is a preview built from the first
few KiB of its stored bytes, never decoded (on Redis, decoded, never unpickled, and cut: the
binding has no preview of a frame's bytes). On Redis what only a directory has (``volume``,
``size_limit``, the oldest item's age) is None, and the settings are the namespace's and the
server's memory settings."""

from __future__ import annotations

import bisect
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

from .. import admin
from .._store import store_of

__all__ = ["LIMITS", "STATES", "Page", "PageError", "snapshot"]

#: The job states, in the order the page shows them.
STATES: tuple[admin.JobState, ...] = ("ready", "leased", "scheduled", "dead")

#: The characters of a value's preview.
PREVIEW_WIDTH = 60

#: The largest page a request may ask for, per list: enough to page quickly, small enough
#: that no request makes a poll cost what the directory holds.
LIMITS = {"queues": 500, "job_queues": 50, "claims": 500, "jobs": 200}

#: How many keys to look through for a queue's front item before giving up on showing it.
_FRONT_LOOKUPS = 20


class PageError(ValueError):
    """A page was asked for with a limit or cursor that cannot be used (the API's 400)."""


@dataclass(frozen=True)
class Page:
    """Which page of each list a snapshot shows: a limit each, and a cursor each (None: the
    first page) as the previous snapshot's ``pages[...]["next"]`` gave it. ``jobs`` is the
    most jobs of one state of one job queue."""

    queues: int = 50
    queues_after: str | None = None
    job_queues: int = 10
    job_queues_after: str | None = None
    claims: int = 50
    claims_after: str | None = None
    jobs: int = 20

    @classmethod
    def parse(cls, query: dict[str, str], defaults: Page) -> Page:
        """The page that a request's query names (``queues_limit``, ``queues_after``, ...,
        ``jobs_limit``); what it leaves out comes from ``defaults``.

        :raises PageError: for a limit that is not a number from 1 to its list's largest, or
            an offset cursor that is not a number
        """
        fields: dict[str, Any] = {}
        for name, most in LIMITS.items():
            text = query.get(f"{name}_limit")
            if text is None:
                continue
            if not text.isdigit() or not 1 <= int(text) <= most:
                raise PageError(f"{name}_limit must be a whole number from 1 to {most}")
            fields[name] = int(text)
        for name in ("queues", "job_queues", "claims"):
            cursor = query.get(f"{name}_after")
            if cursor is None:
                continue
            if name != "job_queues" and not cursor.isdigit():
                raise PageError(
                    f"{name}_after must be the cursor a previous answer gave as "
                    f"pages.{name}.next (a whole number)"
                )
            fields[f"{name}_after"] = cursor
        return cls(**{**asdict(defaults), **fields})


def _paged(total: int, start: int, shown: int, limit: int, after: str | None) -> dict[str, Any]:
    # `start` counts the rows before this page, so the page can say "51–100 of 1,000".
    return {"total": total, "start": start, "shown": shown, "limit": limit, "after": after}


def _queue_front(cache: admin.AnyCache, prefix: str | None) -> str | None:
    """A preview of the front item of the queue of ``prefix``, or None if it is not among the
    first few keys in key order (other keys share the prefix, or the items left meanwhile).
    Only its stored bytes' first few KiB are read (on Redis: the queue's first few numbers,
    and the value of the first item still there)."""
    return store_of(cache).inspector().queue_front(prefix, PREVIEW_WIDTH, _FRONT_LOOKUPS)


def _queues(cache: admin.AnyCache, page: Page) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    # The queues come from one scan of the keys (admin.queues); only this page's are shown
    # and looked into for their front item.
    every = admin.queues(cache)
    start = int(page.queues_after or 0)
    rows = []
    for row in every[start : start + page.queues]:
        shown = asdict(row)
        shown["front"] = _queue_front(cache, row.prefix)
        rows.append(shown)
    info = _paged(len(every), start, len(rows), page.queues, page.queues_after)
    end = start + len(rows)
    info["next"] = str(end) if end < len(every) else None
    return rows, info


def _job_queues(cache: admin.AnyCache, page: Page) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    names = admin.job_queues(cache)
    start = 0 if page.job_queues_after is None else _rank(names, page.job_queues_after)
    shown = names[start : start + page.job_queues]
    rows = []
    for name in shown:
        rows.append(
            {
                "name": name,
                "counts": admin.job_counts(cache, name)._asdict(),
                "jobs": {
                    state: [
                        asdict(row)
                        for row in admin.jobs(
                            cache, name, state, limit=page.jobs, width=PREVIEW_WIDTH
                        )
                    ]
                    for state in STATES
                },
            }
        )
    info = _paged(len(names), start, len(rows), page.job_queues, page.job_queues_after)
    info["next"] = shown[-1] if start + len(shown) < len(names) else None
    return rows, info


def _rank(names: list[str], after: str) -> int:
    # How many names sort up to `after` (the names are sorted, as the engine lists them).
    return bisect.bisect_right(names, after)


def _claims(cache: admin.AnyCache, page: Page) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    total = admin.claim_count(cache)
    start = int(page.claims_after or 0)
    rows = []
    for claim in admin.claims(cache, limit=page.claims, offset=start):
        row = asdict(claim)
        # A claim's token lets its holder renew and release it. The page never needs it,
        # actions on or off: its release button names the claim (namespace and key) and the
        # server breaks whatever claim is live on that key (issue 29), so whoever can read
        # the page (a proxy's log, a screenshot) gets no token.
        del row["token"]
        rows.append(row)
    info = _paged(total, start, len(rows), page.claims, page.claims_after)
    end = start + len(rows)
    info["next"] = str(end) if end < total else None
    return rows, info


def _figures(cache: admin.AnyCache) -> dict[str, Any]:
    # What differs between the backends: where the cache is, its counters, its settings
    # (a directory's; a Redis namespace's and its server's memory settings).
    look = store_of(cache).inspector()
    # The counters as stored: stats() would switch counting on or off (a write).
    hits, misses = look.counters()
    settings = look.settings()
    return {
        "backend": look.backend,
        "directory": look.location,
        "namespace": look.namespace,
        "hits": hits,
        "misses": misses,
        "volume": look.volume(),
        # A directory's own policy and limit; on Redis the server's policy, and no limit.
        "eviction_policy": settings.get(
            "eviction_policy", settings.get("maxmemory_policy", "the server's")
        ),
        "size_limit": settings.get("size_limit"),
        "statistics": settings["statistics"],
        "settings": settings,
    }


def snapshot(
    cache: admin.AnyCache,
    *,
    limit: int | None = None,
    actions: bool = False,
    page: Page | None = None,
) -> dict[str, Any]:
    """The cache's stats and settings, and a page of its queues, of its job queues (each with
    its counts and first jobs of each state, their values previewed) and of its live claims,
    each list with its total and the cursor of the next page (``pages``). ``actions`` tells
    the page whether to show buttons. The claims never carry their tokens.

    :param limit: jobs per state and job queue (overrides ``page.jobs``)
    :param page: which page of each list (default: the first, with :class:`Page`'s limits)
    """
    page = page or Page()
    if limit is not None:
        page = Page(**{**asdict(page), "jobs": limit})
    figures = _figures(cache)
    queues, queues_page = _queues(cache, page)
    job_queues, job_queues_page = _job_queues(cache, page)
    claims, claims_page = _claims(cache, page)
    return {
        "backend": figures["backend"],
        "directory": figures["directory"],
        "namespace": figures["namespace"],
        "time": time.time(),
        "actions": actions,
        "limit": page.jobs,
        "stats": {
            "count": len(cache),
            "volume": figures["volume"],
            "hits": figures["hits"],
            "misses": figures["misses"],
            "queues": queues_page["total"],
            "job_queues": job_queues_page["total"],
            "claims": claims_page["total"],
            "eviction_policy": figures["eviction_policy"],
            "size_limit": figures["size_limit"],
            "statistics": figures["statistics"],
        },
        "settings": figures["settings"],
        "queues": queues,
        "job_queues": job_queues,
        "claims": claims,
        "pages": {"queues": queues_page, "job_queues": job_queues_page, "claims": claims_page},
    }


#: The span over which the tasks' section reckons its rates (seconds).
RATE_WINDOW = 300.0


class TaskRates:
    """The tasks' totals (kept in the store by every worker, D-063) as the dashboard last
    read them, so that each read can say how fast they grew: per minute, over the reads of
    the last :data:`RATE_WINDOW` seconds (the store keeps totals only; the rates are this
    process's own reckoning, so a fresh dashboard shows none until its second read)."""

    def __init__(self, window: float = RATE_WINDOW) -> None:
        self.window = window
        self.samples: deque[tuple[float, dict[str, dict[str, int]]]] = deque()
        self.lock = threading.Lock()

    def read(self, cache: admin.AnyCache) -> dict[str, Any]:
        """The tasks by name: totals, rates per minute, mean run time and latest failure; at
        most :data:`~diskcache_oxide.tasks._metrics.NAME_LIMIT` names (``unreported``: how
        many more), entries that hold junk skipped (``bad``: how many)."""
        from ..tasks._metrics import NAME_LIMIT, read_report

        now = time.time()
        report = read_report(cache, buckets=False)
        totals = report.totals
        counts = {name: dict(entry.counts) for name, entry in totals.items()}
        with self.lock:
            self.samples.append((now, counts))
            while len(self.samples) > 2 and self.samples[1][0] < now - self.window:
                self.samples.popleft()
            then, before = self.samples[0]
        span = now - then
        rows = []
        for name, entry in sorted(totals.items()):
            runs = entry.observed["run"]
            rates: dict[str, float | None] = {}
            for metric in ("started", "succeeded", "failed", "retried"):
                if span < 1.0:
                    rates[metric] = None
                else:
                    grown = entry.counts[metric] - before.get(name, {}).get(metric, 0)
                    rates[metric] = round(max(0, grown) * 60.0 / span, 3)
            # Checked field by field when read (failure_shown): only numbers, a str, a bool.
            failure = entry.last_failure
            rows.append(
                {
                    "name": name,
                    **entry.counts,
                    "per_minute": rates,
                    "run_mean": entry.sums["run"] / runs if runs else None,
                    "last_failure": None
                    if failure is None
                    else {
                        "error": failure["error"],
                        "id": failure["id"],
                        "attempt": failure["attempt"],
                        "final": failure["final"],
                        "ago": now - failure["time"],
                    },
                }
            )
        return {
            "time": now,
            "span": span,
            "tasks": rows,
            "limit": NAME_LIMIT,
            "unreported": report.unreported,
            "bad": report.bad,
        }
