"""How the reader defends itself as a web app: one ASGI middleware, ``Guard``, before every route.

A visitor's browser will send requests for any page it shows, the reader's or another site's,
and the reader has no login to tell them apart. What tells them apart is in the headers:

- **Host.** A DNS rebinding gives an attacker's name (``evil.example``) the app's address. To
  the browser, the attacker's page and the app are then one origin: the page's scripts read
  ``/ledger`` and ``/api/meter``. Only the Host header still names the attacker, so the app
  answers only the names of the address it is bound to (``Hosts``) and refuses any other
  with 421.
- **Origin.** A page of another site can submit a form, or send a no-cors ``fetch``, to
  ``POST /tap/N`` or to the paying ``POST /api/article/N``. A POST is therefore taken only
  from the reader's own pages: its ``Origin`` must be the app's (``Sec-Fetch-Site``, then
  ``Referer``, stand in for an older browser that sends no Origin). Anything else gets 403.
  A request with none of the three comes from no browser (curl, a script): there is no
  visitor's browser to abuse, so it is let through. Reads stay GETs and nothing a GET does
  taps or pays, so an ``<img>`` or a link cannot spend money.
- **What a response may do.** Every response says ``nosniff``, and the app's pages forbid
  being framed (a framed Queue button could be clicked by a visitor fooled by an overlay, and
  that click would be the app's own page's). The original articles are somebody else's
  HTML, served on the app's origin: ``SOURCE_POLICY`` sandboxes them, so they run no script,
  submit no form and load nothing.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("reader.guard")

#: The app's own pages: their script and style from the app alone, never in a frame.
APP_POLICY = "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
#: An original article (``/source/N``): a sandbox with no scripts, forms or plugins, an origin of
#: its own, and nothing loaded. Its inline style is kept so that the page looks like the
#: original; without any request allowed, style cannot send anything anywhere.
SOURCE_POLICY = "sandbox; default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"

#: What every response says: do not guess a type, do not show me in a frame, and (unless the
#: route says otherwise, as ``/source/N`` does) ``APP_POLICY``.
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": APP_POLICY,
}

#: The methods that read. Nothing answering them taps or pays.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _address(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


@dataclasses.dataclass(frozen=True)
class Hosts:
    """The names in the Host header that the app answers to."""

    names: frozenset[str]
    #: Bound to every address (0.0.0.0, ::): any of the machine's addresses may be in the
    #: Host header. An address, unlike a name, cannot be rebound.
    any_address: bool = False

    @classmethod
    def bound_to(cls, address: str, extra: Iterable[str] = ()) -> Hosts:
        """The names for a socket bound to ``address``: the loopback names for a loopback
        address, that address alone for another, the machine's addresses and its own names for
        every address; ``extra`` adds names (``READER_HOSTS``, for a name of the machine's
        that it does not know of itself)."""
        address = address.strip("[]").lower()
        names = {name.strip().lower() for name in extra if name.strip()}
        if address in ("", "0.0.0.0", "::"):
            names |= {"localhost", socket.gethostname().lower(), socket.getfqdn().lower()}
            return cls(frozenset(names), any_address=True)
        ip = _address(address)
        if address == "localhost" or (ip is not None and ip.is_loopback):
            names |= {"localhost", "127.0.0.1", "::1"}
        return cls(frozenset(names | {address}))

    def allows(self, name: str) -> bool:
        name = name.lower()
        return name in self.names or (self.any_address and _address(name) is not None)

    def __str__(self) -> str:
        listed = sorted(self.names)
        if self.any_address:
            listed.append("any of this machine's addresses")
        return ", ".join(listed)


def host_name(host: str) -> str:
    """The name in a Host header, without its port: ``[::1]:8000`` is ``::1``."""
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.partition(":")[0]


def _authority(url: str) -> str:
    """``host:port`` of an Origin or a Referer (``null``, an opaque origin, has none)."""
    try:
        return urlsplit(url).netloc.lower()
    except ValueError:
        return ""


def foreign_page(headers: Headers, host: str) -> str | None:
    """Which header shows that this request was sent by a page that is not the app's own
    (served at ``host``), or None if it was the app's page, or no browser, that sent it."""
    origin = headers.get("origin")
    if origin is not None:
        return None if _authority(origin) == host else f"Origin: {origin}"
    site = headers.get("sec-fetch-site")
    if site is not None:
        # "none": the visitor's own doing (the address bar, a bookmark), no page's.
        return None if site in ("same-origin", "none") else f"Sec-Fetch-Site: {site}"
    referer = headers.get("referer")
    if referer is not None:
        return None if _authority(referer) == host else f"Referer: {referer}"
    return None


class Guard:
    """The ASGI middleware: refuses foreign Host names (421) and POSTs from other sites' pages
    (403), each with a response that says why, and adds the security headers to the rest."""

    def __init__(self, app: ASGIApp, hosts: Hosts) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():  # unless the route set its own
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def refusal(self, scope: Scope) -> PlainTextResponse | None:
        headers = Headers(scope=scope)
        host = headers.get("host", "").lower()
        request = f"{scope['method']} {scope['path']}"
        if not self.hosts.allows(host_name(host)):
            named = f"{host_name(host)!r}" if host else "no name (the request has no Host header)"
            log.warning("refused %s: Host %r is not one of %s", request, host, self.hosts)
            return _refused(
                421,
                f"This reader answers to {self.hosts}, not to {named}. Another name reaching it "
                "is what a DNS rebinding attack looks like. To serve it under that name, "
                "bind that name's address (--host) or add the name to READER_HOSTS.",
            )
        if scope["method"] in SAFE_METHODS:
            return None
        foreign = foreign_page(headers, host)
        if foreign is None:
            return None
        log.warning("refused %s: sent by another site's page (%s)", request, foreign)
        return _refused(
            403,
            f"Refused {request}: it was sent by another site's page ({foreign}). The reader "
            f"takes taps and payments only from its own pages, at http://{host}/.",
        )


def _refused(status: int, message: str) -> PlainTextResponse:
    # Sent before the app is reached, so not through send_with_headers: it carries them itself.
    headers = {**HEADERS, "Cache-Control": "no-store"}
    return PlainTextResponse(message + "\n", status_code=status, headers=headers)
