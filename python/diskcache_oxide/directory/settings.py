"""The settings a cache directory keeps, with their defaults: ``diskcache_oxide.core`` exports
them as ``DEFAULT_SETTINGS``, and the directory's inspector lists them in this order."""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_SETTINGS"]

#: The settings a cache keeps in its directory, with their defaults (python-diskcache 5.6.3).
DEFAULT_SETTINGS: dict[str, Any] = {
    "statistics": 0,
    "tag_index": 0,
    "eviction_policy": "least-recently-stored",
    "size_limit": 2**30,
    "cull_limit": 10,
    "sqlite_auto_vacuum": 1,
    "sqlite_cache_size": 2**13,
    "sqlite_journal_mode": "wal",
    "sqlite_mmap_size": 2**26,
    "sqlite_synchronous": 1,
    "disk_min_file_size": 2**15,
    # pickle.HIGHEST_PROTOCOL on every Python we support (3.10 to 3.14), written out so that the
    # package does not import pickle until something is pickled (issue 33); a test holds the
    # two equal.
    "disk_pickle_protocol": 5,
}
