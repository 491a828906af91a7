"""``RedisCache``: python-diskcache's Cache calls and the queue on a Redis, Valkey or Redis
Cluster server (issue 21, D-058).

Each call is one Lua script (``_scripts``) run atomically on the server, on the keys of one
namespace only. Values and keys are stored as the engine's frames (``_core.encode_value`` and
``encode_key``), the same bytes a directory holds, so nothing is pickled unless
``pickle=True``.
"""

from __future__ import annotations

import io
import logging
import math
import re
import sys
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, BinaryIO, Literal, ParamSpec, TypeVar

try:
    import redis
    import redis.cluster
except ImportError as error:  # the extra is not installed: say how to get it
    raise ImportError(
        f"diskcache_oxide.remote needs redis-py ({error}): pip install 'diskcache_oxide[redis]'"
    ) from error

if TYPE_CHECKING:  # only for annotations: the package has no run-time dependencies
    if sys.version_info >= (3, 11):
        from typing import Self
    else:
        from typing_extensions import Self

from .. import _core
from .._api import missed, shaped
from .._seconds import ANY, Rule, seconds
from ..core import ENOVAL, Memoized, memoize_on
from ..errors import CacheError, CorruptValueError, DecodeError
from ._io import Link, Script
from ._scripts import SCRIPTS

__all__ = ["RedisCache", "UnsupportedError"]

P = ParamSpec("P")
R = TypeVar("R")

log = logging.getLogger("diskcache_oxide.remote")

_Tag = str | int | float | bytes | None
_Side = Literal["front", "back"]

#: A key of the D-054 queue shape with a prefix: ``'{prefix}-'`` and exactly 15 ASCII digits.
_ITEM = re.compile(r"(.*)-([0-9]{15})", re.DOTALL)
_LAST = 999_999_999_999_999
_EXPIRE = Rule(None, False, none=True)
_TIMEOUT = Rule(">= 0", True, none=True)
#: How many entries one call of the clear/expire/evict scripts removes, so that a large
#: namespace does not block the server for long; the call repeats until nothing is left.
_BATCH = 500
#: The longest one BLPOP of a blocked pull waits before the pull looks again (it is woken at
#: once by a push; the slices only bound a wait against a client's socket timeout).
_SLICE = 2.0


class UnsupportedError(CacheError, NotImplementedError):
    """A call or setting a directory has and Redis cannot hold (D-058); the message names the
    alternative."""


#: The furthest expiry the scripts store, in ms from now (about 285,000 years): a longer one is
#: never (a Lua number is a double, exact up to 2**53).
_FURTHEST = 2.0**53 / 1000


def _ms(expire: float | None) -> str:
    """An expiry in seconds from now as the scripts take it: milliseconds, '' for never.

    :raises ValueError: for NaN, as a directory refuses it
    """
    if expire is None:
        return ""
    if math.isnan(expire):
        raise ValueError("expire must be None or a number of seconds other than NaN, not nan")
    if expire >= _FURTHEST:
        return ""
    return str(int(max(expire, -_FURTHEST) * 1000.0))


def _side(side: object) -> str:
    if side not in ("front", "back"):
        raise ValueError(f"side must be 'front' or 'back', not {side!r}")
    return str(side)


