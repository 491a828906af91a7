"""Which Host header names a local web server answers to: the dashboard's and the worker's
metrics server's one rule against DNS rebinding (issue 29), on the ground floor so that both
features use it without importing each other."""

from __future__ import annotations

import ipaddress

__all__ = ["allowed_hosts", "is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 in brackets or not) is this machine's
    loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(host: str) -> list[str]:
    """The Host header names the app answers to when bound to ``host``: the loopback names
    for a loopback address, that address alone for another, anything for a wildcard."""
    if is_loopback(host):
        return ["127.0.0.1", "localhost", "[::1]", "::1", host]
    if host in ("0.0.0.0", "::", ""):
        return ["*"]
    return [host, f"[{host}]"]
