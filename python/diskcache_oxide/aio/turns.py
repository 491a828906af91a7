"""Compute-once from asyncio: `aget_or_compute`, `acompute_once`, and the shielded turns
that finish and store their result even when every caller was cancelled (D-023, D-024).

A *turn* is the task that holds the claim, computes the value and stores it. It is shielded
from its caller and kept alive by a strong reference until it ends, so a caller that goes
away loses the view, not the work. What can still cancel a turn is the end of its event
loop: ``asyncio.run`` cancels the tasks left when its coroutine returns. :func:`keep_turns`
(an ``async with`` block) and :func:`turns_lifespan` (for an ASGI app) wait for the pending
turns before the loop ends; a turn cancelled anyway logs a warning.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, cast

from .. import _payonce as core
from .._asyncio import P, R, _Tag
from .._keying import keyed
from .._log import log
from .._sentinels import ENOVAL
from .._store import AsyncClaimBackend, AsyncStore, AsyncStored, Stored
from ..claims import LEASE, Claim, Claims, Outcome, _if_computing, _lease, _timeout, stable_name
from .claims import AsyncClaim, AsyncClaims, claims_on, storage, store_for

#: Strong references to the running turns, so a turn whose callers were all cancelled is not
#: garbage-collected mid-way (the event loop only keeps weak references to tasks).
_shielded: set[asyncio.Task[Any]] = set()


def pending_turns() -> int:
    """How many shielded turns (of every loop) are still running."""
    return len(_shielded)


async def drain_turns(timeout: float | None = None) -> None:
    """Wait for the shielded turns of the running loop to finish (before closing the loop:
    ``asyncio.run`` cancels the tasks left at its end)."""
    loop = asyncio.get_running_loop()
    mine = [task for task in list(_shielded) if task.get_loop() is loop]
    if mine:
        await asyncio.wait(mine, timeout=timeout)


@contextlib.asynccontextmanager
async def keep_turns(timeout: float | None = None) -> AsyncIterator[None]:
    """``async with keep_turns():`` around an app's main coroutine: at the end of the block
    (also when it raises), wait up to ``timeout`` seconds (default: as long as they take)
    for the turns still running, so the end of the loop does not cancel paid work::

        async def main():
            async with keep_turns():
                await serve()

        asyncio.run(main())
    """
    try:
        yield
    finally:
        await drain_turns(timeout)


@contextlib.asynccontextmanager
async def turns_lifespan(app: Any = None, *, timeout: float | None = None) -> AsyncIterator[None]:
    """An ASGI lifespan that waits for the pending turns at shutdown: pass it as Starlette's
    or FastAPI's ``lifespan=`` (``Starlette(routes=..., lifespan=turns_lifespan)``), or enter
    it inside your own lifespan. ``uvicorn`` then finishes paid work before the loop ends."""
    async with keep_turns(timeout):
        yield


# ---- the asyncio driver of _payonce -----------------------------------------------------------


def _computation(
    fn: object, args: tuple[Any, ...], kwargs: dict[str, Any], run: Callable[..., Awaitable[Any]]
) -> Callable[..., Awaitable[Any]]:
    """``fn(*args, **kwargs)`` as something to await (given the claim if ``claim=`` is passed
    to it): a coroutine function is awaited on the loop, a plain function runs in the
    executor (and if it returns an awaitable, that is awaited too)."""
    if not callable(fn):
        raise TypeError(
            f"fn must be a function or coroutine function that computes the value, not "
            f"{type(fn).__name__}"
        )
    if inspect.iscoroutinefunction(fn):
        return lambda **claim: cast(Awaitable[Any], fn(*args, **claim, **kwargs))

    async def in_thread(**claim: Any) -> Any:
        result = await run(fn, *args, **claim, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result

    return in_thread


class _Driver:
    """Performs the protocol's operations for one :func:`aget_or_compute` call: storage on the
    store's asyncio claims, the turn in a shielded task, the computation with a heartbeat
    task."""

    def __init__(
        self,
        store: AsyncStore,
        backend: AsyncClaimBackend,
        call: core.Call,
        compute: Callable[..., Awaitable[Any]],
        pass_claim: Literal[False, "sync", "async"],
    ) -> None:
        self._store = store
        self._backend = backend
        self._call = call
        self._compute = compute
        self._pass_claim = pass_claim
        self._at_risk = False

    async def perform(self, op: str, arg: Any) -> Any:
        if op is core.COMPUTE:
            return await self._computing(arg)
        if op is core.TURN:
            return await self._turn()
        if op is core.RELEASE:
            return await asyncio.shield(storage(self._backend, self._call, op, arg))
        result = await storage(self._backend, self._call, op, arg)
        if op is core.ACQUIRE:
            self._at_risk = result is not None  # from here until the value is stored
        elif op is core.STORE:
            self._at_risk = False
        return result

    async def _turn(self) -> Any:
        """Run the protocol's turn in a task of its own, shielded from the caller and kept by
        a strong reference until it ends: a cancelled caller loses the view, not the work."""
        task = asyncio.get_running_loop().create_task(self._turning())
        _shielded.add(task)
        task.add_done_callback(_shielded.discard)
        return await asyncio.shield(task)

    async def _turning(self) -> Any:
        try:
            return await core.adrive(core.turn(self._call.key), self.perform)
        except asyncio.CancelledError:
            if self._at_risk:
                log().warning(
                    "a turn computing %r was cancelled before it stored its value (its event "
                    "loop ended?); the work is lost. Run the app inside `async with "
                    "keep_turns():` or with turns_lifespan so that pending turns finish first",
                    self._call.key,
                )
            raise

    async def _sleep_or_extend(self, op: str, arg: Any) -> Any:
        if op is core.SLEEP:
            await asyncio.sleep(arg)
            return True
        return await storage(self._backend, self._call, op, arg)

    async def _computing(self, claim: Claim) -> Any:
        beat = asyncio.get_running_loop().create_task(
            core.adrive(core.heartbeat(claim), self._sleep_or_extend)
        )
        try:
            if self._pass_claim == "async":
                claims = cast("Claims[Any]", self._call.claims)
                held = AsyncClaim(claims_on(self._store, claims), claim)
                return await self._compute(claim=held)
            if self._pass_claim == "sync":
                return await self._compute(claim=claim)
            return await self._compute()
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat


async def aget_or_compute(
    cache: Stored | AsyncStored,
    key: Any,
    fn: Callable[..., Any],
    /,
    *args: Any,
    lease: float = LEASE,
    timeout: float | None = None,
    expire: float | None = None,
    tag: _Tag = None,
    namespace: str = "default",
    if_computing: Literal["wait", "skip"] = "wait",
    outcome: bool = False,
    pass_claim: bool = False,
    **kwargs: Any,
) -> Any:
    """:func:`~diskcache_oxide.get_or_compute` from asyncio: ``fn(*args, **kwargs)`` runs
    once across loops, threads and processes. ``fn`` may be a coroutine function (awaited on
    the loop) or a plain function (run in the cache's executor).

    Taking the claim, computing (with a heartbeat renewing the claim) and storing run in one
    task, shielded from the caller's cancellation and strongly referenced until it ends: a
    cancelled caller loses the view, not the work, and the value is cached for the next
    caller. Waiters sleep in the executor until the value is stored or the claim is released
    or runs out. ``fn`` failing releases the claim and raises in the caller whose turn it
    was; the waiters try the claim again.

    ``outcome=True`` returns ``(value, Outcome)``, as the sync form does.
    ``pass_claim=True`` calls ``fn(*args, claim=..., **kwargs)``: a coroutine function gets
    an :class:`~diskcache_oxide.aio.AsyncClaim` (``await claim.extend()``), a plain function,
    which runs in a thread, the sync :class:`~diskcache_oxide.Claim`.

    :raises ClaimTimeout: if ``timeout`` (default: none) passed without a value
    """
    store = store_for(cache)
    compute = _computation(fn, args, kwargs, store.run)
    lease = _lease(lease)
    limit = None if timeout is None else _timeout(timeout)
    skip = if_computing != "wait" and _if_computing(if_computing) == "skip"
    claims: Claims[Any] = Claims(store.cache, namespace)
    call = core.Call(claims, key, lease, expire, tag)
    backend = store.claims()
    value = await storage(backend, call, core.GET, None)  # the protocol's first read
    if value is not ENOVAL:
        return (value, Outcome.CACHED) if outcome else value
    handed: Literal[False, "sync", "async"] = False
    if pass_claim:
        handed = "async" if inspect.iscoroutinefunction(fn) else "sync"
    driver = _Driver(store, backend, call, compute, handed)
    got = await core.adrive(core.get_or_compute(key, limit, skip), driver.perform)
    return got if outcome else got[0]


class AsyncComputeOnce(Protocol, Generic[P, R]):
    """A coroutine function wrapped by :func:`acompute_once`."""

    __wrapped__: Callable[P, Awaitable[R]]

    async def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...

    def __cache_key__(self, *args: P.args, **kwargs: P.kwargs) -> tuple[Any, ...]: ...


def acompute_once(
    cache: Stored | AsyncStored,
    *,
    lease: float = LEASE,
    timeout: float | None = None,
    expire: float | None = None,
    tag: _Tag = None,
    name: str | None = None,
    typed: bool = False,
    ignore: Collection[int | str] = (),
    pass_claim: bool = False,
) -> Callable[[Callable[P, Awaitable[R]]], AsyncComputeOnce[P, R]]:
    """Decorator for coroutine functions: each result computed once, through
    :func:`aget_or_compute`, under the keys of :func:`~diskcache_oxide.compute_once`
    (``pass_claim=True``: called with ``claim=`` its :class:`~diskcache_oxide.aio.AsyncClaim`)."""
    seconds = _lease(lease)

    async def once(
        func: Callable[..., Any],
        key: tuple[Any, ...],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        return await aget_or_compute(
            cache,
            key,
            functools.partial(func, *args, **kwargs),
            lease=seconds,
            timeout=timeout,
            expire=expire,
            tag=tag,
            pass_claim=pass_claim,
        )

    return cast(
        Callable[[Callable[P, Awaitable[R]]], AsyncComputeOnce[P, R]],
        keyed(name, typed, ignore, once, stable_name),
    )


# ---- the asyncio faces' pay-once calls ---------------------------------------------------------


class AsyncPayOnceCalls:
    """``claims()`` and ``get_or_compute`` as methods, written once for every asyncio face
    (``AsyncCache`` and ``AsyncRedisCache`` inherit them): both run on the face's store
    (:func:`~diskcache_oxide.aio.claims.store_for`)."""

    __slots__ = ()

    if TYPE_CHECKING:  # what the class that inherits this supplies

        def _dco_async_store(self) -> AsyncStore: ...

    def claims(self, namespace: str = "default") -> AsyncClaims:
        """Claims on this cache's keys (:class:`~diskcache_oxide.aio.AsyncClaims`)."""
        return AsyncClaims(self, namespace)

    async def get_or_compute(
        self,
        key: Any,
        fn: Callable[..., Any],
        /,
        *args: Any,
        lease: float = 60.0,
        timeout: float | None = None,
        expire: float | None = None,
        tag: _Tag = None,
        namespace: str = "default",
        if_computing: Literal["wait", "skip"] = "wait",
        outcome: bool = False,
        pass_claim: bool = False,
        **kwargs: Any,
    ) -> Any:
        """:func:`aget_or_compute` on this cache: the value of ``key``, computed by
        ``fn(*args, **kwargs)`` once across loops, threads and processes; ``fn`` may be a
        coroutine function or a plain function (run in the executor). The options are
        :meth:`Cache.get_or_compute`'s: ``outcome=True`` returns ``(value, Outcome)``, and
        ``pass_claim=True`` hands ``fn`` its claim as ``claim=`` (an :class:`AsyncClaim` for
        a coroutine function, a :class:`~diskcache_oxide.Claim` for a plain one)."""
        return await aget_or_compute(
            self,
            key,
            fn,
            *args,
            lease=lease,
            timeout=timeout,
            expire=expire,
            tag=tag,
            namespace=namespace,
            if_computing=if_computing,
            outcome=outcome,
            pass_claim=pass_claim,
            **kwargs,
        )
