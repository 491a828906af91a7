"""The :class:`Cache` class: python-diskcache 5.6.3's ``Cache`` API over the Rust engine.

The hot methods (``get``, ``set``, ``add``, ``delete``, ``incr``, ``[]``, ``in``, ...) are
inherited from the binding's ``CacheCore`` and run in Rust without a Python frame. What is
naturally Python lives here: construction, ``transact()``, ``memoize()``, ``check()`` and
``reset()``. See docs/decisions/D-008-binding-and-python-layer.md.
"""

from __future__ import annotations

import contextlib
import os
import os.path
import sys
import warnings
from collections.abc import Callable, Collection, Iterator
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    ParamSpec,
    TypeVar,
    cast,
)

if TYPE_CHECKING:  # only for annotations: the package has no run-time dependencies
    if sys.version_info >= (3, 11):
        from typing import Self
    else:
        from typing_extensions import Self

from . import _core
from ._faces.durable import DurableCacheCalls
from ._keying import Memoized as Memoized
from ._keying import args_to_key as args_to_key
from ._keying import full_name as full_name
from ._keying import keyed as keyed
from ._keying import memoize_on as memoize_on
from ._log import log
from ._paths import directory_path
from ._seconds import ANY, seconds

# The sentinels live on the ground floor (_sentinels), where every backend and feature shares
# them; python-diskcache's users import ENOVAL, UNKNOWN and Constant from here.
from ._sentinels import ENOVAL as ENOVAL
from ._sentinels import UNKNOWN as UNKNOWN
from ._sentinels import Constant as Constant
from .claims import PayOnceCalls
from .directory.settings import DEFAULT_SETTINGS as DEFAULT_SETTINGS
from .directory.store import DirectoryStore

# python-diskcache's diskcache.core defines both of check()'s warning classes: they stay
# importable from here (the binding picks a problem's class, see _core._check).
from .errors import EmptyDirWarning as EmptyDirWarning
from .errors import UnknownFileWarning as UnknownFileWarning

__all__ = [
    "DEFAULT_SETTINGS",
    "ENOVAL",
    "EVICTION_POLICY",
    "UNKNOWN",
    "Cache",
    "Constant",
    "args_to_key",
    "full_name",
]

P = ParamSpec("P")
R = TypeVar("R")
_C = TypeVar("_C", bound="Cache")


#: The eviction policies, by the names python-diskcache uses. Each entry says what the
#: policy does when the cache is set up (``init``), on a read (``get``) and when the cache
#: is over its size limit (``cull``); ``None`` where it does nothing, as in python-diskcache.
EVICTION_POLICY: dict[str, dict[str, str | None]] = {
    "none": {"init": None, "get": None, "cull": None},
    "least-recently-stored": {
        "init": "index the store time",
        "get": None,
        "cull": "remove the items stored longest ago first",
    },
    "least-recently-used": {
        "init": "index the access time",
        "get": "record the access time",
        "cull": "remove the items read longest ago first",
    },
    "least-frequently-used": {
        "init": "index the access count",
        "get": "count the access",
        "cull": "remove the items read least often first",
    },
}

_DISK_UNSUPPORTED = (
    "diskcache_oxide does not support custom Disk classes: values are stored in a safe, "
    "language-neutral format instead of pickles. To store your own types, register them "
    "with diskcache_oxide.register_type(cls, name, encode, decode); to keep pickling "
    "everything the safe format cannot express, open the cache with pickle=True"
)


def _reopen(
    cls: type[Cache],
    directory: str,
    timeout: float,
    pickle: bool,
    on_decode_error: Literal["raise", "miss"],
    read_only: bool = False,
    durable: bool = False,
) -> Cache:
    if read_only or durable:
        return cls(
            directory,
            timeout,
            pickle=pickle,
            on_decode_error=on_decode_error,
            read_only=read_only,
            durable=durable,
        )
    return cls(directory, timeout, pickle=pickle, on_decode_error=on_decode_error)


