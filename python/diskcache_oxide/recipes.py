"""Recipes over a cache: python-diskcache 5.6.3's ``Averager``, ``Lock``, ``RLock``,
``BoundedSemaphore``, ``throttle``, ``barrier`` and ``memoize_stampede``.

The locks go further than python-diskcache's (see
docs/decisions/D-025-locks-with-timeouts-and-owners.md):

- ``acquire(blocking=True, timeout=-1)`` behaves as in :mod:`threading` and returns
  whether the lock was taken;
- ``release()`` checks the owner: releasing a lock this thread does not hold raises
  :class:`RuntimeError`;
- a held lock expires ``expire`` seconds (default :data:`LOCK_EXPIRE`) after it was last
  acquired or extended, so a holder that died cannot block the others forever.

Every recipe works on a :class:`~diskcache_oxide.Cache` or a
:class:`~diskcache_oxide.FanoutCache`, visible to every process and thread that opens
the same directory. Their keys must not be evicted: use ``eviction_policy='none'``.
"""

from __future__ import annotations

import functools
import math
import os
import threading
import time
from collections.abc import Callable, Collection
from typing import Any, ParamSpec, TypeVar, cast

from ._keying import Memoized, full_name, keyed, off_the_loop
from ._seconds import Rule, seconds
from ._sentinels import ENOVAL
from .core import Cache
from .fanout import FanoutCache

__all__ = [
    "LOCK_EXPIRE",
    "Averager",
    "BoundedSemaphore",
    "Lock",
    "RLock",
    "barrier",
    "memoize_stampede",
    "throttle",
]

P = ParamSpec("P")
R = TypeVar("R")

_Cache = Cache | FanoutCache
_Tag = str | int | float | bytes | None

#: Seconds a held lock lasts after it was last acquired or extended, unless the lock is
#: made with another ``expire`` (None: never expires, as in python-diskcache).
LOCK_EXPIRE = 60.0

#: Waits between attempts to take a busy lock start here and double up to the cap.
_FIRST_WAIT = 0.001
_MAX_WAIT = 0.02

# The process part of an owner token, one per process id: a forked child gets its own.
_PROCESS_TOKENS: dict[int, str] = {}


def _owner() -> str:
    """Who is calling: this host, process and thread, as a string stored in the lock."""
    pid = os.getpid()
    token = _PROCESS_TOKENS.get(pid)
    if token is None:
        # setdefault is atomic: two threads racing here agree on one token. The host name and
        # random part as socket.gethostname() and secrets.token_hex(4) give them, without
        # importing either module with the package (import time, issue 33).
        fresh = f"{os.uname().nodename}:{pid}:{os.urandom(4).hex()}"
        token = _PROCESS_TOKENS.setdefault(pid, fresh)
    return f"{token}:{threading.get_ident()}"


def _deadline(blocking: bool, timeout: float | None) -> float | None:
    """When to give up, on the monotonic clock (None: never), checking the arguments as
    :meth:`threading.Lock.acquire` does."""
    if timeout is None or timeout == -1:
        return None
    if not blocking:
        raise ValueError("can't specify a timeout for a non-blocking call")
    if timeout < 0:
        raise ValueError(f"timeout must be a non-negative number or -1, not {timeout!r}")
    return time.monotonic() + timeout


def _spin(attempt: Callable[[], bool], blocking: bool, timeout: float | None) -> bool:
    """Call ``attempt`` until it returns True, waiting between tries with backoff; False
    once ``timeout`` has passed (or at once, when not ``blocking``)."""
    deadline = _deadline(blocking, timeout)
    wait = _FIRST_WAIT
    while True:
        if attempt():
            return True
        if not blocking:
            return False
        pause = wait * (0.5 + _random() / 2)
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            pause = min(pause, remaining)
        time.sleep(pause)
        wait = min(wait * 2, _MAX_WAIT)


#: A lock's ``expire=``: None or a number > 0; a value that is not a number is a ValueError too.
_EXPIRE = Rule("> 0", False, none=True, wrong_type=ValueError)


def _check_expire(expire: float | None) -> float | None:
    return seconds(expire, "expire", _EXPIRE)


def _not_held(kind: str, key: Any, holder: Any, expire: float | None) -> RuntimeError:
    if holder is ENOVAL:
        why = "it is not held"
        if expire is not None:
            why += f" (never acquired, already released, or it expired after {expire:g} s)"
        else:
            why += " (never acquired or already released)"
    else:
        why = f"it is held by another owner ({holder})"
    return RuntimeError(f"cannot release {kind} {key!r}: {why}")


