"""Claims with a TTL, and compute-once on top of them.

A *claim* marks a key as "someone is working on it" for a limited time. It lives in the
cache directory, so every thread, event loop and process that opens the directory sees it;
an in-process lock (``threading.Lock``, ``asyncio.Lock``) cannot do that. Each claim carries
a random owner token: only the holder of the token can release or extend it, and once its
TTL has passed anyone may take it, so a holder that crashed blocks the key for at most one
TTL. See docs/decisions/D-023-claims-and-compute-once.md and docs/guide-paying-once.md.

:func:`get_or_compute` (and the :func:`compute_once` decorator) use claims so that exactly
one caller computes a missing value while every other caller waits for the stored result.

The claim is an ordinary cache entry under the key ``(CLAIM_NAMESPACE, namespace, key)``:
it is taken with ``add(..., expire=ttl)`` (atomic: it succeeds only if no live entry
exists, and an expired one counts as absent), and released or extended inside
``transact()`` after checking the stored token.
"""

from __future__ import annotations

import functools
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Collection, Iterator
from types import TracebackType
from typing import Any, Generic, NamedTuple, ParamSpec, Protocol, TypeVar, cast

from .core import ENOVAL, Cache, args_to_key, full_name
from .errors import CacheError

__all__ = [
    "CLAIM_NAMESPACE",
    "Claim",
    "ClaimInfo",
    "ClaimTimeout",
    "Claims",
    "ComputeOnce",
    "compute_once",
    "get_or_compute",
]

P = ParamSpec("P")
R = TypeVar("R")

_log = logging.getLogger("diskcache_oxide")

#: The first element of every claim's cache key; user keys never collide with it unless
#: they are tuples starting with this exact string.
CLAIM_NAMESPACE = "diskcache_oxide.claim"

#: Polling: first pause, growth factor and longest pause, in seconds.
POLL_FIRST = 0.005
POLL_FACTOR = 1.5
POLL_MAX = 0.1


class ClaimTimeout(CacheError, TimeoutError):
    """A claim could not be taken, or a computed value did not appear, within ``wait``.

    Not to be confused with :class:`~diskcache_oxide.Timeout`, which means the database
    stayed locked.
    """


class ClaimInfo(NamedTuple):
    """Who holds a claim: the token, the holder's host and pid, when it was taken (epoch
    seconds) and when it expires unless extended (epoch seconds)."""

    token: str
    host: str
    pid: int
    acquired: float
    expires: float


def _ttl(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"ttl must be a number of seconds, not {type(value).__name__}")
    ttl = float(value)
    if not ttl > 0 or ttl == float("inf"):
        raise ValueError(f"ttl must be a finite number of seconds > 0, not {value!r}")
    return ttl


def _wait(value: object, name: str = "wait") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    wait = float(value)
    if not wait >= 0:
        raise ValueError(f"{name} must be a number of seconds >= 0, not {value!r}")
    return wait


def backoff(first: float = POLL_FIRST) -> Iterator[float]:
    """The pauses between polls: ``first``, growing by :data:`POLL_FACTOR` up to
    :data:`POLL_MAX`, with a little jitter so waiters do not poll in step."""
    delay = first
    while True:
        yield delay * (0.75 + 0.5 * secrets.randbelow(1000) / 1000)
        delay = min(delay * POLL_FACTOR, POLL_MAX)


