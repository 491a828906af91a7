"""Write the reader's feed: articles/NN-slug.html and articles/feed.json from articles/source.txt.

Each article is laid out as its (made-up) publication would lay it out: a cookie banner,
navigation, ads in the page and between paragraphs, a newsletter box, share buttons, related
links, comments and a footer around the body, in four different styles of markup (a local
newspaper, a WordPress blog, a JavaScript-framework magazine, a food site). The paid step of
the app has to find the body in all of that.

    python make_articles.py          # (re)write the pages
    python make_articles.py --check  # exit 1 if a page would change

The output is deterministic: the same source gives the same bytes.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import html
import json
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ARTICLES = HERE / "articles"
SOURCE = ARTICLES / "source.txt"
FEED = ARTICLES / "feed.json"


@dataclasses.dataclass(frozen=True)
class Block:
    """One piece of an article's body: a paragraph, a subheading or a pull quote."""

    kind: str  # "p", "h2" or "quote"
    text: str


@dataclasses.dataclass(frozen=True)
class Article:
    id: int
    slug: str
    title: str
    source: str
    author: str
    date: str
    section: str
    teaser: str
    body: tuple[Block, ...]

    @property
    def file(self) -> str:
        return f"{self.id:02d}-{self.slug}.html"


PUBLICATIONS = {
    "gazette": "The Kestrel Bay Gazette",
    "fieldnotes": "Fieldnotes",
    "circuit": "Circuit & Signal",
    "longtable": "The Long Table",
}


def parse(text: str) -> list[Article]:
    """The articles of source.txt, numbered from 1 in the order they appear."""
    articles: list[Article] = []
    chunks = text.split("\n=== ")[1:]
    for number, chunk in enumerate(chunks, start=1):
        head, _, rest = chunk.partition("\n\n")
        lines = head.splitlines()
        slug = lines[0].strip()
        fields = dict(line.split(": ", 1) for line in lines[1:])
        body: list[Block] = []
        for para in rest.strip().split("\n\n"):
            para = " ".join(para.split())
            if para.startswith("## "):
                body.append(Block("h2", para[3:]))
            elif para.startswith("> "):
                body.append(Block("quote", para[2:]))
            else:
                body.append(Block("p", para))
        if fields["source"] not in PUBLICATIONS:
            raise ValueError(f"{slug}: unknown source {fields['source']!r}")
        articles.append(
            Article(
                number,
                slug,
                fields["title"],
                fields["source"],
                fields["author"],
                fields["date"],
                fields["section"],
                fields["teaser"],
                tuple(body),
            )
        )
    return articles


def e(text: str) -> str:
    return html.escape(text, quote=True)


def human_date(iso: str) -> str:
    day = dt.date.fromisoformat(iso)
    return f"{day.day} {day:%B %Y}"


COMMENTERS = [
    ("BayWatcher62", "Good to see this covered properly. I had no idea about half of this."),
    ("m.lindqvist", "Great piece. Would love a follow-up in a year to see how it turned out."),
    ("OldHarbourHand", "We tried something similar thirty years ago. Nobody listened then either."),
    ("Curious_Carol", "Does anyone know if there is a way to get involved? Happy to volunteer."),
    ("jt_writes", "This is the kind of story I subscribe for. Thank you."),
    ("FenlandFrank", "Interesting, but I think the article skips over the cost question."),
    ("skerry_sue", "Shared this with my book club, we talked about it for an hour."),
    ("Nadia K", "Lovely writing. The bit near the end made me smile."),
]


def comments(article: Article, count: int) -> list[tuple[str, str]]:
    start = article.id * 3 % len(COMMENTERS)
    return [COMMENTERS[(start + i) % len(COMMENTERS)] for i in range(count)]


def others(article: Article, articles: list[Article], count: int) -> list[Article]:
    """Some other articles to link to, chosen by number so the output is stable."""
    picks: list[Article] = []
    step = 7
    index = article.id
    while len(picks) < count:
        index = (index + step) % len(articles)
        candidate = articles[index]
        if candidate.id != article.id and candidate not in picks:
            picks.append(candidate)
        step += 2
    return picks


