"""The paid step: clean one article. Both lanes run exactly this function, and only through
``reader.pay``'s compute-once, so that each article is paid for once.

Each paid call is written to the ledger *before* it is made (the money is committed when
the call starts, whatever becomes of its result). The step sleeps ``READER_DELAY`` seconds,
standing in for a slow paid API, then extracts the article's main text from its HTML page
with trafilatura, then, if ``READER_LLM_URL`` names an OpenAI-compatible endpoint, asks it
for a two-sentence summary (a second paid call, with its own ledger entry).
"""

from __future__ import annotations

import os
import re
import time
import uuid
from typing import Any

import httpx
import trafilatura

from .feed import Article
from .store import Store

SUMMARY_PROMPT = (
    "You summarise articles for a reading app. Answer with two plain sentences that say what "
    "the article is about and what it concludes. No preamble."
)


class ExtractionFailed(RuntimeError):
    """trafilatura found no main text in the page."""


_HEADING = re.compile(r"^#{1,6}\s+")
_BOLD = re.compile(r"\*\*(.+?)\*\*")


def extract_blocks(html: str) -> list[tuple[str, str]]:
    """The article's main text as ``(kind, text)`` blocks, ``kind`` being ``"h"`` for a
    heading and ``"p"`` for a paragraph, in plain text."""
    text = trafilatura.extract(
        html,
        include_comments=False,
        include_tables=False,
        include_links=False,
        include_formatting=True,  # marks headings (and emphasis, which we drop)
        favor_precision=True,
        deduplicate=False,
    )
    if not text:
        raise ExtractionFailed("no main text found")
    blocks: list[tuple[str, str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        kind = "h" if _HEADING.match(line) else "p"
        line = _BOLD.sub(r"\1", _HEADING.sub("", line))
        if len(line) > 2 and line.startswith("*") and line.endswith("*"):
            line = line[1:-1]
        blocks.append((kind, line))
    return blocks


def summarize(
    url: str,
    model: str,
    title: str,
    paragraphs: list[str],
    *,
    key: str | None = None,
    timeout: float = 60.0,
) -> str:
    """A summary from an OpenAI-compatible chat completions endpoint at ``url`` (``.../v1``)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    body = {
        "model": model,
        "temperature": 0,
        "messages": [
            {"role": "system", "content": SUMMARY_PROMPT},
            {"role": "user", "content": title + "\n\n" + "\n\n".join(paragraphs)},
        ],
    }
    response = httpx.post(
        url.rstrip("/") + "/chat/completions", json=body, headers=headers, timeout=timeout
    )
    response.raise_for_status()
    content = response.json()["choices"][0]["message"]["content"]
    return str(content).strip()


def paid_turn(store: Store, article: Article, lane: str, claim_token: str | None) -> dict[str, Any]:
    """Pay for one article's clean-up and return the value to cache.

    ``claim_token`` is the token of the claim this turn runs under (recorded in the ledger so
    the meter can tell a running turn from a lost one).
    """
    settings = store.settings
    turn = uuid.uuid4().hex
    started = time.time()
    entry = {"turn": turn, "article": article.id, "lane": lane, "pid": os.getpid()}
    store.ledger.append({"call": "extract", "token": claim_token, "at": started, **entry})
    if settings.delay > 0:
        time.sleep(settings.delay)
    blocks = extract_blocks(article.html())
    while blocks and blocks[0][1] in (article.title, article.teaser):
        blocks.pop(0)  # the page shows the title and the teaser already
    paragraphs = [text for _, text in blocks]
    summary: str | None = None
    summary_error: str | None = None
    if settings.llm_url:
        store.ledger.append({"call": "summary", "token": claim_token, "at": time.time(), **entry})
        try:
            summary = summarize(
                settings.llm_url,
                settings.llm_model,
                article.title,
                paragraphs,
                key=settings.llm_key,
                timeout=settings.llm_timeout,
            )
        except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as exc:
            # The extraction is paid for already: keep it, and say why there is no summary.
            summary_error = f"{type(exc).__name__}: {exc}"
    return {
        "article": article.id,
        "title": article.title,
        "paragraphs": paragraphs,
        "headings": [i for i, (kind, _) in enumerate(blocks) if kind == "h"],
        "summary": summary,
        "summary_error": summary_error,
        "turn": turn,
        "lane": lane,
        "pid": os.getpid(),
        "paid_at": started,
        "seconds": round(time.time() - started, 3),
    }
