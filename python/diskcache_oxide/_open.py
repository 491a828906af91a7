"""``diskcache_oxide.open``: one way to open either backend (issue 21, D-058)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

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
    import os

    if isinstance(url_or_path, os.PathLike):
        url_or_path = os.fspath(url_or_path)
    if isinstance(url_or_path, str):
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


def open_directory(path: str, **settings: Any) -> Any:
    """A cache directory's :class:`~diskcache_oxide.Cache` at ``path``: for a feature given a
    path (``JobQueue(path)``), which names no backend itself."""
    from .core import Cache

    return Cache(path, **settings)


def _redis_cache(client_or_url: Any, settings: dict[str, Any]) -> Any:
    try:
        from .remote import RedisCache
    except ImportError as error:
        raise ImportError(f"the Redis backend needs redis-py ({error}): {_INSTALL}") from error
    return RedisCache(client_or_url, **settings)


#: What a password is written as wherever a URL is shown (logs, the CLI, the dashboard).
PASSWORD_MASK = "***"


def is_password_pair(pair: str) -> bool:
    """Whether a URL query's ``name=value`` pair is a password (its name as redis-py reads
    it)."""
    return unquote(pair.partition("=")[0]).lower() == "password"


def without_password(url: str) -> str:
    """``url`` with its password written as ``***``: the ``user:PASS@`` form and a
    ``?password=`` parameter, both of which redis-py reads. A URL that cannot be parsed (an
    unparsable port, say) keeps nothing between ``://`` and its last ``@``. Not escaped: the
    caller escapes for where it prints (the one place every tool masks a URL)."""
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
