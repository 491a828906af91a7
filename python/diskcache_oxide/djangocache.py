"""The Django cache backend :class:`DjangoCache`, over a :class:`~diskcache_oxide.FanoutCache`.

Configure it as python-diskcache's ``diskcache.DjangoCache`` is configured (a directory), or
with a Redis URL as ``LOCATION`` to share one cache between machines::

    CACHES = {
        "default": {
            "BACKEND": "diskcache_oxide.DjangoCache",
            "LOCATION": "/var/tmp/django-cache",  # the FanoutCache directory
            "TIMEOUT": 300,  # Django's default timeout, in seconds (None: forever)
            "SHARDS": 8,  # FanoutCache shards (default 8)
            "DATABASE_TIMEOUT": 0.010,  # seconds a call waits on a locked shard
            "OPTIONS": {"size_limit": 2**30},  # settings of the FanoutCache, and "pickle"
        },
        "shared": {
            "BACKEND": "diskcache_oxide.DjangoCache",
            # opened with diskcache_oxide.open(): a RedisCache in the namespace "app"
            "LOCATION": "redis://127.0.0.1:6379/0?namespace=app",
            "OPTIONS": {"timeout": 5.0},  # settings of the RedisCache
        },
    }

It follows Django's cache API (``django.core.cache.backends.base.BaseCache``) wherever that
and python-diskcache's backend differ (docs/decisions/D-042-django-cache-backend.md).
Values go through the safe format: caching model instances, querysets or responses (the
per-view cache, ``cache_page``) needs ``"pickle": True`` in ``OPTIONS``, and only for a
directory whose every writer is trusted. This module imports Django; the package itself
does not, and imports this module only when ``diskcache_oxide.DjangoCache`` is first used.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, TypeVar, cast
from urllib.parse import unquote, urlsplit

from ._keying import args_to_key, full_name
from ._open import REDIS_SCHEMES, is_url, without_password
from ._open import open as open_cache
from ._sentinels import ENOVAL
from .core import Cache
from .errors import UnsupportedError, UnsupportedTypeError
from .fanout import FanoutCache
from .persistent import Deque, Index

try:
    from asgiref.sync import sync_to_async
    from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache
    from django.core.exceptions import ImproperlyConfigured
except ImportError as error:
    # Every module of the package must import without Django (the wheel check imports them
    # all in a bare virtualenv); the class is then defined over stand-ins and refuses to be
    # made, and ``diskcache_oxide.DjangoCache`` raises this error.
    DJANGO_MISSING: ImportError | None = error
    DEFAULT_TIMEOUT = object()
    BaseCache = object
    ImproperlyConfigured = ValueError
else:
    DJANGO_MISSING = None

__all__ = ["DJANGO_MISSING", "DjangoCache"]

_T = TypeVar("_T")

_Tag = str | int | float | bytes | None

#: Django's own culling options, which count entries; this backend bounds bytes instead.
_ENTRY_LIMITS = {"MAX_ENTRIES": "size_limit", "CULL_FREQUENCY": "cull_limit"}


class DjangoCache(BaseCache):  # type: ignore[misc]  # Django ships no type information
    """A Django cache backend storing entries in a diskcache_oxide FanoutCache, or on Redis.

    :param directory: Django's ``LOCATION``: the cache directory (a path or a ``file://``
        URL), or a ``redis://``, ``rediss://`` or ``unix://`` URL, opened with
        :func:`diskcache_oxide.open` (``?namespace=`` in its query names the namespace)
    :param params: the rest of the ``CACHES`` entry: ``TIMEOUT``, ``KEY_PREFIX``,
        ``VERSION``, ``KEY_FUNCTION`` as for every Django backend; for a directory,
        ``SHARDS`` (default 8) and ``DATABASE_TIMEOUT`` (seconds a call waits on a locked
        shard, default 0.010) for the FanoutCache; ``OPTIONS``, the settings of the
        FanoutCache (``size_limit``, ``cull_limit``, ``eviction_policy``, ...) or of the
        RedisCache (``timeout``, ``namespace``, ...), and ``pickle=True`` to store what the
        safe format cannot
    :raises ImproperlyConfigured: for an option the cache does not take, naming what to use
        instead
    """

    def __init__(self, directory: str, params: dict[str, Any]) -> None:
        if DJANGO_MISSING is not None:
            raise ImportError(
                f"DjangoCache needs Django ({DJANGO_MISSING}): pip install django"
            ) from DJANGO_MISSING
        super().__init__(params)
        options = dict(params.get("OPTIONS", {}))
        for name, instead in _ENTRY_LIMITS.items():
            if name in options:
                raise ImproperlyConfigured(
                    f"DjangoCache ({directory}) does not take OPTIONS {name!r}: it bounds the "
                    f"cache by bytes, not entries; use {instead!r} instead (see "
                    "docs/guide-django.md)"
                )
        # Typed as the FanoutCache: a RedisCache takes the same calls with the same
        # signatures (tests/redis holds its faces to Cache's), and the few it lacks raise.
        self._cache: FanoutCache
        if is_url(directory):
            self._cache = cast(FanoutCache, self._open_remote(directory, params, options))
        else:
            if isinstance(directory, str) and directory[:7].lower() == "file://":
                directory = unquote(urlsplit(directory).path)
            shards = params.get("SHARDS", 8)
            timeout = params.get("DATABASE_TIMEOUT", 0.010)
            try:
                self._cache = FanoutCache(directory, shards, timeout, **options)
            except (ValueError, TypeError) as error:
                raise ImproperlyConfigured(f"DjangoCache ({directory}): {error}") from error
        self._pickle = bool(options.get("pickle", False))
        #: Where the entries are, as messages name it (a URL without its password).
        self._where = without_password(directory) if is_url(directory) else str(directory)

    @staticmethod
    def _open_remote(url: str, params: dict[str, Any], options: dict[str, Any]) -> Any:
        """The RedisCache at ``url``, its settings from ``OPTIONS``; the directory's own
        parameters are refused, since a Redis namespace has no shards and no lock wait."""
        shown = without_password(url)
        for name in ("SHARDS", "DATABASE_TIMEOUT"):
            if name in params:
                raise ImproperlyConfigured(
                    f"DjangoCache ({shown}): {name} configures a directory's FanoutCache, and "
                    f"this LOCATION is a {'/'.join(REDIS_SCHEMES)} URL; remove it (a Redis "
                    "namespace has no shards; OPTIONS' 'timeout' is how long a command waits "
                    "for the server)"
                )
        try:
            return open_cache(url, **options)
        except (ValueError, TypeError, ImportError, UnsupportedError) as error:
            raise ImproperlyConfigured(f"DjangoCache ({shown}): {error}") from error

    # ----- the handles behind it -------------------------------------------------------------

    @property
    def directory(self) -> str:
        """The cache directory (Django's ``LOCATION``). A Redis ``LOCATION`` has none: the
        attribute is then missing (AttributeError), as on a RedisCache."""
        return self._cache.directory

    @property
    def fanout(self) -> FanoutCache:
        """The :class:`~diskcache_oxide.FanoutCache` this backend stores into.

        :raises AttributeError: for a Redis ``LOCATION`` (see :attr:`store`)
        """
        if not isinstance(self._cache, FanoutCache):  # type: ignore[redundant-expr,unused-ignore]
            raise AttributeError(
                "this DjangoCache's LOCATION is a Redis URL: it has no FanoutCache; "
                ".store is its RedisCache"
            )
        return self._cache

    @property
    def store(self) -> Any:
        """The cache this backend stores into: a :class:`~diskcache_oxide.FanoutCache` for a
        directory, a :class:`~diskcache_oxide.remote.RedisCache` for a Redis URL."""
        return self._cache

    def _fanout_for(self, what: str) -> FanoutCache:
        """The FanoutCache, for a call only a directory has; on Redis, UnsupportedError
        naming what to do instead."""
        if not isinstance(self._cache, FanoutCache):  # type: ignore[redundant-expr,unused-ignore]
            raise UnsupportedError(
                f"{what} is a directory's (a sub-directory beside the shards); this "
                f"DjangoCache's LOCATION is a Redis URL ({self._where}): open another "
                "namespace with diskcache_oxide.open(url, namespace=...) instead"
            )
        return self._cache

    def cache(self, name: str) -> Cache:
        """The plain :class:`~diskcache_oxide.Cache` called ``name``, beside the shards
        (``<directory>/cache/<name>``); see :meth:`FanoutCache.cache`.

        :raises UnsupportedError: for a Redis ``LOCATION``
        """
        return self._fanout_for("cache(name)").cache(name)

    def deque(self, name: str, maxlen: int | None = None) -> Deque:
        """The :class:`~diskcache_oxide.Deque` called ``name`` (``<directory>/deque/<name>``).

        :raises UnsupportedError: for a Redis ``LOCATION``
        """
        return self._fanout_for("deque(name)").deque(name, maxlen=maxlen)

    def index(self, name: str) -> Index:
        """The :class:`~diskcache_oxide.Index` called ``name`` (``<directory>/index/<name>``).

        :raises UnsupportedError: for a Redis ``LOCATION``
        """
        return self._fanout_for("index(name)").index(name)

    # ----- timeouts and values ---------------------------------------------------------------

    def get_backend_timeout(self, timeout: Any = DEFAULT_TIMEOUT) -> float | None:
        """Seconds until an entry stored with Django's ``timeout`` expires, or None for never.

        ``DEFAULT_TIMEOUT`` is the cache's ``TIMEOUT``; ``None`` never expires; ``0`` and
        negative timeouts give an entry that has already expired (Django: "expire
        immediately"). Relative, where Django's base class returns an absolute time,
        because the FanoutCache takes seconds from now.
        """
        if timeout is DEFAULT_TIMEOUT:
            timeout = self.default_timeout
        if timeout is None:
            return None
        # 0 as -1, as Django does, so that clock granularity cannot make it live for a moment.
        return -1.0 if timeout <= 0 else float(timeout)

    def _storing(self, call: Callable[[], _T]) -> _T:
        """Run a write, turning a value the safe format cannot store into an error that says
        how to store such values with this backend."""
        try:
            return call()
        except UnsupportedTypeError as error:
            if self._pickle:
                raise
            raise UnsupportedTypeError(
                f"{error}. With Django: add 'pickle': True to this cache's OPTIONS in CACHES "
                f"(only if you trust every process that can write {self._where}), or cache "
                "plain data (dicts, lists, strings, numbers, dates) instead of the object"
            ) from error

    # ----- Django's cache API ----------------------------------------------------------------

    def add(
        self,
        key: Any,
        value: Any,
        timeout: Any = DEFAULT_TIMEOUT,
        version: int | None = None,
        read: bool = False,
        tag: _Tag = None,
        retry: bool = True,
    ) -> bool:
        """Store ``value`` under ``key`` only if the key is absent (or expired).

        :param timeout: seconds until it expires (``DEFAULT_TIMEOUT``: the cache's
            ``TIMEOUT``; None: never; 0 or less: at once, and nothing is kept)
        :param version: the key's version (default: the cache's ``VERSION``)
        :param read: ``value`` is a binary file to store as the value's bytes
        :param tag: a tag for :meth:`evict`
        :param retry: wait for a locked shard instead of returning False (default True)
        :return: True if it was stored
        """
        made = self.make_and_validate_key(key, version=version)
        expire = self.get_backend_timeout(timeout)
        return self._storing(lambda: self._cache.add(made, value, expire, read, tag, retry))

    def get(
        self,
        key: Any,
        default: Any = None,
        version: int | None = None,
        read: bool = False,
        expire_time: bool = False,
        tag: bool = False,
        retry: bool = False,
    ) -> Any:
        """The value under ``key``, or ``default`` if it is absent or expired.

        :param version: the key's version (default: the cache's ``VERSION``)
        :param read: return a binary file opened on the value instead of the value
        :param expire_time: also return the expiry time (a tuple, as :meth:`Cache.get`)
        :param tag: also return the tag (a tuple, as :meth:`Cache.get`)
        :param retry: wait for a locked shard instead of returning ``default``
        """
        made = self.make_and_validate_key(key, version=version)
        return self._cache.get(made, default, read, expire_time, tag, retry)

    def read(self, key: Any, version: int | None = None) -> Any:
        """A binary file opened on the value of ``key`` (stored with ``read=True``, or
        large enough to be kept in a value file).

        :raises KeyError: if ``key`` is absent
        """
        made = self.make_and_validate_key(key, version=version)
        return self._cache.read(made)

    def set(
        self,
        key: Any,
        value: Any,
        timeout: Any = DEFAULT_TIMEOUT,
        version: int | None = None,
        read: bool = False,
        tag: _Tag = None,
        retry: bool = True,
    ) -> bool:
        """Store ``value`` under ``key``, replacing what was there.

        :param timeout: seconds until it expires (``DEFAULT_TIMEOUT``: the cache's
            ``TIMEOUT``; None: never; 0 or less: at once, so the key reads as absent)
        :param version: the key's version (default: the cache's ``VERSION``)
        :param read: ``value`` is a binary file to store as the value's bytes
        :param tag: a tag for :meth:`evict`
        :param retry: wait for a locked shard instead of returning False (default True)
        :return: True if it was stored (Django's backends return None; True is as truthy)
        :raises UnsupportedTypeError: for a value the safe format cannot store, unless the
            cache has ``'pickle': True`` in ``OPTIONS``
        """
        made = self.make_and_validate_key(key, version=version)
        expire = self.get_backend_timeout(timeout)
        return self._storing(lambda: self._cache.set(made, value, expire, read, tag, retry))

    def touch(
        self,
        key: Any,
        timeout: Any = DEFAULT_TIMEOUT,
        version: int | None = None,
        retry: bool = True,
    ) -> bool:
        """Give ``key`` a new timeout (as :meth:`set` counts it) without changing its value.

        :return: True if the key was there to touch
        """
        made = self.make_and_validate_key(key, version=version)
        return self._cache.touch(made, self.get_backend_timeout(timeout), retry)

    def pop(
        self,
        key: Any,
        default: Any = None,
        version: int | None = None,
        expire_time: bool = False,
        tag: bool = False,
        retry: bool = True,
    ) -> Any:
        """Remove ``key`` and return its value, or ``default`` if it was absent."""
        made = self.make_and_validate_key(key, version=version)
        return self._cache.pop(made, default, expire_time, tag, retry)

    def delete(self, key: Any, version: int | None = None, retry: bool = True) -> bool:
        """Remove ``key``.

        :return: True if it was there
        """
        made = self.make_and_validate_key(key, version=version)
        return self._cache.delete(made, retry)

    def get_many(self, keys: Iterable[Any], version: int | None = None) -> dict[Any, Any]:
        """The values of those ``keys`` that are present, as a dict (absent keys are left
        out), read in one batch per shard."""
        keys = list(keys)
        made = [self.make_and_validate_key(key, version=version) for key in keys]
        values = self._cache.get_many(made, ENOVAL, retry=True)
        return {key: value for key, value in zip(keys, values, strict=True) if value is not ENOVAL}

    def set_many(
        self,
        data: Mapping[Any, Any],
        timeout: Any = DEFAULT_TIMEOUT,
        version: int | None = None,
    ) -> list[Any]:
        """Store every item of ``data``, in one batch per shard.

        :return: the keys that could not be stored: always ``[]`` (a locked shard is waited
            for), as Django's contract for a backend that stores everything
        """
        made = {self.make_and_validate_key(key, version=version): v for key, v in data.items()}
        if made:
            expire = self.get_backend_timeout(timeout)
            self._storing(lambda: self._cache.set_many(made, expire, retry=True))
        return []

    def delete_many(self, keys: Iterable[Any], version: int | None = None) -> None:
        """Remove every key of ``keys``, in one batch per shard."""
        made = [self.make_and_validate_key(key, version=version) for key in keys]
        if made:
            self._cache.delete_many(made, retry=True)

    def has_key(self, key: Any, version: int | None = None) -> bool:
        """Whether ``key`` is present and not expired."""
        made = self.make_and_validate_key(key, version=version)
        return made in self._cache

    def incr(
        self,
        key: Any,
        delta: int = 1,
        version: int | None = None,
        default: int | None = None,
        retry: bool = True,
    ) -> int:
        """Add ``delta`` to the number under ``key``, atomically, keeping its expiry.

        :param default: start from this if the key is absent (default: raise, as Django)
        :return: the new value
        :raises ValueError: if the key is absent (or expired) and ``default`` is None
        :raises TypeError: if the stored value is not a number
        """
        made = self.make_and_validate_key(key, version=version)
        try:
            result = self._cache.incr(made, delta, default, retry)
        except KeyError:
            raise ValueError(f"Key '{key}' not found") from None
        if result is None:  # the shard stayed locked (only without retry)
            raise ValueError(f"Key '{key}' could not be incremented: its shard stayed locked")
        return cast(int, result)

    def decr(
        self,
        key: Any,
        delta: int = 1,
        version: int | None = None,
        default: int | None = None,
        retry: bool = True,
    ) -> int:
        """Subtract ``delta`` from the number under ``key``; see :meth:`incr`."""
        return self.incr(key, -delta, version, default, retry)

    def clear(self) -> int:
        """Remove every entry.

        :return: how many were removed
        """
        return self._cache.clear(retry=True)

    def close(self, **kwargs: Any) -> None:
        """Close the shards' connections (Django calls this at the end of each request);
        the next call opens them again."""
        self._cache.close()

    # ----- python-diskcache's extras ---------------------------------------------------------

    def expire(self) -> int:
        """Remove the expired entries.

        :return: how many were removed
        """
        return self._cache.expire(retry=True)

    def evict(self, tag: _Tag) -> int:
        """Remove the entries stored with ``tag``.

        :return: how many were removed
        """
        return self._cache.evict(tag, retry=True)

    def cull(self) -> int:
        """Remove expired entries, then evict by the eviction policy down to ``size_limit``.

        :return: how many were removed
        """
        return self._cache.cull(retry=True)

    def stats(self, enable: bool = True, reset: bool = False) -> tuple[int, int]:
        """``(hits, misses)`` over every shard; ``enable`` turns counting on or off."""
        return self._cache.stats(enable=enable, reset=reset)

    def create_tag_index(self) -> None:
        """Index the shards by tag, so that :meth:`evict` is fast. On Redis, where a tag's
        entries are always indexed, this does nothing."""
        if isinstance(self._cache, FanoutCache):  # type: ignore[redundant-expr,unused-ignore]
            self._cache.create_tag_index()

    def drop_tag_index(self) -> None:
        """Drop the shards' tag index (nothing on Redis, see :meth:`create_tag_index`)."""
        if isinstance(self._cache, FanoutCache):  # type: ignore[redundant-expr,unused-ignore]
            self._cache.drop_tag_index()

    def memoize(
        self,
        name: str | None = None,
        timeout: Any = DEFAULT_TIMEOUT,
        version: int | None = None,
        typed: bool = False,
        tag: _Tag = None,
        ignore: Collection[int | str] = (),
    ) -> Callable[[Callable[..., _T]], Callable[..., _T]]:
        """Decorator caching a function's results by its arguments, in this cache.

        :param name: key prefix (default: the function's ``module.qualname``)
        :param timeout: as for :meth:`set`; 0 or less looks results up but never stores them
        :param version: the version of the keys (default: the cache's ``VERSION``)
        :param typed: cache arguments of different types apart (``f(3)``, ``f(3.0)``)
        :param tag: tag stored with each result
        :param ignore: positions and keyword names left out of the key
        :return: a decorator; the wrapped function has ``__cache_key__(*args, **kwargs)``
        :raises TypeError: if used without parentheses (``@cache.memoize``)
        """
        if callable(name):
            raise TypeError("name cannot be callable: write @cache.memoize(), with parentheses")
        stores = timeout is None or timeout is DEFAULT_TIMEOUT or timeout > 0

        def decorator(func: Callable[..., _T]) -> Callable[..., _T]:
            base = (full_name(func),) if name is None else (name,)

            def cache_key(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
                return args_to_key(base, args, kwargs, typed, ignore)

            @functools.wraps(func)
            def wrapper(*args: Any, **kwargs: Any) -> _T:
                # The key is built by make_key without validate_key: it is ours, not the
                # caller's, and the memcached portability warnings do not apply to it.
                made = self.make_key(cache_key(*args, **kwargs), version=version)
                result = self._cache.get(made, ENOVAL, retry=True)
                if result is ENOVAL:
                    result = func(*args, **kwargs)
                    if stores:
                        expire = self.get_backend_timeout(timeout)
                        self._storing(
                            lambda: self._cache.set(made, result, expire, tag=tag, retry=True)
                        )
                return cast(_T, result)

            wrapper.__cache_key__ = cache_key  # type: ignore[attr-defined]
            return wrapper

        return decorator

    # ----- the asynchronous API --------------------------------------------------------------
    # Each runs the call of the same name in a worker thread, so an atomic call (incr, add,
    # get_many) stays one call, where Django's base class composes some of them from aget and
    # aset. The FanoutCache's handles are safe to share between threads, so no call needs the
    # thread that opened them (thread_sensitive=False).

    async def aadd(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> bool:
        """:meth:`add`, from asyncio."""
        return await _in_thread(self.add, key, value, timeout, version)

    async def aget(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        """:meth:`get`, from asyncio."""
        return await _in_thread(self.get, key, default, version)

    async def aset(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> bool:
        """:meth:`set`, from asyncio."""
        return await _in_thread(self.set, key, value, timeout, version)

    async def atouch(
        self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> bool:
        """:meth:`touch`, from asyncio."""
        return await _in_thread(self.touch, key, timeout, version)

    async def adelete(self, key: Any, version: int | None = None) -> bool:
        """:meth:`delete`, from asyncio."""
        return await _in_thread(self.delete, key, version)

    async def aget_many(self, keys: Iterable[Any], version: int | None = None) -> dict[Any, Any]:
        """:meth:`get_many`, from asyncio."""
        return await _in_thread(self.get_many, list(keys), version)

    async def aget_or_set(
        self, key: Any, default: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> Any:
        """:meth:`get_or_set`, from asyncio (a callable ``default`` runs in the worker
        thread)."""
        return await _in_thread(self.get_or_set, key, default, timeout, version)

    async def ahas_key(self, key: Any, version: int | None = None) -> bool:
        """:meth:`has_key`, from asyncio."""
        return await _in_thread(self.has_key, key, version)

    async def aincr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        """:meth:`incr`, from asyncio (atomic, as :meth:`incr` is)."""
        return await _in_thread(self.incr, key, delta, version)

    async def adecr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        """:meth:`decr`, from asyncio (atomic, as :meth:`decr` is)."""
        return await _in_thread(self.decr, key, delta, version)

    async def aset_many(
        self, data: Mapping[Any, Any], timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> list[Any]:
        """:meth:`set_many`, from asyncio."""
        return await _in_thread(self.set_many, dict(data), timeout, version)

    async def adelete_many(self, keys: Iterable[Any], version: int | None = None) -> None:
        """:meth:`delete_many`, from asyncio."""
        await _in_thread(self.delete_many, list(keys), version)

    async def aclear(self) -> int:
        """:meth:`clear`, from asyncio."""
        return await _in_thread(self.clear)

    async def aincr_version(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        """:meth:`incr_version`, from asyncio."""
        return await _in_thread(self.incr_version, key, delta, version)

    async def adecr_version(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        """:meth:`decr_version`, from asyncio."""
        return await _in_thread(self.decr_version, key, delta, version)

    async def aclose(self, **kwargs: Any) -> None:
        """:meth:`close`, from asyncio."""
        await _in_thread(self.close, **kwargs)


async def _in_thread(call: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``call(*args, **kwargs)`` in a worker thread, awaited."""
    return await sync_to_async(call, thread_sensitive=False)(*args, **kwargs)
