"""The :class:`NullCache`: the whole :class:`~diskcache_oxide.Cache` API, storing nothing.

What a :class:`~diskcache_oxide.Caches` registry hands out when caching is switched off or a
cache could not be opened, so the app keeps running without its cache. Every read misses,
every write reports that nothing was stored (see docs/decisions/D-022-caches-registry.md).
The queue calls are here too, but the queue is always empty: never use a NullCache where
the items must be kept (docs/state-isnt-cache.md).
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any, Literal, ParamSpec, TypeVar, cast

from ._docs import mirror_docs
from .core import (
    DEFAULT_SETTINGS,
    ENOVAL,
    Cache,
    Memoized,
    args_to_key,
    full_name,
    shaped_miss,
)

__all__ = ["NullCache"]

P = ParamSpec("P")
R = TypeVar("R")
_N = TypeVar("_N", bound="NullCache")
_Tag = str | int | float | bytes | None
_Side = Literal["front", "back"]

_COUNTERS = ("count", "size", "hits", "misses")


def _wait(timeout: float | None) -> None:
    if timeout is not None and timeout > 0:
        time.sleep(timeout)


class NullCache:
    """A cache that stores nothing, with :class:`~diskcache_oxide.Cache`'s API.

    ``get``/``pop``/``pull``/``peek`` return their default, ``set``/``add``/``touch``/
    ``delete`` return False, ``push`` returns None, ``incr`` returns ``default + delta``
    without keeping it, the cache is always empty, ``transact()`` does nothing and a
    memoized function runs on every call. Nothing touches the disk.

    :param directory: only remembered (as :attr:`directory`); nothing is created there
    :param timeout: only remembered
    :param settings: only remembered, and read back as attributes (``size_limit``, ...)
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        timeout: float = 60,
        disk: object = None,
        **settings: Any,
    ) -> None:
        self._directory = None if directory is None else os.fspath(directory)
        self._timeout = float(timeout)
        self._settings: dict[str, Any] = {**DEFAULT_SETTINGS, **settings}

    @property
    def directory(self) -> str | None:
        return self._directory

    @property
    def timeout(self) -> float:
        return self._timeout

    @property
    def pickle(self) -> bool:
        return bool(self._settings.get("pickle", False))

    @property
    def on_decode_error(self) -> Literal["raise", "miss"]:
        return cast(Literal["raise", "miss"], self._settings.get("on_decode_error", "raise"))

    @property
    def read_only(self) -> bool:
        return bool(self._settings.get("read_only", False))

    @property
    def durable(self) -> bool:
        return bool(self._settings.get("durable", False))

    def __getattr__(self, name: str) -> Any:
        settings = self.__dict__.get("_settings", {})
        if name in DEFAULT_SETTINGS:
            return settings[name]
        raise AttributeError(
            f"{type(self).__name__!r} object has no attribute {name!r}", name=name, obj=self
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._directory!r})"

    # ------------------------------------------------------------------ single keys

    def set(
        self,
        key: Any,
        value: Any,
        expire: float | None = None,
        read: bool = False,
        tag: _Tag = None,
        retry: bool = False,
    ) -> bool:
        return False

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def add(
        self,
        key: Any,
        value: Any,
        expire: float | None = None,
        read: bool = False,
        tag: _Tag = None,
        retry: bool = False,
    ) -> bool:
        return False

    def touch(self, key: Any, expire: float | None = None, retry: bool = False) -> bool:
        return False

    def incr(self, key: Any, delta: Any = 1, default: Any = 0, retry: bool = False) -> Any:
        if default is None:
            raise KeyError(key)
        return default + delta

    def decr(self, key: Any, delta: Any = 1, default: Any = 0, retry: bool = False) -> Any:
        return self.incr(key, -delta, default, retry)

    def get(
        self,
        key: Any,
        default: Any = None,
        read: bool = False,
        expire_time: bool = False,
        tag: bool = False,
        retry: bool = False,
    ) -> Any:
        return shaped_miss(default, expire_time, tag)

    def __getitem__(self, key: Any) -> Any:
        raise KeyError(key)

    def read(self, key: Any, retry: bool = False) -> Any:
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return False

    def pop(
        self,
        key: Any,
        default: Any = None,
        expire_time: bool = False,
        tag: bool = False,
        retry: bool = False,
    ) -> Any:
        return shaped_miss(default, expire_time, tag)

    def __delitem__(self, key: Any) -> None:
        raise KeyError(key)

    def delete(self, key: Any, retry: bool = False) -> bool:
        return False

    def peekitem(
        self,
        last: bool = True,
        expire_time: bool = False,
        tag: bool = False,
        retry: bool = False,
    ) -> Any:
        raise KeyError("dictionary is empty")

    # ------------------------------------------------------------------ batches

    def get_many(self, keys: Iterable[Any], default: Any = None, retry: bool = False) -> list[Any]:
        return [default for _ in keys]

    def set_many(
        self,
        mapping: Mapping[Any, Any] | Iterable[tuple[Any, Any]],
        expire: float | None = None,
        tag: _Tag = None,
        retry: bool = False,
    ) -> None:
        pass

    def delete_many(self, keys: Iterable[Any], retry: bool = False) -> int:
        return 0

    # ------------------------------------------------------------------ whole cache

    def expire(self, now: float | None = None, retry: bool = False) -> int:
        return 0

    def evict(self, tag: _Tag, retry: bool = False) -> int:
        return 0

    def clear(self, retry: bool = False) -> int:
        return 0

    def cull(self, retry: bool = False) -> int:
        return 0

    def check(self, fix: bool = False, retry: bool = False) -> list[warnings.WarningMessage]:
        return []

    def stats(self, enable: bool = True, reset: bool = False) -> tuple[int, int]:
        return (0, 0)

    def volume(self) -> int:
        return 0

    def reset(self, key: str, value: Any = ENOVAL, update: bool = True) -> Any:
        if not isinstance(key, str):
            kind = type(key).__name__
            raise TypeError(f"reset(key=...) takes a setting's name as a str, not {kind}")
        if key in _COUNTERS:
            if value is not ENOVAL:
                raise ValueError(f"{key} is a counter; it cannot be set")
            return 0
        if key not in DEFAULT_SETTINGS:
            raise ValueError(f"unknown setting {key!r}")
        if value is ENOVAL:
            return self._settings[key]
        self._settings[key] = value
        return value

    def create_tag_index(self) -> None:
        pass

    def drop_tag_index(self) -> None:
        pass

    @contextlib.contextmanager
    def transact(self, retry: bool = False) -> Iterator[None]:
        yield

    def memoize(
        self,
        name: str | None = None,
        typed: bool = False,
        expire: float | None = None,
        tag: _Tag = None,
        ignore: Collection[int | str] = (),
    ) -> Callable[[Callable[P, R]], Memoized[P, R]]:
        if callable(name):
            raise TypeError("name cannot be callable")

        def decorator(func: Callable[P, R]) -> Memoized[P, R]:
            base = (full_name(func),) if name is None else (name,)

            def cache_key(*args: P.args, **kwargs: P.kwargs) -> tuple[Any, ...]:
                return args_to_key(base, args, kwargs, typed, ignore)

            @functools.wraps(func)
            def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
                return func(*args, **kwargs)

            wrapper.__cache_key__ = cache_key  # type: ignore[attr-defined]
            return cast(Memoized[P, R], wrapper)

        return decorator

    def __len__(self) -> int:
        return 0

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __reversed__(self) -> Iterator[Any]:
        return iter(())

    def iterkeys(self, reverse: bool = False, prefix: str | None = None) -> Iterator[Any]:
        return iter(())

    # ------------------------------------------------------------------ queue

    def push(
        self,
        value: Any,
        prefix: str | None = None,
        side: _Side = "back",
        expire: float | None = None,
        read: bool = False,
        tag: _Tag = None,
        retry: bool = False,
    ) -> Any:
        return None

    def push_many(
        self,
        values: Iterable[Any],
        prefix: str | None = None,
        side: _Side = "back",
        expire: float | None = None,
        tag: _Tag = None,
        retry: bool = False,
    ) -> list[Any]:
        return [None for _ in values]

    def pull(
        self,
        prefix: str | None = None,
        default: Any = (None, None),
        side: _Side = "front",
        expire_time: bool = False,
        tag: bool = False,
        retry: bool = False,
        timeout: float | None = None,
    ) -> Any:
        _wait(timeout)
        return shaped_miss(default, expire_time, tag)

    def pull_many(
        self,
        n: int,
        prefix: str | None = None,
        side: _Side = "front",
        expire_time: bool = False,
        tag: bool = False,
        retry: bool = False,
        timeout: float | None = None,
    ) -> list[Any]:
        _wait(timeout)
        return []

    def peek(
        self,
        prefix: str | None = None,
        default: Any = (None, None),
        side: _Side = "front",
        expire_time: bool = False,
        tag: bool = False,
        retry: bool = False,
    ) -> Any:
        return shaped_miss(default, expire_time, tag)

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        pass

    def __enter__(self: _N) -> _N:
        return self

    def __exit__(self, *exception: object) -> None:
        self.close()