def body_html(article: Article, p: str, h2: str, quote: str, insert_after: dict[int, str]) -> str:
    """The body's blocks with the given markup; ``insert_after[n]`` goes after paragraph n."""
    out: list[str] = []
    paragraphs = 0
    for block in article.body:
        if block.kind == "p":
            out.append(p.format(e(block.text)))
            paragraphs += 1
            if paragraphs in insert_after:
                out.append(insert_after[paragraphs])
        elif block.kind == "h2":
            out.append(h2.format(e(block.text)))
        else:
            out.append(quote.format(e(block.text)))
    return "\n".join(out)


def json_ld(article: Article) -> str:
    data = {
        "@context": "https://schema.org",
        "@type": "NewsArticle",
        "headline": article.title,
        "description": article.teaser,
        "datePublished": article.date,
        "author": {"@type": "Person", "name": article.author},
        "publisher": {"@type": "Organization", "name": PUBLICATIONS[article.source]},
    }
    return json.dumps(data, ensure_ascii=False).replace("</", "<\\/")


def head(article: Article, style: str) -> str:
    site = PUBLICATIONS[article.source]
    return f"""<!DOCTYPE html>
<html lang="en-GB">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{e(article.title)} | {e(site)}</title>
<meta name="description" content="{e(article.teaser)}">
<meta name="author" content="{e(article.author)}">
<meta property="og:type" content="article">
<meta property="og:site_name" content="{e(site)}">
<meta property="og:title" content="{e(article.title)}">
<meta property="og:description" content="{e(article.teaser)}">
<meta property="article:published_time" content="{article.date}">
<meta property="article:section" content="{e(article.section)}">
<script type="application/ld+json">{json_ld(article)}</script>
<style>{style}</style>
</head>"""


# ---- The Kestrel Bay Gazette: a local newspaper ----------------------------------------------

GAZETTE_STYLE = (
    "body{font-family:Georgia,serif;margin:0;background:#f4f1ea;color:#222}"
    ".cookie-banner{position:fixed;bottom:0;left:0;right:0;background:#222;color:#eee;"
    "padding:1em}.site-header,.main-nav,main,footer{max-width:70em;margin:auto}"
    ".ad-slot{background:#ddd;text-align:center;padding:1em;font-family:sans-serif}"
    ".story{max-width:42em}.sidebar{font-family:sans-serif}"
)
GAZETTE_NAV = [
    "News", "Sport", "Business", "Transport", "Heritage", "Community", "Council", "Education",
    "Opinion", "Puzzles", "Jobs", "Property", "Notices",
]  # fmt: skip
GAZETTE_ADS = [
    "Bayview Motors: 0% finance on nearly new cars, this weekend only. Terms apply.",
    "Kestrel Savings: fixed-rate bonds from 4.1% AER. Your capital is at risk.",
    "Harbour Fish Bar: two cod suppers for the price of one every Tuesday.",
    "Moffat & Daughters Funeral Directors: caring for local families since 1921.",
]


