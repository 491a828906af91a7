"""The Redis backend: :class:`RedisCache`, the cache and queue calls on a Redis, Valkey or
Redis Cluster server (issue 21, D-058). Needs redis-py: ``pip install 'diskcache_oxide[redis]'``.

Named ``remote`` rather than ``redis`` so that ``diskcache_oxide.redis`` and the ``redis``
distribution are never confused in imports, tracebacks or mypy's module names, and so that the
same package can hold Valkey and other servers speaking the protocol.
"""

from __future__ import annotations

from ._io import NotReplicatedError, ServerConnectionError, ServerTimeout
from .cache import RedisCache, UnsupportedError, open_client

__all__ = [
    "NotReplicatedError",
    "RedisCache",
    "ServerConnectionError",
    "ServerTimeout",
    "UnsupportedError",
    "open_client",
]
