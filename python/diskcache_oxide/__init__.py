"""diskcache_oxide: a disk-backed cache and work queue for Python with a Rust engine.

A safe, faster drop-in for python-diskcache 5.6.3's ``Cache``: the same API, with values
stored in a language-neutral format instead of pickles (``pickle=True`` opts back in).
``Cache.push``/``pull`` make a queue on the cache's keys; :class:`JobQueue` adds leased jobs
that survive a worker's crash.
"""

from __future__ import annotations

from ._core import __version__
from .caches import Caches
from .core import DEFAULT_SETTINGS, ENOVAL, EVICTION_POLICY, UNKNOWN, Cache, Constant
from .errors import (
    CacheError,
    CorruptValueError,
    DatabaseError,
    DecodeError,
    EmptyDirWarning,
    FormatVersionError,
    LayoutMismatchError,
    NotACacheError,
    ReadOnlyError,
    Timeout,
    UnknownFileWarning,
    UnknownTypeError,
    UnsafeValueError,
    UnsupportedTypeError,
)
from .fanout import FanoutCache
from .jobs import Job, JobCounts, JobInfo, JobQueue, Swept
from .null import NullCache
from .registry import register_type, registered_types, unregister_type

__all__ = [
    "DEFAULT_SETTINGS",
    "ENOVAL",
    "EVICTION_POLICY",
    "UNKNOWN",
    "Cache",
    "CacheError",
    "Caches",
    "Constant",
    "CorruptValueError",
    "DatabaseError",
    "DecodeError",
    "EmptyDirWarning",
    "FanoutCache",
    "FormatVersionError",
    "Job",
    "JobCounts",
    "JobInfo",
    "JobQueue",
    "LayoutMismatchError",
    "NotACacheError",
    "NullCache",
    "ReadOnlyError",
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