def gazette(article: Article, articles: list[Article]) -> str:
    related = "\n".join(
        f'<li><a href="{o.file}">{e(o.title)}</a></li>' for o in others(article, articles, 4)
    )
    most_read = "\n".join(
        f'<li><a href="{o.file}">{e(o.title)}</a></li>' for o in others(article, articles, 9)[4:]
    )
    talk = "\n".join(
        f'<div class="comment"><p class="comment-author">{e(who)}</p>'
        f'<p class="comment-text">{e(what)}</p><a class="reply" href="#">Reply</a> · '
        f'<a href="#">Report</a></div>'
        for who, what in comments(article, 3)
    )
    ad = GAZETTE_ADS[article.id % len(GAZETTE_ADS)]
    inline = (
        '<div class="ad-slot ad-inline" data-ad-unit="gazette_article_inline">'
        '<span class="ad-label">Advertisement</span>'
        f"<p>{e(GAZETTE_ADS[(article.id + 1) % len(GAZETTE_ADS)])}</p></div>"
    )
    body = body_html(
        article,
        "<p>{}</p>",
        "<h2>{}</h2>",
        '<blockquote class="pull-quote"><p>{}</p></blockquote>',
        {2: inline},
    )
    nav = "".join(f'<li><a href="#">{n}</a></li>' for n in GAZETTE_NAV)
    return f"""{head(article, GAZETTE_STYLE)}
<body class="article-page">
<div id="cookie-consent" class="cookie-banner" role="dialog" aria-label="Cookie consent">
<p>We use cookies to improve your experience, to show you personalised advertising and to
measure our audience. By clicking "Accept all" you agree to our use of cookies.
<a href="#">Manage preferences</a></p>
<button type="button">Accept all</button> <button type="button">Reject non-essential</button>
</div>
<header class="site-header">
<div class="masthead"><a class="logo" href="#">The Kestrel Bay Gazette</a>
<span class="tagline">News from the bay since 1887</span>
<a class="subscribe" href="#">Subscribe from £1 a week</a> <a href="#">Sign in</a></div>
<nav class="main-nav" aria-label="Sections"><ul>{nav}</ul></nav>
<div class="ticker"><strong>Latest:</strong> Harbour road closed for resurfacing until Friday ·
Tide tables for the week · Lifeboat called out twice overnight</div>
</header>
<div class="ad-slot ad-leaderboard" data-ad-unit="gazette_top">
<span class="ad-label">Advertisement</span><p>{e(ad)}</p></div>
<main>
<article class="story">
<p class="breadcrumb"><a href="#">Home</a> › <a href="#">{e(article.section)}</a></p>
<h1 class="headline">{e(article.title)}</h1>
<p class="standfirst">{e(article.teaser)}</p>
<div class="byline">By <a rel="author" href="#">{e(article.author)}</a>, staff reporter ·
<time datetime="{article.date}">{human_date(article.date)}</time> · 4 min read</div>
<div class="share-tools"><a href="#">Share on Facebook</a> <a href="#">Share on X</a>
<a href="#">Email</a> <a href="#">Print</a></div>
<div class="story-body">
{body}
</div>
<p class="story-tags">Topics: <a href="#">{e(article.section)}</a> <a href="#">Kestrel Bay</a></p>
<aside class="newsletter-signup"><h3>Get the Gazette in your inbox</h3>
<p>Our free morning briefing: the day's local news, weather and what's on, every weekday at 7am.</p>
<form><input type="email" placeholder="Your email address"><button>Sign up</button></form>
<p class="small">You can unsubscribe at any time. See our privacy notice.</p></aside>
</article>
<aside class="related"><h2>More from the Gazette</h2><ul>
{related}
</ul></aside>
<section class="comments" id="comments"><h2>Comments (3)</h2>
<p class="comments-note">Comments are moderated. Please keep it civil.</p>
{talk}
</section>
<aside class="sidebar"><div class="most-read"><h3>Most read</h3><ol>
{most_read}
</ol></div>
<div class="ad-slot ad-mpu" data-ad-unit="gazette_mpu"><span class="ad-label">Advertisement</span>
<p>Place your family notice in the Gazette: births, marriages and deaths, online and in print.</p>
</div></aside>
</main>
<footer class="site-footer"><p><a href="#">About us</a> · <a href="#">Contact</a> ·
<a href="#">Advertise with us</a> · <a href="#">Privacy policy</a> ·
<a href="#">Cookie settings</a> · <a href="#">Terms</a></p>
<p>© 2026 Kestrel Bay Media Ltd, 14 Quay Street, Kestrel Bay. Registered in Scotland.</p></footer>
</body>
</html>
"""


# ---- Fieldnotes: a WordPress blog ------------------------------------------------------------

FIELDNOTES_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:0;color:#1b2a1b;background:#fff}"
    ".gdpr-notice{background:#fffbe6;padding:.6em;text-align:center}"
    ".site{display:grid;grid-template-columns:3fr 1fr;max-width:72em;margin:auto;gap:2em}"
    ".site-header,.site-footer{grid-column:1/3}.entry-content{font-size:1.1em;line-height:1.6}"
)
FIELDNOTES_MENU = ["Home", "About", "Insects", "Plants", "Rivers", "Weather", "Ice", "Soil"]