class Claims:
    """Claims on keys of one cache directory.

    :param cache: the cache whose directory holds the claims
    :param namespace: keeps separate sets of claims on the same keys apart (default
        ``'default'``)

    ``acquire`` returns a :class:`Claim` or None; ``hold`` waits and raises
    :class:`ClaimTimeout`, and is meant for ``with``::

        claims = Claims(cache)
        with claims.hold("article:7", ttl=30, wait=5):
            ...  # nobody else holds the claim here (for up to 30 s)
    """

    def __init__(self, cache: Cache, namespace: str = "default") -> None:
        if not isinstance(cache, Cache):
            raise TypeError(f"cache must be a Cache, not {type(cache).__name__}")
        if not isinstance(namespace, str):
            raise TypeError(f"namespace must be a str, not {type(namespace).__name__}")
        self._cache = cache
        self._namespace = namespace

    @property
    def cache(self) -> Cache:
        """The cache whose directory holds the claims."""
        return self._cache

    @property
    def namespace(self) -> str:
        """The namespace these claims live in: claims on the same key in other namespaces
        are separate."""
        return self._namespace

    def __repr__(self) -> str:
        return f"Claims({self._cache.directory!r}, namespace={self._namespace!r})"

    def _key(self, key: Any) -> tuple[Any, ...]:
        return (CLAIM_NAMESPACE, self._namespace, key)

    def try_acquire(self, key: Any, ttl: float) -> Claim | None:
        """Take the claim on ``key`` for ``ttl`` seconds if nobody holds it (an expired
        claim counts as free); None if it is held. Never waits."""
        seconds = _ttl(ttl)
        token = secrets.token_hex(16)
        record = {
            "token": token,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "acquired": time.time(),
        }
        if self._cache.add(self._key(key), record, expire=seconds, retry=True):
            return Claim(self, key, token, seconds)
        return None

    def acquire(self, key: Any, ttl: float, *, wait: float = 0.0) -> Claim | None:
        """Take the claim on ``key`` for ``ttl`` seconds, polling for up to ``wait``
        seconds while someone else holds it; None if it could not be taken."""
        limit = _wait(wait)
        deadline = time.monotonic() + limit
        pauses = backoff()
        while True:
            claim = self.try_acquire(key, ttl)
            if claim is not None:
                return claim
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            time.sleep(min(next(pauses), remaining))

    def hold(self, key: Any, ttl: float, *, wait: float = 0.0) -> Claim:
        """Like :meth:`acquire`, but raises :class:`ClaimTimeout` instead of returning
        None; use the result in a ``with`` block to release it at the end."""
        claim = self.acquire(key, ttl, wait=wait)
        if claim is None:
            raise ClaimTimeout(f"the claim on {key!r} is held by another owner (waited {wait} s)")
        return claim

    def holder(self, key: Any) -> ClaimInfo | None:
        """Who holds the claim on ``key``; None if nobody does (or it expired)."""
        found = self._cache.get(self._key(key), default=ENOVAL, expire_time=True, retry=True)
        record, expires = found
        if record is ENOVAL or not isinstance(record, dict):
            return None
        return ClaimInfo(
            record["token"],
            record["host"],
            record["pid"],
            record["acquired"],
            float("inf") if expires is None else expires,
        )

    def release(self, key: Any, token: str) -> bool:
        """Release the claim on ``key`` if ``token`` owns it; False if it does not (never
        did, already released, or the claim expired and may have been taken by another)."""
        ckey = self._key(key)
        with self._cache.transact(retry=True):
            if not self._owned(ckey, token):
                return False
            return self._cache.delete(ckey, retry=True)

    def extend(self, key: Any, token: str, ttl: float) -> bool:
        """Make the claim on ``key`` expire ``ttl`` seconds from now if ``token`` owns it
        and it has not expired; False otherwise."""
        seconds = _ttl(ttl)
        ckey = self._key(key)
        with self._cache.transact(retry=True):
            if not self._owned(ckey, token):
                return False
            return self._cache.touch(ckey, expire=seconds, retry=True)

    def owns(self, key: Any, token: str) -> bool:
        """True if ``token`` holds the live claim on ``key``."""
        return self._owned(self._key(key), token)

    def _owned(self, ckey: tuple[Any, ...], token: str) -> bool:
        record = self._cache.get(ckey, default=None, retry=True)
        return isinstance(record, dict) and record.get("token") == token

    def break_claim(self, key: Any) -> bool:
        """Delete the claim on ``key`` whoever holds it (an operator's tool); False if there
        was none."""
        return self._cache.delete(self._key(key), retry=True)


class Claim:
    """A claim this caller holds, returned by :meth:`Claims.acquire`.

    ``token`` identifies the owner: :meth:`Claims.release` and :meth:`Claims.extend` with
    it work from any process. As a context manager the claim is released on exit.
    """

    __slots__ = {
        "_claims": None,
        "key": "The key claimed.",
        "token": "The random token that identifies the owner.",
        "ttl": "The TTL the claim was taken with, in seconds (what :meth:`extend` renews).",
    }

    def __init__(self, claims: Claims, key: Any, token: str, ttl: float) -> None:
        self._claims = claims
        self.key = key
        self.token = token
        self.ttl = ttl

    @property
    def claims(self) -> Claims:
        """The :class:`Claims` it was taken from (its cache directory and namespace)."""
        return self._claims

    def __repr__(self) -> str:
        return f"Claim(key={self.key!r}, token={self.token!r}, ttl={self.ttl!r})"

    def release(self) -> bool:
        """Release it; False if it was no longer ours (expired or already released)."""
        return self._claims.release(self.key, self.token)

    def extend(self, ttl: float | None = None) -> bool:
        """Heartbeat: the claim now expires ``ttl`` seconds from now (default: the TTL it
        was taken with). False if it was no longer ours."""
        return self._claims.extend(self.key, self.token, self.ttl if ttl is None else ttl)

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
            _log.warning("claim on %r was lost before its release (TTL passed?)", self.key)