class RedisCache:
    """A cache and queue in one namespace of a Redis server (D-058).

    :param client_or_url: a ``redis://``, ``rediss://`` or ``unix://`` URL (``?cluster=1``
        opens a ``RedisCluster``), or a configured ``redis.Redis``/``RedisCluster`` client
        (made with ``decode_responses=False``)
    :param namespace: every key this cache writes starts with ``dco:{namespace}:``; the braces
        are a hash tag, so a namespace lives in one cluster slot
    :param pickle: read and write pickles for values the safe format cannot express
    :param on_decode_error: ``'raise'`` or ``'miss'`` (an undecodable value reads as a miss)
    :param timeout: the socket timeout of a client opened from a URL, in seconds
    :param settings: a directory's settings; those Redis cannot honour raise
        :class:`UnsupportedError` (``size_limit`` and culling: use the server's
        ``maxmemory``)
    """

    def __init__(
        self,
        client_or_url: Any,
        namespace: str = "default",
        pickle: bool = False,
        on_decode_error: str = "raise",
        timeout: float = 60.0,
        **settings: Any,
    ) -> None:
        if not isinstance(namespace, str) or not namespace:
            raise ValueError(f"namespace must be a non-empty str, not {namespace!r}")
        if "{" in namespace or "}" in namespace:
            raise ValueError(f"namespace must not contain braces (its hash tag): {namespace!r}")
        if on_decode_error not in ("raise", "miss"):
            raise ValueError(f"on_decode_error must be 'raise' or 'miss', not {on_decode_error!r}")
        for name in settings:
            if name in ("size_limit", "cull_limit"):
                raise UnsupportedError(
                    f"{name} is a directory's culling; on Redis set the server's maxmemory and "
                    "maxmemory-policy (volatile-ttl or allkeys-lru) instead (D-058)"
                )
            if name not in ("eviction_policy", "statistics"):
                raise TypeError(f"RedisCache() got an unexpected setting {name!r}")
        self._owned = isinstance(client_or_url, str)
        if isinstance(client_or_url, str):
            client_or_url = open_client(client_or_url, timeout)
        if not isinstance(client_or_url, (redis.Redis, redis.cluster.RedisCluster)):
            raise TypeError(
                "RedisCache() takes a redis:// URL or a redis.Redis or RedisCluster client, "
                f"not {type(client_or_url).__name__}"
            )
        client: Any = client_or_url
        kwargs: dict[str, Any] = getattr(client, "get_connection_kwargs", dict)()
        if kwargs.get("decode_responses"):
            raise ValueError("RedisCache needs a client made with decode_responses=False")
        self._client: Any = client
        # A blocked pull's BLPOP must return before the client's socket timeout fires.
        socket_timeout = kwargs.get("socket_timeout")
        self._slice = _SLICE
        if isinstance(socket_timeout, (int, float)) and socket_timeout > 0:
            self._slice = max(0.01, min(_SLICE, socket_timeout / 2))
        self._namespace = namespace
        self._pickle = bool(pickle)
        self._on_decode_error = on_decode_error
        self._base = b"dco:{" + namespace.encode() + b"}:"
        self._link = Link(client, self._base, SCRIPTS)
        self._keys = self._link.keys
        if settings.get("statistics"):
            self.stats(enable=True)

    # ----- plumbing --------------------------------------------------------------------------

    def _run(self, name: str, *args: bytes | str | int) -> Any:
        return self._link.send(Script(name, args))

    @staticmethod
    def _member(key: Any) -> bytes:
        """The member naming ``key`` in the namespace: its queue and number for a key of the
        D-054 shape, else its frame."""
        kind = type(key)
        if kind is float and key.is_integer() and 0 <= key <= _LAST:
            # A directory holds 2.0 and 2 as one key (SQLite compares them equal), and so
            # does the key frame; a queue-shaped int has its own member, so 2.0 takes it too.
            key, kind = int(key), int
        if kind is str:
            found = _ITEM.fullmatch(key)
            if found is not None:
                prefix = found.group(1).encode("utf-8", "surrogatepass")
                return b"q:s" + prefix + b":" + found.group(2).encode()
        elif kind is int and 0 <= key <= _LAST:
            return b"q:i:%015d" % key
        return b"k:" + _core.encode_key(key)

    @staticmethod
    def _key(member: bytes) -> Any:
        if member.startswith(b"q:i:"):
            return int(member[4:])
        if member.startswith(b"q:s"):
            return member[3:-16].decode("utf-8", "surrogatepass") + "-" + member[-15:].decode()
        return _core.decode_key(member[2:])

    @staticmethod
    def _qid(prefix: str | None) -> bytes:
        if prefix is None:
            return b"i"
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str or None, not {type(prefix).__name__}")
        return b"s" + prefix.encode("utf-8", "surrogatepass")

    @staticmethod
    def _item_key(prefix: str | None, number: bytes) -> Any:
        return int(number) if prefix is None else f"{prefix}-{number.decode()}"

    def _encode(self, value: Any) -> bytes:
        return _core.encode_value(value, pickle=self._pickle)

    def _decode(self, data: bytes) -> Any:
        return _core.decode_value(data, pickle=self._pickle)

    @staticmethod
    def _tag(tag: _Tag) -> bytes:
        if tag is None:
            return b""
        if not isinstance(tag, (str, int, float, bytes)):
            # A directory's tag column holds only these; the key codec would take a tuple.
            raise TypeError(
                "tag must be None, int, float, str or bytes, not "
                f"{type(tag).__name__}; convert it, for example with str()"
            )
        return _core.encode_key(tag)

    @staticmethod
    def _untag(data: bytes) -> Any:
        return None if not data else _core.decode_key(data)

    @staticmethod
    def _expires(data: bytes) -> float | None:
        return None if not data else int(data) / 1000.0

    # ----- handle ----------------------------------------------------------------------------

    @property
    def namespace(self) -> str:
        """The namespace every key of this cache is stored under."""
        return self._namespace

    @property
    def client(self) -> Any:
        """The redis-py client."""
        return self._client

    def close(self) -> None:
        """Close the client's connections if this cache opened it from a URL; as a directory's
        handle does, the cache opens new ones on its next call."""
        if not self._owned:
            return
        if isinstance(self._client, redis.cluster.RedisCluster):
            # RedisCluster.close() forgets the cluster's nodes, and its next call fails with
            # an AttributeError; dropping the connections keeps it usable.
            self._client.disconnect_connection_pools()  # type: ignore[no-untyped-call]
        else:
            self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exception: object) -> None:
        self.close()

    def transact(self, retry: bool = False) -> Any:
        """Not on Redis: a script cannot wrap arbitrary Python reads and writes (D-058)."""
        raise UnsupportedError(
            "transact() around arbitrary reads and writes cannot hold on Redis: each call is "
            "already atomic on the server; for read-modify-write use incr/decr, add or pop, "
            "for work that must survive a crash use JobQueue, and for one writer at a time "
            "use Claims (D-058)"
        )

    def cull(self, retry: bool = False) -> int:
        """Not on Redis: the server's maxmemory policy culls (D-058)."""
        raise UnsupportedError(
            "cull() is a directory's size limit; on Redis set maxmemory and maxmemory-policy "
            "(D-058)"
        )

    # ----- reads -----------------------------------------------------------------------------

    def _value(self, data: bytes, key: Any) -> Any:
        try:
            return self._decode(data)
        except CorruptValueError:
            raise
        except Exception:
            if self._on_decode_error == "miss":
                log.warning("diskcache_oxide: the value of %r cannot be decoded", key)
                return ENOVAL
            raise

    def get(
        self,
        key: Any,
        default: Any = None,
        read: bool = False,
        expire_time: bool = False,
        tag: bool = False,
        retry: bool = False,
    ) -> Any:
        """The value of ``key``, or ``default``; with ``expire_time``/``tag``, in a tuple with
        them, as :meth:`Cache.get` returns it."""
        found = self._run("get", self._member(key))
        if found is None:
            return missed(default, expire_time, tag)
        data, expires, tagged = found
        value = self._value(data, key)
        if value is ENOVAL:
            return missed(default, expire_time, tag)
        if read and isinstance(value, bytes):
            value = io.BytesIO(value)
        return shaped(value, self._expires(expires), self._untag(tagged), expire_time, tag)

    def read(self, key: Any, retry: bool = False) -> BinaryIO:
        """A file object over the bytes of ``key``. :raises KeyError: if it is missing"""
        handle = self.get(key, ENOVAL, read=True)
        if handle is ENOVAL:
            raise KeyError(key)
        if not isinstance(handle, io.BytesIO):
            raise TypeError(f"the value of {key!r} is not bytes")
        return handle

    def __getitem__(self, key: Any) -> Any:
        value = self.get(key, ENOVAL)
        if value is ENOVAL:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return bool(self._run("get_many", self._member(key))[0] is not None)

    def get_many(self, keys: Iterable[Any], default: Any = None, retry: bool = False) -> list[Any]:
        """The value of each key, or ``default``."""
        keys = list(keys)
        if not keys:
            return []
        found = self._run("get_many", *[self._member(key) for key in keys])
        out = []
        for key, data in zip(keys, found, strict=True):
            value = ENOVAL if data is None else self._value(data, key)
            out.append(default if value is ENOVAL else value)
        return out

    # ----- writes ----------------------------------------------------------------------------

    def _payload(self, value: Any, read: bool) -> bytes:
        if read:
            value = value.read()
        return self._encode(value)

    def set(
        self,
        key: Any,
        value: Any,
        expire: float | None = None,
        read: bool = False,
        tag: _Tag = None,
        retry: bool = False,
    ) -> bool:
        """Store ``value`` under ``key``; True."""
        ms = _ms(seconds(expire, "expire", _EXPIRE))
        data = self._payload(value, read)
        return bool(self._run("set", self._member(key), data, ms, self._tag(tag), "0"))

    def __setitem__(self, key: Any, value: Any) -> None:
        self.set(key, value)

    def add(
        self,
        key: Any,
        value: Any,
        expire: float | None = None,
        read: bool = False,
        tag: _Tag = None,
        retry: bool = False,
    ) -> bool:
        """Store ``value`` only if ``key`` is absent; True if it was stored."""
        ms = _ms(seconds(expire, "expire", _EXPIRE))
        data = self._payload(value, read)
        return bool(self._run("set", self._member(key), data, ms, self._tag(tag), "1"))

    def set_many(
        self,
        mapping: Mapping[Any, Any] | Iterable[tuple[Any, Any]],
        expire: float | None = None,
        tag: _Tag = None,
        retry: bool = False,
    ) -> None:
        """Store every pair, in one script."""
        ms = _ms(seconds(expire, "expire", _EXPIRE))
        items = mapping.items() if isinstance(mapping, Mapping) else mapping
        args: list[bytes | str | int] = [ms, self._tag(tag)]
        for key, value in items:
            args += [self._member(key), self._encode(value)]
        if len(args) > 2:
            self._run("set_many", *args)

    def touch(self, key: Any, expire: float | None = None, retry: bool = False) -> bool:
        """Give ``key`` a new expiry; True if it was there."""
        ms = _ms(seconds(expire, "expire", _EXPIRE))
        return bool(self._run("touch", self._member(key), ms))

    def incr(self, key: Any, delta: Any = 1, default: Any = 0, retry: bool = False) -> Any:
        """Add ``delta`` to the value of ``key`` (``default`` if it is absent; KeyError if that
        is None) and return it. Atomic: the new value replaces exactly the version read, and
        a lost race reads again."""
        member = self._member(key)
        while True:
            found = self._run("get_revision", member)
            if found is None:
                if default is None:
                    raise KeyError(key)
                value = default + delta
                revision = b""
            else:
                value = self._decode(found[0]) + delta
                revision = found[1]
            if self._run("replace", member, revision, self._encode(value)):
                return value

    def decr(self, key: Any, delta: Any = 1, default: Any = 0, retry: bool = False) -> Any:
        """``incr(key, -delta, default)``."""
        return self.incr(key, -delta, default)

    def delete(self, key: Any, retry: bool = False) -> bool:
        """Remove ``key``; True if it was there."""
        return bool(self._run("delete", self._member(key)))

    def __delitem__(self, key: Any) -> None:
        if not self.delete(key):
            raise KeyError(key)

    def delete_many(self, keys: Iterable[Any], retry: bool = False) -> int:
        """Remove every key; the number that were there."""
        members = [self._member(key) for key in keys]
        return int(self._run("delete", *members)) if members else 0

    def pop(
        self,
        key: Any,
        default: Any = None,
        expire_time: bool = False,
        tag: bool = False,
        retry: bool = False,
    ) -> Any:
        """Remove ``key`` and return its value (or ``default``), as :meth:`Cache.pop`."""
        found = self._run("pop", self._member(key))
        if found is None:
            return missed(default, expire_time, tag)
        data, expires, tagged = found
        return shaped(
            self._decode(data), self._expires(expires), self._untag(tagged), expire_time, tag
        )

    def _repeat(self, name: str, *args: bytes | str | int) -> int:
        total = 0
        while True:
            removed = int(self._run(name, *args, _BATCH))
            total += removed
            if removed < _BATCH:
                return total

    def expire(self, now: float | None = None, retry: bool = False) -> int:
        """Remove the entries expired at ``now`` (default: the server's clock); how many."""
        at = "" if now is None else str(int(seconds(now, "now", ANY) * 1000))
        return self._repeat("expire", at)

    def evict(self, tag: _Tag, retry: bool = False) -> int:
        """Remove every entry with ``tag``; how many."""
        return self._repeat("evict", self._tag(tag))

    def clear(self, retry: bool = False) -> int:
        """Remove every entry of the namespace (and no other key); how many."""
        return self._repeat("clear")

    def stats(self, enable: bool = True, reset: bool = False) -> tuple[int, int]:
        """``(hits, misses)`` counted since statistics were enabled, then enable or disable
        counting (and zero the counts with ``reset``)."""
        hits, misses = self._run("stats", "1" if enable else "0", "1" if reset else "0")
        return int(hits), int(misses)

    # ----- keys ------------------------------------------------------------------------------

    def __len__(self) -> int:
        """Every entry of the namespace, expired ones not yet removed included (as a
        directory counts them)."""
        return int(self._client.zcard(self._keys[0]))

    def iterkeys(self, reverse: bool = False, prefix: str | None = None) -> Iterator[Any]:
        """The keys in a directory's sorted order (largest first with ``reverse``): numbers,
        then str keys by their UTF-8 bytes, then bytes keys, then the other keys by their
        frame; with ``prefix``, only the str keys that start with it. The keys are read
        first, from the index (paged by score), and sorted here; iterate the cache itself
        for the order they were first stored."""
        if prefix is not None:
            found = [key for key in self._keys_in_order(False) if type(key) is str]
            found = [key for key in found if key.startswith(prefix)]
        else:
            found = list(self._keys_in_order(False))
        found.sort(key=_sort_key, reverse=reverse)
        return iter(found)

    def _keys_in_order(self, reverse: bool) -> Iterator[Any]:
        index = self._keys[0]
        last = "-inf" if not reverse else "+inf"
        while True:
            if reverse:
                page = self._client.zrevrangebyscore(
                    index, last, "-inf", start=0, num=200, withscores=True
                )
            else:
                page = self._client.zrangebyscore(
                    index, last, "+inf", start=0, num=200, withscores=True
                )
            if not page:
                return
            for member, _ in page:
                yield self._key(member)
            last = f"({int(page[-1][1])}"

    def __iter__(self) -> Iterator[Any]:
        """The keys in the order they were first stored, as a directory's cache iterates."""
        return self._keys_in_order(False)

    def __reversed__(self) -> Iterator[Any]:
        return self._keys_in_order(True)

    # ----- memoize ---------------------------------------------------------------------------

    def memoize(
        self,
        name: str | None = None,
        typed: bool = False,
        expire: float | None = None,
        tag: _Tag = None,
        ignore: Collection[int | str] = (),
    ) -> Callable[[Callable[P, R]], Memoized[P, R]]:
        """Decorator caching a function's results by its arguments (:meth:`Cache.memoize`)."""
        return memoize_on(self, name, typed, expire, tag, ignore)

    # ----- pay once --------------------------------------------------------------------------

    def get_or_compute(
        self,
        key: Any,
        fn: Callable[..., Any],
        /,
        *args: Any,
        lease: float = 60.0,
        timeout: float | None = None,
        expire: float | None = None,
        tag: _Tag = None,
        namespace: str = "default",
        if_computing: Literal["wait", "skip"] = "wait",
        outcome: bool = False,
        pass_claim: bool = False,
        **kwargs: Any,
    ) -> Any:
        """The value of ``key``, computed by ``fn(*args, **kwargs)`` once across threads,
        loops, processes and machines: :func:`diskcache_oxide.get_or_compute` on this cache
        (:meth:`Cache.get_or_compute`'s parameters; claims are RedisClaims, D-058)."""
        from ..claims import get_or_compute

        return get_or_compute(  # type: ignore[call-overload]
            self,
            key,
            fn,
            *args,
            lease=lease,
            timeout=timeout,
            expire=expire,
            tag=tag,
            namespace=namespace,
            if_computing=if_computing,
            outcome=outcome,
            pass_claim=pass_claim,
            **kwargs,
        )

    # ----- the queue -------------------------------------------------------------------------

    def push(
        self,
        value: Any,
        prefix: str | None = None,
        side: _Side = "back",
        expire: float | None = None,
        read: bool = False,
        tag: _Tag = None,
        retry: bool = False,
    ) -> Any:
        """Add ``value`` at ``side`` of the queue ``prefix``; its key (D-054).

        :raises OverflowError: if that side has used every number (D-057)
        """
        return self._push([self._payload(value, read)], prefix, side, expire, tag)[0]

    def push_many(
        self,
        values: Iterable[Any],
        prefix: str | None = None,
        side: _Side = "back",
        expire: float | None = None,
        tag: _Tag = None,
        retry: bool = False,
    ) -> list[Any]:
        """Push several values in one script, in order; their keys. All or nothing: an
        :class:`OverflowError` writes none of them."""
        data = [self._encode(value) for value in values]
        return self._push(data, prefix, side, expire, tag) if data else []

    def _push(
        self,
        data: list[bytes],
        prefix: str | None,
        side: object,
        expire: float | None,
        tag: _Tag = None,
    ) -> list[Any]:
        where = _side(side)
        ms = _ms(seconds(expire, "expire", _EXPIRE))
        qid = self._qid(prefix)
        try:
            numbers = self._run("push", qid, where, ms, self._tag(tag), *data)
        except redis.ResponseError as error:
            if "DCO_OVERFLOW" not in str(error):
                raise
            queue = "(int keys)" if prefix is None else prefix
            raise OverflowError(
                f'the queue "{queue}" has used every number at its {where} end (500 trillion '
                "pushes); nothing was overwritten. Drain it and start a new prefix"
            ) from None
        return [self._item_key(prefix, number) for number in numbers]

    def _first(
        self, prefix: str | None, side: str, take: bool
    ) -> tuple[Any, Any, float | None, Any] | None:
        """The first live item from ``side`` that this process can read: ``(key, value,
        expire_time, tag)``, removed with ``take``; None if there is none."""
        qid = self._qid(prefix)
        while True:
            found = self._run("peek", qid, side)
            if found is None:
                return None
            number, data, expires, revision, tagged = found
            member = b"q:" + qid + b":" + number
            key = self._item_key(prefix, number)
            try:
                value = self._decode(data)
            except CorruptValueError:
                # No build could read it: remove it so that it stalls nobody.
                self._run("take", member, revision)
                if self._on_decode_error == "miss":
                    log.warning("diskcache_oxide: removed the damaged queue item %r", key)
                    continue
                raise
            except DecodeError:
                # A pickle on a pickle=False cache, a type this process has not registered: the
                # item stays for a worker that can read it; this one raises, or with
                # on_decode_error='miss' gets the default.
                if self._on_decode_error == "miss":
                    log.warning("diskcache_oxide: cannot decode the queue item %r", key)
                    return None
                raise
            if not take or self._run("take", member, revision):
                return key, value, self._expires(expires), self._untag(tagged)
            # Another worker took that version first: that is its progress; look again.

    def pull(
        self,
        prefix: str | None = None,
        default: Any = (None, None),
        side: _Side = "front",
        expire_time: bool = False,
        tag: bool = False,
        retry: bool = False,
        timeout: float | None = None,
    ) -> Any:
        """Take the first item from ``side`` of the queue ``prefix``: ``(key, value)``, or
        ``default``. Exactly one caller gets each item. With ``timeout``, wait up to that many
        seconds for a push, blocked on the server (BLPOP on the queue's wake-up list)."""
        where = _side(side)
        wait = seconds(timeout, "timeout", _TIMEOUT)
        deadline = None if wait is None else time.monotonic() + wait
        wake = self._base + b"w:" + self._qid(prefix)
        while True:
            item = self._first(prefix, where, take=True)
            if item is not None:
                key, value, expires, tagged = item
                return shaped((key, value), expires, tagged, expire_time, tag)
            if deadline is None:
                return missed(default, expire_time, tag)
            left = deadline - time.monotonic()
            if left <= 0:
                return missed(default, expire_time, tag)
            self._client.blpop([wake], timeout=min(left, self._slice))

    def peek(
        self,
        prefix: str | None = None,
        default: Any = (None, None),
        side: _Side = "front",
        expire_time: bool = False,
        tag: bool = False,
        retry: bool = False,
    ) -> Any:
        """The first item from ``side`` of the queue ``prefix``, left in place."""
        item = self._first(prefix, _side(side), take=False)
        if item is None:
            return missed(default, expire_time, tag)
        key, value, expires, tagged = item
        return shaped((key, value), expires, tagged, expire_time, tag)

    def pull_many(
        self,
        n: int,
        prefix: str | None = None,
        side: _Side = "front",
        expire_time: bool = False,
        tag: bool = False,
        retry: bool = False,
        timeout: float | None = None,
    ) -> list[Any]:
        """Take up to ``n`` items from ``side``, each exactly once (one script per item, not
        one transaction: D-058); with ``timeout``, wait while there are none."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be an int >= 0, not {n!r}")
        out: list[Any] = []
        if n == 0:
            return out
        first = self.pull(prefix, ENOVAL, side, expire_time, tag, timeout=timeout)
        if first is ENOVAL or (isinstance(first, tuple) and first[0] is ENOVAL):
            return out
        out.append(first)
        while len(out) < n:
            item = self._first(prefix, _side(side), take=True)
            if item is None:
                break
            key, value, expires, tagged = item
            out.append(shaped((key, value), expires, tagged, expire_time, tag))
        return out

    def peekitem(
        self,
        last: bool = True,
        expire_time: bool = False,
        tag: bool = False,
        retry: bool = False,
    ) -> Any:
        """The last (or first) entry in insertion order as ``(key, value)``, left in place;
        expired entries met on the way are removed. :raises KeyError: if there is none"""
        found = self._run("peekitem", "1" if last else "0")
        if found is None:
            raise KeyError("dictionary is empty")
        member, data, expires, tagged = found
        item = (self._key(member), self._decode(data))
        return shaped(item, self._expires(expires), self._untag(tagged), expire_time, tag)


_INT64 = (-(2**63), 2**63 - 1)


def _sort_key(key: Any) -> tuple[int, Any]:
    """Where ``key`` sorts in a directory's key index: SQLite orders numbers (ints that fit
    64 bits, floats) before text before blobs; a key of another type is a blob there too,
    placed here after the bytes keys, by its frame."""
    kind = type(key)
    if (kind is int and _INT64[0] <= key <= _INT64[1]) or kind is float:
        return (0, key)
    if kind is str:
        return (1, key.encode("utf-8", "surrogatepass"))
    if kind is bytes:
        return (2, key)
    return (3, _core.encode_key(key))


def open_client(url: str, timeout: float = 60.0) -> Any:
    """A redis-py client for ``url``; ``?cluster=1`` (or ``true``) opens a RedisCluster.
    ``namespace=`` in the query is the cache's, not the client's, and is dropped here."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(url)
    query = parse_qsl(parts.query)
    cluster = any(
        name == "cluster" and value.lower() in ("1", "true", "yes") for name, value in query
    )
    kept = [(name, value) for name, value in query if name not in ("cluster", "namespace")]
    url = urlunsplit(parts._replace(query=urlencode(kept)))
    if cluster:
        return redis.cluster.RedisCluster.from_url(  # type: ignore[no-untyped-call]
            url, socket_timeout=timeout
        )
    return redis.Redis.from_url(url, socket_timeout=timeout)
