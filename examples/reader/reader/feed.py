"""The feed: the articles shipped in ``examples/reader/articles`` (written by make_articles.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

ARTICLES = Path(__file__).resolve().parent.parent / "articles"


@dataclasses.dataclass(frozen=True)
class Article:
    """One card of the feed; ``path`` is the article's original HTML page."""

    id: int
    slug: str
    title: str
    source: str
    author: str
    date: str
    section: str
    teaser: str
    path: Path

    def html(self) -> str:
        return self.path.read_text(encoding="utf-8")


class Feed:
    """The articles by id, in feed order."""

    def __init__(self, articles: list[Article]) -> None:
        self.articles = articles
        self._by_id = {a.id: a for a in articles}

    @classmethod
    def load(cls, directory: Path = ARTICLES) -> Feed:
        entries: list[dict[str, Any]] = json.loads(
            (directory / "feed.json").read_text(encoding="utf-8")
        )
        return cls(
            [
                Article(
                    id=int(x["id"]),
                    slug=x["slug"],
                    title=x["title"],
                    source=x["source"],
                    author=x["author"],
                    date=x["date"],
                    section=x["section"],
                    teaser=x["teaser"],
                    path=directory / x["file"],
                )
                for x in entries
            ]
        )

    def get(self, article_id: int) -> Article | None:
        return self._by_id.get(article_id)

    def __len__(self) -> int:
        return len(self.articles)
