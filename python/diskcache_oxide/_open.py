"""``diskcache_oxide.open``: one way to open either backend (issue 21, D-058)."""

from __future__ import annotations

import os
import sys
from typing import Any, TypeAlias

from ._store import store_of
from .errors import CacheError

__all__ = ["open"]

_REDIS_SCHEMES = ("redis", "rediss", "unix")
_INSTALL = "pip install 'diskcache_oxide[redis]'"


def open(url_or_path: Any, **settings: Any) -> Any:
    """A cache for ``url_or_path``.

    * a path or a ``file://`` URL: a directory :class:`Cache` with these settings;
    * a ``redis://``, ``rediss://`` or ``unix://`` URL: a
      :class:`~diskcache_oxide.remote.RedisCache` (``?namespace=`` in the query, or the
      ``namespace`` setting; ``?cluster=1`` opens a RedisCluster);
    * a ``redis.Redis`` or ``RedisCluster`` client: a RedisCache over it.

    :raises ImportError: for a Redis URL when redis-py is not installed (naming the extra)
    :raises ValueError: for a URL of another scheme
    """
    if isinstance(url_or_path, os.PathLike):
        url_or_path = os.fspath(url_or_path)
    if isinstance(url_or_path, str):
        # urllib.parse is imported where a URL is read, not with the package (issue 33).
        from urllib.parse import parse_qsl, unquote, urlsplit

        parts = urlsplit(url_or_path)
        scheme = parts.scheme.lower()
        if scheme == "file":
            from .core import Cache

            return Cache(unquote(parts.path), **settings)
        if scheme in _REDIS_SCHEMES:
            for name, value in parse_qsl(parts.query):
                if name == "namespace":
                    settings.setdefault("namespace", value)
            return _redis_cache(url_or_path, settings)
        if scheme and "://" in url_or_path:
            raise ValueError(
                f"open() takes a path, a file:// URL or a redis://, rediss:// or unix:// URL; "
                f"the scheme {parts.scheme!r} is none of them"
            )
        from .core import Cache

        return Cache(url_or_path, **settings)
    return _redis_cache(url_or_path, settings)


def open_directory(
    path: str | os.PathLike[str] | None, *, opener: str = "Cache", **settings: Any
) -> Any:
    """A cache directory's :class:`~diskcache_oxide.Cache` at ``path`` (None: a new temporary
    directory): for a feature given a path (``JobQueue(path)``, ``Deque(directory)``, the
    operator's tools), which names no backend itself. ``opener`` (the class the caller called)
    is named when ``path`` is refused, as a URL is (``_paths.directory_path``).
    """
    from ._paths import directory_path
    from .core import Cache

    if path is not None:
        directory_path(path, opener)
    return Cache(path, **settings)


def _redis_cache(client_or_url: Any, settings: dict[str, Any]) -> Any:
    try:
        from .remote import RedisCache
    except ImportError as error:
        raise ImportError(f"the Redis backend needs redis-py ({error}): {_INSTALL}") from error
    return RedisCache(client_or_url, **settings)


def asyncio_face_of(cache: object) -> type | None:
    """The class of ``cache``'s own asyncio face, where its backend has one (a RedisCache:
    :class:`~diskcache_oxide.remote.AsyncRedisCache`, on redis-py's asyncio client); None
    where it has none (``AsyncCache`` runs a directory's calls in threads). A Redis cache
    exists only once its module is loaded, so an unloaded one is never imported to find out."""
    remote = sys.modules.get("diskcache_oxide.remote.cache")
    if remote is not None and isinstance(cache, remote.RedisCache):
        from .remote.aio import AsyncRedisCache

        return AsyncRedisCache
    return None


#: What a password is written as wherever a URL is shown (logs, the CLI, the dashboard).
PASSWORD_MASK = "***"


def is_password_pair(pair: str) -> bool:
    """Whether a URL query's ``name=value`` pair is a password (its name as redis-py reads
    it)."""
    from urllib.parse import unquote

    return unquote(pair.partition("=")[0]).lower() == "password"


