"""diskcache_oxide: a disk-backed cache and work queue for Python with a Rust engine.

A safe, faster drop-in for python-diskcache 5.6.3's ``Cache``: the same API, with values
stored in a language-neutral format instead of pickles (``pickle=True`` opts back in).
``Cache.push``/``pull`` make a queue on the cache's keys; :class:`JobQueue` adds leased jobs
that survive a worker's crash.
"""

from typing import TYPE_CHECKING

from ._core import __version__
from ._open import open as open  # not in __all__: a star import keeps the builtin
from .claims import (
    COMPUTING,
    Claim,
    ClaimInfo,
    Claims,
    ClaimTimeout,
    Outcome,
    compute_once,
    get_or_compute,
)
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
    UnexpectedReplyError,
    UnknownFileWarning,
    UnknownTypeError,
    UnsafeValueError,
    UnsupportedTypeError,
    ValueTooLargeError,
)
from .fanout import FanoutCache
from .migrate import migrate
from .registry import register_type, registered_types, unregister_type

if TYPE_CHECKING:
    from .caches import Caches
    from .jobs import Job, JobCounts, JobInfo, JobQueue, Swept
    from .migrate import MigrationReport, SkippedEntry, SkippedSetting
    from .null import NullCache
    from .persistent import Deque, Index
    from .recipes import (
        LOCK_EXPIRE,
        Averager,
        BoundedSemaphore,
        Lock,
        RLock,
        barrier,
        memoize_stampede,
        throttle,
    )
    from .tasks import (
        PeriodicTask,
        ResultTimeout,
        Task,
        TaskCancelled,
        TaskError,
        TaskFailed,
        TaskResult,
        Tasks,
        TaskTimeout,
    )

#: Names whose module is imported on first use (PEP 562), so that ``import diskcache_oxide``
#: costs no more than python-diskcache's import (issue 33): the tasks (asyncio among their
#: imports, a fifth of the import time alone), the job queue, the recipes, Deque and Index,
#: NullCache, Caches and migration's report classes are features a cache user may never
#: call. ``migrate`` itself is bound below, from its package's light ``__init__``: the function
#: shares its name with its module, and the first import of the module binds the module to
#: this attribute.
_LAZY = {
    **dict.fromkeys(("Caches",), "caches"),
    **dict.fromkeys(("Job", "JobCounts", "JobInfo", "JobQueue", "Swept"), "jobs"),
    **dict.fromkeys(("MigrationReport", "SkippedEntry", "SkippedSetting"), "migrate"),
    **dict.fromkeys(("NullCache",), "null"),
    **dict.fromkeys(("Deque", "Index"), "persistent"),
    **dict.fromkeys(
        (
            "LOCK_EXPIRE",
            "Averager",
            "BoundedSemaphore",
            "Lock",
            "RLock",
            "barrier",
            "memoize_stampede",
            "throttle",
        ),
        "recipes",
    ),
    **dict.fromkeys(
        (
            "PeriodicTask",
            "ResultTimeout",
            "Task",
            "TaskCancelled",
            "TaskError",
            "TaskFailed",
            "TaskResult",
            "Tasks",
            "TaskTimeout",
        ),
        "tasks",
    ),
}

__all__ = [
    "DEFAULT_SETTINGS",
    "ENOVAL",
    "EVICTION_POLICY",
    "LOCK_EXPIRE",
    "UNKNOWN",
    "Averager",
    "BoundedSemaphore",
    "Cache",
    "CacheError",
    "Caches",
    "COMPUTING",
    "Claim",
    "ClaimInfo",
    "ClaimTimeout",
    "Claims",
    "Constant",
    "CorruptValueError",
    "Deque",
    "DatabaseError",
    "DecodeError",
    "EmptyDirWarning",
    "FanoutCache",
    "FormatVersionError",
    "Index",
    "Job",
    "JobCounts",
    "JobInfo",
    "JobQueue",
    "LayoutMismatchError",
    "Lock",
    "MigrationReport",
    "NotACacheError",
    "Outcome",
    "NullCache",
    "PeriodicTask",
    "RLock",
    "ReadOnlyError",
    "ResultTimeout",
    "SkippedEntry",
    "SkippedSetting",
    "Swept",
    "Task",
    "TaskCancelled",
    "TaskError",
    "TaskFailed",
    "TaskResult",
    "TaskTimeout",
    "Tasks",
    "Timeout",
    "UnexpectedReplyError",
    "UnknownFileWarning",
    "UnknownTypeError",
    "UnsafeValueError",
    "UnsupportedTypeError",
    "ValueTooLargeError",
    "__version__",
    "barrier",
    "memoize_stampede",
    "migrate",
    "compute_once",
    "get_or_compute",
    "register_type",
    "registered_types",
    "throttle",
    "unregister_type",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is not None:
        import importlib

        value = getattr(importlib.import_module(f".{module}", __name__), name)
        globals()[name] = value  # found directly from now on
        return value
    # DjangoCache is imported on first use, so that Django is not needed to import the
    # package (python-diskcache exposes its backend as diskcache.DjangoCache too).
    if name == "DjangoCache":
        from . import djangocache

        if djangocache.DJANGO_MISSING is not None:
            raise ImportError(
                f"diskcache_oxide.DjangoCache needs Django ({djangocache.DJANGO_MISSING}): "
                "pip install django"
            ) from djangocache.DJANGO_MISSING
        return djangocache.DjangoCache
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    # What the package exports, not the submodules and helpers its imports bind.
    return sorted({*__all__, "DjangoCache", "open", "__version__"})
