"""The :class:`Caches` registry: an app's named caches, configured in one place.

Configured as Django's ``CACHES`` is: a mapping of names to a directory and settings. Each
cache opens on first use. A registry switched off (``enabled=False``, or the environment
variable ``DISKCACHE_OXIDE_DISABLED``) hands out :class:`~diskcache_oxide.NullCache`; so
does one whose cache cannot be opened, after logging why, once. A queue is state, not
cache, so the registry refuses ``eviction_policy='none'`` (docs/state-isnt-cache.md,
docs/decisions/D-022-caches-registry.md).

This is not :mod:`diskcache_oxide.registry`, which registers custom value types.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from typing import Any, TypeAlias

from ._log import log
from .core import Cache
from .errors import CacheError
from .fanout import FanoutCache
from .null import NullCache

__all__ = ["ENV_VAR", "AnyCache", "Caches"]

#: Set to anything but ``''``, ``0``, ``false``, ``no`` or ``off`` to switch every
#: :class:`Caches` registry created afterwards off.
ENV_VAR = "DISKCACHE_OXIDE_DISABLED"

#: What a registry hands out.
AnyCache: TypeAlias = Cache | FanoutCache | NullCache

_ENTRY_KEYS = frozenset({"directory", "timeout", "settings", "fanout"})
_FALSE = frozenset({"", "0", "false", "no", "off"})

STATE_ISNT_CACHE = (
    "cache {name!r} has eviction_policy='none': that is state (a queue or job store), not "
    "cache. A registry hands out a NullCache, which stores nothing, when caching is switched "
    "off or a cache cannot be opened, so state must not be opened through it: open it "
    "directly with Cache(directory, eviction_policy='none'). See docs/state-isnt-cache.md"
)


def disabled_by_env() -> bool:
    """Whether :data:`ENV_VAR` switches caching off."""
    return os.environ.get(ENV_VAR, "").strip().lower() not in _FALSE


class _Entry:
    """One validated configuration entry."""

    __slots__ = ("directory", "timeout", "settings", "shards")

    def __init__(self, name: str, config: Mapping[str, Any]) -> None:
        if not isinstance(config, Mapping):
            raise TypeError(f"cache {name!r}: its configuration must be a mapping")
        unknown = sorted(set(config) - _ENTRY_KEYS)
        if unknown:
            raise ValueError(
                f"cache {name!r}: unknown configuration keys {unknown}; "
                f"expected some of {sorted(_ENTRY_KEYS)}"
            )
        directory = config.get("directory")
        self.directory: str | None = None if directory is None else os.fspath(directory)
        timeout = config.get("timeout")
        self.timeout: float | None = None if timeout is None else float(timeout)
        settings = config.get("settings", {})
        if not isinstance(settings, Mapping):
            raise TypeError(f"cache {name!r}: 'settings' must be a mapping")
        self.settings: dict[str, Any] = dict(settings)
        if self.settings.get("eviction_policy") == "none":
            raise ValueError(STATE_ISNT_CACHE.format(name=name))
        fanout = config.get("fanout")
        self.shards: int | None = None
        if fanout is not None:
            if not isinstance(fanout, Mapping) or set(fanout) - {"shards"}:
                raise ValueError(f"cache {name!r}: 'fanout' must be a mapping like {{'shards': 8}}")
            self.shards = int(fanout.get("shards", 8))

    def open(self) -> Cache | FanoutCache:
        if self.shards is not None:
            timeout = 0.010 if self.timeout is None else self.timeout
            return FanoutCache(self.directory, self.shards, timeout, **self.settings)
        timeout = 60 if self.timeout is None else self.timeout
        return Cache(self.directory, timeout, **self.settings)

    def null(self) -> NullCache:
        timeout = 60 if self.timeout is None else self.timeout
        return NullCache(self.directory, timeout, **self.settings)


class Caches(Mapping[str, AnyCache]):
    """Named caches, opened on first use.

    :param config: name -> ``{'directory': ..., 'timeout': ..., 'settings': {...},
        'fanout': {'shards': N}}``; every key is optional. ``settings`` holds
        :data:`~diskcache_oxide.DEFAULT_SETTINGS` names and :class:`Cache` options
        (``pickle``, ``durable``, ...); with ``fanout`` the cache is a :class:`FanoutCache`
    :param enabled: False switches caching off; so does :data:`ENV_VAR` (either one is
        enough, and the environment is read when the registry is made)
    :raises ValueError: for a configuration error, and for a cache configured with
        ``eviction_policy='none'`` (state isn't cache)

    ``caches['name']`` and ``caches.get('name')`` hand out the cache; a switched-off
    registry hands out a :class:`NullCache`, and so does one whose cache could not be opened
    (permission denied, a read-only file system, a damaged database, a layout mismatch):
    the reason is logged once on the ``diskcache_oxide`` logger and kept in :attr:`errors`.
    """

    def __init__(self, config: Mapping[str, Mapping[str, Any]], *, enabled: bool = True) -> None:
        self._entries = {str(name): _Entry(str(name), entry) for name, entry in config.items()}
        self._enabled = bool(enabled) and not disabled_by_env()
        self._open: dict[str, AnyCache] = {}
        self._errors: dict[str, BaseException] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Whether the registry hands out real caches."""
        return self._enabled

    @property
    def errors(self) -> dict[str, BaseException]:
        """Why each cache that could not be opened was not (name -> exception)."""
        with self._lock:
            return dict(self._errors)

    def __getitem__(self, name: str) -> AnyCache:
        """The cache called ``name``, opened on the first call and the same object after.

        A switched-off registry hands out a :class:`NullCache`; so does one whose cache
        could not be opened (``OSError`` or :class:`~diskcache_oxide.CacheError`), after
        logging why and keeping the error in :attr:`errors`. It is not opened again until
        :meth:`close`.

        :raises KeyError: if no cache called ``name`` is configured
        :raises ValueError: if the opened cache has ``eviction_policy='none'`` (state
            isn't cache)
        """
        try:
            return self._open[name]
        except KeyError:
            pass
        try:
            entry = self._entries[name]
        except KeyError:
            raise KeyError(
                f"no cache named {name!r} is configured (configured: {sorted(self._entries)})"
            ) from None
        with self._lock:
            cache = self._open.get(name)
            if cache is None:
                cache = self._make(name, entry)
                self._open[name] = cache
            return cache

    def _make(self, name: str, entry: _Entry) -> AnyCache:
        if not self._enabled:
            return entry.null()
        try:
            cache = entry.open()
        except (OSError, CacheError) as exc:
            self._errors[name] = exc
            log().warning(
                "cache %r (directory %r) could not be opened, so it is switched off and "
                "stores nothing: %s: %s",
                name,
                entry.directory,
                type(exc).__name__,
                exc,
            )
            return entry.null()
        if cache.eviction_policy == "none":
            cache.close()
            raise ValueError(STATE_ISNT_CACHE.format(name=name))
        return cache

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def close(self) -> None:
        """Close every cache opened so far and forget it (and why any failed): the next
        ``caches[name]`` opens it again."""
        with self._lock:
            opened = list(self._open.values())
            self._open.clear()
            self._errors.clear()
        for cache in opened:
            cache.close()

    def __enter__(self) -> Caches:
        return self

    def __exit__(self, *exception: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "enabled" if self._enabled else "disabled"
        return f"{type(self).__name__}({sorted(self._entries)}, {state})"
