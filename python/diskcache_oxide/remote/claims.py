"""Claims and compute-once on Redis (issue 21, D-058): :class:`RedisClaims` implements the
pay-once storage protocol (:class:`~diskcache_oxide._payonce.ClaimBackend` and
:class:`~diskcache_oxide._payonce.ClaimRegistry`) on a :class:`RedisCache`'s client and
namespace, so :class:`~diskcache_oxide.Claims`, ``get_or_compute``, ``compute_once`` and
their asyncio forms run on Redis with the protocol, the heartbeat and the shielded turns of
``_payonce`` (D-052); Redis provides only the primitives.

A claim is one HASH with a PEXPIRE of its lease (``_scripts.CLAIM_SCRIPTS``), taken, renewed
and released by Lua scripts that check the owner's token; the values are the cache's own
entries (``RedisCache.get``/``set``, the engine's frames). A waiter is counted on the server
and BLPOPs a per-key wake-up list, which a release, a break or a store fills with one token
per counted waiter; it is bounded by the claim's remaining lease, so a claim that runs out
ends the wait too.
"""

from __future__ import annotations

import time
from typing import Any

from ..core import ENOVAL
from ._io import Link, Script
from ._scripts import CLAIM_SCRIPTS
from .cache import RedisCache

__all__ = ["RedisClaims"]

_Record = tuple[str, str, int, float, float]

#: Waits shorter than this (seconds) are not sent to the server: BLPOP's 0 means forever.
_SHORTEST = 0.005


def _lease_ms(lease: float) -> str:
    return str(max(1, int(lease * 1000.0)))


def _text(data: bytes | str) -> str:
    return data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else data


def _record(fields: list[Any]) -> _Record:
    token, host, pid, acquired, expires = fields
    return (
        _text(token),
        _text(host),
        int(pid),
        int(acquired) / 1000.0,
        int(expires) / 1000.0,
    )


class RedisClaims:
    """The claims and values of one :class:`RedisCache` namespace, on its client: all the keys
    of a claim start with the namespace's hash-tagged prefix ``dco:{ns}:``, so a cluster keeps
    them in the namespace's slot."""

    __slots__ = ("_link", "cache")

    def __init__(self, cache: RedisCache) -> None:
        self.cache = cache
        wait = cache._link
        self._link = Link(
            cache._client,
            cache._base,
            CLAIM_SCRIPTS,
            replicas=wait.replicas,
            replica_timeout=wait.replica_timeout,
            reconnect_for=wait.reconnect_for,
        )

    def __repr__(self) -> str:
        return f"RedisClaims(namespace={self.cache.namespace!r})"

    # ---- plumbing ----

    @staticmethod
    def _cid(namespace: str) -> bytes:
        name = namespace.encode("utf-8", "surrogatepass")
        return str(len(name)).encode() + b":" + name

    def _call(self, name: str, namespace: str, key: Any, *args: bytes | str | int) -> Any:
        cache = self.cache
        frame = b"" if key is ENOVAL else cache._member(key)
        return self._link.send(Script(name, (self._cid(namespace), frame, *args)))

    # ---- ClaimBackend ----

    def get(self, key: Any) -> Any:
        return self.cache.get(key, ENOVAL)

    def store(self, key: Any, value: Any, expire: float | None, tag: Any) -> None:
        self.cache.set(key, value, expire, tag=tag)
        self._call("wake", "", key)

    def try_acquire(
        self, namespace: str, key: Any, lease: float, token: str, host: str, pid: int
    ) -> bool:
        return bool(self._call("acquire", namespace, key, _lease_ms(lease), token, host, pid))

    def extend(self, namespace: str, key: Any, token: str, lease: float) -> bool:
        return bool(self._call("extend", namespace, key, token, _lease_ms(lease)))

    def release(self, namespace: str, key: Any, token: str) -> bool:
        return bool(self._call("release", namespace, key, token))

    def wait_for_change(self, namespace: str, key: Any, seconds: float, value: bool) -> bool:
        """Sleep on the server (BLPOP of the key's wake-up list, in slices within the client's
        socket timeout) until a release, break or store wakes this waiter, the claim's lease
        runs out, or ``seconds`` pass. True if woken or the claim is free or ran out."""
        start = time.monotonic()
        left_ms = int(self._call("wait", namespace, key))
        if left_ms <= 0:
            return True  # nobody holds it
        deadline = start + seconds
        runs_out = start + left_ms / 1000.0
        wake = self.cache._base + b"W:" + self.cache._member(key)
        woken = False
        try:
            while True:
                now = time.monotonic()
                left = min(deadline, runs_out) - now
                if left < _SHORTEST:
                    # The lease ran out (unless it was renewed: the caller looks again).
                    return runs_out <= deadline
                if self.cache._client.blpop([wake], timeout=min(left, self.cache._slice)):
                    woken = True
                    return True
        finally:
            if not woken:  # counted and not woken: no longer waiting (a wake resets the count)
                self._call("unwait", namespace, key)

    # ---- ClaimRegistry ----

    def holder(self, namespace: str, key: Any) -> _Record | None:
        found = self._call("holder", namespace, key)
        return None if not found else _record(found)

    def break_claim(self, namespace: str, key: Any) -> bool:
        return bool(self._call("break", namespace, key))

    def claims(self, namespace: str) -> list[tuple[Any, _Record]]:
        flat = self._call("list", namespace, ENOVAL)
        return [
            (self.cache._key(flat[at]), _record(flat[at + 1 : at + 6]))
            for at in range(0, len(flat), 6)
        ]
