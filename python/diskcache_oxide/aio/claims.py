"""`AsyncClaims` and `AsyncClaim`: claims with a lease from asyncio (D-023, D-024, D-044)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from .. import _payonce as core
from .._docs import mirror_docs
from ..claims import LEASE, Claim, ClaimInfo, Claims, ClaimTimeout, _lease, _timeout
from ..core import Cache
from ._run import _in_thread, _log, _taking
from .cache import AsyncCache

if TYPE_CHECKING:
    from ..remote.cache import RedisCache

T = TypeVar("T")


class _OnThreads:
    """A synchronous cache that is not a directory (a ``RedisCache``), as the pay-once drivers
    use an :class:`AsyncCache`: ``cache``, ``executor`` and ``_run`` (its blocking calls in
    the running loop's default executor)."""

    __slots__ = ("cache", "executor")

    def __init__(self, cache: RedisCache, executor: Executor | None = None) -> None:
        self.cache = cache
        self.executor = executor

    async def _run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        return await _in_thread(self.executor, fn, *args, **kwargs)


def _runner(cache: Cache | AsyncCache | RedisCache | _OnThreads) -> AsyncCache | _OnThreads:
    """Where the drivers run ``cache``'s blocking calls: an :class:`AsyncCache` as given, or
    around a directory's :class:`Cache`; the default executor for any other (a RedisCache)."""
    if isinstance(cache, (AsyncCache, _OnThreads)):
        return cache
    if isinstance(cache, Cache):
        return AsyncCache(cache)
    return _OnThreads(cache)


# ---- claims ---------------------------------------------------------------------------------


class AsyncClaims:
    """:class:`~diskcache_oxide.claims.Claims` as coroutines. Waits sleep in the cache's
    executor until the claim is released or runs out; a caller cancelled while its claim was
    being taken releases it."""

    def __init__(
        self, cache: Cache | AsyncCache | RedisCache | _OnThreads, namespace: str = "default"
    ) -> None:
        acache = _runner(cache)
        self._acache = acache
        self._claims = Claims(acache.cache, namespace)

    @property
    def claims(self) -> Claims:
        """The synchronous claims underneath."""
        return self._claims

    async def try_acquire(self, key: Any, lease: float = LEASE) -> AsyncClaim | None:
        seconds = _lease(lease)

        def give_back(claim: Claim | None) -> None:
            if claim is not None:
                claim.release()

        claim = await _taking(
            self._acache.executor, lambda: self._claims.try_acquire(key, seconds), give_back
        )
        return None if claim is None else AsyncClaim(self, claim)

    async def acquire(
        self, key: Any, lease: float = LEASE, *, timeout: float = 0.0
    ) -> AsyncClaim | None:
        call = core.Call(self._claims, key, _lease(lease))
        limit = _timeout(timeout)

        async def perform(op: str, arg: Any) -> Any:
            if op is core.ACQUIRE:
                return await self.try_acquire(key, call.lease)
            return await self._acache._run(core.storage, call, op, arg)

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
        return await self._acache._run(self._claims.holder, key)

    async def release(self, key: Any, token: str) -> bool:
        return await self._acache._run(self._claims.release, key, token)

    async def extend(self, key: Any, token: str, lease: float = LEASE) -> bool:
        return await self._acache._run(self._claims.extend, key, token, lease)

    async def list(self) -> list[tuple[Any, ClaimInfo]]:
        return await self._acache._run(self._claims.list)


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
        return await self._claims._acache._run(self.claim.held)

    async def __aenter__(self) -> AsyncClaim:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not await asyncio.shield(self.release()):
            _log.warning("claim on %r was lost before its release (its lease ran out)", self.key)


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
