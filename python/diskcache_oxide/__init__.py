"""diskcache_oxide: a disk-backed cache and work queue for Python with a Rust engine.

A safe, faster drop-in for python-diskcache 5.6.3's ``Cache``: the same API, with values
stored in a language-neutral format instead of pickles (``pickle=True`` opts back in).
``Cache.push``/``pull`` make a queue on the cache's keys; :class:`JobQueue` adds leased jobs
that survive a worker's crash.
"""

from __future__ import annotations

from ._core import __version__
from .core import DEFAULT_SETTINGS, ENOVAL, EVICTION_POLICY, UNKNOWN, Cache, Constant
from .errors import (
    CacheError,
    CorruptValueError,
    DatabaseError,
    DecodeError,
    EmptyDirWarning,
    FormatVersionError,
    NotACacheError,
    Timeout,
    UnknownFileWarning,
    UnknownTypeError,
    UnsafeValueError,
    UnsupportedTypeError,
)
from .jobs import Job, JobCounts, JobInfo, JobQueue, Swept
from .registry import register_type, registered_types, unregister_type

__all__ = [
    "DEFAULT_SETTINGS",
    "ENOVAL",
    "EVICTION_POLICY",
    "UNKNOWN",
    "Cache",
    "CacheError",
    "Constant",
    "CorruptValueError",
    "DatabaseError",
    "DecodeError",
    "EmptyDirWarning",
    "FormatVersionError",
    "Job",
    "JobCounts",
    "JobInfo",
    "JobQueue",
    "NotACacheError",
    "Swept",
    "Timeout",
    "UnknownFileWarning",
    "UnknownTypeError",
    "UnsafeValueError",
    "UnsupportedTypeError",
    "__version__",
    "register_type",
    "registered_types",
    "unregister_type",
]
