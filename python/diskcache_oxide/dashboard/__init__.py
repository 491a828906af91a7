"""The web dashboard, ``diskcache-oxide serve DIR``: a live view of a cache directory (its
stats, queues, leased jobs by state and claims), on Starlette, uvicorn and Jinja2, the
``dashboard`` extra (``pip install 'diskcache_oxide[dashboard]'``; D-046).

The page is a Jinja2 template with the first snapshot in it; a little plain JavaScript
(``static/dashboard.js``, no CDN) polls ``/api/state`` every second and redraws. The directory
is opened read-only. Only with ``allow_actions`` does the page show the retry, bury and purge
buttons, and only then do their POST endpoints act (otherwise they answer 403). Each POST must
carry the page's token in ``X-Dashboard-Token``, which another site cannot read or send, and
the server answers only to the host names it was bound to (no DNS rebinding).

The libraries are imported when an app is made, not with this module, so the package imports
without them.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import socket
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__, admin
from .state import snapshot

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["allowed_hosts", "create_app", "serve", "snapshot"]

HERE = Path(__file__).resolve().parent
TOKEN_HEADER = "X-Dashboard-Token"
#: Sent with every response: no other site may frame the page (a click inside a frame would
#: be the operator's click: clickjacking), nor make the browser guess a file's type.
SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
#: The largest job id (SQLite's rowid is a signed 64-bit integer).
_MAX_JOB_ID = 2**63 - 1
ACTIONS_OFF = "actions are off: start the dashboard with --allow-actions to use them"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(host: str) -> list[str]:
    """The Host header names the app answers to when bound to ``host``: the loopback names
    for a loopback address, that address alone for another, anything for a wildcard."""
    if _is_loopback(host):
        return ["127.0.0.1", "localhost", "[::1]", "::1", host]
    if host in ("0.0.0.0", "::", ""):
        return ["*"]
    return [host, f"[{host}]"]


def create_app(
    directory: str | os.PathLike[str],
    *,
    allow_actions: bool = False,
    interval: float = 1.0,
    limit: int = 50,
    hosts: list[str] | None = None,
) -> Starlette:
    """The dashboard's ASGI app for the cache in ``directory`` (which must exist).

    :param allow_actions: show and accept retry, bury and purge (opens a writing handle)
    :param interval: seconds between the page's polls
    :param limit: jobs listed per state and job queue
    :param hosts: the Host names to answer (default: :func:`allowed_hosts` of 127.0.0.1)
    """
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles
    from starlette.templating import Jinja2Templates

    path = os.fspath(directory)
    reader = admin.open_cache(path)
    writer = admin.open_cache(path, write=True) if allow_actions else None
    token = secrets.token_urlsafe(24)
    templates = Jinja2Templates(directory=str(HERE / "templates"))

    def state() -> dict[str, Any]:
        return snapshot(reader, limit=limit, actions=allow_actions)

    def gone() -> str | None:
        # A handle keeps reading a deleted directory's open files, so ask the file system.
        if not os.path.isfile(os.path.join(path, "cache.db")):
            return (
                f"the cache directory {path} is gone (deleted or moved) since the dashboard "
                "started; restart it on the directory's new path"
            )
        return None

    def page(request: Request) -> Response:
        missing = gone()
        if missing is not None:
            return Response(missing + "\n", status_code=410, media_type="text/plain")
        return templates.TemplateResponse(
            request,
            "index.html",
            {
                "state": state(),
                "token": token if allow_actions else "",
                "interval": interval,
                "version": __version__,
            },
            headers={"Cache-Control": "no-store"},
        )

    def api_state(request: Request) -> Response:
        missing = gone()
        if missing is not None:
            return JSONResponse({"error": missing}, status_code=410)
        return JSONResponse(state(), headers={"Cache-Control": "no-store"})

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
            row = admin.job(writer, job_id) if 0 <= job_id <= _MAX_JOB_ID else None
            if row is None:
                return JSONResponse({"error": f"no job {job_id}"}, status_code=404)
            if not act(job_id):
                message = not_done.format(id=job_id, state=row.state)
                return JSONResponse({"error": message}, status_code=409)
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

        purged = await run_in_threadpool(admin.purge_dead, writer, queue)
        return JSONResponse(
            {"ok": True, "purged": purged, "message": f"deleted {purged} dead jobs of {queue!r}"}
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            reader.close()
            if writer is not None:
                writer.close()

    routes = [
        Route("/", page),
        Route("/api/state", api_state),
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
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    middleware = [
        Middleware(_SecurityHeaders),
        Middleware(TrustedHostMiddleware, allowed_hosts=hosts or allowed_hosts("127.0.0.1")),
    ]
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)


class _SecurityHeaders:
    """ASGI middleware adding :data:`SECURITY_HEADERS` to every response, refusals and static
    files included."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, sending)


def serve(
    directory: str | os.PathLike[str],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    allow_actions: bool = False,
    interval: float = 1.0,
) -> None:
    """Serve the dashboard until interrupted (Ctrl-C, SIGTERM). Binds ``host:port`` first
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
        directory, allow_actions=allow_actions, interval=interval, hosts=allowed_hosts(host)
    )
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    mode = "actions on (retry, bury, purge)" if allow_actions else "read-only"
    print(f"dashboard of {os.fspath(directory)} at http://{shown}:{bound}/ ({mode})", flush=True)
    if not _is_loopback(host):
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
