"""The pay-once protocol, written once: claim, compute, heartbeat, store, release, and wait
for a change or a lease's end (D-052).

The protocol is a set of generators that perform nothing themselves ("sans-IO"). Each one
yields the operation it needs next, as an ``(op, arg)`` pair, and is sent back its result;
a *driver* performs the operations. :mod:`diskcache_oxide.claims` has the synchronous driver
(the calls run inline, the heartbeat in a thread) and :mod:`diskcache_oxide.aio.turns` the
asyncio one (the storage calls run in the cache's executor, the turn in a shielded task, the
heartbeat in a task). So the order of the steps, the re-check after a claim is taken, what is
returned when, and what is logged are written here and nowhere else.

The operations:

================  =========================================  ================================
op                the driver does                             and sends back
================  =========================================  ================================
``GET``           read the value (:meth:`ClaimBackend.get`)   the value, or ``ENOVAL``
``ACQUIRE``       try to take the claim (never waits)         a :class:`~.claims.Claim` or None
``STORE``         store ``arg``, the computed value           None
``RELEASE``       release the claim ``arg``                   True if it was still ours
``EXTEND``        renew the claim ``arg`` for its lease       True if it was still ours
``WAIT``          sleep up to ``arg`` s for a change of the   None
                  claim or the value
``WAIT_FREE``     sleep up to ``arg`` s for a change of the   None
                  claim (not of the value)
``COMPUTE``       call ``fn`` while the claim ``arg`` is      ``fn``'s result
                  held, with a :func:`heartbeat` running
``TURN``          run :func:`turn` to its end (the async      what :func:`turn` returns
                  driver: in a task shielded from the caller)
``SLEEP``         sleep ``arg`` s (the heartbeat's pause)     False to stop the heartbeat
================  =========================================  ================================

The storage operations (all but ``COMPUTE``, ``TURN`` and ``SLEEP``) are done by
:func:`storage`, the same function for both drivers (the async one runs it in a thread). It
calls only the primitives of :class:`ClaimBackend`, so a second backend plugs in by
implementing that protocol.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Protocol, TypeVar

from ._log import log
from ._sentinels import COMPUTING, ENOVAL, Outcome
from ._store import ClaimBackend

__all__ = [
    "ClaimBackend",
    "Outcome",
]

T = TypeVar("T")


#: The heartbeat renews a claim after this fraction of its lease has passed.
HEARTBEAT_FRACTION = 1 / 3

#: Waiters look again at least this often (seconds): where there is no directory watch, and
#: so that a deadline is never slept past by more than this.
WAIT_SLICE = 1.0


# ---- the operations ---------------------------------------------------------------------------

GET = "get"
ACQUIRE = "acquire"
STORE = "store"
RELEASE = "release"
EXTEND = "extend"
WAIT = "wait"
WAIT_FREE = "wait-free"
COMPUTE = "compute"
TURN = "turn"
SLEEP = "sleep"


class Claim(Protocol):
    """What the protocol asks of a claim (:class:`diskcache_oxide.Claim` is one): declared
    here so that this module does not import ``claims``, which imports it."""

    @property
    def key(self) -> Any: ...
    @property
    def lease(self) -> float: ...
    def extend(self) -> bool: ...
    def release(self) -> bool: ...


class Claims(Protocol):
    """What the protocol asks of a set of claims (:class:`diskcache_oxide.Claims` is one)."""

    @property
    def backend(self) -> ClaimBackend: ...
    @property
    def namespace(self) -> str: ...
    def try_acquire(self, key: Any, lease: float = ...) -> Claim | None: ...


#: One step of the protocol: the operation and its argument.
Step = tuple[str, Any]


class Call:
    """The fixed parts of one pay-once call, which the storage operations read."""

    __slots__ = ("backend", "claims", "expire", "key", "lease", "namespace", "tag")

    def __init__(
        self,
        claims: Claims,
        key: Any,
        lease: float,
        expire: float | None = None,
        tag: Any = None,
    ) -> None:
        self.claims = claims
        self.backend = claims.backend
        self.namespace = claims.namespace
        self.key = key
        self.lease = lease
        self.expire = expire
        self.tag = tag


def storage(call: Call, op: str, arg: Any) -> Any:
    """Perform one storage operation of ``call`` (blocking): both drivers' way to the
    :class:`ClaimBackend`."""
    if op is GET:
        return call.backend.get(call.key)
    if op is ACQUIRE:
        return call.claims.try_acquire(call.key, call.lease)
    if op is STORE:
        call.backend.store(call.key, arg, call.expire, call.tag)
        return None
    if op is RELEASE:
        return arg.release()
    if op is EXTEND:
        return arg.extend()
    if op is WAIT or op is WAIT_FREE:
        call.backend.wait_for_change(call.namespace, call.key, arg, op is WAIT)
        return None
    raise AssertionError(f"not a storage operation: {op!r}")


# ---- the protocol -----------------------------------------------------------------------------


def get_or_compute(
    key: Any, limit: float | None, skip: bool
) -> Generator[Step, Any, tuple[Any, Outcome]]:
    """The whole call, after its first read found no value: a :func:`turn`; if another caller
    holds the claim, :data:`COMPUTING` if ``skip``, else wait for a change, read again (a
    value now is that caller's: :attr:`Outcome.WAITED`) and start again. Returns ``(value,
    outcome)``.

    The first read is the drivers' (``backend.get(key)``, and the value if there is one, as
    :attr:`Outcome.CACHED`): a hit then costs one read and builds none of the protocol's
    state, as fast as before the protocol was written once.

    :raises ClaimTimeout: when ``limit`` seconds (None: no limit) passed without a value
    """
    deadline = None if limit is None else time.monotonic() + limit
    waited = False
    while True:
        got = yield TURN, None
        if got is not None:
            if waited and got[1] is Outcome.CACHED:
                return got[0], Outcome.WAITED
            return got  # type: ignore[no-any-return]
        if skip:
            return COMPUTING, Outcome.SKIPPED
        remaining = WAIT_SLICE if deadline is None else deadline - time.monotonic()
        if remaining <= 0:
            from .errors import ClaimTimeout

            raise ClaimTimeout(f"no value for {key!r} appeared within {limit} s")
        waited = True
        yield WAIT, min(remaining, WAIT_SLICE)
        value = yield GET, None
        if value is not ENOVAL:
            return value, Outcome.WAITED


def turn(key: Any) -> Generator[Step, Any, tuple[Any, Outcome] | None]:
    """One caller's turn: take the claim (None if someone holds it); look again (the previous
    holder may have stored the value and released between our read and our claim); compute;
    store; and release the claim whatever happened, warning if it had run out meanwhile."""
    claim = yield ACQUIRE, None
    if claim is None:
        return None
    try:
        value = yield GET, None
        if value is not ENOVAL:
            return value, Outcome.CACHED
        value = yield COMPUTE, claim
        yield STORE, value
        return value, Outcome.COMPUTED
    finally:
        if not (yield RELEASE, claim):
            log().warning(
                "claim on %r ran out while its value was computed (the heartbeat could not "
                "renew it in time); another caller may have computed it too",
                key,
            )


def heartbeat(claim: Claim) -> Generator[Step, Any, None]:
    """Renew ``claim`` every ``HEARTBEAT_FRACTION`` of its lease until the driver's ``SLEEP``
    says stop: a holder that dies stops renewing, so its claim runs out one lease later. A
    failed renewal (a locked or full disk) is logged and tried again at the next beat; a lost
    claim ends the heartbeat."""
    interval = claim.lease * HEARTBEAT_FRACTION
    while (yield SLEEP, interval):
        try:
            renewed = yield EXTEND, claim
        except Exception as error:
            log().warning("could not renew the claim on %r: %s", claim.key, error)
            continue
        if not renewed:
            log().warning("the claim on %r was lost; stopping its heartbeat", claim.key)
            return


def acquire(limit: float) -> Generator[Step, Any, Any]:
    """:meth:`Claims.acquire`: try the claim; until ``limit`` seconds have passed, wait for
    it to be released or run out and try again. Returns the claim, or None."""
    deadline = time.monotonic() + limit
    while True:
        claim = yield ACQUIRE, None
        if claim is not None:
            return claim
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        yield WAIT_FREE, min(remaining, WAIT_SLICE)


# ---- the synchronous trampoline ---------------------------------------------------------------


def drive(steps: Generator[Step, Any, T], perform: Callable[[str, Any], Any]) -> T:
    """Run ``steps`` to its end, performing each operation with ``perform``: its result is
    sent back, an exception it raises is thrown in (so the protocol's ``finally`` releases
    the claim). The asyncio driver is the same loop with ``await``."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            if error is None:
                op, arg = steps.send(result)
            else:
                thrown, error = error, None
                op, arg = steps.throw(thrown)
                del thrown
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        try:
            result = perform(op, arg)
        except BaseException as exc:
            result, error = None, exc


async def adrive(
    steps: Generator[Step, Any, T], perform: Callable[[str, Any], Awaitable[Any]]
) -> T:
    """:func:`drive` for the asyncio driver: ``await perform(op, arg)`` for each operation."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            if error is None:
                op, arg = steps.send(result)
            else:
                thrown, error = error, None
                op, arg = steps.throw(thrown)
                del thrown
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        try:
            result = await perform(op, arg)
        except BaseException as exc:
            result, error = None, exc
