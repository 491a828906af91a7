"""Claims and compute-once on Redis (issue 21, D-058, D-059): :class:`RedisClaims` implements
the pay-once storage protocol (:class:`~diskcache_oxide._store.ClaimBackend` and
:class:`~diskcache_oxide._store.ClaimRegistry`) on a :class:`RedisCache`'s client and
namespace, so :class:`~diskcache_oxide.Claims`, ``get_or_compute``, ``compute_once`` and
their asyncio forms run on Redis with the protocol, the heartbeat and the shielded turns of
``_payonce`` (D-052); Redis provides only the primitives.

Each primitive is an operation (a generator of requests, as ``_ops`` writes the cache's
calls): :class:`RedisClaims` runs them on the blocking client, and ``AsyncRedisCache``
(``remote.aio``) awaits the same operations on the asyncio client, so the async pay-once
driver holds no thread on Redis.

A claim is one HASH with a PEXPIRE of its lease (``_scripts.CLAIM_SCRIPTS``), taken, renewed
and released by Lua scripts that check the owner's token; the values are the cache's own
entries (``_ops.get``/``_ops.set``, the engine's frames). A waiter is counted on the server
and BLPOPs a per-key wake-up list, which a release, a break or a store fills with one token
per counted waiter; it is bounded by the claim's remaining lease, so a claim that runs out
ends the wait too.
"""

from __future__ import annotations

import time
from typing import Any

from .._sentinels import ENOVAL
from . import _ops
from ._io import AsyncLink, Link
from ._members import claims_id
from ._ops import Namespace
from ._policy import check_eviction
from ._requests import Command, Op, Script
from ._scripts import CLAIM_SCRIPTS, SCRIPTS

__all__ = ["LINKED", "AsyncRedisClaims", "RedisClaims"]

_Record = tuple[str, str, int, float, float]

#: Waits shorter than this (seconds) are not sent to the server: BLPOP's 0 means forever.
_SHORTEST = 0.005

#: The scripts a claims link runs: the cache's (a store is the cache's ``set``) and the
#: claims' own, named ``claim_<name>``.
LINKED = {**SCRIPTS, **{f"claim_{name}": text for name, text in CLAIM_SCRIPTS.items()}}


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


def _script(name: str, namespace: str, key: Any, *args: bytes | str | int) -> Script:
    frame = b"" if key is ENOVAL else _ops.member(key)
    return Script(f"claim_{name}", (claims_id(namespace), frame, *args))


# ---- the operations: ClaimBackend ----


def get(ns: Namespace, key: Any) -> Op[Any]:
    """The stored value of ``key``, or ENOVAL."""
    return (yield from _ops.get(ns, key, ENOVAL))


def store(ns: Namespace, key: Any, value: Any, expire: float | None, tag: Any) -> Op[None]:
    """Store the value (the cache's ``set``) and wake the key's waiters."""
    yield from _ops.set(ns, key, value, expire, tag=tag)
    yield _script("wake", "", key)


def try_acquire(
    ns: Namespace, namespace: str, key: Any, lease: float, token: str, host: str, pid: int
) -> Op[bool]:
    """Take the claim if nobody holds it (one script: the HASH and its PEXPIRE, if absent)."""
    return bool((yield _script("acquire", namespace, key, _lease_ms(lease), token, host, pid)))


def extend(ns: Namespace, namespace: str, key: Any, token: str, lease: float) -> Op[bool]:
    """Renew ``token``'s live claim for ``lease`` seconds; False if it is not ``token``'s."""
    return bool((yield _script("extend", namespace, key, token, _lease_ms(lease))))


def release(ns: Namespace, namespace: str, key: Any, token: str) -> Op[bool]:
    """Remove ``token``'s live claim and wake the waiters; False if it is not ``token``'s."""
    return bool((yield _script("release", namespace, key, token)))


def wait_for_change(
    ns: Namespace, namespace: str, key: Any, seconds: float, value: bool
) -> Op[bool]:
    """Sleep on the server (BLPOP of the key's wake-up list, in slices within the client's
    socket timeout) until a release, break or store wakes this waiter, the claim's lease
    runs out, or ``seconds`` pass. True if woken or the claim is free or ran out.

    A waiter that ends without being woken uncounts itself (a wake resets the count). One
    abandoned mid-wait (a cancelled asyncio caller) stays counted until the count's own
    expiry or the next wake: a release then leaves one token nobody takes, which expires."""
    start = time.monotonic()
    left_ms = int((yield _script("wait", namespace, key)))
    if left_ms <= 0:
        return True  # nobody holds it
    deadline = start + seconds
    runs_out = start + left_ms / 1000.0
    wake = ns._base + b"W:" + _ops.member(key)
    try:
        while True:
            left = min(deadline, runs_out) - time.monotonic()
            if left < _SHORTEST:
                # The lease ran out (unless it was renewed: the caller looks again).
                woken = runs_out <= deadline
                break
            request = Command(
                ("BLPOP", wake, _ops.blpop_seconds(min(left, ns._slice))),
                idempotent=True,
                reply=_ops.POPPED,
            )
            if (yield request):
                return True
    except GeneratorExit:
        raise  # abandoned: nothing can be sent any more
    except BaseException:
        yield _script("unwait", namespace, key)
        raise
    yield _script("unwait", namespace, key)
    return woken


# ---- the operations: ClaimRegistry ----