def fieldnotes(article: Article, articles: list[Article]) -> str:
    near = others(article, articles, 6)
    recent = "\n".join(f'<li><a href="{o.file}">{e(o.title)}</a></li>' for o in near[:5])
    sponsored = (
        '<div class="wp-block-group sponsored-note"><p><strong>Sponsored:</strong> '
        "Ridgeway Optics make the hand lenses and binoculars I use on every walk. Fieldnotes "
        'readers get 15% off with the code FIELD15. <a href="#">Shop now</a></p></div>'
    )
    body = body_html(
        article,
        "<p>{}</p>",
        '<h2 class="wp-block-heading">{}</h2>',
        '<blockquote class="wp-block-quote"><p>{}</p></blockquote>',
        {3: sponsored},
    )
    talk = "\n".join(
        f'<li class="comment"><article class="comment-body"><footer class="comment-meta">'
        f'<b class="fn">{e(who)}</b> <span class="says">says:</span></footer>'
        f'<div class="comment-content"><p>{e(what)}</p></div>'
        f'<div class="reply"><a class="comment-reply-link" href="#">Reply</a></div></article></li>'
        for who, what in comments(article, 2)
    )
    menu = "".join(f'<li class="menu-item"><a href="#">{m}</a></li>' for m in FIELDNOTES_MENU)
    prev_post, next_post = near[0], near[1]
    return f"""{head(article, FIELDNOTES_STYLE)}
<body class="post-template-default single single-post postid-{article.id * 37}">
<div class="gdpr-notice" id="gdpr">This site uses cookies from Google to deliver its services
and to analyse traffic. <a href="#">Learn more</a> <a href="#" class="ok">OK, got it</a></div>
<div id="page" class="site">
<a class="skip-link screen-reader-text" href="#content">Skip to content</a>
<header id="masthead" class="site-header">
<p class="site-title"><a href="#" rel="home">Fieldnotes</a></p>
<p class="site-description">A naturalist's notebook, kept in public</p>
<nav id="site-navigation" class="main-navigation"><ul id="primary-menu" class="menu">{menu}
<li class="menu-item"><a href="#">Support the blog</a></li></ul></nav>
</header>
<div id="content" class="site-content"><div id="primary" class="content-area">
<main id="main" class="site-main">
<article id="post-{article.id * 37}" class="post type-post status-publish format-standard">
<header class="entry-header"><h1 class="entry-title">{e(article.title)}</h1>
<div class="entry-meta"><span class="posted-on">Posted on <time class="entry-date published"
datetime="{article.date}">{human_date(article.date)}</time></span>
<span class="byline"> by <span class="author vcard"><a href="#">{e(article.author)}</a>
</span></span>
<span class="cat-links"> in <a href="#" rel="category tag">{e(article.section)}</a></span></div>
</header>
<div class="entry-content">
<p class="intro"><em>{e(article.teaser)}</em></p>
{body}
<div class="sharedaddy sd-sharing-enabled"><h3 class="sd-title">Share this:</h3>
<ul><li><a href="#">Twitter</a></li><li><a href="#">Facebook</a></li><li><a href="#">Email</a></li>
<li><a href="#">Print</a></li></ul></div>
<div class="sharedaddy sd-like"><h3 class="sd-title">Like this:</h3><p>Like Loading...</p></div>
</div>
<footer class="entry-footer"><span class="tags-links">Tagged <a href="#">{e(article.section)}</a>,
<a href="#">notebook</a>, <a href="#">citizen science</a></span></footer>
</article>
<div class="author-bio"><h2 class="author-title">About {e(article.author)}</h2>
<p>{e(article.author)} writes Fieldnotes from a terraced house with a small garden and a
large collection of hand lenses. Letters, corrections and photographs of odd insects are always
welcome.</p></div>
<nav class="navigation post-navigation" aria-label="Posts"><div class="nav-links">
<div class="nav-previous"><a href="{prev_post.file}" rel="prev">Previous post:
{e(prev_post.title)}</a></div>
<div class="nav-next"><a href="{next_post.file}" rel="next">Next post:
{e(next_post.title)}</a></div>
</div></nav>
<div id="comments" class="comments-area">
<h2 class="comments-title">2 thoughts on “{e(article.title)}”</h2>
<ol class="comment-list">
{talk}
</ol>
<div id="respond" class="comment-respond"><h3 class="comment-reply-title">Leave a Reply</h3>
<form class="comment-form"><p class="comment-notes">Your email address will not be published.
Required fields are marked *</p><textarea name="comment"></textarea>
<input type="submit" value="Post Comment"></form></div>
</div>
</main></div>
<aside id="secondary" class="widget-area">
<section class="widget widget_search"><form role="search">
<input type="search" placeholder="Search …"></form></section>
<section class="widget widget_recent_entries"><h2 class="widget-title">Recent Posts</h2><ul>
{recent}
</ul></section>
<section class="widget widget_text"><h2 class="widget-title">Support Fieldnotes</h2>
<div class="textwidget"><p>Fieldnotes is free to read. If it brightens your week, you can buy me
a coffee, which mostly goes on batteries for the moth trap.</p></div></section>
<section class="widget ad-widget"><ins class="adsbygoogle" data-ad-client="ca-pub-0000">
Advertisement: Greenway Garden Centres, bird food and feeders, 3 for 2.</ins></section>
<section class="widget widget_tag_cloud"><h2 class="widget-title">Tags</h2><div class="tagcloud">
<a href="#">bees</a> <a href="#">moths</a> <a href="#">mosses</a> <a href="#">rivers</a>
<a href="#">weather</a> <a href="#">ice</a> <a href="#">compost</a></div></section>
</aside>
</div>
<footer id="colophon" class="site-footer"><div class="site-info">
<a href="#">Proudly powered by WordPress</a> | Theme: Twenty Nineteen. © 2026 Fieldnotes.
<a href="#">Privacy Policy</a></div></footer>
</div>
</body>
</html>
"""


