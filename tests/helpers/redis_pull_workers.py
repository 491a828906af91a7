"""Bodies of the processes tests/redis/test_redis_pull.py spawns (imported by name, so spawn
can find them)."""

from __future__ import annotations

from typing import Any


def drain_until_empty(url: str, namespace: str, prefix: str, out: Any, barrier: Any) -> None:
    """Pull from the queue ``prefix`` until one pull finds it empty (no waiting, so each
    worker ends with exactly one empty pull); put every key it got on ``out``. The scripts
    are loaded and the connection made before the barrier, so the race starts together."""
    from diskcache_oxide.remote import RedisCache

    cache = RedisCache(url, namespace=namespace)
    try:
        cache.pull(prefix=prefix + "-warm")  # the pull script loaded: no NOSCRIPT counted
        barrier.wait(60)  # ready: the parent reads the server's counters now
        barrier.wait(60)  # go
        taken = []
        while True:
            key, _ = cache.pull(prefix=prefix)
            if key is None:
                break
            taken.append(key)
        out.put(taken)
    finally:
        cache.close()
