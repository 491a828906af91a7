"""Claims with a lease, and compute-once on top of them.

A *claim* marks a key as "someone is working on it" for a limited time, its *lease*. It lives
in the cache directory, in a table of its own (D-044), so every thread, event loop and
process that opens the directory sees it, and no ``clear()``, eviction, expiry, cull or size
limit removes it; an in-process lock (``threading.Lock``, ``asyncio.Lock``) cannot do that.
Each claim carries a random owner token: only the holder of the token can release or extend
it, and once its lease has run out anyone may take it, so a holder that crashed blocks the key
for at most one lease. See docs/decisions/D-023-claims-and-compute-once.md and
docs/guide-paying-once.md.

:func:`get_or_compute` (:meth:`Cache.get_or_compute`, and the :func:`compute_once`
decorator) use claims so that exactly one caller computes a missing value while every other
caller waits for the stored result. While the value is computed, a heartbeat renews the
claim, so a short lease is safe however long the computation takes. The names (D-045):
``lease`` is how long a claim lasts without renewal, ``expire`` how long the stored value
lives, ``timeout`` how long a waiter waits.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from collections.abc import Callable, Collection
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Literal,
    NamedTuple,
    ParamSpec,
    Protocol,
    TypeVar,
    cast,
    overload,
)

from . import _payonce as core
from ._keying import is_coroutine_function, keyed
from ._log import log
from ._payonce import HEARTBEAT_FRACTION
from ._seconds import LEASE as _LEASE_RULE
from ._seconds import TIMEOUT as _TIMEOUT_RULE
from ._seconds import seconds
from ._sentinels import COMPUTING as COMPUTING
from ._sentinels import ENOVAL, Constant
from ._sentinels import Outcome as Outcome
from ._store import ClaimBackend as ClaimBackend
from ._store import ClaimRegistry as ClaimRegistry
from ._store import Store, Stored, store_of
from .errors import ClaimTimeout as ClaimTimeout

__all__ = [
    "COMPUTING",
    "HEARTBEAT_FRACTION",
    "LEASE",
    "Claim",
    "ClaimBackend",
    "ClaimInfo",
    "ClaimRegistry",
    "ClaimTimeout",
    "Claims",
    "ComputeOnce",
    "Outcome",
    "PayOnceCalls",
    "compute_once",
    "get_or_compute",
    "stable_name",
]

P = ParamSpec("P")
R = TypeVar("R")
#: The cache a set of claims lives in: a Cache, a RedisCache (anything with a store).
C = TypeVar("C", bound=Stored)


#: The default lease, in seconds: renewed by the heartbeat while the value is computed.
LEASE = 60.0


class ClaimInfo(NamedTuple):
    """Who holds a claim: the token, the holder's host and pid, when it was taken (epoch
    seconds) and when its lease runs out unless renewed (epoch seconds)."""

    token: str
    host: str
    pid: int
    acquired: float
    expires: float


# ---- arguments ------------------------------------------------------------------------------


def _lease(value: object, name: str = "lease") -> float:
    return seconds(value, name, _LEASE_RULE)  # type: ignore[return-value]


def _timeout(value: object, name: str = "timeout") -> float:
    return seconds(value, name, _TIMEOUT_RULE)  # type: ignore[return-value]


_IF_COMPUTING = ("wait", "skip")


def _if_computing(value: object) -> Literal["wait", "skip"]:
    if value not in _IF_COMPUTING:
        raise ValueError(f"if_computing must be 'wait' or 'skip', not {value!r}")
    return cast(Literal["wait", "skip"], value)


def backend_of(cache: Stored, *, strict: bool = False) -> ClaimRegistry:
    """The storage of ``cache``'s claims and values (:class:`ClaimBackend`), as its store
    supplies it (``_store.store_of``): the cache directory's claims table, or a
    :class:`~diskcache_oxide.remote.RedisCache` namespace's
    (:class:`~diskcache_oxide.remote.claims.RedisClaims`). A ``TypeError`` for anything
    else."""
    return store_of(cache).claims(strict)


# ---- claims ---------------------------------------------------------------------------------


class Claims(Generic[C]):
    """Claims on keys of one cache directory.

    :param cache: the cache whose directory holds the claims
    :param namespace: keeps separate sets of claims on the same keys apart (default
        ``'default'``)
    :param strict: on Redis, refuse (``remote.UnsupportedError``) a server whose
        ``maxmemory-policy`` may evict claims (``allkeys-*``, and ``volatile-*`` too: a claim
        carries its lease as a TTL), instead of one ``remote.EvictionWarning`` per namespace
        and process (issue 29, D-058); a directory ignores it

    ``try_acquire`` returns a :class:`Claim` or None at once; ``acquire`` waits up to
    ``timeout`` (woken when the holder releases the claim or its lease runs out); ``hold``
    raises :class:`ClaimTimeout` instead of returning None, and is meant for ``with``::

        claims = Claims(cache)
        with claims.hold("article:7", lease=30, timeout=5):
            ...  # nobody else holds the claim here (for up to 30 s)
    """

    def __init__(self, cache: C, namespace: str = "default", *, strict: bool = False) -> None:
        backend = backend_of(cache, strict=strict)
        if not isinstance(namespace, str):
            raise TypeError(f"namespace must be a str, not {type(namespace).__name__}")
        self._cache = cache
        self._backend = backend
        self._namespace = namespace

    @property
    def cache(self) -> C:
        """The cache that holds the claims: a directory's, or a Redis namespace's."""
        return self._cache

    @property
    def backend(self) -> ClaimRegistry:
        """Where the claims are stored: the storage primitives (:class:`ClaimBackend`)."""
        return self._backend

    @property
    def namespace(self) -> str:
        """The namespace these claims live in: claims on the same key in other namespaces
        are separate."""
        return self._namespace

    def __repr__(self) -> str:
        where = getattr(self._cache, "directory", self._cache)
        return f"Claims({where!r}, namespace={self._namespace!r})"

    def try_acquire(self, key: Any, lease: float = LEASE) -> Claim | None:
        """Take the claim on ``key`` for ``lease`` seconds if nobody holds it (a claim whose
        lease ran out counts as free); None if it is held. Never waits."""
        seconds = _lease(lease)
        # What secrets.token_hex and socket.gethostname return, without importing either
        # module with the package (import time, issue 33).
        token = os.urandom(16).hex()
        taken = self._backend.try_acquire(
            self._namespace, key, seconds, token, os.uname().nodename, os.getpid()
        )
        return Claim(self, key, token, seconds) if taken else None

    def acquire(self, key: Any, lease: float = LEASE, *, timeout: float = 0.0) -> Claim | None:
        """Take the claim on ``key`` for ``lease`` seconds, waiting up to ``timeout`` seconds
        while someone else holds it; None if it could not be taken. The wait sleeps until the
        holder releases the claim or its lease runs out (polling only where the platform has
        no directory watch)."""
        call = core.Call(self, key, _lease(lease))
        limit = _timeout(timeout)
        return cast(
            "Claim | None",
            core.drive(core.acquire(limit), functools.partial(core.storage, call)),
        )

    def hold(self, key: Any, lease: float = LEASE, *, timeout: float = 0.0) -> Claim:
        """Like :meth:`acquire`, but raises :class:`ClaimTimeout` instead of returning None;
        use the result in a ``with`` block to release it at the end."""
        claim = self.acquire(key, lease, timeout=timeout)
        if claim is None:
            raise ClaimTimeout(
                f"the claim on {key!r} is held by another owner (waited {timeout} s); "
                "holder() says who holds it"
            )
        return claim

    def holder(self, key: Any) -> ClaimInfo | None:
        """Who holds the claim on ``key``; None if nobody does (or its lease ran out)."""
        found = self._backend.holder(self._namespace, key)
        return None if found is None else ClaimInfo(*found)

    def release(self, key: Any, token: str) -> bool:
        """Release the claim on ``key`` if ``token`` owns it; False if it does not (never
        did, already released, or the lease ran out and another may have taken it)."""
        return self._backend.release(self._namespace, key, token)

    def extend(self, key: Any, token: str, lease: float = LEASE) -> bool:
        """Make the claim on ``key`` run out ``lease`` seconds from now if ``token`` owns it
        and its lease has not run out; False otherwise."""
        return self._backend.extend(self._namespace, key, token, _lease(lease))

    def owns(self, key: Any, token: str) -> bool:
        """True if ``token`` holds the live claim on ``key``."""
        held = self.holder(key)
        return held is not None and held.token == token

    def break_claim(self, key: Any) -> bool:
        """Remove the claim on ``key`` whoever holds it (an operator's tool); False if there
        was none."""
        return self._backend.break_claim(self._namespace, key)

    def list(self) -> list[tuple[Any, ClaimInfo]]:
        """The live claims of this namespace, as ``(key, ClaimInfo)`` pairs."""
        return [(key, ClaimInfo(*info)) for key, info in self._backend.claims(self._namespace)]


class Claim:
    """A claim this caller holds, returned by :meth:`Claims.acquire`.

    ``token`` identifies the owner: :meth:`Claims.release` and :meth:`Claims.extend` with
    it work from any process. As a context manager the claim is released on exit.
    """

    __slots__ = {
        "_claims": None,
        "key": "The key claimed.",
        "token": "The random token that identifies the owner.",
        "lease": "The lease the claim was taken with, in seconds (what :meth:`extend` renews).",
    }

    def __init__(self, claims: Claims[Any], key: Any, token: str, lease: float) -> None:
        self._claims = claims
        self.key = key
        self.token = token
        self.lease = lease

    @property
    def claims(self) -> Claims[Any]:
        """The :class:`Claims` it was taken from (its cache directory and namespace)."""
        return self._claims

    def __repr__(self) -> str:
        return f"Claim(key={self.key!r}, token={self.token!r}, lease={self.lease!r})"

    def release(self) -> bool:
        """Release it; False if it was no longer ours (its lease ran out, or already
        released)."""
        return self._claims.release(self.key, self.token)

    def extend(self, lease: float | None = None) -> bool:
        """Heartbeat: the claim now runs out ``lease`` seconds from now (default: the lease it
        was taken with). False if it was no longer ours."""
        return self._claims.extend(self.key, self.token, self.lease if lease is None else lease)

    def held(self) -> bool:
        """True while the claim is live and ours."""
        return self._claims.owns(self.key, self.token)

    def __enter__(self) -> Claim:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self.release():
            log().warning("claim on %r was lost before its release (its lease ran out)", self.key)


# ---- compute-once: the synchronous driver of _payonce ------------------------------------------


class _Heartbeat:
    """The protocol's heartbeat (:func:`_payonce.heartbeat`) for ``claim``, in a daemon
    thread, from the start of the block to its end."""

    def __init__(self, call: core.Call, claim: Claim) -> None:
        self._call = call
        self._claim = claim
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._beat, name="diskcache-oxide-heartbeat", daemon=True
        )

    def _perform(self, op: str, arg: Any) -> Any:
        if op is core.SLEEP:
            return not self._stop.wait(arg)
        return core.storage(self._call, op, arg)

    def _beat(self) -> None:
        core.drive(core.heartbeat(self._claim), self._perform)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exception: object) -> None:
        self._stop.set()
        self._thread.join()


def _sync_callable(fn: object) -> Callable[..., Any]:
    if not callable(fn):
        raise TypeError(f"fn must be a callable that computes the value, not {type(fn).__name__}")
    if is_coroutine_function(fn):
        raise TypeError(
            f"fn is a coroutine function ({getattr(fn, '__qualname__', fn)!r}); await "
            "AsyncCache.get_or_compute (or aget_or_compute) for it instead"
        )
    return fn


def _computed(result: object) -> object:
    import inspect  # imported on use, as in _keying.is_coroutine_function

    if inspect.isawaitable(result):
        close = getattr(result, "close", None)
        if close is not None:
            close()
        raise TypeError(
            "fn returned an awaitable; await AsyncCache.get_or_compute (or "
            "aget_or_compute) for a function that returns a coroutine"
        )
    return result


@overload
def get_or_compute(
    cache: Stored,
    key: Any,
    fn: Callable[..., R],
    /,
    *args: Any,
    lease: float = ...,
    timeout: float | None = ...,
    expire: float | None = ...,
    tag: str | int | float | bytes | None = ...,
    namespace: str = ...,
    if_computing: Literal["wait"] = ...,
    outcome: Literal[False] = ...,
    pass_claim: bool = ...,
    **kwargs: Any,
) -> R: ...
@overload
def get_or_compute(
    cache: Stored,
    key: Any,
    fn: Callable[..., R],
    /,
    *args: Any,
    lease: float = ...,
    timeout: float | None = ...,
    expire: float | None = ...,
    tag: str | int | float | bytes | None = ...,
    namespace: str = ...,
    if_computing: Literal["skip"],
    outcome: Literal[False] = ...,
    pass_claim: bool = ...,
    **kwargs: Any,
) -> R | Constant: ...
@overload
def get_or_compute(
    cache: Stored,
    key: Any,
    fn: Callable[..., R],
    /,
    *args: Any,
    lease: float = ...,
    timeout: float | None = ...,
    expire: float | None = ...,
    tag: str | int | float | bytes | None = ...,
    namespace: str = ...,
    if_computing: Literal["wait"] = ...,
    outcome: Literal[True],
    pass_claim: bool = ...,
    **kwargs: Any,
) -> tuple[R, Outcome]: ...
@overload
def get_or_compute(
    cache: Stored,
    key: Any,
    fn: Callable[..., R],
    /,
    *args: Any,
    lease: float = ...,
    timeout: float | None = ...,
    expire: float | None = ...,
    tag: str | int | float | bytes | None = ...,
    namespace: str = ...,
    if_computing: Literal["skip"],
    outcome: Literal[True],
    pass_claim: bool = ...,
    **kwargs: Any,
) -> tuple[R | Constant, Outcome]: ...


def get_or_compute(
    cache: Stored,
    key: Any,
    fn: Callable[..., R],
    /,
    *args: Any,
    lease: float = LEASE,
    timeout: float | None = None,
    expire: float | None = None,
    tag: str | int | float | bytes | None = None,
    namespace: str = "default",
    if_computing: Literal["wait", "skip"] = "wait",
    outcome: bool = False,
    pass_claim: bool = False,
    **kwargs: Any,
) -> Any:
    """The value of ``key``, computed by ``fn(*args, **kwargs)`` once across threads, loops
    and processes.

    If ``key`` is cached, its value is returned. Otherwise one caller takes the claim on
    ``key``, calls ``fn`` (a heartbeat renewing the claim meanwhile), stores the result
    (with ``expire`` and ``tag``) and releases the claim; every other caller sleeps until
    the value is stored or the claim is released or runs out, and returns the value. If the
    computing caller dies, its claim runs out one ``lease`` later and a waiter takes over;
    if ``fn`` raises, the claim is released and the error raised in that caller, and the
    waiters try the claim again.

    :param lease: seconds a claim lasts without renewal: how long a crashed caller can
        block the key (the heartbeat renews it every third of that while ``fn`` runs)
    :param timeout: seconds a waiter waits in all before :class:`ClaimTimeout` (default:
        wait as long as it takes)
    :param expire: seconds the stored value lives (default: until evicted)
    :param if_computing: ``'skip'``: if another caller holds the claim, return
        :data:`COMPUTING` at once instead of waiting (a worker that leaves the key to the
        caller already computing it)
    :param outcome: return ``(value, Outcome)`` instead of the value: whether this call
        found the value cached (:attr:`Outcome.CACHED`), computed it
        (:attr:`Outcome.COMPUTED`), waited for another caller's (:attr:`Outcome.WAITED`), or
        skipped (:attr:`Outcome.SKIPPED`, with :data:`COMPUTING`)
    :param pass_claim: call ``fn(*args, claim=..., **kwargs)`` with the :class:`Claim` this
        call computes under (its ``token``, ``extend()``, ``held()``)
    :raises ClaimTimeout: if ``timeout`` passed without a value

    ``args`` and ``kwargs`` go to ``fn``; a keyword named like one of these options is taken
    as the option, so pass ``functools.partial(fn, expire=...)`` for such an argument.
    """
    compute = _sync_callable(fn)
    lease = _lease(lease)
    limit = None if timeout is None else _timeout(timeout)
    skip = if_computing != "wait" and _if_computing(if_computing) == "skip"
    claims = Claims(cache, namespace)
    value = claims.backend.get(key)  # the protocol's first read: a hit ends here
    if value is not ENOVAL:
        return (value, Outcome.CACHED) if outcome else value
    call = core.Call(claims, key, lease, expire, tag)

    def perform(op: str, arg: Any) -> Any:
        if op is core.COMPUTE:
            with _Heartbeat(call, arg):
                if pass_claim:
                    return _computed(compute(*args, claim=arg, **kwargs))
                return _computed(compute(*args, **kwargs))
        if op is core.TURN:
            return core.drive(core.turn(key), perform)
        return core.storage(call, op, arg)

    got = core.drive(core.get_or_compute(key, limit, skip), perform)
    return got if outcome else got[0]


class PayOnceCalls:
    """:meth:`get_or_compute` as a method, written once for every blocking cache that has a
    store (``Cache`` and ``RedisCache`` inherit it; ``NullCache`` and ``FanoutCache`` have
    theirs generated from it, ``_faces/``)."""

    __slots__ = ()

    if TYPE_CHECKING:  # what the class that inherits this supplies

        def _dco_store(self) -> Store: ...

    @overload
    def get_or_compute(
        self,
        key: Any,
        fn: Callable[..., R],
        /,
        *args: Any,
        lease: float = ...,
        timeout: float | None = ...,
        expire: float | None = ...,
        tag: str | int | float | bytes | None = ...,
        namespace: str = ...,
        if_computing: Literal["wait"] = ...,
        outcome: Literal[False] = ...,
        pass_claim: bool = ...,
        **kwargs: Any,
    ) -> R: ...

    @overload
    def get_or_compute(
        self,
        key: Any,
        fn: Callable[..., R],
        /,
        *args: Any,
        lease: float = ...,
        timeout: float | None = ...,
        expire: float | None = ...,
        tag: str | int | float | bytes | None = ...,
        namespace: str = ...,
        if_computing: Literal["skip"],
        outcome: Literal[False] = ...,
        pass_claim: bool = ...,
        **kwargs: Any,
    ) -> R | Constant: ...

    @overload
    def get_or_compute(
        self,
        key: Any,
        fn: Callable[..., R],
        /,
        *args: Any,
        lease: float = ...,
        timeout: float | None = ...,
        expire: float | None = ...,
        tag: str | int | float | bytes | None = ...,
        namespace: str = ...,
        if_computing: Literal["wait"] = ...,
        outcome: Literal[True],
        pass_claim: bool = ...,
        **kwargs: Any,
    ) -> tuple[R, Outcome]: ...

    @overload
    def get_or_compute(
        self,
        key: Any,
        fn: Callable[..., R],
        /,
        *args: Any,
        lease: float = ...,
        timeout: float | None = ...,
        expire: float | None = ...,
        tag: str | int | float | bytes | None = ...,
        namespace: str = ...,
        if_computing: Literal["skip"],
        outcome: Literal[True],
        pass_claim: bool = ...,
        **kwargs: Any,
    ) -> tuple[R | Constant, Outcome]: ...

    @overload
    def get_or_compute(
        self,
        key: Any,
        fn: Callable[..., R],
        /,
        *args: Any,
        lease: float = ...,
        timeout: float | None = ...,
        expire: float | None = ...,
        tag: str | int | float | bytes | None = ...,
        namespace: str = ...,
        if_computing: Literal["wait", "skip"] = ...,
        outcome: bool = ...,
        pass_claim: bool = ...,
        **kwargs: Any,
    ) -> R | Constant | tuple[R | Constant, Outcome]: ...

    def get_or_compute(
        self,
        key: Any,
        fn: Callable[..., R],
        /,
        *args: Any,
        lease: float = 60.0,
        timeout: float | None = None,
        expire: float | None = None,
        tag: str | int | float | bytes | None = None,
        namespace: str = "default",
        if_computing: Literal["wait", "skip"] = "wait",
        outcome: bool = False,
        pass_claim: bool = False,
        **kwargs: Any,
    ) -> R | Constant | tuple[R | Constant, Outcome]:
        """The value of ``key``, computed by ``fn(*args, **kwargs)`` once across threads,
        loops and processes: :func:`diskcache_oxide.get_or_compute` on this cache.

        :param lease: seconds the claim lasts without renewal (a heartbeat renews it while
            ``fn`` runs, so this is how long a crashed caller can block the key)
        :param timeout: seconds a waiter waits before
            :class:`~diskcache_oxide.ClaimTimeout` (default: as long as it takes)
        :param expire: seconds the stored value lives (default: until evicted)
        :param tag: the stored value's tag
        :param namespace: the claims' namespace
        :param if_computing: ``'skip'`` returns :data:`~diskcache_oxide.COMPUTING` at once
            when another caller is computing the value, instead of waiting for it
        :param outcome: return ``(value, Outcome)``: whether the value was cached, computed
            by this call, or waited for (or skipped)
        :param pass_claim: call ``fn(*args, claim=..., **kwargs)`` with the
            :class:`~diskcache_oxide.Claim` it computes under
        """
        return get_or_compute(  # type: ignore[no-any-return, call-overload]
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


def stable_name(func: Callable[..., Any]) -> str:
    """The ``module.qualname`` compute-once keys a function by, the same in a process that
    runs its module as a script (``python -m package.module``) and in one that imports it.

    :raises ValueError: for a function of a script run by its path (``python script.py``),
        whose module name other processes cannot know: pass ``name=``
    """
    module = func.__module__
    if module == "__main__":
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        if spec is None or not getattr(spec, "name", None):
            raise ValueError(
                f"{func.__qualname__} is defined in a script run by its path, so its "
                "compute-once key would differ from the same function imported as a module "
                "(and both would pay); pass name='...' to compute_once, or run the script "
                "with python -m"
            )
        module = spec.name
    return f"{module}.{func.__qualname__}"


class ComputeOnce(Protocol, Generic[P, R]):
    """A function wrapped by :func:`compute_once`."""

    __wrapped__: Callable[P, R]

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...

    def __cache_key__(self, *args: P.args, **kwargs: P.kwargs) -> tuple[Any, ...]: ...


def compute_once(
    cache: Stored,
    *,
    lease: float = LEASE,
    timeout: float | None = None,
    expire: float | None = None,
    tag: str | int | float | bytes | None = None,
    name: str | None = None,
    typed: bool = False,
    ignore: Collection[int | str] = (),
    pass_claim: bool = False,
) -> Callable[[Callable[P, R]], ComputeOnce[P, R]]:
    """Decorator: like :meth:`Cache.memoize`, but each result is computed once across
    threads, loops and processes, through :func:`get_or_compute`.

    Keys are :meth:`Cache.memoize`'s, with the function named by :func:`stable_name`, so a
    worker that runs the module as ``python -m`` and a server that imports it share them;
    ``name=`` sets the name instead. With ``pass_claim=True`` the function is called with
    ``claim=`` the :class:`Claim` it computes under (not part of the key).
    """
    seconds = _lease(lease)

    def once(
        func: Callable[..., Any],
        key: tuple[Any, ...],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        return get_or_compute(
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
        Callable[[Callable[P, R]], ComputeOnce[P, R]],
        keyed(name, typed, ignore, once, stable_name),
    )
