"""The web app: the feed, Queue taps, the direct lane, the cost meter and the ledger.

    python -m reader.app DIR [--host 127.0.0.1] [--port 8000 | --fd N]

Pages are rendered on the server (Jinja2); static/reader.js adds the live meter, taps without
a reload, and fetches an article's text when it is not cached yet.

Routes:

- ``GET /``: the feed, one card per article (title, source, teaser, Queue, Open);
- ``POST /tap/{id}``: the Queue button. **The only place anything is put in the job queue**;
  tests/reader/test_reader_code.py checks that no other code calls put or push;
- ``GET /article/{id}``: the article page, with its text if it is cached, else a placeholder
  that the script fills from ``POST /api/article/{id}``;
- ``POST /api/article/{id}``: the direct lane (``pay.open_article``). A POST, since it may
  pay: no link or ``<img>`` can reach it. If the reader closes the page, the request is
  cancelled: the view is lost, the paid turn is not;
- ``GET /api/meter``: the cost meter, polled every second by every page;
- ``GET /ledger``: every paid call and what became of it;
- ``GET /source/{id}``: the article's original HTML page, boilerplate and all, sandboxed.

In front of them all, ``guard.Guard`` answers only the Host names of the bound address and
takes a POST only from the app's own pages (reader/guard.py says why).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import uvicorn
from diskcache_oxide.aio import AsyncCache, turns_lifespan
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from . import meter, pay, worker
from .config import Settings
from .feed import Article, Feed
from .guard import SOURCE_POLICY, Guard, Hosts
from .store import Store

HERE = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=HERE / "templates")


def _clock(epoch: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(epoch))


templates.env.filters["clock"] = _clock
log = logging.getLogger("reader.app")


class Reader:
    """What the routes share: the directory's handles (this process's) and the feed."""

    def __init__(self, store: Store, feed: Feed) -> None:
        self.store = store
        self.feed = feed
        self.acache: AsyncCache = pay.async_cache(store)


def _reader(request: Request) -> Reader:
    reader: Reader = request.app.state.reader
    return reader


def _article(request: Request) -> Article | None:
    return _reader(request).feed.get(int(request.path_params["article_id"]))


def _not_found() -> Response:
    return Response("No such article", status_code=404, media_type="text/plain")


async def index(request: Request) -> Response:
    reader = _reader(request)
    reading = await asyncio.to_thread(meter.read, reader.store, reader.feed)
    return templates.TemplateResponse(
        request,
        "index.html",
        {"articles": reader.feed.articles, "reading": reading, "page": "feed"},
    )


async def tap(request: Request) -> Response:
    """The Queue button: one job for the worker, oldest first. A second tap on an article
    whose job is still waiting adds nothing (``unique``)."""
    article = _article(request)
    if article is None:
        return _not_found()
    reader = _reader(request)
    job_id = await worker.put(article.id)
    await asyncio.to_thread(reader.store.note, "tap", article=article.id, job=job_id)
    if "application/json" in request.headers.get("accept", ""):
        return JSONResponse({"job": job_id, "article": article.id})
    return RedirectResponse("/", status_code=303)


async def article_page(request: Request) -> Response:
    article = _article(request)
    if article is None:
        return _not_found()
    reader = _reader(request)
    value = await asyncio.to_thread(pay.cached, reader.store, article.id)
    reading = await asyncio.to_thread(meter.read, reader.store, reader.feed)
    return templates.TemplateResponse(
        request,
        "article.html",
        {"article": article, "value": value, "reading": reading, "page": "article"},
    )


async def _disconnected(request: Request) -> None:
    """Returns when the client has gone away (closed the page, navigated elsewhere)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def api_article(request: Request) -> Response:
    """The direct lane. Starlette does not cancel a handler whose client left, so we watch
    for the disconnect ourselves and cancel the opening then, as a server should for work
    nobody is waiting for. What the cancellation must not cancel, the paid turn, the library
    shields."""
    article = _article(request)
    if article is None:
        return _not_found()
    reader = _reader(request)
    opening = asyncio.ensure_future(pay.open_article(reader.store, reader.acache, article))
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({opening, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not opening.done():
            opening.cancel()
    if not opening.done() or opening.cancelled():
        await asyncio.to_thread(reader.store.note, "view-lost", article=article.id)
        log.info("reader left article %d: view lost, the paid turn goes on", article.id)
        return Response(status_code=499)
    try:
        opened = opening.result()
    except Exception as exc:  # a failed extraction, or no result within READER_WAIT
        log.exception("opening article %d failed", article.id)
        return JSONResponse({"error": f"{type(exc).__name__}: {exc}"}, status_code=502)
    return JSONResponse({**opened.value, "how": opened.how})


async def api_meter(request: Request) -> Response:
    reader = _reader(request)
    reading = await asyncio.to_thread(meter.read, reader.store, reader.feed)
    return JSONResponse(reading.as_json(), headers={"Cache-Control": "no-store"})


async def ledger_page(request: Request) -> Response:
    reader = _reader(request)
    reading = await asyncio.to_thread(meter.read, reader.store, reader.feed)
    events = await asyncio.to_thread(reader.store.events)
    return templates.TemplateResponse(
        request,
        "ledger.html",
        {
            "reading": reading,
            "feed": reader.feed,
            "events": events[-200:],
            "page": "ledger",
        },
    )


async def source_page(request: Request) -> Response:
    """Somebody else's HTML on the app's origin: sandboxed, or its scripts could tap, pay and
    read every page of the app as the app's own."""
    article = _article(request)
    if article is None:
        return _not_found()
    return FileResponse(
        article.path, media_type="text/html", headers={"Content-Security-Policy": SOURCE_POLICY}
    )


async def method_not_allowed(request: Request, exc: Exception) -> Response:
    """Starlette's 405, saying which method to use and, for a tap or the direct lane, why."""
    assert isinstance(exc, HTTPException)
    allowed = (exc.headers or {}).get("Allow", "")
    message = f"{request.method} {request.url.path} is not allowed here, only {allowed}."
    if "POST" in allowed:
        message += (
            " Tapping and paying take a POST from the reader's own pages, so that no link or"
            " image, on any site, can do either."
        )
    return PlainTextResponse(message + "\n", status_code=405, headers=exc.headers)


def create_app(
    directory: str | Path, settings: Settings | None = None, *, bound: str = "127.0.0.1"
) -> Starlette:
    """The app on ``directory``; ``bound``, the address its socket is bound to, decides the
    Host names it answers (``guard.Hosts``)."""
    settings = Settings.from_env() if settings is None else settings

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        store = Store(directory, settings)
        worker.tasks.bind(store)  # taps queue worker.clean on this store's cache
        app.state.reader = Reader(store, Feed.load(settings.articles))
        try:
            # Finishes the paid turns still running before the loop ends (at shutdown, or
            # when uvicorn stops on SIGTERM), so a server stopped mid-turn stores its result.
            async with turns_lifespan(app):
                yield
        finally:
            pay.close_async_cache(app.state.reader.acache)
            store.close()

    routes: list[Any] = [
        Route("/", index),
        Route("/tap/{article_id:int}", tap, methods=["POST"]),
        Route("/article/{article_id:int}", article_page),
        Route("/api/article/{article_id:int}", api_article, methods=["POST"]),
        Route("/api/meter", api_meter),
        Route("/ledger", ledger_page),
        Route("/source/{article_id:int}", source_page),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    hosts = Hosts.bound_to(bound, settings.hosts)
    return Starlette(
        routes=routes,
        middleware=[Middleware(Guard, hosts=hosts)],
        exception_handlers={405: method_not_allowed},
        lifespan=lifespan,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The reader's web app.")
    parser.add_argument("directory", help="the app's directory (created if missing)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--fd", type=int, help="serve on this already bound, listening socket")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    # The Host names answered are those of the address actually bound, the socket's if given.
    sock = socket.socket(fileno=args.fd) if args.fd is not None else None
    bound = sock.getsockname()[0] if sock is not None else args.host
    app = create_app(args.directory, bound=bound)
    config = uvicorn.Config(
        app, host=args.host, port=args.port, log_level="warning", timeout_graceful_shutdown=5
    )
    server = uvicorn.Server(config)
    if sock is not None:
        server.run(sockets=[sock])
    else:
        server.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
