"""Persistent collections: :class:`Deque` and :class:`Index`, python-diskcache 5.6.3's API.

Both are thin Python layers over a :class:`~diskcache_oxide.Cache` that holds nothing
else. A ``Deque`` keeps its items under the cache's queue keys (``push``/``pull``/``peek``
at either end); an ``Index`` is a mapping whose iteration order is the order keys were
first stored. Every process and thread that opens the same directory sees the same
collection. The caches they open use ``eviction_policy='none'``: a collection must never
lose an item to the size limit. See docs/guide-collections-and-recipes.md.

``Deque.fromcache`` and ``Index.fromcache`` also take a
:class:`~diskcache_oxide.remote.RedisCache` (issue 21, D-058): every call that is one cache
call, or one script, works there as on a directory; a call that needs several cache calls to
be one transaction (a bounded deque's trim, ``rotate``, ``reverse``, setting an item by
position, ``transact()``) raises :class:`~diskcache_oxide.remote.UnsupportedError`, and
``Index.update`` and ``popitem``, ``del deque[i]`` and ``remove`` take a lock-free path there.
"""

from __future__ import annotations

import contextlib
import itertools
import operator
import os
from collections import OrderedDict
from collections.abc import (
    Callable,
    Collection,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
    Sequence,
)
from typing import Any, Literal, ParamSpec, TypeAlias, TypeVar

from ._keying import Memoized
from ._open import open_directory
from ._sentinels import ENOVAL
from ._store import Stored, has_store, store_of

__all__ = ["Deque", "Index"]

P = ParamSpec("P")
R = TypeVar("R")
_D = TypeVar("_D", bound="Deque")
_I = TypeVar("_I", bound="Index")

#: How many keys one batched read of an iteration fetches at a time.
_BATCH = 64
#: How many values an ``extend`` pushes per call into the engine.
_PUSH_BATCH = 1000

_MISSING = (None, ENOVAL)

_Side = Literal["front", "back"]


def _check_maxlen(maxlen: float | None) -> int | None:
    """``maxlen`` as an int, or None for no bound (``None`` or ``float('inf')``)."""
    if maxlen is None or maxlen == float("inf"):
        return None
    if isinstance(maxlen, bool) or not isinstance(maxlen, int):
        raise TypeError(f"maxlen must be an int or None, not {type(maxlen).__name__}")
    if maxlen < 0:
        raise ValueError(f"maxlen must be non-negative, not {maxlen}")
    return maxlen


#: The cache a collection lives in: a Cache or a RedisCache (a cache with a store,
#: ``_store.has_store``). Typed loosely, so that this module names no backend (issue 31).
_Cache: TypeAlias = Any

#: Whether the caches of a class cannot run a group of calls as one transaction (a Redis
#: namespace, D-058), as their store says: asked once per class (the class gives the store),
#: since a push asks at every call.
_NOT_TRANSACTIONAL: dict[type, bool] = {}


def _on_redis(cache: _Cache) -> bool:
    """Whether ``cache`` cannot run a group of calls as one transaction (a RedisCache: its
    store says so, D-058)."""
    kind = type(cache)
    found = _NOT_TRANSACTIONAL.get(kind)
    if found is None:
        # Anything without a store (python-diskcache's suite puts a mock in its place) is
        # taken as a directory's cache, as the type test this replaces took it.
        found = has_store(cache) and not store_of(cache).transactional
        _NOT_TRANSACTIONAL[kind] = found
    return found


def _checked(cache: Any, cls: str) -> _Cache:
    """``cache`` if a collection can live in it: a Cache or a RedisCache."""
    if not has_store(cache):
        raise TypeError(
            f"{cls}.fromcache() takes a Cache or a RedisCache, not {type(cache).__name__}"
        )
    return cache


def _unsupported(what: str) -> Exception:
    """The clear error for a collection call that cannot hold on Redis (D-058)."""
    from .errors import UnsupportedError

    return UnsupportedError(
        f"{what} on a RedisCache needs several calls to be one transaction, which Redis "
        "cannot hold (D-058); use a directory's Cache for it, or the calls that are one "
        "script: append, appendleft, extend, pop, popleft, peek, del deque[i], clear"
    )


