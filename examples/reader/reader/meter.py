"""The cost meter: what was paid for, and what became of it.

Every extraction in the ledger is one of:

- **cached**: its result is the one stored for the article (the money bought something);
- **running**: it holds the article's live claim right now;
- **lost**: neither: paid for, and its result never stored (a turn cancelled mid-way, a
  worker killed mid-turn whose claim then ran out, a failed extraction).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any

from . import pay
from .feed import Feed
from .store import Store


@dataclasses.dataclass(frozen=True)
class Turn:
    """One paid extraction and what became of it (``cached``, ``running`` or ``lost``)."""

    entry: dict[str, Any]
    status: str


@dataclasses.dataclass(frozen=True)
class Reading:
    paid: int
    cached: int
    running: int
    lost: int
    summaries: int
    queued: int
    views_lost: int
    articles: dict[int, str]  # article id -> "cached" or "computing"
    tapped: dict[int, int]  # article id -> job id, for the jobs still in the queue
    turns: list[Turn]

    def as_json(self) -> dict[str, Any]:
        return {
            "paid": self.paid,
            "cached": self.cached,
            "running": self.running,
            "lost": self.lost,
            "summaries": self.summaries,
            "queued": self.queued,
            "views_lost": self.views_lost,
            "articles": {str(k): v for k, v in self.articles.items()},
            "tapped": {str(k): v for k, v in self.tapped.items()},
        }


def read(store: Store, feed: Feed) -> Reading:
    entries = store.payments()
    extracts = [x for x in entries if x["call"] == "extract"]
    by_article: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for entry in extracts:
        by_article[entry["article"]].append(entry)
    articles: dict[int, str] = {}
    status: dict[str, str] = {}
    holders = pay.holders(store)
    for article in feed.articles:
        value = pay.cached(store, article.id)
        info = holders.get(article.id)
        if value is not None:
            articles[article.id] = "cached"
        elif info is not None:
            articles[article.id] = "computing"
        for entry in by_article.get(article.id, []):
            if value is not None and value.get("turn") == entry["turn"]:
                status[entry["turn"]] = "cached"
            elif info is not None and entry.get("token") == info.token:
                status[entry["turn"]] = "running"
            else:
                status[entry["turn"]] = "lost"
    turns = [Turn(x, status.get(x["turn"], "lost")) for x in extracts]
    counts = store.jobs.counts()
    tapped: dict[int, int] = {}
    for event in store.events("tap"):
        job = store.jobs.get(event["job"])  # None once finished
        if job is not None and job.state != "dead":
            tapped[event["article"]] = event["job"]
    return Reading(
        paid=len(extracts),
        cached=sum(t.status == "cached" for t in turns),
        running=sum(t.status == "running" for t in turns),
        lost=sum(t.status == "lost" for t in turns),
        summaries=sum(x["call"] == "summary" for x in entries),
        queued=counts.ready + counts.scheduled + counts.leased,
        views_lost=len(store.events("view-lost")),
        articles=articles,
        tapped=tapped,
        turns=turns,
    )