# ----------------------------------------------------------------------------- Averager


class Averager:
    """A running average kept under ``key``: ``add`` values, ``get`` the mean.

    The total and the count are stored together, so any process can add to them.
    """

    def __init__(
        self, cache: _Cache, key: Any, expire: float | None = None, tag: _Tag = None
    ) -> None:
        self._cache = cache
        self._key = key
        self._expire = expire
        self._tag = tag

    def add(self, value: float) -> None:
        """Add ``value`` to the average."""
        with self._cache.transact(retry=True):
            total, count = self._cache.get(self._key, default=(0.0, 0))
            self._cache.set(
                self._key, (total + value, count + 1), expire=self._expire, tag=self._tag
            )

    def get(self) -> float | None:
        """The average, or None when nothing was added."""
        total, count = self._cache.get(self._key, default=(0.0, 0), retry=True)
        return None if count == 0 else float(total / count)

    def pop(self) -> float | None:
        """The average (None when nothing was added); the key is removed."""
        total, count = self._cache.pop(self._key, default=(0.0, 0), retry=True)
        return None if count == 0 else float(total / count)


# ----------------------------------------------------------------------------- locks


class Lock:
    """A lock shared by every process and thread using ``key`` in the cache.

    :param expire: seconds the lock stays held after it was acquired (or extended)
        before anyone may take it, so a holder that died frees it (default
        :data:`LOCK_EXPIRE`; None: held until released, as in python-diskcache)
    :param tag: tag stored with the lock's entry

    The owner is the thread that acquired it (in this process, on this host); only it
    may release it. Not re-entrant: see :class:`RLock`.
    """

    def __init__(
        self, cache: _Cache, key: Any, expire: float | None = LOCK_EXPIRE, tag: _Tag = None
    ) -> None:
        self._cache = cache
        self._key = key
        self._expire = _check_expire(expire)
        self._tag = tag

    def _try(self) -> bool:
        return self._cache.add(self._key, _owner(), expire=self._expire, tag=self._tag, retry=True)

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take the lock, waiting while another owner holds it.

        :param blocking: False: do not wait, return at once
        :param timeout: the most seconds to wait (-1 or None: as long as it takes)
        :return: whether the lock was taken
        :raises ValueError: for a timeout with ``blocking=False``, or a negative one
        """
        return _spin(self._try, blocking, timeout)

    def release(self) -> None:
        """Release the lock.

        :raises RuntimeError: if this thread does not hold it (never acquired, released,
            expired, or taken by another owner after it expired)
        """
        cache, key = self._cache, self._key
        with cache.transact(retry=True):
            holder = cache.get(key, default=ENOVAL)
            if holder != _owner():
                raise _not_held("lock", key, holder, self._expire)
            cache.delete(key)

    def extend(self, expire: float | None = None) -> bool:
        """Restart the expiry clock of a lock this thread holds: held for ``expire`` more
        seconds (default: the lock's own ``expire``).

        :return: False if this thread does not hold the lock (it may have expired)
        """
        cache, key = self._cache, self._key
        ttl = self._expire if expire is None else _check_expire(expire)
        with cache.transact(retry=True):
            if cache.get(key, default=ENOVAL) != _owner():
                return False
            return cache.touch(key, ttl)

    def locked(self) -> bool:
        """Whether anyone holds the lock."""
        return self._key in self._cache

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


class RLock:
    """A re-entrant lock shared by every process and thread using ``key`` in the cache.

    The owning thread may acquire it again; it is free once released as many times.
    ``expire`` and ``tag`` as for :class:`Lock`; each acquire restarts the expiry clock.
    """

    def __init__(
        self, cache: _Cache, key: Any, expire: float | None = LOCK_EXPIRE, tag: _Tag = None
    ) -> None:
        self._cache = cache
        self._key = key
        self._expire = _check_expire(expire)
        self._tag = tag

    def _try(self) -> bool:
        cache, me = self._cache, _owner()
        with cache.transact(retry=True):
            holder, count = cache.get(self._key, default=(None, 0))
            if count > 0 and holder != me:
                return False
            cache.set(self._key, (me, count + 1), expire=self._expire, tag=self._tag)
            return True

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take the lock (again, if this thread holds it); see :meth:`Lock.acquire`."""
        return _spin(self._try, blocking, timeout)

    def release(self) -> None:
        """Release the lock once.

        :raises RuntimeError: if this thread does not hold it
        """
        cache, key = self._cache, self._key
        with cache.transact(retry=True):
            holder, count = cache.get(key, default=(ENOVAL, 0))
            if holder != _owner() or count <= 0:
                raise _not_held("lock", key, holder, self._expire)
            if count == 1:
                cache.delete(key)
            else:
                cache.set(key, (holder, count - 1), expire=self._expire, tag=self._tag)

    def extend(self, expire: float | None = None) -> bool:
        """Restart the expiry clock of a lock this thread holds; see :meth:`Lock.extend`."""
        cache, key = self._cache, self._key
        ttl = self._expire if expire is None else _check_expire(expire)
        with cache.transact(retry=True):
            holder, _ = cache.get(key, default=(None, 0))
            if holder != _owner():
                return False
            return cache.touch(key, ttl)

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


class BoundedSemaphore:
    """A semaphore of ``value`` slots shared by every process and thread using ``key``.

    Each slot taken records its owner (the thread) and its own expiry time, so one
    holder that died frees only its own slot, ``expire`` seconds after taking it.
    ``expire`` and ``tag`` as for :class:`Lock`.
    """

    def __init__(
        self,
        cache: _Cache,
        key: Any,
        value: int = 1,
        expire: float | None = LOCK_EXPIRE,
        tag: _Tag = None,
    ) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"value must be a positive int, not {value!r}")
        self._cache = cache
        self._key = key
        self._value = value
        self._expire = _check_expire(expire)
        self._tag = tag

    def _holders(self, now: float) -> list[list[Any]]:
        """The slots taken and not yet expired, as ``[owner, deadline or None]``."""
        taken = self._cache.get(self._key, default=[])
        return [slot for slot in taken if slot[1] is None or slot[1] > now]

    def _store(self, holders: list[list[Any]], now: float) -> None:
        if not holders:
            self._cache.delete(self._key)
            return
        deadlines = [deadline for _, deadline in holders]
        expire = None if None in deadlines else max(deadlines) - now
        self._cache.set(self._key, holders, expire=expire, tag=self._tag)

    def _try(self) -> bool:
        with self._cache.transact(retry=True):
            now = time.time()
            holders = self._holders(now)
            if len(holders) >= self._value:
                return False
            deadline = None if self._expire is None else now + self._expire
            holders.append([_owner(), deadline])
            self._store(holders, now)
            return True

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take a slot, waiting while all are taken; see :meth:`Lock.acquire`."""
        return _spin(self._try, blocking, timeout)

    def release(self) -> None:
        """Give back a slot this thread took.

        :raises RuntimeError: if this thread holds no slot
        """
        me = _owner()
        with self._cache.transact(retry=True):
            now = time.time()
            holders = self._holders(now)
            for position, (owner, _) in enumerate(holders):
                if owner == me:
                    del holders[position]
                    self._store(holders, now)
                    return
            raise _not_held("semaphore", self._key, ENOVAL, self._expire)

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


# ----------------------------------------------------------------------------- decorators


def throttle(
    cache: _Cache,
    count: int,
    seconds: float,
    name: str | None = None,
    expire: float | None = None,
    tag: _Tag = None,
    time_func: Callable[[], float] = time.time,
    sleep_func: Callable[[float], object] = time.sleep,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator letting at most ``count`` calls per ``seconds`` through, across every
    process using the cache; a call over the rate sleeps until it may run.

    A token bucket under ``name`` (default: the function's ``module.qualname``), refilled
    at ``count / seconds`` per second and full when decorated.
    """
    rate = count / float(seconds)

    def decorator(func: Callable[P, R]) -> Callable[P, R]:
        key = full_name(func) if name is None else name
        cache.set(key, (time_func(), count), expire=expire, tag=tag, retry=True)

        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            while True:
                with cache.transact(retry=True):
                    now = time_func()
                    last, tally = cache.get(key, default=(now, count))
                    tally += (now - last) * rate
                    delay = 0.0
                    if tally > count:
                        cache.set(key, (now, count - 1), expire=expire, tag=tag)
                    elif tally >= 1:
                        cache.set(key, (now, tally - 1), expire=expire, tag=tag)
                    else:
                        delay = (1 - tally) / rate
                if not delay:
                    return func(*args, **kwargs)
                sleep_func(delay)

        return wrapper

    return decorator


