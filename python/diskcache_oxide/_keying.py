"""Keying calls: the ground floor's decorator that every memoizing and compute-once call is
built on (issue 31).

:func:`args_to_key` lays a call's arguments out as python-diskcache does, :func:`keyed` is the
body of every keyed decorator (``memoize``, ``NullCache.memoize``, ``compute_once``,
``acompute_once``) and :func:`memoize_on` is ``memoize`` over anything with python-diskcache's
``get``/``set``, whichever backend it is. It imports only the ground floor
(:mod:`._sentinels`, :mod:`._seconds`); ``diskcache_oxide.core`` still exports
``args_to_key`` and ``full_name``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from typing import Any, Generic, ParamSpec, Protocol, TypeVar, cast

from ._seconds import Rule, seconds
from ._sentinels import ENOVAL

__all__ = ["Memoized", "args_to_key", "full_name", "keyed", "memoize_on"]

P = ParamSpec("P")
R = TypeVar("R")

#: ``memoize(expire=)``: None or any number (0 or less: results are only looked up).
_EXPIRE = Rule(None, False, none=True)


def full_name(func: Callable[..., Any]) -> str:
    """The ``module.qualname`` of ``func``."""
    return f"{func.__module__}.{func.__qualname__}"


def _type_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def args_to_key(
    base: tuple[Any, ...],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    typed: bool,
    ignore: Collection[int | str],
) -> tuple[Any, ...]:
    """The cache key of one call, laid out as python-diskcache lays it out.

    ``base + args + (None,) + sorted keyword items``, minus the ignored positions and
    names; with ``typed``, followed by the argument types. Types are written as their
    ``'module.qualname'`` strings, since the safe format does not store type objects.
    """
    kept = tuple(arg for index, arg in enumerate(args) if index not in ignore)
    key: tuple[Any, ...] = base + kept + (None,)
    items: list[tuple[str, Any]] = []
    if kwargs:
        items = sorted((name, value) for name, value in kwargs.items() if name not in ignore)
        for item in items:
            key += item
    if typed:
        key += tuple(_type_name(type(arg)) for arg in kept)
        if kwargs:
            key += tuple(_type_name(type(value)) for _, value in items)
    return key


class Memoized(Protocol, Generic[P, R]):
    """A function wrapped by :meth:`Cache.memoize`."""

    __wrapped__: Callable[P, R]

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...

    def __cache_key__(self, *args: P.args, **kwargs: P.kwargs) -> tuple[Any, ...]: ...


_Call = Callable[[Callable[..., Any], tuple[Any, ...], tuple[Any, ...], dict[str, Any]], Any]


def keyed(
    name: str | None,
    typed: bool,
    ignore: Collection[int | str],
    call: _Call | None,
    namer: Callable[[Callable[..., Any]], str] = full_name,
    acall: _Call | None = None,
) -> Callable[[Callable[..., Any]], Any]:
    """The body of every keyed decorator (``memoize``, ``NullCache.memoize``,
    ``compute_once``, ``acompute_once``): a decorator whose wrapper keys each call as
    :func:`args_to_key` does, under ``name`` (default: ``namer(func)``), and returns
    ``call(func, key, args, kwargs)``: awaited if ``call`` is a coroutine function, so the
    wrapper is one too. Where ``func`` is a coroutine function and ``acall`` is given (the
    decorators that store results), the wrapper is a coroutine function awaiting
    ``acall(func, key, args, kwargs)`` instead, which awaits ``func``. With ``call=None`` the
    wrapper only calls ``func`` (a cache that stores nothing), as a coroutine function when
    ``func`` is one. The wrapper has ``__cache_key__(*args, **kwargs)`` and ``func``'s name
    and docstring (``functools.wraps``)."""

    def decorator(func: Callable[..., Any]) -> Any:
        base = (namer(func),) if name is None else (name,)

        def cache_key(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
            return args_to_key(base, args, kwargs, typed, ignore)

        wrapper: Callable[..., Any]
        if call is None and is_coroutine_function(func):

            async def wrapper(*args: Any, **kwargs: Any) -> Any:
                return await func(*args, **kwargs)

        elif call is None:

            def wrapper(*args: Any, **kwargs: Any) -> Any:
                return func(*args, **kwargs)

        elif acall is not None and is_coroutine_function(func):
            store = acall

            async def wrapper(*args: Any, **kwargs: Any) -> Any:
                return await store(
                    func, args_to_key(base, args, kwargs, typed, ignore), args, kwargs
                )

        elif is_coroutine_function(call):

            async def wrapper(*args: Any, **kwargs: Any) -> Any:
                return await call(
                    func, args_to_key(base, args, kwargs, typed, ignore), args, kwargs
                )

        else:

            def wrapper(*args: Any, **kwargs: Any) -> Any:
                return call(func, args_to_key(base, args, kwargs, typed, ignore), args, kwargs)

        functools.update_wrapper(wrapper, func)
        wrapper.__cache_key__ = cache_key  # type: ignore[union-attr]
        return wrapper

    return decorator


def memoize_on(
    cache: Any,
    name: str | None,
    typed: bool,
    expire: float | None,
    tag: str | int | float | bytes | None,
    ignore: Collection[int | str],
) -> Callable[[Callable[P, R]], Memoized[P, R]]:
    """The memoizing decorator of :meth:`Cache.memoize`, over anything with python-diskcache's
    ``get``/``set`` (a Cache, a FanoutCache, a RedisCache). On a coroutine function the
    wrapper is one too: it awaits the function and runs the cache's calls in a worker thread
    (:func:`off_the_loop`), so the event loop never waits on disk or network."""
    if callable(name):
        raise TypeError("name cannot be callable")
    seconds(expire, "expire", _EXPIRE)

    def memoized(
        func: Callable[..., Any],
        key: tuple[Any, ...],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        result = cache.get(key, default=ENOVAL, retry=True)
        if result is ENOVAL:
            result = func(*args, **kwargs)
            if expire is None or expire > 0:
                cache.set(key, result, expire, tag=tag, retry=True)
        return result

    async def amemoized(
        func: Callable[..., Any],
        key: tuple[Any, ...],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        result = await off_the_loop(cache.get, key, default=ENOVAL, retry=True)
        if result is ENOVAL:
            result = await func(*args, **kwargs)
            if expire is None or expire > 0:
                await off_the_loop(cache.set, key, result, expire, tag=tag, retry=True)
        return result

    decorator = keyed(name, typed, ignore, memoized, acall=amemoized)
    return cast(Callable[[Callable[P, R]], Memoized[P, R]], decorator)


async def off_the_loop(call: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)`` in the event loop's default executor, with the caller's
    context variables (``asyncio.to_thread``): how an async memoized function reaches its
    cache. asyncio is imported here, on first use, so that importing the package does not
    import it."""
    import asyncio

    return await asyncio.to_thread(call, *args, **kwargs)


def is_coroutine_function(func: object) -> bool:
    """Whether ``func`` is an ``async def`` (what :func:`inspect.iscoroutinefunction` says).

    :mod:`inspect` is imported here, when a function is decorated, not with the package: it
    brings :mod:`ast`, :mod:`dis` and :mod:`tokenize`, a tenth of the package's import time
    (issue 33)."""
    import inspect

    return inspect.iscoroutinefunction(func)
