"""`AsyncClaims` and `AsyncClaim`: claims with a lease from asyncio (D-023, D-024, D-044).

Every call is awaited on the store's asyncio claims
(:class:`~diskcache_oxide._store.AsyncClaimBackend`): an ``AsyncCache``'s run in its
executor, an ``AsyncRedisCache``'s on redis-py's asyncio client. Which one is the store's
business (:func:`store_for`), not this module's.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
from types import TracebackType
from typing import Any, cast

from .. import _payonce as core
from .._asyncio import _taken_or_given_back
from .._docs import mirror_docs
from .._log import log
from .._store import (
    AsyncClaimBackend,
    AsyncStore,
    AsyncStored,
    Stored,
    async_store_of,
    has_async_store,
    store_of,
)
from ..claims import LEASE, Claim, ClaimInfo, Claims, ClaimTimeout, _lease, _timeout
from ._threads import ThreadedStore


def store_for(cache: Stored | AsyncStored) -> AsyncStore:
    """The asyncio store the drivers await ``cache``'s calls on: an asyncio face's own (an
    ``AsyncCache``: its executor; an ``AsyncRedisCache``: its asyncio client); a blocking
    cache's own where its backend has one (a ``RedisCache``: the asyncio client it keeps for
    the running loop); else the blocking calls in the loop's default executor."""
    if has_async_store(cache):
        return async_store_of(cache)
    blocking = cast("Stored", cache)
    native = store_of(blocking).asyncio()
    return ThreadedStore(blocking) if native is None else native


async def take(
    backend: AsyncClaimBackend, claims: Claims[Any], key: Any, lease: float
) -> Claim | None:
    """:meth:`Claims.try_acquire <diskcache_oxide.Claims.try_acquire>` awaited: the same
    token, host and pid, the claim as a :class:`~diskcache_oxide.Claim`."""
    token = secrets.token_hex(16)
    taken = await backend.try_acquire(
        claims.namespace, key, lease, token, socket.gethostname(), os.getpid()
    )
    return Claim(claims, key, token, lease) if taken else None


async def storage(backend: AsyncClaimBackend, call: core.Call, op: str, arg: Any) -> Any:
    """One storage operation of the pay-once protocol, awaited: the asyncio twin of
    ``_payonce.storage``, on the store's asyncio claims."""
    if op is core.GET:
        return await backend.get(call.key)
    if op is core.ACQUIRE:
        # The drivers' claims are always a Claims: _payonce names it by a protocol only, so
        # as not to import claims.py, which imports it.
        return await take(backend, call.claims, call.key, call.lease)  # type: ignore[arg-type]
    if op is core.STORE:
        await backend.store(call.key, arg, call.expire, call.tag)
        return None
    if op is core.RELEASE:
        return await backend.release(call.namespace, arg.key, arg.token)
    if op is core.EXTEND:
        return await backend.extend(call.namespace, arg.key, arg.token, arg.lease)
    if op is core.WAIT or op is core.WAIT_FREE:
        await backend.wait_for_change(call.namespace, call.key, arg, op is core.WAIT)
        return None
    raise AssertionError(f"not a storage operation: {op!r}")


def claims_on(store: AsyncStore, claims: Claims[Any]) -> AsyncClaims:
    """:class:`AsyncClaims` on a store already found, with its claims: what the asyncio
    driver hands a coroutine function that asked for its claim."""
    made = AsyncClaims.__new__(AsyncClaims)
    made._store, made._claims, made._backend = store, claims, store.claims()
    return made


# ---- claims ---------------------------------------------------------------------------------