# ---- Circuit & Signal: a magazine built with a JavaScript framework ----------------------------

CIRCUIT_STYLE = (
    "body{font-family:Helvetica,Arial,sans-serif;margin:0;background:#0f1115;color:#e8e8e8}"
    ".ConsentBanner_root__Zk1{position:fixed;top:0;left:0;right:0;background:#1d2230;padding:1em}"
    ".ArticleLayout_main__Q8z{display:flex;gap:2em;max-width:76em;margin:auto}"
    ".ArticleBody_root__p3K{font-size:1.05rem;line-height:1.7}"
)
CIRCUIT_NAV = [
    "Hardware", "Software", "Space", "Infrastructure", "Business", "Gadgets", "Logistics",
    "Podcasts", "Deals", "Newsletter",
]  # fmt: skip


def circuit(article: Article, articles: list[Article]) -> str:
    near = others(article, articles, 8)
    read_more = (
        '<p class="ArticleBody_readmore__r7T"><strong>Read more:</strong> '
        f'<a href="{near[0].file}">{e(near[0].title)}</a></p>'
    )
    native_ad = (
        '<div class="InlineAd_root__n2W" data-ad="native" data-testid="inline-ad">'
        '<div class="InlineAd_label__c9F">Sponsored</div>'
        '<a href="#">This cloud backup deal is 70% off for Circuit &amp; Signal readers, '
        "for a limited time</a></div>"
    )
    body = body_html(
        article,
        '<p class="ArticleBody_paragraph__x1A">{}</p>',
        '<h2 class="ArticleBody_heading__m4D">{}</h2>',
        '<figure class="PullQuote_root__t5Q"><blockquote>{}</blockquote></figure>',
        {1: read_more, 3: native_ad},
    )
    cards = "\n".join(
        f'<div class="StoryCard_root__k2P"><a href="{o.file}"><h3 class="StoryCard_title__u8E">'
        f'{e(o.title)}</h3><p class="StoryCard_dek__g1S">{e(o.teaser)}</p></a></div>'
        for o in near[1:4]
    )
    popular = "\n".join(f'<li><a href="{o.file}">{e(o.title)}</a></li>' for o in near[4:8])
    nav = "".join(f'<a class="Header_link__b3C" href="#">{n}</a>' for n in CIRCUIT_NAV)
    trending = " ".join(f'<a href="{o.file}">{e(o.title)}</a>' for o in near[5:8])
    next_data = json.dumps(
        {"props": {"pageProps": {"slug": article.slug, "section": article.section}}},
        ensure_ascii=False,
    )
    return f"""{head(article, CIRCUIT_STYLE)}
<body>
<div id="__next">
<div class="ConsentBanner_root__Zk1" role="dialog" aria-modal="true">
<div class="ConsentBanner_text__a2V">We and our 142 partners store and access information on your
device, such as cookies, and process personal data such as unique identifiers for personalised
ads and content, ad and content measurement, and audience insights.
<a href="#">Privacy Policy</a></div>
<div class="ConsentBanner_buttons__y6R"><button>I accept</button><button>Show purposes</button>
</div></div>
<header class="Header_root__h0L">
<div class="Header_logo__d8K"><a href="#">Circuit &amp; Signal</a></div>
<nav class="Header_nav__w2J">{nav}</nav>
<div class="Header_actions__e5T"><a href="#">Subscribe</a><a href="#">Sign in</a></div></header>
<div class="TrendingBar_root__f4G"><span>Trending:</span> {trending}</div>
<main class="ArticleLayout_main__Q8z"><div class="ArticleLayout_content__s1B">
<div class="ArticleHeader_root__c3M">
<a class="ArticleHeader_section__j9N" href="#">{e(article.section)}</a>
<h1 class="ArticleHeader_title__v6H">{e(article.title)}</h1>
<p class="ArticleHeader_dek__o2Z">{e(article.teaser)}</p>
<div class="ArticleHeader_meta__l8Q"><span class="Byline_name__q1W">{e(article.author)}</span>
<span class="Byline_role__z5X">Senior writer</span>
<time datetime="{article.date}">{human_date(article.date)}</time> <span>6 min read</span>
<button class="SaveButton_root__a7Y">Save</button></div></div>
<div class="ArticleBody_root__p3K" itemprop="articleBody">
{body}
</div>
<div class="ArticleFooter_root__b9C"><p class="ArticleFooter_note__k4E">Circuit &amp; Signal may
earn a commission when you buy through links on our site.</p></div>
<div class="NewsletterCTA_root__h6U"><h3>The Signal, every weekday</h3>
<p>The most important stories in technology, explained in five minutes. Join 200,000 readers.</p>
<input type="email" placeholder="you@example.com"><button>Subscribe</button></div>
<div class="MoreStories_root__r3D"><h2>More stories</h2>
{cards}
</div>
</div>
<aside class="ArticleLayout_rail__x7V">
<div class="AdSlot_root__m1N AdSlot_mpu__p2B" data-slot="rail-1">Advertisement</div>
<div class="MostPopular_root__t6K"><h3>Most popular</h3><ol>
{popular}
</ol></div>
<div class="AdSlot_root__m1N" data-slot="rail-2">Advertisement: Upgrade your home office:
monitors from £129 at Pixelhouse.</div>
</aside></main>
<footer class="Footer_root__y4S"><nav><a href="#">About</a> <a href="#">Careers</a>
<a href="#">Ethics policy</a> <a href="#">Advertise</a> <a href="#">Privacy</a>
<a href="#">Your privacy choices</a></nav>
<p>© 2026 Signal Media Group. All rights reserved.
Circuit &amp; Signal is a registered trademark.</p>
</footer>
</div>
<script id="__NEXT_DATA__" type="application/json">{next_data}</script>
</body>
</html>
"""


