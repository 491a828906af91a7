"""The Redis backend: :class:`RedisCache`, the cache and queue calls on a Redis, Valkey or
Redis Cluster server (issue 21, D-058), and :class:`AsyncRedisCache`, the same calls on
redis-py's asyncio client (D-059). Needs redis-py: ``pip install 'diskcache_oxide[redis]'``.

Named ``remote`` rather than ``redis`` so that ``diskcache_oxide.redis`` and the ``redis``
distribution are never confused in imports, tracebacks or mypy's module names, and so that the
same package can hold Valkey and other servers speaking the protocol.
"""

from __future__ import annotations

from ..errors import UnsupportedError

# cache first: without redis-py it raises the ImportError that names the extra to install.
from . import cache as _cache  # noqa: F401
from ._clients import asyncio_client, blocking_client, open_async_client, open_client
from ._errors import (
    NotReplicatedError,
    ServerConnectionError,
    ServerScriptError,
    ServerTimeout,
    WrongTypeError,
)
from ._policy import EvictionWarning
from .aio import AsyncRedisCache
from .cache import RedisCache

__all__ = [
    "AsyncRedisCache",
    "EvictionWarning",
    "NotReplicatedError",
    "RedisCache",
    "ServerConnectionError",
    "ServerScriptError",
    "ServerTimeout",
    "UnsupportedError",
    "WrongTypeError",
    "asyncio_client",
    "blocking_client",
    "open_async_client",
    "open_client",
]
