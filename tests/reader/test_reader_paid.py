"""The reader's paid step on its own: the extraction finds each article's body in its page and
leaves the page's boilerplate behind; the optional summary goes to an OpenAI-compatible
endpoint (a fake one, on 127.0.0.1); each paid call is in the ledger before it is made."""

from __future__ import annotations

from pathlib import Path

import pytest
from reader import paid
from reader.config import Settings
from reader.feed import Article, Feed
from reader.store import Store
from reader_harness import FakeLLM

#: Text of each layout's boilerplate, none of which may reach the extracted article. (Promos
#: placed *inside* the body, like "Read more:" links, are not in this list: trafilatura keeps
#: some of them, as it would on a real site.)
BOILERPLATE = [
    "We use cookies",
    "This site uses cookies",
    "142 partners",
    "This website uses cookies",
    "Accept all",
    "Subscribe from",
    "Get the Gazette in your inbox",
    "More from the Gazette",
    "Most read",
    "Comments are moderated",
    "Leave a Reply",
    "thoughts on",
    "Recent Posts",
    "Support Fieldnotes",
    "About Dev Okafor",
    "About Priya Raman",
    "Proudly powered",
    "The Signal, every weekday",
    "More stories",
    "Most popular",
    "Free delivery on all cookbook",
    "Sunday Supper",
    "You might also like",
    "Join the conversation",
    "Popular this week",
    "All rights reserved",
    "Registered in Scotland",
    "Bayview Motors",
    "Harbour Fish Bar",
    "Greenway Garden Centres",
    "Pixelhouse",
    "Hartley's Kitchenware",
    "BayWatcher62",
    "Share on Facebook",
]


def _source_blocks() -> dict[str, list[str]]:
    """Each article's body paragraphs, from articles/source.txt."""
    import make_articles

    articles = make_articles.parse(make_articles.SOURCE.read_text(encoding="utf-8"))
    return {a.slug: [b.text for b in a.body] for a in articles}


@pytest.mark.parametrize("article", Feed.load().articles, ids=lambda a: a.slug)
def test_extraction_finds_the_body_and_drops_the_boilerplate(article: Article) -> None:
    blocks = paid.extract_blocks(article.html())
    text = "\n".join(t for _, t in blocks)
    for block in _source_blocks()[article.slug]:
        assert block in text, f"missing from the extraction: {block[:60]!r}"
    leaked = [b for b in BOILERPLATE if b in text]
    assert leaked == []
    headings = [t for kind, t in blocks if kind == "h"]
    assert headings and all(len(h) < 80 for h in headings)


def test_the_feed_has_about_30_articles_from_four_publications() -> None:
    feed = Feed.load()
    assert len(feed) == 30
    assert {a.source for a in feed.articles} == {
        "The Kestrel Bay Gazette",
        "Fieldnotes",
        "Circuit & Signal",
        "The Long Table",
    }
    for article in feed.articles:
        page = article.html()
        words = len(" ".join(_source_blocks()[article.slug]).split())
        assert words > 200, article.slug
        assert len(page) > 3 * len(" ".join(_source_blocks()[article.slug]))  # boilerplate


def test_a_paid_turn_is_in_the_ledger_and_asks_for_a_summary(tmp_path: Path) -> None:
    fake = FakeLLM()
    try:
        settings = Settings.from_env(
            {
                "READER_DELAY": "0",
                "READER_LLM_URL": fake.url,
                "READER_LLM_MODEL": "m",
                "READER_LLM_KEY": "k",
            }
        )
        store = Store(tmp_path, settings)
        article = Feed.load().articles[0]
        value = paid.paid_turn(store, article, "worker", "tok")
        ledger = store.payments()
        store.close()
    finally:
        fake.close()
    assert [(x["call"], x["article"], x["lane"], x["token"]) for x in ledger] == [
        ("extract", article.id, "worker", "tok"),
        ("summary", article.id, "worker", "tok"),
    ]
    assert ledger[0]["turn"] == value["turn"]
    assert value["summary"] == FakeLLM.SUMMARY and value["summary_error"] is None
    assert value["paragraphs"][0].startswith("On paper the last ferry")
    assert value["paragraphs"][value["headings"][0]] == "A survey done with a clipboard"
    [request] = fake.requests
    assert request["auth"] == "Bearer k" and request["body"]["model"] == "m"
    assert value["paragraphs"][0] in request["body"]["messages"][1]["content"]


def test_a_failed_summary_keeps_the_paid_extraction(tmp_path: Path) -> None:
    fake = FakeLLM()
    try:
        settings = Settings.from_env({"READER_DELAY": "0", "READER_LLM_URL": fake.url + "/nope"})
        store = Store(tmp_path, settings)
        value = paid.paid_turn(store, Feed.load().articles[1], "direct", None)
        store.close()
    finally:
        fake.close()
    assert value["summary"] is None
    assert value["summary_error"] is not None and "404" in value["summary_error"]
    assert len(value["paragraphs"]) >= 5


def test_no_summary_unless_an_endpoint_is_named(tmp_path: Path) -> None:
    store = Store(tmp_path, Settings.from_env({"READER_DELAY": "0"}))
    value = paid.paid_turn(store, Feed.load().articles[2], "direct", None)
    calls = [x["call"] for x in store.payments()]
    store.close()
    assert calls == ["extract"] and value["summary"] is None