# ---- The Long Table: a food and culture site ----------------------------------------------------

LONGTABLE_STYLE = (
    "body{font-family:'Palatino Linotype',Palatino,serif;margin:0;background:#fffaf3;color:#3a2a1a}"
    ".cc-window{position:fixed;bottom:1em;left:1em;max-width:24em;background:#3a2a1a;"
    "color:#fff;padding:1em}.container{max-width:70em;margin:auto}"
    ".row{display:flex;gap:2em}.col-main{flex:3}.col-side{flex:1}"
)
LONGTABLE_NAV = [
    "Recipes", "Baking", "Coffee", "Drinks", "Preserving", "Farming", "Work", "Business", "Shop",
]  # fmt: skip


def longtable(article: Article, articles: list[Article]) -> str:
    near = others(article, articles, 7)
    promo = (
        '<div class="promo-box"><p><span class="promo-label">From our shop:</span> The Long Table '
        "Cookbook, Volume Two: 120 recipes from family kitchens, with a foreword by our readers. "
        '<a href="#" class="btn">Buy now</a></p></div>'
    )
    body = body_html(
        article,
        "<p>{}</p>",
        "<h3>{}</h3>",
        '<blockquote class="quote"><p>{}</p></blockquote>',
        {1: promo},
    )
    grid = "\n".join(
        f'<div class="card"><a href="{o.file}"><span class="card-title">{e(o.title)}</span></a>'
        f'<span class="card-meta">{e(PUBLICATIONS[o.source])}</span></div>'
        for o in near[:3]
    )
    popular = "\n".join(f'<li><a href="{o.file}">{e(o.title)}</a></li>' for o in near[3:7])
    talk = "\n".join(
        f'<div class="post"><div class="post-byline"><span class="author">{e(who)}</span>'
        f' <span class="time-ago">2 days ago</span></div><div class="post-message"><p>{e(what)}</p>'
        f'</div><menu class="post-menu"><a href="#">Like</a> <a href="#">Reply</a></menu></div>'
        for who, what in comments(article, 2)
    )
    nav = "".join(f'<li><a href="#">{n}</a></li>' for n in LONGTABLE_NAV)
    return f"""{head(article, LONGTABLE_STYLE)}
<body class="single-story">
<div class="cc-window cc-banner" role="dialog" aria-label="cookieconsent">
<span class="cc-message">This website uses cookies to ensure you get the best experience on our
website. <a class="cc-link" href="#">Learn more</a></span>
<div class="cc-compliance"><a class="cc-btn cc-allow" href="#">Got it!</a></div></div>
<div class="top-bar">Free delivery on all cookbook orders over £25 · <a href="#">Shop</a> ·
<a href="#">Gift a subscription</a></div>
<header class="masthead"><h2 class="logo"><a href="#">The Long Table</a></h2>
<p class="motto">Food, the people who make it, and the places it comes from</p>
<nav class="primary"><ul>{nav}<li><a href="#" class="subscribe">Subscribe</a></li></ul></nav>
</header>
<div class="container"><div class="row">
<div class="col-main">
<div class="post-header"><span class="kicker">{e(article.section)}</span>
<h1 class="post-title">{e(article.title)}</h1>
<p class="dek">{e(article.teaser)}</p>
<p class="post-meta">Words by <span class="author-name">{e(article.author)}</span> ·
<span class="date">{human_date(article.date)}</span></p></div>
<div class="social-share"><a href="#">Pin it</a> <a href="#">Share</a> <a href="#">Email</a>
<a href="#" onclick="window.print()">Print</a></div>
<div class="post-content">
{body}
</div>
<div class="post-footer"><p class="filed-under">Filed under: <a href="#">{e(article.section)}</a>,
<a href="#">Long reads</a></p>
<div class="newsletter"><h4>Sunday Supper</h4><p>One long read and one recipe, every Sunday
morning. Free, and you can leave whenever you like.</p><form><input type="email"
placeholder="Email"><button>Join</button></form></div></div>
<div class="you-might-also-like"><h4>You might also like</h4><div class="grid">
{grid}
</div></div>
<div id="disqus_thread" class="comments"><h4>Join the conversation</h4>
{talk}
</div>
</div>
<div class="col-side">
<div class="widget about"><h4>About The Long Table</h4><p>An independent magazine of stories about
food, published four times a year in print and every week online.</p></div>
<div class="widget ad"><ins class="adsbygoogle">Advertisement: Hartley's Kitchenware, cast iron
that lasts a lifetime. 20% off this week.</ins></div>
<div class="widget popular"><h4>Popular this week</h4><ol>
{popular}
</ol></div></div>
</div></div>
<footer class="site-footer"><p>© 2026 The Long Table Ltd · <a href="#">Contact</a> ·
<a href="#">Write for us</a> · <a href="#">Stockists</a> · <a href="#">Privacy</a> ·
<a href="#">Cookies</a></p></footer>
</body>
</html>
"""


