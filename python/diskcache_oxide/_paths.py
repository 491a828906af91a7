"""What a directory opener (``Cache``, ``FanoutCache``, and through them ``Deque``, ``Index``,
``JobQueue`` and the rest) makes of the ``directory`` it is given: a path, or a clear refusal.

python-diskcache takes ``str()`` of anything and creates that directory. Two mistakes then
pass silently: a cache object where a path belongs (a directory named ``<... object at
0x...>``), and a URL (``Cache("redis://host:6379/0")`` creates ``redis:/host:6379/0`` under
the working directory, so every process gets a cache of its own instead of the server's).
Both are refused here, naming what to call instead."""

from __future__ import annotations

import os
import re
from typing import Any

__all__ = ["directory_path"]

#: A URL's scheme and ``://`` at the start (RFC 3986: a letter, then letters, digits, + - .).
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


def directory_path(directory: Any, opener: str) -> str:
    """``directory`` as the path ``opener`` (the class's name, for the message) opens:
    ``~`` and environment variables expanded, as python-diskcache does.

    :raises TypeError: for an object that is no path and whose ``str()`` is its default repr
    :raises ValueError: for a URL (``scheme://...``), naming ``diskcache_oxide.open``
    """
    kind: Any = type(directory)
    if (
        not isinstance(directory, (str, bytes, os.PathLike))
        and kind.__str__ is object.__str__
        and kind.__repr__ is object.__repr__
    ):
        raise TypeError(
            f"directory must be a path (a str or os.PathLike), not {kind.__name__}; "
            "a RedisCache or another cache object goes where a cache is taken "
            "(JobQueue(cache), AsyncCache(cache), Deque.fromcache(cache)), and "
            "diskcache_oxide.open() opens a path or a redis:// URL"
        )
    if isinstance(directory, bytes):
        text = os.fsdecode(directory)
    else:
        text = os.fspath(directory) if isinstance(directory, os.PathLike) else str(directory)
        if not isinstance(text, str):
            text = os.fsdecode(text)
    found = _URL.match(text)
    if found:
        scheme = found.group(1).lower()
        if scheme == "file":
            instead = "give the path itself, or diskcache_oxide.open(url) for a Cache"
        else:
            instead = (
                "diskcache_oxide.open(url) opens a cache on a redis://, rediss:// or unix:// "
                "URL (a RedisCache)"
            )
        raise ValueError(
            f"{opener} takes a directory path, not a URL ({scheme}://...): "
            f"it would create a local directory named after the URL. {instead}"
        )
    return os.path.expandvars(os.path.expanduser(text))
