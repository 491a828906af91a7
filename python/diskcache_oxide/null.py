"""The :class:`NullCache`: the whole :class:`~diskcache_oxide.Cache` API, storing nothing.

What a :class:`~diskcache_oxide.Caches` registry hands out when caching is switched off or a
cache could not be opened, so the app keeps running without its cache. Every read misses,
every write reports that nothing was stored (see docs/decisions/D-022-caches-registry.md).
The queue calls are here too, but the queue is always empty: never use a NullCache where
the items must be kept (docs/state-isnt-cache.md).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection, Iterator
from typing import Any, Literal, ParamSpec, TypeVar, cast

from ._api import CALLS, leads
from ._docs import mirror_docs
from ._faces.null import NullCacheCalls
from ._keying import Memoized, keyed
from ._sentinels import ENOVAL
from .core import DEFAULT_SETTINGS, Cache

__all__ = ["NullCache"]

P = ParamSpec("P")
R = TypeVar("R")
_N = TypeVar("_N", bound="NullCache")
_Tag = str | int | float | bytes | None

_COUNTERS = ("count", "size", "hits", "misses")


class NullCache(NullCacheCalls):
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

    # Every other member of Cache is generated from the API table (_api.CALLS) into
    # _faces/null.py (NullCacheCalls): Cache's signature, returning the call's NullCache miss.

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
        return cast(Callable[[Callable[P, R]], Memoized[P, R]], keyed(name, typed, ignore, None))

    def __enter__(self: _N) -> _N:
        return self

    def __exit__(self, *exception: object) -> None:
        self.close()


mirror_docs(
    NullCache,
    Cache,
    [call.name for call in CALLS if call.null.written],
    lead=leads(lambda call: f"Like `Cache.{call.name}`, but nothing is stored: {call.null.said}."),
)