LAYOUTS: dict[str, Callable[[Article, list[Article]], str]] = {
    "gazette": gazette,
    "fieldnotes": fieldnotes,
    "circuit": circuit,
    "longtable": longtable,
}


def feed(articles: list[Article]) -> str:
    entries = [
        {
            "id": a.id,
            "slug": a.slug,
            "file": a.file,
            "title": a.title,
            "source": PUBLICATIONS[a.source],
            "author": a.author,
            "date": a.date,
            "section": a.section,
            "teaser": a.teaser,
        }
        for a in articles
    ]
    return json.dumps(entries, indent=1, ensure_ascii=False) + "\n"


def outputs() -> dict[Path, str]:
    """Every file this script writes, with its content."""
    articles = parse(SOURCE.read_text(encoding="utf-8"))
    files = {ARTICLES / a.file: LAYOUTS[a.source](a, articles) for a in articles}
    files[FEED] = feed(articles)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a page would change")
    args = parser.parse_args(argv)
    files = outputs()
    stale = [p for p, text in files.items() if not p.exists() or p.read_text("utf-8") != text]
    if args.check:
        for path in stale:
            print(f"out of date: {path.relative_to(HERE)}")
        return 1 if stale else 0
    for path in stale:
        path.write_text(files[path], encoding="utf-8")
    print(f"{len(files) - 1} articles, {len(stale)} files written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