class Cache(PayOnceCalls, _core.CacheCore):
    """A disk-backed cache: python-diskcache 5.6.3's ``Cache`` with a Rust engine.

    :param directory: the cache directory (default: a new temporary directory); ``~`` and
        environment variables are expanded
    :param timeout: seconds a call waits on a database another connection holds locked
        before raising :class:`~diskcache_oxide.Timeout` (default 60)
    :param disk: must be None; custom ``Disk`` classes are not supported (see
        :func:`~diskcache_oxide.register_type` and ``pickle``)
    :param pickle: store what the safe format cannot express as pickles, and read
        pickles back; only for directories every writer of which you trust (default False)
    :param on_decode_error: ``'raise'`` (default) raises a
        :class:`~diskcache_oxide.DecodeError` for a value that cannot be read; ``'miss'``
        logs it and treats the key as missing in ``get``-style reads
    :param read_only: open an existing cache without writing a byte to its directory;
        reads work, every write raises :class:`~diskcache_oxide.ReadOnlyError`, and a
        missing directory or database raises ``FileNotFoundError`` (see D-019)
    :param durable: never raise operational errors (timeouts, a full disk, I/O errors, a
        corrupt database or value, a read-only file system): log them to the
        ``diskcache_oxide`` logger and return the call's miss value. Bad arguments still
        raise. A durable ``push`` that fails returns None and the item is **not** queued
        (see D-020)
    :param settings: any of :data:`DEFAULT_SETTINGS`

    ``push``/``pull``/``peek`` (and ``push_many``/``pull_many``) use a range of keys as a
    queue shared by every process that opens the directory; ``pull(timeout=...)`` waits for
    an item with the GIL released. Open a queue's cache with ``eviction_policy='none'``. For
    jobs that must survive a worker's crash, see :class:`~diskcache_oxide.JobQueue`.
    """

    def __new__(cls, *args: Any, durable: bool = False, **kwargs: Any) -> Self:
        # A durable handle is an instance of a subclass that turns operational errors into
        # misses, so the methods of every other handle stay the binding's own (D-020).
        if durable and not issubclass(cls, _DurableCache):
            return cast("Self", super().__new__(_durable_class(cls)))
        return super().__new__(cls)

    def _dco_store(self) -> DirectoryStore:
        """This directory's answers to the features (the seam, ``_store.store_of``)."""
        return DirectoryStore(self)

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        timeout: float = 60,
        disk: object = None,
        *,
        pickle: bool = False,
        on_decode_error: Literal["raise", "miss"] = "raise",
        read_only: bool = False,
        durable: bool = False,
        **settings: Any,
    ) -> None:
        if disk is not None:
            raise ValueError(_DISK_UNSUPPORTED)
        if directory is None:
            if read_only:
                raise ValueError("read_only=True needs the directory of an existing cache")
            import tempfile  # only for a cache without a directory (issue 33)

            directory = tempfile.mkdtemp(prefix="diskcache-oxide-")
        path = directory_path(directory, type(self).__name__)
        self._open(
            path,
            seconds(timeout, "timeout", ANY),
            bool(pickle),
            on_decode_error,
            settings,
            bool(read_only),
            bool(durable),
        )

    def __reduce__(self) -> tuple[Any, ...]:
        cls = type(self)
        if issubclass(cls, _DurableCache):
            cls = cls._durable_base
        return (
            _reopen,
            (
                cls,
                self.directory,
                self.timeout,
                self.pickle,
                self.on_decode_error,
                self.read_only,
                self.durable,
            ),
        )

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(self, *exception: object) -> None:
        self.close()

    @contextlib.contextmanager
    def transact(self, retry: bool = False) -> Iterator[None]:
        """Lock the cache for a group of operations that must happen together.

        Reads and writes inside the block are atomic; other writers wait. Transactions
        nest (inner blocks join the outer one) and belong to the thread that opened them.
        An exception leaving the outermost block rolls everything back.

        :param retry: retry on :class:`~diskcache_oxide.Timeout` instead of raising it
        :raises Timeout: if the lock could not be taken in time and ``retry`` is False
        """
        self._begin(retry)
        try:
            yield
        except BaseException:
            self._end(False)
            raise
        self._end(True)

    def check(self, fix: bool = False, retry: bool = False) -> list[warnings.WarningMessage]:
        """Check the database and value files for consistency; with ``fix``, repair.

        :return: the problems found, as ``warnings.WarningMessage`` records
        :raises Timeout: if the database stayed locked and ``retry`` is False
        """
        problems = self._check(fix, retry)
        with warnings.catch_warnings(record=True) as found:
            for message, category in problems:
                warnings.warn(message, category, stacklevel=1)
        return found

    def reset(self, key: str, value: Any = ENOVAL, update: bool = True) -> Any:
        """Read the setting ``key``, or with ``value`` change it.

        :param key: a name from :data:`DEFAULT_SETTINGS`, or one of the counters ``'count'``,
            ``'size'``, ``'hits'``, ``'misses'`` (read only)
        :param value: the new value (default: read only)
        :param update: store the change in the directory so other handles see it
        :return: the setting's value
        """
        if not isinstance(key, str):
            kind = type(key).__name__
            raise TypeError(f"reset(key=...) takes a setting's name as a str, not {kind}")
        if value is ENOVAL:
            return self._reset(key, None, update)
        self._reset(key, value, update)
        return value

    def memoize(
        self,
        name: str | None = None,
        typed: bool = False,
        expire: float | None = None,
        tag: str | int | float | bytes | None = None,
        ignore: Collection[int | str] = (),
    ) -> Callable[[Callable[P, R]], Memoized[P, R]]:
        """Decorator caching a function's results by its arguments.

        :param name: key prefix (default: the function's ``module.qualname``)
        :param typed: cache arguments of different types separately (``f(3)``, ``f(3.0)``)
        :param expire: seconds until a result expires (default: never; 0 or less: do not
            store results, only look them up)
        :param tag: tag stored with each result
        :param ignore: positions and keyword names left out of the key
        :return: a decorator; the wrapped function has ``__cache_key__(*args, **kwargs)``
        :raises TypeError: if used without parentheses (``@cache.memoize``)
        """
        return memoize_on(self, name, typed, expire, tag, ignore)


# ----- durable handles (D-020) ---------------------------------------------------------------


class _DurableCache(DurableCacheCalls, Cache):
    """A :class:`Cache` opened with ``durable=True``: each call with a ``durable`` miss in
    the API table (``_api.CALLS``) logs an operational error and returns that miss instead of
    raising it (D-020). The guarded calls are generated (``_faces/durable.py``, D-051)."""

    _durable_base: type[Cache] = Cache

    def _failed(self, call: str, error: BaseException, result: str) -> None:
        log().warning(
            "durable cache %s: %s failed, so the call %s: %s: %s",
            self.directory,
            call,
            result,
            type(error).__name__,
            error,
        )


_DURABLE_CLASSES: dict[type[Cache], type[_DurableCache]] = {Cache: _DurableCache}


def _durable_class(cls: type[Cache]) -> type[_DurableCache]:
    """The durable variant of ``cls`` (a subclass of it), made once per class."""
    made = _DURABLE_CLASSES.get(cls)
    if made is None:
        made = cast(
            type[_DurableCache],
            type(
                cls.__name__,
                (_DurableCache, cls),
                {
                    "__module__": cls.__module__,
                    "__qualname__": cls.__qualname__,
                    "_durable_base": cls,
                },
            ),
        )
        _DURABLE_CLASSES[cls] = made
    return made
