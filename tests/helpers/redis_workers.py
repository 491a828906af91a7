"""Bodies of the processes the Redis tests spawn (imported by name, so spawn can find them)."""

from __future__ import annotations

from typing import Any


def drain(url: str, namespace: str, out: Any, ready: Any, start: Any) -> None:
    """Pull from the int queue until it stays empty for a second; put every key on ``out``."""
    from diskcache_oxide.remote import RedisCache

    cache = RedisCache(url, namespace=namespace)
    cache.peek()  # the scripts are loaded and the connection made before the race starts
    ready.release()
    start.wait()
    taken = []
    while True:
        key, _ = cache.pull(timeout=1.0)
        if key is None:
            break
        taken.append(key)
    out.put(taken)


def blocked_pull(url: str, namespace: str, out: Any, ready: Any) -> None:
    """Signal ``ready``, then block on one pull and put what it got and how long it waited."""
    import time

    from diskcache_oxide.remote import RedisCache

    cache = RedisCache(url, namespace=namespace)
    ready.set()
    began = time.monotonic()
    item = cache.pull(prefix="jobs", timeout=30)
    out.put((item, time.monotonic() - began))