def _values(cache: _Cache, keys: Iterator[Any]) -> Iterator[Any]:
    """The values of ``keys`` in order, read in batches; keys removed meanwhile are skipped."""
    while True:
        batch = list(itertools.islice(keys, _BATCH))
        if not batch:
            return
        for value in cache.get_many(batch, default=ENOVAL, retry=True):
            if value is not ENOVAL:
                yield value


def _compare(seq_op: Callable[[Any, Any], Any], name: str) -> Callable[[Deque, object], Any]:
    """A rich comparison of a Deque with any sequence, as Python compares two lists."""

    def compare(self: Deque, that: object) -> Any:
        if not isinstance(that, Sequence):
            return NotImplemented
        mine, theirs = list(self), list(that)
        if len(mine) != len(theirs):
            if seq_op is operator.eq:
                return False
            if seq_op is operator.ne:
                return True
        for alpha, beta in zip(mine, theirs, strict=False):
            if alpha != beta:
                return seq_op(alpha, beta)
        return seq_op(len(mine), len(theirs))

    compare.__name__ = name
    compare.__doc__ = f"``{name}`` compared item by item, as lists compare."
    return compare


class Deque(Sequence[Any]):
    """A double-ended queue stored in a cache directory: python-diskcache's ``Deque``.

    :param iterable: items appended at the back when the deque is opened
    :param directory: the directory (default: a new temporary directory, never removed)
    :param maxlen: the most items the deque keeps; appending beyond it drops items from
        the other end (default None: no bound). ``maxlen`` reads back as ``float('inf')``
        when there is no bound, as in python-diskcache

    Pushing and popping at either end is one short transaction. Indexing, ``remove``,
    ``count`` and iteration walk the keys, so they cost time linear in the length.
    """

    _cache: _Cache
    _maxlen: int | None

    def __init__(
        self,
        iterable: Iterable[Any] = (),
        directory: str | os.PathLike[str] | None = None,
        maxlen: int | None = None,
    ) -> None:
        self._maxlen = _check_maxlen(maxlen)
        self._cache = open_directory(directory, opener=type(self).__name__, eviction_policy="none")
        self.extend(iterable)

    @classmethod
    def fromcache(
        cls: type[_D],
        cache: Stored,
        iterable: Iterable[Any] = (),
        maxlen: int | None = None,
    ) -> _D:
        """A deque over ``cache``, an open :class:`Cache` or
        :class:`~diskcache_oxide.remote.RedisCache` that holds nothing else.

        The cache should use ``eviction_policy='none'``.

        :raises UnsupportedError: for a ``maxlen`` on a RedisCache (trimming to it takes
            several calls in one transaction)
        """
        self = cls.__new__(cls)
        self._cache = _checked(cache, "Deque")
        self._maxlen = _check_maxlen(maxlen)
        if self._maxlen is not None and _on_redis(cache):
            raise _unsupported("a bounded Deque (maxlen)")
        self.extend(iterable)
        return self

    # ------------------------------------------------------------------ attributes

    @property
    def cache(self) -> _Cache:
        """The cache the items live in."""
        return self._cache

    @property
    def directory(self) -> str:
        """The directory the items live in (a RedisCache has none: AttributeError)."""
        directory: str = self._cache.directory
        return directory

    @property
    def maxlen(self) -> float:
        """The most items kept; ``float('inf')`` when unbounded."""
        return float("inf") if self._maxlen is None else self._maxlen

    @maxlen.setter
    def maxlen(self, value: int | None) -> None:
        """Change the bound, dropping items from the front until the deque fits."""
        maxlen = _check_maxlen(value)
        if maxlen is not None and _on_redis(self._cache):
            raise _unsupported("a bounded Deque (maxlen)")
        self._maxlen = maxlen
        if maxlen is None:
            return  # nothing to trim
        with self._cache.transact(retry=True):
            self._trim("front")

    def _trim(self, side: _Side) -> None:
        """Drop items from ``side`` until the deque fits its bound (inside a transaction)."""
        if self._maxlen is None:
            return
        excess = len(self._cache) - self._maxlen
        if excess > 0:
            self._cache.pull_many(excess, side=side)

    # ------------------------------------------------------------------ ends

    def append(self, value: Any) -> None:
        """Add ``value`` at the back; with a full ``maxlen``, drop the front item."""
        if self._maxlen is None and _on_redis(self._cache):
            self._cache.push(value)  # one script: nothing to trim
            return
        with self._cache.transact(retry=True):
            self._cache.push(value, retry=True)
            self._trim("front")

    def appendleft(self, value: Any) -> None:
        """Add ``value`` at the front; with a full ``maxlen``, drop the back item."""
        if self._maxlen is None and _on_redis(self._cache):
            self._cache.push(value, side="front")
            return
        with self._cache.transact(retry=True):
            self._cache.push(value, side="front", retry=True)
            self._trim("back")

    def _extend(self, iterable: Iterable[Any], side: _Side) -> None:
        # Extending a deque with itself reads it whole first, as collections.deque does.
        values = iter(list(iterable) if iterable is self else iterable)
        trim: _Side = "back" if side == "front" else "front"
        while True:
            batch = list(itertools.islice(values, _PUSH_BATCH))
            if not batch:
                return
            if self._maxlen is None and _on_redis(self._cache):
                self._cache.push_many(batch, side=side)  # one script, all or nothing
                continue
            with self._cache.transact(retry=True):
                self._cache.push_many(batch, side=side)
                self._trim(trim)

    def extend(self, iterable: Iterable[Any]) -> None:
        """Append each item of ``iterable`` at the back, in order."""
        self._extend(iterable, "back")

    def extendleft(self, iterable: Iterable[Any]) -> None:
        """Add each item of ``iterable`` at the front, in turn (so they end up reversed)."""
        self._extend(iterable, "front")

    def __iadd__(self: _D, iterable: Iterable[Any]) -> _D:
        self.extend(iterable)
        return self

    def _end(self, side: _Side, remove: bool, what: str) -> Any:
        if remove:
            _, value = self._cache.pull(default=_MISSING, side=side, retry=True)
        else:
            _, value = self._cache.peek(default=_MISSING, side=side, retry=True)
        if value is ENOVAL:
            raise IndexError(f"{what} from an empty deque")
        return value

    def pop(self) -> Any:
        """Remove and return the back item.

        :raises IndexError: if the deque is empty
        """
        return self._end("back", True, "pop")

    def popleft(self) -> Any:
        """Remove and return the front item.

        :raises IndexError: if the deque is empty
        """
        return self._end("front", True, "pop")

    def peek(self) -> Any:
        """The back item, left in place.

        :raises IndexError: if the deque is empty
        """
        return self._end("back", False, "peek")

    def peekleft(self) -> Any:
        """The front item, left in place.

        :raises IndexError: if the deque is empty
        """
        return self._end("front", False, "peek")

    # ------------------------------------------------------------------ by position

    def _key_at(self, index: int) -> Any:
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"deque indices must be integers, not {type(index).__name__}")
        size = len(self._cache)
        if not -size <= index < size:
            raise IndexError("deque index out of range")
        if index >= 0:
            keys = self._cache.iterkeys()
            steps = index
        else:
            keys = self._cache.iterkeys(reverse=True)
            steps = -index - 1
        for key in itertools.islice(keys, steps, None):
            return key
        raise IndexError("deque index out of range")

    def _at(self, index: int, action: Callable[[Any], Any]) -> Any:
        if _on_redis(self._cache):
            raise _unsupported("setting a Deque's item by position")
        with self._cache.transact(retry=True):
            return action(self._key_at(index))

    def __getitem__(self, index: int) -> Any:  # type: ignore[override]
        """The item at ``index`` (negative counts from the back).

        :raises IndexError: if ``index`` is out of range
        """
        while True:
            # Read without the write lock; a key removed between the walk and the read
            # (another process popped it) means the positions moved: walk again.
            value = self._cache.get(self._key_at(index), ENOVAL, retry=True)
            if value is not ENOVAL:
                return value

    def __setitem__(self, index: int, value: Any) -> None:
        """Replace the item at ``index``.

        :raises IndexError: if ``index`` is out of range
        """
        self._at(index, lambda key: self._cache.__setitem__(key, value))

    def __delitem__(self, index: int) -> None:
        """Remove the item at ``index``.

        :raises IndexError: if ``index`` is out of range
        """
        if _on_redis(self._cache):
            # Lock-free: remove the key found at ``index`` only if it is still there; if
            # another caller removed it first, the positions moved: walk again.
            while not self._cache.delete(self._key_at(index)):
                pass
            return
        self._at(index, self._cache.__delitem__)

    # ------------------------------------------------------------------ whole deque

    def __len__(self) -> int:
        return len(self._cache)

    def __iter__(self) -> Iterator[Any]:
        """The items from front to back."""
        return _values(self._cache, iter(self._cache.iterkeys()))

    def __reversed__(self) -> Iterator[Any]:
        """The items from back to front."""
        return _values(self._cache, iter(self._cache.iterkeys(reverse=True)))

    def __contains__(self, value: object) -> bool:
        return any(item is value or item == value for item in self)

    def count(self, value: Any) -> int:
        """How many items equal ``value``."""
        return sum(1 for item in self if value == item)

    def index(self, value: Any, start: int = 0, stop: int | None = None) -> int:
        """The position of the first item equal to ``value`` in ``[start, stop)``.

        :raises ValueError: if there is none
        """
        size = len(self)
        if start < 0:
            start = max(size + start, 0)
        if stop is not None and stop < 0:
            stop += size
        for position, item in enumerate(self):
            if stop is not None and position >= stop:
                break
            if position >= start and (item is value or item == value):
                return position
        raise ValueError(f"{value!r} is not in deque")

    def remove(self, value: Any) -> None:
        """Remove the first item equal to ``value``.

        :raises ValueError: if there is none
        """
        cache = self._cache
        for key in cache.iterkeys():
            item = cache.get(key, default=ENOVAL, retry=True)
            if item is not ENOVAL and value == item and cache.delete(key, retry=True):
                return
        raise ValueError("deque.remove(value): value not in deque")

    def clear(self) -> None:
        """Remove every item."""
        self._cache.clear(retry=True)

    def copy(self: _D) -> _D:
        """Another Deque over the same directory (the same items) and ``maxlen``."""
        return type(self).fromcache(self._cache, maxlen=self._maxlen)

    def reverse(self) -> None:
        """Reverse the items in place, in one transaction."""
        cache = self._cache
        if _on_redis(cache):
            raise _unsupported("Deque.reverse()")
        with cache.transact(retry=True):
            keys = list(cache.iterkeys())
            for front, back in zip(keys[: len(keys) // 2], reversed(keys), strict=False):
                first, last = cache[front], cache[back]
                cache[front] = last
                cache[back] = first

    def rotate(self, steps: int = 1) -> None:
        """Move the last ``steps`` items to the front (negative: the first to the back),
        in one transaction."""
        if not isinstance(steps, int):
            raise TypeError(f"integer argument expected, got {type(steps).__name__}")
        cache = self._cache
        if _on_redis(cache):
            raise _unsupported("Deque.rotate()")
        with cache.transact(retry=True):
            size = len(cache)
            if not size:
                return
            steps %= size
            if steps > size // 2:
                moved = cache.pull_many(size - steps, side="front")
                cache.push_many([value for _, value in moved], side="back")
            elif steps:
                moved = cache.pull_many(steps, side="back")
                cache.push_many([value for _, value in moved], side="front")

    @contextlib.contextmanager
    def transact(self) -> Iterator[None]:
        """Hold the deque's write lock for a group of operations (waits for the lock)."""
        with self._cache.transact(retry=True):
            yield

    __eq__ = _compare(operator.eq, "__eq__")
    __ne__ = _compare(operator.ne, "__ne__")
    __lt__ = _compare(operator.lt, "__lt__")
    __gt__ = _compare(operator.gt, "__gt__")
    __le__ = _compare(operator.le, "__le__")
    __ge__ = _compare(operator.ge, "__ge__")
    __hash__ = None  # type: ignore[assignment]

    def __getstate__(self) -> tuple[_Cache, int | None]:
        return self._cache, self._maxlen

    def __setstate__(self, state: tuple[_Cache, int | None]) -> None:
        self._cache, self._maxlen = state

    def __repr__(self) -> str:
        if _on_redis(self._cache):
            return f"{type(self).__name__}(namespace={self._cache.namespace!r})"
        return f"{type(self).__name__}(directory={self.directory!r})"


class Index(MutableMapping[Any, Any]):
    """A mapping stored in a cache directory: python-diskcache's ``Index``.

    ``Index()``, ``Index(directory)``, ``Index(directory, mapping_or_pairs, **items)`` or
    ``Index(mapping_or_pairs, **items)``: a first argument that is a str, bytes or path is
    the directory (default: a new temporary directory, never removed); the rest are stored
    as ``dict.update`` would.

    Keys iterate in the order they were first stored. Keys are matched by their stored
    encoding, not by ``hash()``: ``1`` and ``1.0`` are different keys, and so are ``1`` and
    ``True``.
    """

    _cache: _Cache

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        directory: str | None = None
        if args and isinstance(args[0], (str, bytes, os.PathLike)):
            directory = os.fsdecode(args[0])
            args = args[1:]
        elif args and args[0] is None:
            args = args[1:]
        self._cache = open_directory(directory, opener=type(self).__name__, eviction_policy="none")
        self.update(*args, **kwargs)

    @classmethod
    def fromcache(cls: type[_I], cache: Stored, *args: Any, **kwargs: Any) -> _I:
        """An index over ``cache``, an open :class:`Cache` or
        :class:`~diskcache_oxide.remote.RedisCache`, updated with ``args``/``kwargs``.

        The cache should use ``eviction_policy='none'``.
        """
        self = cls.__new__(cls)
        self._cache = _checked(cache, "Index")
        self.update(*args, **kwargs)
        return self

    @property
    def cache(self) -> _Cache:
        """The cache the items live in."""
        return self._cache

    @property
    def directory(self) -> str:
        """The directory the items live in (a RedisCache has none: AttributeError)."""
        directory: str = self._cache.directory
        return directory

    # ------------------------------------------------------------------ mapping

    def __getitem__(self, key: Any) -> Any:
        """The value stored under ``key``.

        :raises KeyError: if ``key`` is absent
        """
        return self._cache[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        """Store ``value`` under ``key``; a key already there keeps its place in the order."""
        self._cache[key] = value

    def __delitem__(self, key: Any) -> None:
        """Remove ``key`` and its value.

        :raises KeyError: if ``key`` is absent
        """
        del self._cache[key]

    def __contains__(self, key: object) -> bool:
        return key in self._cache

    def __len__(self) -> int:
        return len(self._cache)

    def __iter__(self) -> Iterator[Any]:
        """The keys, in the order they were first stored."""
        return iter(self._cache)

    def __reversed__(self) -> Iterator[Any]:
        """The keys, last stored first."""
        return reversed(self._cache)

    def get(self, key: Any, default: Any = None) -> Any:
        """The value of ``key``, or ``default``."""
        return self._cache.get(key, default, retry=True)

    def update(self, *args: Any, **kwargs: Any) -> None:
        """Store items as ``dict.update`` does, in one transaction."""
        if not args and not kwargs:
            return
        if _on_redis(self._cache):
            # One set_many script stores them all at once, in order (a later pair of one
            # key wins, as in dict.update).
            if len(args) > 1:
                raise TypeError(f"update expected at most 1 argument, got {len(args)}")
            pairs: list[tuple[Any, Any]] = []
            if args:
                other = args[0]
                if isinstance(other, Mapping):
                    pairs += [(key, other[key]) for key in other]
                elif hasattr(other, "keys"):
                    pairs += [(key, other[key]) for key in other.keys()]
                else:
                    pairs += [(key, value) for key, value in other]
            pairs += list(kwargs.items())
            self._cache.set_many(pairs)
            return
        with self._cache.transact(retry=True):
            MutableMapping.update(self, *args, **kwargs)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        """The value of ``key``; if absent, store ``default`` first and return it."""
        cache = self._cache
        while True:
            value = cache.get(key, ENOVAL, retry=True)
            if value is not ENOVAL:
                return value
            if cache.add(key, default, retry=True):
                return default

    def pop(self, key: Any, default: Any = ENOVAL) -> Any:
        """Remove ``key`` and return its value, or ``default`` if absent.

        :raises KeyError: if ``key`` is absent and no ``default`` was given
        """
        value = self._cache.pop(key, default=default, retry=True)
        if value is ENOVAL:
            raise KeyError(key)
        return value

    def popitem(self, last: bool = True) -> tuple[Any, Any]:
        """Remove and return the last stored ``(key, value)`` (``last=False``: the first).

        :raises KeyError: if the index is empty
        """
        cache = self._cache
        if _on_redis(cache):
            # Lock-free: pop the key found at that end; if another caller removed it first,
            # look again.
            while True:
                key, _ = cache.peekitem(last=last)
                value = cache.pop(key, ENOVAL)
                if value is not ENOVAL:
                    return key, value
        with cache.transact(retry=True):
            key, value = cache.peekitem(last=last)
            del cache[key]
        return key, value

    def peekitem(self, last: bool = True) -> tuple[Any, Any]:
        """The last stored ``(key, value)`` (``last=False``: the first), left in place.

        :raises KeyError: if the index is empty
        """
        item: tuple[Any, Any] = self._cache.peekitem(last, retry=True)
        return item

    def clear(self) -> None:
        """Remove every item."""
        self._cache.clear(retry=True)

    # ------------------------------------------------------------------ queue

    def push(self, value: Any, prefix: str | None = None, side: _Side = "back") -> Any:
        """Store ``value`` under a new queue key at ``side``; see :meth:`Cache.push`.

        :return: the new key
        """
        return self._cache.push(value, prefix, side, retry=True)

    def pull(
        self, prefix: str | None = None, default: Any = (None, None), side: _Side = "front"
    ) -> Any:
        """Remove and return ``(key, value)`` from ``side`` of the queue under ``prefix``,
        or ``default`` if it is empty; see :meth:`Cache.pull`."""
        return self._cache.pull(prefix, default, side, retry=True)

    # ------------------------------------------------------------------ the rest

    def memoize(
        self, name: str | None = None, typed: bool = False, ignore: Collection[int | str] = ()
    ) -> Callable[[Callable[P, R]], Memoized[P, R]]:
        """Decorator caching a function's results in the index; see :meth:`Cache.memoize`."""
        decorator: Callable[[Callable[P, R]], Memoized[P, R]]
        decorator = self._cache.memoize(name, typed, ignore=ignore)
        return decorator

    @contextlib.contextmanager
    def transact(self) -> Iterator[None]:
        """Hold the index's write lock for a group of operations (waits for the lock)."""
        with self._cache.transact(retry=True):
            yield

    def __eq__(self, other: object) -> bool:
        """Equal to a mapping with the same items; in the same order too when ``other`` is
        an Index or an OrderedDict."""
        if not isinstance(other, Mapping):
            return NotImplemented
        if len(self) != len(other):
            return False
        if isinstance(other, (Index, OrderedDict)):
            pairs = zip(self.items(), other.items(), strict=False)
            return all(ak == bk and av == bv for (ak, av), (bk, bv) in pairs)
        return all(value == other.get(key, ENOVAL) for key, value in self.items())

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # type: ignore[assignment]

    def __getstate__(self) -> _Cache:
        return self._cache

    def __setstate__(self, state: _Cache) -> None:
        self._cache = state

    def __repr__(self) -> str:
        if _on_redis(self._cache):
            return f"{type(self).__name__}(namespace={self._cache.namespace!r})"
        return f"{type(self).__name__}({self.directory!r})"