# ---- compute-once ---------------------------------------------------------------------------


def _release_after_turn(claim: Claim) -> None:
    if not claim.release():
        _log.warning(
            "claim on %r expired while its value was computed; another caller may have "
            "computed it too (use a longer ttl)",
            claim.key,
        )


def get_or_compute(
    cache: Cache,
    key: Any,
    fn: Callable[[], R],
    *,
    ttl: float = 60.0,
    wait: float | None = None,
    expire: float | None = None,
    tag: str | int | float | bytes | None = None,
    namespace: str = "default",
) -> R:
    """The value of ``key``, computed by ``fn()`` once across threads, loops and processes.

    If ``key`` is cached, its value is returned. Otherwise one caller takes the claim on
    ``key`` (for ``ttl`` seconds), calls ``fn``, stores the result (with ``expire`` and
    ``tag``) and releases the claim; every other caller polls, with backoff, until the value
    appears, and returns it. If the computing caller dies, its claim expires after ``ttl``
    and a waiter takes over; if ``fn`` raises, the claim is released and the error raised
    in that caller, and the waiters try the claim again at their next poll.

    :param ttl: seconds the claim lasts: longer than ``fn`` ever takes, short enough that a
        crashed caller does not block the key for long
    :param wait: seconds a waiter waits in all (default: ``ttl`` plus the time for one more
        computation, i.e. ``2 * ttl``)
    :raises ClaimTimeout: if ``wait`` passed without a value
    """
    seconds = _ttl(ttl)
    limit = 2 * seconds if wait is None else _wait(wait)
    claims = Claims(cache, namespace)
    deadline = time.monotonic() + limit
    pauses = backoff()
    while True:
        value = cache.get(key, default=ENOVAL, retry=True)
        if value is not ENOVAL:
            return cast(R, value)
        claim = claims.try_acquire(key, seconds)
        if claim is not None:
            try:
                # The previous holder may have stored the value and released between our
                # get and our add.
                value = cache.get(key, default=ENOVAL, retry=True)
                if value is not ENOVAL:
                    return cast(R, value)
                result = fn()
                cache.set(key, result, expire=expire, tag=tag, retry=True)
                return result
            finally:
                _release_after_turn(claim)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ClaimTimeout(f"no value for {key!r} appeared within {limit} s")
        time.sleep(min(next(pauses), remaining))


class ComputeOnce(Protocol, Generic[P, R]):
    """A function wrapped by :func:`compute_once`."""

    __wrapped__: Callable[P, R]

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...

    def __cache_key__(self, *args: P.args, **kwargs: P.kwargs) -> tuple[Any, ...]: ...


def compute_once(
    cache: Cache,
    *,
    ttl: float = 60.0,
    wait: float | None = None,
    expire: float | None = None,
    tag: str | int | float | bytes | None = None,
    name: str | None = None,
    typed: bool = False,
    ignore: Collection[int | str] = (),
) -> Callable[[Callable[P, R]], ComputeOnce[P, R]]:
    """Decorator: like :meth:`Cache.memoize` (same keys), but each result is computed once
    across threads, loops and processes, through :func:`get_or_compute`."""
    seconds = _ttl(ttl)

    def decorator(func: Callable[P, R]) -> ComputeOnce[P, R]:
        base = (full_name(func),) if name is None else (name,)

        def cache_key(*args: P.args, **kwargs: P.kwargs) -> tuple[Any, ...]:
            return args_to_key(base, args, kwargs, typed, ignore)

        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            return get_or_compute(
                cache,
                cache_key(*args, **kwargs),
                lambda: func(*args, **kwargs),
                ttl=seconds,
                wait=wait,
                expire=expire,
                tag=tag,
            )

        wrapper.__cache_key__ = cache_key  # type: ignore[attr-defined]
        return cast(ComputeOnce[P, R], wrapper)

    return decorator
