"""The web dashboard, ``diskcache-oxide serve TARGET``: a live view of a cache directory or a
Redis namespace (its stats, queues, leased jobs by state and claims), on Starlette, uvicorn and
Jinja2, the ``dashboard`` extra (``pip install 'diskcache_oxide[dashboard]'``; D-046, D-062).

The page is a Jinja2 template with the first snapshot in it; a little plain JavaScript
(``static/dashboard.js``, no CDN) polls ``/api/state`` every second and redraws. The directory
is opened read-only. Only with ``allow_actions`` does the page show the retry, bury, purge and
release buttons, and only then do their POST endpoints act (otherwise they answer 403). A
release names the claim (namespace and key); claims' tokens are never sent to the page. Each
POST must carry the page's token in ``X-Dashboard-Token``, which another site cannot read or
send, and the server answers only to the host names it was bound to (no DNS rebinding). No
response may be framed by another page (``X-Frame-Options: DENY``, ``frame-ancestors
'none'``), so no site can dress the buttons up as its own, and the page asks before it
buries, purges or releases.

A poll costs what its page shows, not what the directory holds: the lists are paged
(``/api/state?queues_limit=&queues_after=&job_queues_...&claims_...&jobs_limit=``, the cursors
being the previous answer's ``pages[...]["next"]``) and values are previews (D-046).

The tasks' section (``/api/tasks``, polled beside the state) lists the tasks by name with their
totals, rates per minute and latest failure, read from what every worker adds to the store
(D-063); ``/metrics`` serves the same totals and the job queues' depths in Prometheus's text
format (the ``metrics`` extra; without it, a 501 naming the extra). Both are read-only.

The libraries are imported when an app is made, not with this module, so the package imports
without them.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import admin
from .._core import __version__
from .._hosts import allowed_hosts, is_loopback
from .._shown import shown
from .state import LIMITS, Page, PageError, TaskRates, snapshot

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["FRAME_HEADERS", "Page", "allowed_hosts", "create_app", "serve", "snapshot"]

HERE = Path(__file__).resolve().parent
#: The socket timeout of the dashboard's Redis handles (seconds).
REDIS_TIMEOUT = 5.0
TOKEN_HEADER = "X-Dashboard-Token"
ACTIONS_OFF = "actions are off: start the dashboard with --allow-actions to use them"

#: On every response: no page of another origin may frame the dashboard (a frame could hide
#: a retry, bury or purge button under a click meant for something else), and the page loads
#: nothing that is not the dashboard's own.
FRAME_HEADERS = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": (
        "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'; "
        "object-src 'none'"
    ),
}
NO_STORE = {"Cache-Control": "no-store"}


class _FrameHeaders:
    """ASGI middleware adding :data:`FRAME_HEADERS` to every response that passes through it
    (it wraps every other middleware, so refusals such as a foreign Host's 400 get them too)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                for name, value in FRAME_HEADERS.items():
                    headers.append((name.lower().encode(), value.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, sending)


def _unavailable(path: str, error: BaseException) -> str:
    """What the page says when the directory or the Redis server cannot be read."""
    if admin.is_url(path):
        return (
            f"cannot read {admin.location(path)}: {error}. Is the Redis server running? The "
            "page recovers by itself once it answers again"
        )
    if not os.path.isdir(path) or not os.path.exists(os.path.join(path, "cache.db")):
        return (
            f"the directory {path} was deleted or moved while the dashboard was serving it: "
            "put it back, or stop this dashboard (Ctrl-C) and serve the directory where it "
            "is now"
        )
    return f"cannot read the cache in {path}: {error}"


_NOT_A_LITERAL = object()
#: The longest key text a release may name (a claim's key is short; a repr of more is junk).
_KEY_TEXT_LIMIT = 10_000


def _literal(text: str) -> Any:
    """``text`` read as a Python literal (:func:`ast.literal_eval`, which runs no code), or
    :data:`_NOT_A_LITERAL`."""
    import ast

    if len(text) > _KEY_TEXT_LIMIT:
        return _NOT_A_LITERAL
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _NOT_A_LITERAL


def create_app(
    target: str | os.PathLike[str],
    *,
    allow_actions: bool = False,
    interval: float = 1.0,
    limit: int = 20,
    page: Page | None = None,
    hosts: list[str] | None = None,
) -> Starlette:
    """The dashboard's ASGI app for the cache at ``target``: a directory (which must exist) or
    a Redis URL (``redis://host:port/db?namespace=NS``, ``rediss://``, ``unix://``,
    ``?cluster=1``; the server must answer).

    :param allow_actions: show and accept retry, bury and purge (opens a writing handle)
    :param interval: seconds between the page's polls
    :param limit: jobs listed per state and job queue, unless a request asks for others
    :param page: the default page of each list (:class:`Page`: 50 queues, 10 job queues,
        50 claims), which a request's query may change within :data:`LIMITS`
    :param hosts: the Host names to answer (default: :func:`allowed_hosts` of 127.0.0.1)
    """
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles
    from starlette.templating import Jinja2Templates

    path = os.fspath(target)
    # On Redis, a poll that waits on a server that stopped answering holds a worker thread:
    # a short socket timeout turns it into the page's "cannot read" within a few polls.
    reader = admin.open_cache(path, timeout=REDIS_TIMEOUT)
    writer = admin.open_cache(path, write=True, timeout=REDIS_TIMEOUT) if allow_actions else None
    token = secrets.token_urlsafe(24)
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    defaults = Page(**{**asdict(page or Page()), "jobs": limit})

    def state(request: Request) -> tuple[int, dict[str, Any]]:
        """The snapshot the request's query asks for, or what went wrong, with its status."""
        try:
            chosen = Page.parse(dict(request.query_params), defaults)
        except PageError as error:
            return 400, {"error": str(error), "limits": LIMITS}
        try:
            return 200, snapshot(reader, actions=allow_actions, page=chosen)
        except admin.errors() as error:
            # A directory deleted or damaged under us, a Redis server gone: said on the
            # page, not a 500.
            return 503, {"error": _unavailable(path, error), "directory": admin.location(path)}

    def index(request: Request) -> Response:
        status, shown = state(request)
        return templates.TemplateResponse(
            request,
            "index.html",
            {
                "state": shown,
                "token": token if allow_actions else "",
                "interval": interval,
                "version": __version__,
                "directory": admin.location(path),
            },
            status_code=status,
            headers=NO_STORE,
        )

    def api_state(request: Request) -> Response:
        status, shown = state(request)
        return JSONResponse(shown, status_code=status, headers=NO_STORE)

    rates = TaskRates()

    def api_tasks(request: Request) -> Response:
        """The tasks by name (every worker's totals, from the store), their rates, their
        latest failures."""
        try:
            shown = rates.read(reader)
        except admin.errors() as error:
            return JSONResponse({"error": _unavailable(path, error)}, status_code=503)
        return JSONResponse(shown, headers=NO_STORE)

    def metrics(request: Request) -> Response:
        """Prometheus's text: every worker's task totals and the job queues' depths."""
        from ..tasks import _metrics

        try:
            body, content_type = _metrics.exposition(reader)
        except ImportError as error:
            return PlainTextResponse(str(error), status_code=501)
        except admin.errors() as error:
            return PlainTextResponse(_unavailable(path, error), status_code=503)
        return Response(body, media_type=content_type, headers=NO_STORE)

    def refused(request: Request) -> Response | None:
        if writer is None:
            return JSONResponse({"error": ACTIONS_OFF}, status_code=403)
        if not secrets.compare_digest(request.headers.get(TOKEN_HEADER, ""), token):
            return JSONResponse(
                {"error": f"a dashboard action needs the page's {TOKEN_HEADER} header"},
                status_code=403,
            )
        return None

    def job_action(
        act: Callable[[int], bool], done: str, not_done: str
    ) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            answer = refused(request)
            if answer is not None:
                return answer
            assert writer is not None
            job_id: int = request.path_params["job_id"]
            try:
                row = admin.job(writer, job_id)  # None for an id out of range, too
                if row is None:
                    return JSONResponse({"error": f"no job {job_id}"}, status_code=404)
                if not act(job_id):
                    message = not_done.format(id=job_id, state=row.state)
                    return JSONResponse({"error": message}, status_code=409)
            except admin.errors() as error:
                return JSONResponse({"error": _unavailable(path, error)}, status_code=503)
            return JSONResponse({"ok": True, "message": done.format(id=job_id, queue=row.queue)})

        return endpoint

    def retry(job_id: int) -> bool:
        assert writer is not None
        return admin.retry_job(writer, job_id)

    def bury(job_id: int) -> bool:
        assert writer is not None
        return admin.bury_job(writer, job_id, "buried from the dashboard")

    async def purge(request: Request) -> Response:
        answer = refused(request)
        if answer is not None:
            return answer
        assert writer is not None
        try:
            body = await request.json()
            queue = body["queue"]
            if not isinstance(queue, str):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            return JSONResponse({"error": 'send {"queue": NAME}'}, status_code=400)
        from starlette.concurrency import run_in_threadpool

        try:
            purged = await run_in_threadpool(admin.purge_dead, writer, queue)
        except admin.errors() as error:
            return JSONResponse({"error": _unavailable(path, error)}, status_code=503)
        return JSONResponse(
            {"ok": True, "purged": purged, "message": f"deleted {purged} dead jobs of {queue!r}"}
        )

    async def release_claim(request: Request) -> Response:
        """Break the live claim the body names, ``{"namespace": NS, "key": KEY}``, KEY as
        ``/api/state`` shows it (the key's repr, read back as a Python literal without
        running code). The page never has the claim's token: breaking needs none."""
        answer = refused(request)
        if answer is not None:
            return answer
        assert writer is not None
        try:
            body = await request.json()
            namespace, shown_key = body["namespace"], body["key"]
            if not isinstance(namespace, str) or not isinstance(shown_key, str):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            return JSONResponse(
                {"error": 'send {"namespace": NS, "key": KEY}, KEY as /api/state shows it'},
                status_code=400,
            )
        key = _literal(shown_key)
        if key is _NOT_A_LITERAL:
            message = (
                f"the key {shown(shown_key)[:200]} is not a Python literal the dashboard can "
                "read back: release it with `diskcache-oxide claims TARGET release --literal`"
            )
            return JSONResponse({"error": message}, status_code=400)
        from starlette.concurrency import run_in_threadpool

        try:
            released = await run_in_threadpool(admin.release_claim, writer, key, namespace)
        except admin.errors() as error:
            return JSONResponse({"error": _unavailable(path, error)}, status_code=503)
        except (TypeError, ValueError) as error:  # a key no cache can hold
            return JSONResponse({"error": shown(str(error))[:300]}, status_code=400)
        where = f"{shown(shown_key)[:200]} ({shown(namespace)[:100]!r})"
        if not released:
            return JSONResponse({"error": f"no live claim on {where}"}, status_code=404)
        return JSONResponse(
            {
                "ok": True,
                "message": f"released the claim on {where}; its holder's next renewal fails",
            }
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            reader.close()
            if writer is not None:
                writer.close()

    async def failed(request: Request, error: Exception) -> Response:
        # Starlette answers an unhandled error from outside every middleware: the frame
        # headers go on here by hand. The error itself goes to the server's log.
        message = f"the dashboard failed: {type(error).__name__}; its log says more"
        return JSONResponse({"error": message}, status_code=500, headers=FRAME_HEADERS)

    routes = [
        Route("/", index),
        Route("/api/state", api_state),
        Route("/api/tasks", api_tasks),
        Route("/metrics", metrics),
        Route(
            "/api/jobs/{job_id:int}/retry",
            job_action(retry, "job {id} is back in {queue!r}", "job {id} is {state}, not dead"),
            methods=["POST"],
        ),
        Route(
            "/api/jobs/{job_id:int}/bury",
            job_action(bury, "job {id} is dead (buried)", "job {id} is already {state}"),
            methods=["POST"],
        ),
        Route("/api/purge", purge, methods=["POST"]),
        Route("/api/claims/release", release_claim, methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    middleware = [
        Middleware(_FrameHeaders),
        Middleware(TrustedHostMiddleware, allowed_hosts=hosts or allowed_hosts("127.0.0.1")),
    ]
    return Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={Exception: failed},
    )


def serve(
    target: str | os.PathLike[str],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    allow_actions: bool = False,
    interval: float = 1.0,
) -> None:
    """Serve the dashboard of ``target`` (a directory or a Redis URL) until interrupted
    (Ctrl-C, SIGTERM). Binds ``host:port`` first
    (port 0: a free one), then prints the address on stdout."""
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as error:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    sock.listen(128)
    bound = sock.getsockname()[1]
    app = create_app(
        target, allow_actions=allow_actions, interval=interval, hosts=allowed_hosts(host)
    )
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    mode = "actions on (retry, bury, purge, release)" if allow_actions else "read-only"
    print(f"dashboard of {admin.location(target)} at http://{shown}:{bound}/ ({mode})", flush=True)
    if not is_loopback(host):
        print(
            f"warning: {host} is reachable from other machines and the dashboard has no login",
            file=sys.stderr,
            flush=True,
        )
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    try:
        # uvicorn shuts down on SIGINT or SIGTERM, then raises the signal again: Ctrl-C ends
        # here quietly, SIGTERM ends the process as the signal does.
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