class AsyncClaims:
    """:class:`~diskcache_oxide.claims.Claims` as coroutines. Waits sleep until the claim is
    released or runs out; a caller cancelled while its claim was being taken releases it."""

    def __init__(self, cache: Stored | AsyncStored, namespace: str = "default") -> None:
        store = store_for(cache)
        self._store = store
        self._claims: Claims[Any] = Claims(store.cache, namespace)
        self._backend = store.claims()

    @property
    def claims(self) -> Claims[Any]:
        """The synchronous claims underneath."""
        return self._claims

    async def try_acquire(self, key: Any, lease: float = LEASE) -> AsyncClaim | None:
        seconds = _lease(lease)

        async def release(claim: Claim | None) -> None:
            if claim is not None:
                await self.release(claim.key, claim.token)

        taken = await _taken_or_given_back(take(self._backend, self._claims, key, seconds), release)
        return None if taken is None else AsyncClaim(self, taken)

    async def acquire(
        self, key: Any, lease: float = LEASE, *, timeout: float = 0.0
    ) -> AsyncClaim | None:
        call = core.Call(self._claims, key, _lease(lease))
        limit = _timeout(timeout)

        async def perform(op: str, arg: Any) -> Any:
            if op is core.ACQUIRE:
                return await self.try_acquire(key, call.lease)
            return await storage(self._backend, call, op, arg)

        claim: AsyncClaim | None = await core.adrive(core.acquire(limit), perform)
        return claim

    async def hold(self, key: Any, lease: float = LEASE, *, timeout: float = 0.0) -> AsyncClaim:
        claim = await self.acquire(key, lease, timeout=timeout)
        if claim is None:
            raise ClaimTimeout(
                f"the claim on {key!r} is held by another owner (waited {timeout} s); "
                "holder() says who holds it"
            )
        return claim

    async def holder(self, key: Any) -> ClaimInfo | None:
        found = await self._backend.holder(self._claims.namespace, key)
        return None if found is None else ClaimInfo(*found)

    async def release(self, key: Any, token: str) -> bool:
        return await self._backend.release(self._claims.namespace, key, token)

    async def extend(self, key: Any, token: str, lease: float = LEASE) -> bool:
        return await self._backend.extend(self._claims.namespace, key, token, _lease(lease))

    async def list(self) -> list[tuple[Any, ClaimInfo]]:
        found = await self._backend.claims(self._claims.namespace)
        return [(key, ClaimInfo(*info)) for key, info in found]


class AsyncClaim:
    """A claim held through :class:`AsyncClaims`; ``async with`` releases it at the end."""

    def __init__(self, claims: AsyncClaims, claim: Claim) -> None:
        self._claims = claims
        self.claim = claim

    @property
    def key(self) -> Any:
        return self.claim.key

    @property
    def token(self) -> str:
        return self.claim.token

    @property
    def lease(self) -> float:
        return self.claim.lease

    def __repr__(self) -> str:
        return f"Async{self.claim!r}"

    async def release(self) -> bool:
        return await self._claims.release(self.claim.key, self.claim.token)

    async def extend(self, lease: float | None = None) -> bool:
        seconds = self.claim.lease if lease is None else lease
        return await self._claims.extend(self.claim.key, self.claim.token, seconds)

    async def held(self) -> bool:
        found = await self._claims.holder(self.claim.key)  # as Claims.owns reads it
        return found is not None and found.token == self.claim.token

    async def __aenter__(self) -> AsyncClaim:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not await asyncio.shield(self.release()):
            log().warning("claim on %r was lost before its release (its lease ran out)", self.key)


def _claims_lead(name: str) -> str:
    if name == "try_acquire":
        return (
            "Awaitable `Claims.try_acquire`, giving an :class:`AsyncClaim`: runs it in the "
            "cache's executor; a caller cancelled meanwhile releases the claim it took."
        )
    if name in ("acquire", "hold"):
        return (
            f"Awaitable `Claims.{name}`, giving an :class:`AsyncClaim` (for ``async with``): "
            "waits sleep in the cache's executor, a second at a time."
        )
    return f"Awaitable `Claims.{name}`: runs it in the cache's executor."


def _claim_lead(name: str) -> str:
    if name in ("key", "token", "lease"):
        return f"The `Claim.{name}` of the claim underneath."
    return f"Awaitable `Claim.{name}`: runs it in the cache's executor."


mirror_docs(AsyncClaims, Claims, lead=_claims_lead)
mirror_docs(AsyncClaim, Claim, lead=_claim_lead)