#: What each call of a NullCache does instead of what `Cache`'s does: the one place its
#: behaviour is described; the rest of each docstring is the `Cache` method's.
_MISSES: dict[str, str] = {
    # the handle
    "directory": "the directory it was made with, if any (nothing is created there)",
    "timeout": "the ``timeout`` it was made with",
    "pickle": "the ``pickle`` setting it was made with (default False)",
    "on_decode_error": "the ``on_decode_error`` setting it was made with (default ``'raise'``)",
    "read_only": "the ``read_only`` setting it was made with (default False)",
    "durable": "the ``durable`` setting it was made with (default False)",
    # single keys
    "set": "returns False",
    "__setitem__": "the value is dropped",
    "add": "returns False",
    "touch": "returns False (there is no key to touch)",
    "incr": "returns ``default + delta``, as for an absent key, and keeps nothing "
    "(KeyError if ``default`` is None)",
    "decr": "returns ``default - delta``, as for an absent key, and keeps nothing "
    "(KeyError if ``default`` is None)",
    "get": "returns ``default`` (with ``expire_time``/``tag``, in a tuple with None for each)",
    "__getitem__": "raises KeyError",
    "read": "raises KeyError",
    "__contains__": "returns False",
    "pop": "returns ``default`` (with ``expire_time``/``tag``, in a tuple with None for each)",
    "__delitem__": "raises KeyError",
    "delete": "returns False",
    "peekitem": "raises KeyError, as on an empty cache",
    # batches
    "get_many": "returns ``default`` for every key",
    "set_many": "returns None, and no pair is kept",
    "delete_many": "returns 0",
    # the whole cache
    "expire": "returns 0",
    "evict": "returns 0",
    "clear": "returns 0",
    "cull": "returns 0",
    "check": "returns ``[]`` (no problems)",
    "stats": "returns ``(0, 0)``",
    "volume": "returns 0",
    "reset": "reads the setting (the counters read 0) or remembers the new value "
    "(ValueError for an unknown setting, or for setting a counter)",
    "create_tag_index": "does nothing",
    "drop_tag_index": "does nothing",
    "transact": "the block just runs, with nothing to lock",
    "memoize": "the decorated function runs on every call (its ``__cache_key__`` gives the "
    "keys `Cache.memoize` would use)",
    "__len__": "returns 0",
    "__iter__": "yields nothing",
    "__reversed__": "yields nothing",
    "iterkeys": "yields nothing",
    # the queue, always empty
    "push": "returns None, and the item is dropped",
    "push_many": "returns one None per value, and every item is dropped",
    "pull": "returns ``default`` (shaped by ``expire_time``/``tag``) after waiting "
    "``timeout`` seconds for an item that never comes, so a worker loop does not spin",
    "pull_many": "returns ``[]`` after waiting ``timeout`` seconds",
    "peek": "returns ``default`` (shaped by ``expire_time``/``tag``)",
    # lifetime
    "close": "does nothing",
}

mirror_docs(
    NullCache,
    Cache,
    _MISSES,
    lead=lambda name: f"Like `Cache.{name}`, but nothing is stored: {_MISSES[name]}.",
)