def barrier(
    cache: _Cache,
    lock_factory: Callable[..., Any],
    name: str | None = None,
    expire: float | None = LOCK_EXPIRE,
    tag: _Tag = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator running the function under a lock: ``lock_factory(cache, key,
    expire=expire, tag=tag)``, for example :class:`Lock`, :class:`RLock` or
    :class:`BoundedSemaphore`, keyed by ``name`` (default: the function's
    ``module.qualname``)."""

    def decorator(func: Callable[P, R]) -> Callable[P, R]:
        key = full_name(func) if name is None else name
        lock = lock_factory(cache, key, expire=expire, tag=tag)

        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            with lock:
                return func(*args, **kwargs)

        return wrapper

    return decorator


#: The first item of the key that marks a recomputation in progress. Every key
#: ``memoize_stampede`` makes for a call holds at least ``(name, None)``, so the
#: two-item ``(_RECOMPUTING, call_key)`` can never be a call's key.
_RECOMPUTING = "diskcache_oxide.memoize_stampede:recomputing"


def memoize_stampede(
    cache: _Cache,
    expire: float,
    name: str | None = None,
    typed: bool = False,
    tag: _Tag = None,
    beta: float = 1,
    ignore: Collection[int | str] = (),
) -> Callable[[Callable[P, R]], Memoized[P, R]]:
    """Decorator caching a function's results, recomputing them early to avoid stampedes.

    As a result nears its expiry, a call decides at random, more likely the nearer it is
    and the longer the function took, to recompute it in a background thread while every
    caller keeps getting the cached result (Vattani, Chierichetti and Lowenstein, "Optimal
    Probabilistic Cache Stampede Prevention", VLDB 2015). ``beta`` above 1 recomputes
    earlier. Keys and parameters as :meth:`Cache.memoize`. On a coroutine function the
    wrapper is one too: the cache's calls run in a worker thread, and an early recomputation
    is a task on the caller's event loop.

    :raises TypeError: if used without parentheses
    """
    if callable(name):
        raise TypeError("name cannot be callable")

    def early_now(expire_time: float | None, delta: float) -> bool:
        """Whether this call recomputes a result that took ``delta`` seconds and expires at
        ``expire_time`` (None: never), more likely the nearer the expiry and the larger
        ``delta`` and ``beta``."""
        if expire_time is None:
            return False
        ttl = expire_time - time.time()
        return -delta * beta * math.log(_random()) >= ttl

    def timed(
        func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Any, float]:
        start = time.time()
        result = func(*args, **kwargs)
        return result, time.time() - start

    def early(
        func: Callable[..., Any],
        key: tuple[Any, ...],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        pair, expire_time = cache.get(key, default=ENOVAL, expire_time=True, retry=True)
        if pair is ENOVAL:
            result, delta = timed(func, args, kwargs)
            cache.set(key, (result, delta), expire=expire, tag=tag, retry=True)
            return result
        result, delta = pair
        if not early_now(expire_time, delta):
            return result
        # Recompute early, once: the first caller to add the marker starts the thread.
        if cache.add((_RECOMPUTING, key), None, expire=max(delta, 0.001), retry=True):

            def recompute() -> None:
                fresh = timed(func, args, kwargs)
                cache.set(key, fresh, expire=expire, tag=tag, retry=True)

            threading.Thread(target=recompute, daemon=True).start()
        return result

    async def atimed(
        func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Any, float]:
        start = time.time()
        result = await func(*args, **kwargs)
        return result, time.time() - start

    async def aearly(
        func: Callable[..., Any],
        key: tuple[Any, ...],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        got = await off_the_loop(cache.get, key, default=ENOVAL, expire_time=True, retry=True)
        pair, expire_time = got
        if pair is ENOVAL:
            result, delta = await atimed(func, args, kwargs)
            await off_the_loop(cache.set, key, (result, delta), expire=expire, tag=tag, retry=True)
            return result
        result, delta = pair
        if not early_now(expire_time, delta):
            return result
        marker = (_RECOMPUTING, key)
        if await off_the_loop(cache.add, marker, None, expire=max(delta, 0.001), retry=True):

            async def recompute() -> None:
                fresh = await atimed(func, args, kwargs)
                await off_the_loop(cache.set, key, fresh, expire=expire, tag=tag, retry=True)

            import asyncio  # here, so that importing the package does not import asyncio

            # The loop keeps only a weak reference to a task: hold it until it is done.
            task = asyncio.get_running_loop().create_task(recompute())
            _RECOMPUTATIONS.add(task)
            task.add_done_callback(_RECOMPUTATIONS.discard)
        return result

    decorator = keyed(name, typed, ignore, early, acall=aearly)
    return cast(Callable[[Callable[P, R]], Memoized[P, R]], decorator)


#: The early recomputations of async functions still running (see ``aearly``).
_RECOMPUTATIONS: set[Any] = set()


def _random() -> float:
    """A float in [0, 1) from :mod:`random`, imported on first use rather than with the
    package (issue 33)."""
    import random

    return random.random()