def holder(ns: Namespace, namespace: str, key: Any) -> Op[_Record | None]:
    """``(token, host, pid, acquired, expires)`` of the live claim, or None."""
    found = yield _script("holder", namespace, key)
    return None if not found else _record(found)


def break_claim(ns: Namespace, namespace: str, key: Any) -> Op[bool]:
    """Remove the claim whoever holds it."""
    return bool((yield _script("break", namespace, key)))


def claims(ns: Namespace, namespace: str) -> Op[list[tuple[Any, _Record]]]:
    """The live claims of ``namespace``."""
    flat = yield _script("list", namespace, ENOVAL)
    return [
        (_ops.key_of(flat[at]), _record(flat[at + 1 : at + 6])) for at in range(0, len(flat), 6)
    ]


class RedisClaims:
    """The claims and values of one :class:`RedisCache` namespace, on its blocking client: all
    the keys of a claim start with the namespace's hash-tagged prefix ``dco:{ns}:``, so a
    cluster keeps them in the namespace's slot. Each method runs its operation above.

    :param cache: the namespace's cache
    :param strict: refuse (:class:`~diskcache_oxide.remote.UnsupportedError`) a server whose
        ``maxmemory-policy`` may evict claims (any ``allkeys-*`` or ``volatile-*`` policy: a
        claim carries its lease as a TTL), instead of warning once
        (:class:`~diskcache_oxide.remote.EvictionWarning`; issue 29, D-058)
    """

    __slots__ = ("_link", "cache")

    def __init__(self, cache: Any, *, strict: bool = False) -> None:
        # Any, not RedisCache: the cache's module reaches this one through its store
        # (remote/store.py), so importing it here would close a cycle (tests/api/test_layers.py).
        # The policy is read once per server and process (remote._policy), so the Claims a
        # get_or_compute opens per call cost no round trip for it.
        check_eviction(cache, "claims", strict=strict)
        self.cache = cache
        self._link = Link(cache._client, cache._base, LINKED, **cache._link.settings())

    def __repr__(self) -> str:
        return f"RedisClaims(namespace={self.cache.namespace!r})"

    # ---- ClaimBackend ----

    def get(self, key: Any) -> Any:
        return self._link.run(get(self.cache, key))

    def store(self, key: Any, value: Any, expire: float | None, tag: Any) -> None:
        self._link.run(store(self.cache, key, value, expire, tag))

    def try_acquire(
        self, namespace: str, key: Any, lease: float, token: str, host: str, pid: int
    ) -> bool:
        return self._link.run(try_acquire(self.cache, namespace, key, lease, token, host, pid))

    def extend(self, namespace: str, key: Any, token: str, lease: float) -> bool:
        return self._link.run(extend(self.cache, namespace, key, token, lease))

    def release(self, namespace: str, key: Any, token: str) -> bool:
        return self._link.run(release(self.cache, namespace, key, token))

    def wait_for_change(self, namespace: str, key: Any, seconds: float, value: bool) -> bool:
        return self._link.run(wait_for_change(self.cache, namespace, key, seconds, value))

    # ---- ClaimRegistry ----

    def holder(self, namespace: str, key: Any) -> _Record | None:
        return self._link.run(holder(self.cache, namespace, key))

    def break_claim(self, namespace: str, key: Any) -> bool:
        return self._link.run(break_claim(self.cache, namespace, key))

    def claims(self, namespace: str) -> list[tuple[Any, _Record]]:
        return self._link.run(claims(self.cache, namespace))


class AsyncRedisClaims:
    """The claims and values of one namespace as awaitables
    (:class:`~diskcache_oxide._store.AsyncClaimBackend`): the operations above, awaited on
    redis-py's asyncio client, so that the asyncio pay-once driver holds no thread on Redis.

    :param ns: what the operations read of the namespace (a ``RedisCache`` or an
        ``AsyncRedisCache``: its key prefix and settings)
    :param link: the asyncio client's link, made with the claims' scripts (:data:`LINKED`)
    """

    __slots__ = ("_link", "_ns")

    def __init__(self, ns: Namespace, link: AsyncLink) -> None:
        self._ns = ns
        self._link = link

    def __repr__(self) -> str:
        return f"AsyncRedisClaims(namespace={self._ns._namespace!r})"

    async def get(self, key: Any) -> Any:
        return await self._link.run(get(self._ns, key))

    async def store(self, key: Any, value: Any, expire: float | None, tag: Any) -> None:
        await self._link.run(store(self._ns, key, value, expire, tag))

    async def try_acquire(
        self, namespace: str, key: Any, lease: float, token: str, host: str, pid: int
    ) -> bool:
        return await self._link.run(try_acquire(self._ns, namespace, key, lease, token, host, pid))

    async def extend(self, namespace: str, key: Any, token: str, lease: float) -> bool:
        return await self._link.run(extend(self._ns, namespace, key, token, lease))

    async def release(self, namespace: str, key: Any, token: str) -> bool:
        return await self._link.run(release(self._ns, namespace, key, token))

    async def wait_for_change(self, namespace: str, key: Any, seconds: float, value: bool) -> bool:
        return await self._link.run(wait_for_change(self._ns, namespace, key, seconds, value))

    async def holder(self, namespace: str, key: Any) -> _Record | None:
        return await self._link.run(holder(self._ns, namespace, key))

    async def claims(self, namespace: str) -> list[tuple[Any, _Record]]:
        return await self._link.run(claims(self._ns, namespace))