def without_password(url: str) -> str:
    """``url`` with its password written as ``***``: the ``user:PASS@`` form and a
    ``?password=`` parameter, both of which redis-py reads. A URL that cannot be parsed (an
    unparsable port, say) keeps nothing between ``://`` and its last ``@``. Not escaped: the
    caller escapes for where it prints (the one place every tool masks a URL)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        scheme, _, rest = url.partition("://")
        if "@" in rest:
            rest = f"{PASSWORD_MASK}@{rest.rpartition('@')[2]}"
        return f"{scheme}://{rest}"
    netloc = parts.netloc
    if password is not None:
        user = parts.username or ""
        netloc = f"{user}:{PASSWORD_MASK}@{netloc.rpartition('@')[2]}"
    query = "&".join(
        f"{pair.partition('=')[0]}={PASSWORD_MASK}" if is_password_pair(pair) else pair
        for pair in parts.query.split("&")
    )
    return parts._replace(netloc=netloc, query=query).geturl()


# ---- the operator's targets -----------------------------------------------------------------
# A cache directory or a Redis namespace's URL, as the operator's tools (diskcache_oxide.admin,
# the command line, the dashboard, admin.copy) name it, show it and open it.

#: What the operator's calls take: a directory's Cache or a Redis namespace's RedisCache (a
#: cache with a store, ``_store.has_store``). Typed loosely, so that the tools name no backend.
AnyCache: TypeAlias = Any

#: The URL schemes that name a Redis namespace (as diskcache_oxide.open takes them).
REDIS_SCHEMES = _REDIS_SCHEMES

#: The socket timeout of the Redis handles the tools open (seconds): long enough for any read
#: an operator's command makes, short enough that a server that stops answering (paused,
#: partitioned) is reported instead of hanging the command or the dashboard's polls.
REDIS_TIMEOUT = 10.0


def is_url(target: object) -> bool:
    """Whether ``target`` is a Redis URL (``redis://``, ``rediss://``, ``unix://``) rather
    than a directory."""
    if not isinstance(target, str) or "://" not in target:
        return False
    from urllib.parse import urlsplit

    return urlsplit(target).scheme.lower() in REDIS_SCHEMES


def errors() -> tuple[type[BaseException], ...]:
    """The errors of a backend that a tool reports as one line, not a traceback: the cache's
    and the system's, and redis-py's (a server down, a timeout) once redis-py is in use."""
    found: list[type[BaseException]] = [CacheError, OSError]
    redis = sys.modules.get("redis")
    if redis is not None:
        found.append(redis.RedisError)
    return tuple(found)


def location(target: Any) -> str:
    """A cache as a tool names it: a directory's path, or a Redis namespace as a URL
    (``redis://host:port/db?namespace=NS``, its password left out)."""
    if isinstance(target, (str, os.PathLike)):
        text = os.fspath(target)
        # The URL as it may be printed: without a password (either form redis-py reads).
        return without_password(text) if is_url(text) else text
    return store_of(target).inspector().location


def open_cache(
    target: str | os.PathLike[str],
    *,
    write: bool = False,
    pickle: bool = False,
    timeout: float = REDIS_TIMEOUT,
) -> AnyCache:
    """The cache at ``target``: a directory, read-only unless ``write`` (an operator's
    command that changes something), which must exist (nothing is created); or a Redis URL
    (``redis://host:port/db?namespace=NS``, ``rediss://``, ``unix://``, ``?cluster=1``),
    opened through :func:`diskcache_oxide.open` with a socket ``timeout`` in seconds, and
    checked to answer (a PING). Redis has no read-only handle: the reading calls here use
    read commands only, whatever ``write``.

    :raises FileNotFoundError: if there is no cache in the directory
    :raises CacheError: if the Redis server does not answer, or redis-py is not installed
    """
    if is_url(target):
        return open_redis(str(target), pickle, timeout)
    path = os.fspath(target)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"no directory {path!r}")
    if not os.path.exists(os.path.join(path, "cache.db")):
        if os.path.exists(os.path.join(path, "000", "cache.db")):
            raise FileNotFoundError(
                f"{path!r} holds the shards of a FanoutCache (000, 001, ...), not a cache: "
                f"give one shard's directory, such as {os.path.join(path, '000')!r}"
            )
        raise FileNotFoundError(f"no diskcache_oxide cache in {path!r} (no cache.db there)")
    if write:
        return open_directory(path, pickle=pickle)
    return open_directory(path, read_only=True, pickle=pickle)


def open_redis(url: str, pickle: bool, timeout: float = REDIS_TIMEOUT) -> AnyCache:
    """The RedisCache of ``url``, checked to answer (a PING).

    :raises CacheError: if it cannot be opened or the server does not answer
    """
    shown = without_password(url)
    try:
        cache = open(url, pickle=pickle, timeout=timeout)
    except ImportError as error:
        raise CacheError(str(error)) from None
    except ValueError as error:  # a bad namespace, a URL redis-py cannot read
        raise CacheError(f"cannot open {shown}: {error}") from None
    try:
        store_of(cache).inspector().ping()
    except Exception as error:
        cache.close()
        if isinstance(error, errors()):
            raise CacheError(
                f"cannot reach the Redis server of {shown}: {error} (is it running, and is the "
                "URL right?)"
            ) from None
        raise
    return cache
