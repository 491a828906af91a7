"""`AsyncClaims` and `AsyncClaim`: claims with a lease from asyncio (D-023, D-024, D-044)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .. import _payonce as core
from .._docs import mirror_docs
from ..claims import LEASE, Claim, ClaimInfo, Claims, ClaimTimeout, _lease, _timeout
from ..core import Cache
from ._run import _log, _taking
from .cache import AsyncCache

if TYPE_CHECKING:
    from ..remote.aio import AsyncRedisCache
    from ..remote.cache import RedisCache

T = TypeVar("T")


def _on_loop(acache: object) -> AsyncRedisCache | None:
    """``acache`` if it is a Redis cache's asyncio face, whose claims run on the asyncio
    client (``remote.aio``); None for an AsyncCache, whose calls run in its executor."""
    remote = sys.modules.get("diskcache_oxide.remote.aio")  # loaded if there is one
    if remote is not None and isinstance(acache, remote.AsyncRedisCache):
        return cast("AsyncRedisCache", acache)
    return None


def _redis_face(cache: RedisCache) -> AsyncRedisCache:
    """The asyncio face of ``cache`` for the running loop: one per loop (an asyncio client
    belongs to one loop), kept on the cache while the loop lives, made the first time a
    pay-once driver runs on the cache there; outside a loop, a new one."""
    from ..remote.aio import AsyncRedisCache

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return AsyncRedisCache(cache)
    face = cache._async_faces.get(loop)
    if face is None:
        face = cache._async_faces[loop] = AsyncRedisCache(cache)
    return cast("AsyncRedisCache", face)


def _runner(
    cache: Cache | AsyncCache | RedisCache | AsyncRedisCache,
) -> AsyncCache | AsyncRedisCache:
    """Where the drivers run ``cache``'s calls: an :class:`AsyncCache` as given, or around a
    directory's :class:`Cache` (in its executor); a Redis cache's asyncio face, on the asyncio
    client (an ``AsyncRedisCache`` as given, or the one of a ``RedisCache`` for this loop)."""
    if isinstance(cache, AsyncCache) or _on_loop(cache) is not None:
        return cache  # type: ignore[return-value]
    if isinstance(cache, Cache):
        return AsyncCache(cache)
    return _redis_face(cast("RedisCache", cache))


async def _storage(acache: AsyncCache | AsyncRedisCache, call: core.Call, op: str, arg: Any) -> Any:
    """One storage operation of the pay-once protocol: awaited on the asyncio client for
    Redis, run in the cache's executor for a directory."""
    face = _on_loop(acache)
    if face is not None:
        return await face._storage(call, op, arg)
    return await acache._run(core.storage, call, op, arg)


async def _on_loop_taking(take: Awaitable[T], give_back: Callable[[T], Awaitable[object]]) -> T:
    """Await ``take`` in a task of its own; if the caller is cancelled meanwhile, what it took
    is handed to ``give_back`` once it ends, instead of being dropped."""
    loop = asyncio.get_running_loop()
    task = loop.create_task(_awaited(take))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:

        def orphaned(done: asyncio.Task[T]) -> None:
            _giving_back.discard(done)
            if done.cancelled() or done.exception() is not None:
                return
            back = loop.create_task(_awaited(give_back(done.result())))
            _giving_back.add(back)
            back.add_done_callback(_giving_back.discard)

        _giving_back.add(task)
        task.add_done_callback(orphaned)
        raise


#: Strong references to the takes of cancelled callers and their give-backs, until they end.
_giving_back: set[asyncio.Task[Any]] = set()


async def _awaited(work: Awaitable[T]) -> T:
    return await work


# ---- claims ---------------------------------------------------------------------------------


class AsyncClaims:
    """:class:`~diskcache_oxide.claims.Claims` as coroutines. Waits sleep in the cache's
    executor until the claim is released or runs out; a caller cancelled while its claim was
    being taken releases it."""

    def __init__(
        self,
        cache: Cache | AsyncCache | RedisCache | AsyncRedisCache,
        namespace: str = "default",
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
        face = _on_loop(self._acache)
        if face is not None:

            async def release(claim: Claim | None) -> None:
                if claim is not None:
                    await self.release(claim.key, claim.token)

            taken = await _on_loop_taking(face._try_acquire(self._claims, key, seconds), release)
            return None if taken is None else AsyncClaim(self, taken)

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
            return await _storage(self._acache, call, op, arg)

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
        face = _on_loop(self._acache)
        if face is None:
            return await self._acache._run(self._claims.holder, key)
        found = await face._claim(_remote_claims().holder(face, self._claims.namespace, key))
        return None if found is None else ClaimInfo(*found)

    async def release(self, key: Any, token: str) -> bool:
        face = _on_loop(self._acache)
        if face is None:
            return await self._acache._run(self._claims.release, key, token)
        ops = _remote_claims()
        return await face._claim(ops.release(face, self._claims.namespace, key, token))

    async def extend(self, key: Any, token: str, lease: float = LEASE) -> bool:
        face = _on_loop(self._acache)
        if face is None:
            return await self._acache._run(self._claims.extend, key, token, lease)
        ops = _remote_claims()
        namespace = self._claims.namespace
        return await face._claim(ops.extend(face, namespace, key, token, _lease(lease)))

    async def list(self) -> list[tuple[Any, ClaimInfo]]:
        face = _on_loop(self._acache)
        if face is None:
            return await self._acache._run(self._claims.list)
        found = await face._claim(_remote_claims().claims(face, self._claims.namespace))
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
        if _on_loop(self._claims._acache) is None:
            return await self._claims._acache._run(self.claim.held)
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
            _log.warning("claim on %r was lost before its release (its lease ran out)", self.key)


def _remote_claims() -> Any:
    """The claims operations a Redis face awaits (``remote.claims``, loaded with it)."""
    from ..remote import claims

    return claims


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
