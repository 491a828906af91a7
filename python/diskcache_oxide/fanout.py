"""The :class:`FanoutCache`: python-diskcache 5.6.3's ``FanoutCache`` API over plain shards.

A FanoutCache is a directory of ``shards`` plain :class:`~diskcache_oxide.Cache` directories
(``000``, ``001``, ...). Each key lives in exactly one shard, picked by :func:`shard_hash`,
so writers to different shards do not wait for each other. The directory records its
layout in ``fanout.json`` (see docs/decisions/D-021-fanout.md).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import os.path
import struct
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from . import _core
from ._faces.fanout import FanoutCacheCalls
from ._keying import Memoized, memoize_on
from ._paths import directory_path
from ._sentinels import ENOVAL
from .core import DEFAULT_SETTINGS, Cache
from .errors import Timeout
from .registry import _BY_TYPE

if TYPE_CHECKING:
    from .persistent import Deque, Index


def _python_adler32(data: bytes) -> int:
    """RFC 1950's Adler-32 as zlib.adler32 computes it (starting value 1), for a Python built
    without zlib."""
    a, b = 1, 0
    # Reduced every 5552 bytes, as zlib does (its NMAX): Python's ints would not overflow, but
    # the sums stay small.
    for start in range(0, len(data), 5552):
        for byte in data[start : start + 5552]:
            a += byte
            b += a
        a %= 65521
        b %= 65521
    return (b << 16) | a


# zlib's C adler32 hashes every key a FanoutCache routes, so it is bound once here rather than
# imported at each call. A Python built without zlib (some minimal and musl builds) still
# imports the package and uses FanoutCache: the pure-Python adler32 gives the same shard for
# every key, only slower (tests/api/test_imports_without_stdlib_modules.py checks both).
_adler32: Callable[[bytes], int]
try:
    import zlib

    _adler32 = zlib.adler32
except ImportError:
    _adler32 = _python_adler32

__all__ = ["QUEUE_CALLS", "FanoutCache", "shard_hash"]

P = ParamSpec("P")
R = TypeVar("R")
_F = TypeVar("_F", bound="FanoutCache")

_MASK = 0xFFFFFFFF
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1

#: The queue calls of :class:`~diskcache_oxide.Cache` a FanoutCache does not have.
QUEUE_CALLS = frozenset({"push", "pull", "peek", "push_many", "pull_many", "peekitem"})

#: Constructor keywords that describe the handle, not settings stored in the directory.
_HANDLE_OPTIONS = ("pickle", "on_decode_error", "read_only", "durable")

_MARKER = "fanout.json"

_NO_QUEUE = (
    "FanoutCache has no {name}(): its items are spread over shards, so there is no front, "
    "back or order to queue by. Open a plain Cache in a directory of its own for the queue, "
    "for example Cache('/var/lib/my-app/state/jobs', eviction_policy='none') "
    "(see docs/state-isnt-cache.md)"
)


def shard_hash(key: Any) -> int:
    """A 32-bit hash of ``key`` that is the same in every process and every Python run.

    For the keys the cache stores natively (exact ``str``, ``bytes``, ``int`` within 64
    bits and ``float``) it is the hash python-diskcache 5.6.3 uses, so such a key lands
    in the shard python-diskcache would pick. Any other key is hashed by a canonical
    encoding of its value (:func:`_canonical`), never by Python's randomized ``hash()``.
    """
    kind = type(key)
    if kind is str:
        return _adler32(key.encode("utf-8", "surrogatepass")) & _MASK
    if kind is bytes:
        return _adler32(key) & _MASK
    if kind is int and _I64_MIN <= key <= _I64_MAX:
        return int(key % _MASK)
    if kind is float:
        return _adler32(struct.pack("!d", key)) & _MASK
    return _adler32(_canonical(key)) & _MASK


def _canonical(obj: Any) -> bytes:
    """Bytes that depend only on the value of ``obj``: equal keys give equal bytes.

    Each form starts with a tag byte; containers carry their length and their items'
    encodings, and the items of sets and dicts are sorted by their encodings. A type
    registered with :func:`~diskcache_oxide.register_type` is encoded by its registered
    name and encoder, and any other type by its ``module.qualname`` and ``repr()``.
    """
    kind = type(obj)
    if obj is None:
        return b"N"
    if kind is bool:
        return b"T" if obj else b"F"
    if kind is int:
        return b"i" + str(obj).encode("ascii")
    if kind is float:
        return b"f" + struct.pack("!d", obj)
    if kind is str:
        text: bytes = obj.encode("utf-8", "surrogatepass")
        return b"s" + _length(text) + text
    if kind is bytes:
        raw: bytes = obj
        return b"b" + _length(raw) + raw
    if kind is tuple or kind is list:
        tag = b"(" if kind is tuple else b"["
        return tag + _joined([_canonical(item) for item in obj])
    if kind is frozenset or kind is set:
        tag = b"{" if kind is frozenset else b"<"
        return tag + _joined(sorted(_canonical(item) for item in obj))
    if kind is dict:
        pairs = sorted(_canonical(k) + _canonical(v) for k, v in obj.items())
        return b"d" + _joined(pairs)
    registered = _BY_TYPE.get(kind)
    if registered is not None:
        name, encode = registered
        data = name.encode("utf-8")
        return b"c" + _length(data) + data + _canonical(encode(obj))
    data = f"{kind.__module__}.{kind.__qualname__}:{obj!r}".encode("utf-8", "surrogatepass")
    return b"r" + _length(data) + data


def _length(data: bytes) -> bytes:
    return struct.pack("!Q", len(data))


def _joined(parts: list[bytes]) -> bytes:
    return struct.pack("!Q", len(parts)) + b"".join(_length(part) + part for part in parts)


def _reopen(
    cls: type[FanoutCache], directory: str, shards: int, timeout: float, options: dict[str, Any]
) -> FanoutCache:
    fanout = cls.__new__(cls)
    fanout._setup(directory, shards, timeout, options, {})
    return fanout


class FanoutCache(_core.FanoutCore, FanoutCacheCalls):
    """A cache whose keys are spread over ``shards`` plain caches: python-diskcache's
    ``FanoutCache``.

    :param directory: the cache directory (default: a new temporary directory); ``~`` and
        environment variables are expanded
    :param shards: how many shards (default 8); a directory keeps the count it was made
        with, and opening it with another raises
        :class:`~diskcache_oxide.LayoutMismatchError`
    :param timeout: seconds a call waits on a locked shard (default 0.010). A call that
        times out does not raise unless given ``retry=True``: a write returns False (or
        None for ``incr``/``decr``) and a read returns its default
    :param disk: must be None, as for :class:`~diskcache_oxide.Cache`
    :param settings: any of :data:`~diskcache_oxide.DEFAULT_SETTINGS`, and the handle
        options ``pickle``, ``on_decode_error``, ``read_only`` and ``durable`` of
        :class:`~diskcache_oxide.Cache`. ``size_limit`` is for the whole cache: each shard
        gets ``size_limit // shards``

    There are no queue calls (``push``, ``pull``, ...): open a plain Cache in a directory of
    its own for a queue.
    """

    _directory: str
    _count: int
    _timeout: float
    _options: dict[str, Any]
    _caches: dict[str, Cache]
    _deques: dict[str, Deque]
    _indexes: dict[str, Index]

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        shards: int = 8,
        timeout: float = 0.010,
        disk: object = None,
        **settings: Any,
    ) -> None:
        if disk is not None:
            raise ValueError(
                "diskcache_oxide does not support custom Disk classes (see Cache); "
                "open the FanoutCache without disk="
            )
        if directory is None:
            import tempfile  # only for a cache without a directory (issue 33)

            directory = tempfile.mkdtemp(prefix="diskcache-oxide-")
        path = directory_path(directory, type(self).__name__)
        options = {name: settings.pop(name) for name in _HANDLE_OPTIONS if name in settings}
        if not options.get("read_only") or "size_limit" in settings:
            # As python-diskcache: the whole cache's size limit, shared out over the shards.
            limit = settings.pop("size_limit", DEFAULT_SETTINGS["size_limit"])
            settings["size_limit"] = int(limit) // max(int(shards), 1)
        self._setup(path, shards, timeout, options, settings)

    def _setup(
        self,
        directory: str,
        shards: int,
        timeout: float,
        options: dict[str, Any],
        settings: dict[str, Any],
    ) -> None:
        if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
            raise ValueError(f"shards must be a positive int, not {shards!r}")
        self._directory = directory
        self._count = shards
        self._timeout = float(timeout)
        self._options = dict(options)
        self._caches = {}
        self._deques = {}
        self._indexes = {}
        self._shards = ()
        if not options.get("read_only") or any(
            os.path.exists(os.path.join(directory, name)) for name in (_MARKER, "cache.db")
        ):
            # Read-only, this only checks a recorded layout: it never writes the marker.
            _core.claim_fanout(directory, shards)
        opened: list[Cache] = []
        try:
            for number in range(shards):
                shard_dir = os.path.join(directory, f"{number:03d}")
                opened.append(Cache(shard_dir, self._timeout, **options, **settings))
        except BaseException:
            for shard in opened:
                shard.close()
            raise
        self._shards = tuple(opened)

    # ------------------------------------------------------------------ attributes

    @property
    def directory(self) -> str:
        """The cache directory."""
        return self._directory

    @property
    def shards(self) -> int:
        """How many shards the cache has."""
        return self._count

    @property
    def timeout(self) -> float:
        """Seconds a call waits on a locked shard."""
        return self._timeout

    def __getattr__(self, name: str) -> Any:
        if name in QUEUE_CALLS:
            raise AttributeError(_NO_QUEUE.format(name=name), name=name, obj=self)
        if name in DEFAULT_SETTINGS or name in _HANDLE_OPTIONS:
            shards = self._shards
            if shards:
                return getattr(shards[0], name)
        raise AttributeError(
            f"{type(self).__name__!r} object has no attribute {name!r}", name=name, obj=self
        )

    def _shard(self, key: Any) -> Cache:
        shard: Cache = self._shards[shard_hash(key) % self._count]
        return shard

    # ------------------------------------------------------------------ single keys
    # set, add, touch, incr, decr, get, pop, delete and the item protocols are the binding's
    # (FanoutCore, D-069): Cache's call on the shard of ``key``, routed in Rust; a shard that
    # stays locked gives the call's FanoutCache miss (the API table's ``fanout`` column: False,
    # None or the bare default) instead of raising Timeout, unless ``retry``. get_or_compute is
    # generated from the same table into _faces/fanout.py (FanoutCacheCalls), routed by _shard.

    def read(self, key: Any) -> Any:
        """A binary file opened on the value of ``key``.

        :raises KeyError: if ``key`` is absent
        """
        handle = self.get(key, default=ENOVAL, read=True, retry=True)
        if handle is ENOVAL:
            raise KeyError(key)
        return handle

    # ------------------------------------------------------------------ many keys

    def _by_shard(self, keys: Iterable[Any]) -> dict[int, list[tuple[int, Any]]]:
        """(position, key) pairs grouped by the index of their shard."""
        groups: dict[int, list[tuple[int, Any]]] = {}
        for position, key in enumerate(keys):
            groups.setdefault(shard_hash(key) % self._count, []).append((position, key))
        return groups

    def get_many(self, keys: Iterable[Any], default: Any = None, retry: bool = False) -> list[Any]:
        """The values of ``keys``, in order, one batch per shard; ``default`` for a key that is
        absent or whose shard stayed locked (without ``retry``)."""
        keys = list(keys)
        values: list[Any] = [default] * len(keys)
        for index, group in self._by_shard(keys).items():
            try:
                found = self._shards[index].get_many([k for _, k in group], default, retry)
            except Timeout:
                continue
            for (position, _), value in zip(group, found, strict=True):
                values[position] = value
        return values

    def set_many(
        self,
        mapping: Mapping[Any, Any] | Iterable[tuple[Any, Any]],
        expire: float | None = None,
        tag: str | int | float | bytes | None = None,
        retry: bool = False,
    ) -> bool:
        """Store every pair, one transaction per shard. False if a shard stayed locked
        (without ``retry``): that shard's pairs were not stored, the others' were."""
        pairs = list(mapping.items() if isinstance(mapping, Mapping) else mapping)
        stored = True
        for index, group in self._by_shard(k for k, _ in pairs).items():
            try:
                self._shards[index].set_many([pairs[p] for p, _ in group], expire, tag, retry)
            except Timeout:
                stored = False
        return stored

    def delete_many(self, keys: Iterable[Any], retry: bool = False) -> int:
        """Remove ``keys``, one transaction per shard; how many were there. A shard that
        stayed locked (without ``retry``) removes none."""
        removed = 0
        for index, group in self._by_shard(keys).items():
            try:
                removed += self._shards[index].delete_many([k for _, k in group], retry)
            except Timeout:
                continue
        return removed

    # ------------------------------------------------------------------ whole cache

    @contextlib.contextmanager
    def transact(self, retry: bool = True) -> Iterator[None]:
        """Lock every shard, in order, for a group of operations that must happen together.

        Waits for each shard's lock (``retry`` must be True, as in python-diskcache). An
        exception leaving the block rolls back every shard.
        """
        if not retry:
            raise ValueError("retry must be True in FanoutCache.transact()")
        with contextlib.ExitStack() as stack:
            for shard in self._shards:
                stack.enter_context(shard.transact(retry=True))
            yield

    def check(self, fix: bool = False, retry: bool = False) -> list[warnings.WarningMessage]:
        """Check every shard (see :meth:`Cache.check`); the problems found, shard by shard."""
        found: list[warnings.WarningMessage] = []
        for shard in self._shards:
            found.extend(shard.check(fix, retry))
        return found

    def _remove(self, call: Callable[[Cache], int]) -> int:
        total = 0
        for shard in self._shards:
            while True:
                try:
                    total += call(shard)
                except Timeout as timeout:
                    # A shard that removed some items before timing out reports the count.
                    if timeout.args and isinstance(timeout.args[0], int):
                        total += timeout.args[0]
                else:
                    break
        return total

    def expire(self, retry: bool = False) -> int:
        """Remove expired items from every shard; how many were removed."""
        return self._remove(lambda shard: shard.expire(retry=retry))

    def evict(self, tag: str | int | float | bytes | None, retry: bool = False) -> int:
        """Remove the items tagged ``tag`` from every shard; how many were removed."""
        return self._remove(lambda shard: shard.evict(tag, retry=retry))

    def cull(self, retry: bool = False) -> int:
        """Remove items until every shard is within its size limit; how many were removed."""
        return self._remove(lambda shard: shard.cull(retry=retry))

    def clear(self, retry: bool = False) -> int:
        """Remove every item; how many were removed."""
        return self._remove(lambda shard: shard.clear(retry=retry))

    def create_tag_index(self) -> None:
        """Index every shard by tag."""
        for shard in self._shards:
            shard.create_tag_index()

    def drop_tag_index(self) -> None:
        """Drop every shard's tag index."""
        for shard in self._shards:
            shard.drop_tag_index()

    def stats(self, enable: bool = True, reset: bool = False) -> tuple[int, int]:
        """``(hits, misses)`` summed over the shards; see :meth:`Cache.stats`."""
        results = [shard.stats(enable, reset) for shard in self._shards]
        return sum(hits for hits, _ in results), sum(misses for _, misses in results)

    def volume(self) -> int:
        """The estimated size of every shard on disk, in bytes."""
        return sum(shard.volume() for shard in self._shards)

    def reset(self, key: str, value: Any = ENOVAL) -> Any:
        """Read or change the setting ``key`` in every shard (waiting on locked shards).

        As in python-diskcache, the value is per shard: ``reset('size_limit', n)`` gives
        each shard a limit of ``n``.
        """
        result: Any = None
        for shard in self._shards:
            while True:
                try:
                    result = shard.reset(key, value)
                except Timeout:
                    continue
                break
        return result

    def memoize(
        self,
        name: str | None = None,
        typed: bool = False,
        expire: float | None = None,
        tag: str | int | float | bytes | None = None,
        ignore: Collection[int | str] = (),
    ) -> Callable[[Callable[P, R]], Memoized[P, R]]:
        """Decorator caching a function's results by its arguments; see :meth:`Cache.memoize`."""
        return memoize_on(self, name, typed, expire, tag, ignore)

    def __len__(self) -> int:
        return sum(len(shard) for shard in self._shards)

    def __iter__(self) -> Iterator[Any]:
        return itertools.chain.from_iterable(iter(shard) for shard in self._shards)

    def __reversed__(self) -> Iterator[Any]:
        return itertools.chain.from_iterable(reversed(shard) for shard in reversed(self._shards))

    # ------------------------------------------------------------------ sub-stores

    def cache(self, name: str, timeout: float = 60, disk: object = None, **settings: Any) -> Cache:
        """The plain :class:`Cache` called ``name``, in ``<directory>/cache/<name>``.

        The same handle is returned for the same name until :meth:`close`.
        """
        try:
            return self._caches[name]
        except KeyError:
            directory = os.path.join(self._directory, "cache", *name.split("/"))
            opened = Cache(directory, timeout, disk, **settings)
            self._caches[name] = opened
            return opened

    def _collection_cache(self, kind: str, name: str) -> Cache:
        directory = os.path.join(self._directory, kind, *name.split("/"))
        if self._options.get("read_only"):
            return Cache(directory, **self._options)
        return Cache(directory, **self._options, eviction_policy="none")

    def deque(self, name: str, maxlen: int | None = None) -> Deque:
        """The :class:`~diskcache_oxide.Deque` called ``name``, in ``<directory>/deque/<name>``.

        The same Deque is returned for the same name until :meth:`close`.
        """
        try:
            return self._deques[name]
        except KeyError:
            from .persistent import Deque  # imported on first use, not with the package

            opened = Deque.fromcache(self._collection_cache("deque", name), maxlen=maxlen)
            self._deques[name] = opened
            return opened

    def index(self, name: str) -> Index:
        """The :class:`~diskcache_oxide.Index` called ``name``, in ``<directory>/index/<name>``.

        The same Index is returned for the same name until :meth:`close`.
        """
        try:
            return self._indexes[name]
        except KeyError:
            from .persistent import Index

            opened = Index.fromcache(self._collection_cache("index", name))
            self._indexes[name] = opened
            return opened

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Close every shard and sub-cache. Calls after this reopen connections."""
        for shard in self._shards:
            shard.close()
        for sub in self._caches.values():
            sub.close()
        self._caches.clear()
        for deque in self._deques.values():
            deque.cache.close()
        for index in self._indexes.values():
            index.cache.close()
        self._deques.clear()
        self._indexes.clear()

    def __enter__(self: _F) -> _F:
        return self

    def __exit__(self, *exception: object) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, ...]:
        return (_reopen, (type(self), self._directory, self._count, self._timeout, self._options))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._directory!r}, shards={self._count})"
