"""The Redis backend's calls as operations, written once for both faces (issue 21, D-059).

Each call of :class:`~diskcache_oxide.remote.RedisCache` is a generator function here, with
Cache's parameters after the namespace ``ns`` it runs on: it performs no I/O, yields the
:class:`~._requests.Script` and :class:`~._requests.Command` requests it needs and returns the
call's result (``_io`` explains the shape). The encoding of keys and values, the decoding, the
read-revision-replace loop of ``incr``, the queue's one-script pull with its put-back of what
this process cannot decode (D-064) and the error messages are written once, here. The faces
are generated from the API table (``_api.CALLS``, column ``redis``): ``RedisCache``'s ``get``
is ``return self._link.run(_ops.get(self, key, ...))``, ``AsyncRedisCache``'s
``return await self._alink.run(_ops.get(self, key, ...))``.

``retry`` is accepted by every operation, as by Cache's call, and does nothing (D-058).
"""

from __future__ import annotations

import io
import logging
import math
import time
from collections.abc import Iterable, Mapping
from typing import Any, BinaryIO, Literal

import redis

from .. import _core
from .._misses import missed, shaped
from .._seconds import ANY, Rule, seconds
from .._sentinels import ENOVAL
from ..errors import CorruptValueError, DecodeError
from ..errors import UnsupportedError as UnsupportedError
from ._errors import NotReplicatedError
from ._members import key_of as key_of
from ._members import member as member
from ._replies import BULK, COUNT, Shape, array, nil_or
from ._requests import Command, Op, Script

__all__ = ["Namespace", "UnsupportedError"]

log = logging.getLogger("diskcache_oxide.remote")

_Tag = str | int | float | bytes | None
_Side = Literal["front", "back"]
_Arg = bytes | str | int | float

_EXPIRE = Rule(None, False, none=True)
_TIMEOUT = Rule(">= 0", True, none=True)
#: How many entries one call of the clear/expire/evict scripts removes, so that a large
#: namespace does not block the server for long; the call repeats until nothing is left.
_BATCH = 500
#: The longest one BLPOP of a blocked pull waits before the pull looks again (it is woken at
#: once by a push; the slices only bound a wait against a client's socket timeout).
SLICE = 2.0
#: The shortest BLPOP sent: BLPOP's 0 (or a wait that rounds to 0 ms) means forever.
_SHORTEST = 0.001
#: How many keys one page of ``iterkeys`` reads.
_PAGE = 200
#: The furthest expiry the scripts store, in ms from now (about 285,000 years): a longer one is
#: never (a Lua number is a double, exact up to 2**53).
_FURTHEST = 2.0**53 / 1000


class Namespace:
    """What the operations read of a face: the namespace's key prefix and the cache's
    settings. :class:`RedisCache` and :class:`AsyncRedisCache` are both one."""

    _namespace: str
    _base: bytes
    _pickle: bool
    _on_decode_error: str
    #: The longest BLPOP slice: within the client's socket timeout.
    _slice: float

    def _configure(
        self,
        kind: str,
        namespace: str,
        pickle: bool,
        on_decode_error: str,
        settings: Mapping[str, Any],
    ) -> None:
        """Check and keep the settings both faces take (``kind`` names the class in errors)."""
        if not isinstance(namespace, str) or not namespace:
            raise ValueError(f"namespace must be a non-empty str, not {namespace!r}")
        if "{" in namespace or "}" in namespace:
            raise ValueError(f"namespace must not contain braces (its hash tag): {namespace!r}")
        if on_decode_error not in ("raise", "miss"):
            raise ValueError(f"on_decode_error must be 'raise' or 'miss', not {on_decode_error!r}")
        for name in settings:
            if name in ("size_limit", "cull_limit"):
                # The advice names noeviction for jobs and claims (issue 29); imported here
                # because _policy imports this module.
                from ._policy import ADVICE

                raise UnsupportedError(f"{name} is a directory's culling; {ADVICE}")
            if name not in ("eviction_policy", "statistics"):
                raise TypeError(f"{kind}() got an unexpected setting {name!r}")
        self._namespace = namespace
        self._pickle = bool(pickle)
        self._on_decode_error = on_decode_error
        self._base = b"dco:{" + namespace.encode() + b"}:"
        self._slice = SLICE

    def _fit_slice(self, kwargs: Mapping[str, Any]) -> None:
        """A blocked pull's BLPOP must return before the client's socket timeout fires."""
        socket_timeout = kwargs.get("socket_timeout")
        if isinstance(socket_timeout, (int, float)) and socket_timeout > 0:
            self._slice = max(0.01, min(SLICE, socket_timeout / 2))

    @property
    def namespace(self) -> str:
        """The namespace every key of this cache is stored under."""
        return self._namespace

    @property
    def pickle(self) -> bool:
        """Whether values the safe format cannot express are pickled (default False)."""
        return self._pickle

    @property
    def on_decode_error(self) -> str:
        """``'raise'`` or ``'miss'``: what reading a value this process cannot decode does."""
        return self._on_decode_error

    # The codec of members, kept as methods for remote.claims and the tests.
    @staticmethod
    def _member(key: Any) -> bytes:
        return member(key)

    @staticmethod
    def _key(data: bytes) -> Any:
        return key_of(data)


# ----- the codec of keys, members, values and tags ---------------------------------------


def _qid(prefix: str | None) -> bytes:
    if prefix is None:
        return b"i"
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str or None, not {type(prefix).__name__}")
    return b"s" + prefix.encode("utf-8", "surrogatepass")


def _item_key(prefix: str | None, number: bytes) -> Any:
    return int(number) if prefix is None else f"{prefix}-{number.decode()}"


def _tag(tag: _Tag) -> bytes:
    if tag is None:
        return b""
    if not isinstance(tag, (str, int, float, bytes)):
        # A directory's tag column holds only these; the key codec would take a tuple.
        raise TypeError(
            f"tag must be None, int, float, str or bytes, not {type(tag).__name__}; "
            "convert it, for example with str()"
        )
    return _core.encode_key(tag)


def _untag(data: bytes) -> Any:
    return None if not data else _core.decode_key(data)


def _expires(data: bytes) -> float | None:
    return None if not data else int(data) / 1000.0


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


def _expire_ms(expire: float | None) -> str:
    return _ms(seconds(expire, "expire", _EXPIRE))


def _side(side: object) -> str:
    if side not in ("front", "back"):
        raise ValueError(f"side must be 'front' or 'back', not {side!r}")
    return str(side)


def _encode(ns: Namespace, value: Any) -> bytes:
    return _core.encode_value(value, pickle=ns._pickle)


def _decode(ns: Namespace, data: bytes) -> Any:
    return _core.decode_value(data, pickle=ns._pickle)


def _payload(ns: Namespace, value: Any, read: bool) -> bytes:
    if read:
        value = value.read()
    return _encode(ns, value)


def _value(ns: Namespace, data: bytes, key: Any) -> Any:
    """The value decoded; ENOVAL if it cannot be and ``on_decode_error='miss'``."""
    try:
        return _decode(ns, data)
    except CorruptValueError:
        raise
    except Exception:
        if ns._on_decode_error == "miss":
            log.warning("diskcache_oxide: the value of %r cannot be decoded", key)
            return ENOVAL
        raise


def _script(name: str, *args: _Arg) -> Script:
    return Script(name, args)


# ----- reads -------------------------------------------------------------------------------


def get(
    ns: Namespace,
    key: Any,
    default: Any = None,
    read: bool = False,
    expire_time: bool = False,
    tag: bool = False,
    retry: bool = False,
) -> Op[Any]:
    """The value of ``key``, or ``default``, shaped as :meth:`Cache.get` shapes it."""
    found = yield _script("get", member(key))
    if found is None:
        return missed(default, expire_time, tag)
    data, expires, tagged = found
    value = _value(ns, data, key)
    if value is ENOVAL:
        return missed(default, expire_time, tag)
    if read and isinstance(value, bytes):
        value = io.BytesIO(value)
    return shaped(value, _expires(expires), _untag(tagged), expire_time, tag)


def read(ns: Namespace, key: Any, retry: bool = False) -> Op[BinaryIO]:
    """A file object over the bytes of ``key``. :raises KeyError: if it is missing"""
    handle = yield from get(ns, key, ENOVAL, read=True)
    if handle is ENOVAL:
        raise KeyError(key)
    if not isinstance(handle, io.BytesIO):
        raise TypeError(f"the value of {key!r} is not bytes")
    return handle


def getitem(ns: Namespace, key: Any) -> Op[Any]:
    """``cache[key]``. :raises KeyError: if it is missing"""
    value = yield from get(ns, key, ENOVAL)
    if value is ENOVAL:
        raise KeyError(key)
    return value


def contains(ns: Namespace, key: Any) -> Op[bool]:
    """``key in cache``."""
    found = yield _script("get_many", member(key))
    return bool(found[0] is not None)


def get_many(
    ns: Namespace, keys: Iterable[Any], default: Any = None, retry: bool = False
) -> Op[list[Any]]:
    """The value of each key, or ``default``, in one script."""
    keys = list(keys)
    if not keys:
        return []
    found = yield _script("get_many", *[member(key) for key in keys])
    out = []
    for key, data in zip(keys, found, strict=True):
        value = ENOVAL if data is None else _value(ns, data, key)
        out.append(default if value is ENOVAL else value)
    return out


def stats(ns: Namespace, enable: bool = True, reset: bool = False) -> Op[tuple[int, int]]:
    """``(hits, misses)``, then enable or disable counting (zeroed with ``reset``)."""
    hits, misses = yield _script("stats", "1" if enable else "0", "1" if reset else "0")
    return int(hits), int(misses)


def length(ns: Namespace) -> Op[int]:
    """``len(cache)``: what the namespace's index holds (ZCARD), expired entries not yet
    removed included, as a directory counts them."""
    count = yield Command(("ZCARD", ns._base + b"i"), idempotent=True, reply=COUNT)
    return int(count)


def keys_page(ns: Namespace, reverse: bool, after: str | None) -> Op[tuple[list[Any], str | None]]:
    """One page of the keys in insertion order (newest first with ``reverse``), after the
    score bound ``after`` (None: from the start): ``(keys, the next page's bound)``, the
    bound None after the last page. Paging by score (unique revisions) means a concurrent
    write cannot make a page skip or repeat a key."""
    index = ns._base + b"i"
    if reverse:
        command = ("ZREVRANGEBYSCORE", index, after or "+inf", "-inf")
    else:
        command = ("ZRANGEBYSCORE", index, after or "-inf", "+inf")
    page = yield Command(
        (*command, "WITHSCORES", "LIMIT", 0, _PAGE), idempotent=True, reply=_SCORED
    )
    pairs = _pairs(page)
    keys = [key_of(data) for data, _ in pairs]
    if len(pairs) < _PAGE:
        return keys, None
    return keys, f"({int(float(pairs[-1][1]))}"


def _score(score: Any) -> bool:
    if type(score) is float or type(score) is int:
        return True
    if type(score) is not bytes:
        return False
    try:
        float(score)
    except ValueError:
        return False
    return True


def _scored_page(reply: Any, args: tuple[Any, ...]) -> bool:
    """A page of ``WITHSCORES``: flat (member, score, ...) or pairs, at most a page long."""
    if not isinstance(reply, (list, tuple)):
        return False
    if reply and isinstance(reply[0], (list, tuple)):
        return len(reply) <= _PAGE and all(
            isinstance(pair, (list, tuple))
            and len(pair) == 2
            and type(pair[0]) is bytes
            and _score(pair[1])
            for pair in reply
        )
    return (
        len(reply) % 2 == 0
        and len(reply) <= 2 * _PAGE
        and all(
            type(data) is bytes and _score(score)
            for data, score in zip(reply[::2], reply[1::2], strict=True)
        )
    )


_SCORED = Shape(_scored_page, "members and their scores, at most a page of them")
#: BLPOP's reply: nil after its wait, else the list's key and the token popped.
#: A BLPOP's reply: nil (timed out) or the list's name and the value taken (every blocked wait
#: of the caches, claims and jobs sends one).
POPPED = nil_or(array(BULK, BULK))


def _pairs(reply: Any) -> list[tuple[bytes, Any]]:
    """``WITHSCORES``'s reply as pairs: flat in RESP2 (as a bare command returns it), pairs in
    RESP3 or through redis-py's callback."""
    if not reply:
        return []
    if isinstance(reply[0], (list, tuple)):
        return [(pair[0], pair[1]) for pair in reply]
    return list(zip(reply[::2], reply[1::2], strict=True))


#: The ints a directory's key index stores as numbers (SQLite's 64-bit integers).
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


def sorted_keys(keys: Iterable[Any], prefix: str | None, reverse: bool) -> list[Any]:
    """``keys`` in a directory's sorted order, as its ``iterkeys()`` gives them (largest
    first with ``reverse``); with ``prefix``, only the str keys that start with it. The
    namespace's index holds insertion order, so the faces read every key and sort here."""
    if prefix is None:
        found = list(keys)
    else:
        found = [key for key in keys if type(key) is str and key.startswith(prefix)]
    found.sort(key=_sort_key, reverse=reverse)
    return found


def peekitem(
    ns: Namespace,
    last: bool = True,
    expire_time: bool = False,
    tag: bool = False,
    retry: bool = False,
) -> Op[Any]:
    """The last (or first) entry in insertion order as ``(key, value)``, left in place.
    :raises KeyError: if there is none"""
    found = yield _script("peekitem", "1" if last else "0")
    if found is None:
        raise KeyError("dictionary is empty")
    data, value, expires, tagged = found
    item = (key_of(data), _decode(ns, value))
    return shaped(item, _expires(expires), _untag(tagged), expire_time, tag)


# ----- writes ------------------------------------------------------------------------------


def set(  # Cache's name: this module uses the builtin set nowhere
    ns: Namespace,
    key: Any,
    value: Any,
    expire: float | None = None,
    read: bool = False,
    tag: _Tag = None,
    retry: bool = False,
) -> Op[bool]:
    """Store ``value`` under ``key``; True."""
    ms = _expire_ms(expire)
    data = _payload(ns, value, read)
    return bool((yield _script("set", member(key), data, ms, _tag(tag), "0")))


def setitem(ns: Namespace, key: Any, value: Any) -> Op[None]:
    """``cache[key] = value``."""
    yield from set(ns, key, value)


def add(
    ns: Namespace,
    key: Any,
    value: Any,
    expire: float | None = None,
    read: bool = False,
    tag: _Tag = None,
    retry: bool = False,
) -> Op[bool]:
    """Store ``value`` only if ``key`` is absent; True if it was stored."""
    ms = _expire_ms(expire)
    data = _payload(ns, value, read)
    return bool((yield _script("set", member(key), data, ms, _tag(tag), "1")))


def set_many(
    ns: Namespace,
    mapping: Mapping[Any, Any] | Iterable[tuple[Any, Any]],
    expire: float | None = None,
    tag: _Tag = None,
    retry: bool = False,
) -> Op[None]:
    """Store every pair, in one script."""
    ms = _expire_ms(expire)
    items = mapping.items() if isinstance(mapping, Mapping) else mapping
    args: list[_Arg] = [ms, _tag(tag)]
    for key, value in items:
        args += [member(key), _encode(ns, value)]
    if len(args) > 2:
        yield _script("set_many", *args)


def touch(ns: Namespace, key: Any, expire: float | None = None, retry: bool = False) -> Op[bool]:
    """Give ``key`` a new expiry; True if it was there."""
    ms = _expire_ms(expire)
    return bool((yield _script("touch", member(key), ms)))


def incr(ns: Namespace, key: Any, delta: Any = 1, default: Any = 0, retry: bool = False) -> Op[Any]:
    """Add ``delta`` to the value of ``key`` (``default`` if it is absent; KeyError if that is
    None) and return it. Lua cannot read a frame, so the addition is Python's: read the value
    and its revision, add, and replace exactly that revision; a lost race reads again."""
    name = member(key)
    while True:
        found = yield _script("get_revision", name)
        if found is None:
            if default is None:
                raise KeyError(key)
            value = default + delta
            revision = b""
        else:
            value = _decode(ns, found[0]) + delta
            revision = found[1]
        if (yield _script("replace", name, revision, _encode(ns, value))):
            return value


def decr(ns: Namespace, key: Any, delta: Any = 1, default: Any = 0, retry: bool = False) -> Op[Any]:
    """``incr(key, -delta, default)``."""
    return (yield from incr(ns, key, -delta, default))


def delete(ns: Namespace, key: Any, retry: bool = False) -> Op[bool]:
    """Remove ``key``; True if it was there."""
    return bool((yield _script("delete", member(key))))


def delitem(ns: Namespace, key: Any) -> Op[None]:
    """``del cache[key]``. :raises KeyError: if it is missing"""
    if not (yield from delete(ns, key)):
        raise KeyError(key)


def delete_many(ns: Namespace, keys: Iterable[Any], retry: bool = False) -> Op[int]:
    """Remove every key; the number that were there."""
    members = [member(key) for key in keys]
    if not members:
        return 0
    return int((yield _script("delete", *members)))


def pop(
    ns: Namespace,
    key: Any,
    default: Any = None,
    expire_time: bool = False,
    tag: bool = False,
    retry: bool = False,
) -> Op[Any]:
    """Remove ``key`` and return its value (or ``default``), as :meth:`Cache.pop`."""
    found = yield _script("pop", member(key))
    if found is None:
        return missed(default, expire_time, tag)
    data, expires, tagged = found
    return shaped(_decode(ns, data), _expires(expires), _untag(tagged), expire_time, tag)


def _repeat(name: str, *args: _Arg) -> Op[int]:
    """Run a removing script in batches until one removes fewer than a batch; the total."""
    total = 0
    while True:
        removed = int((yield _script(name, *args, _BATCH)))
        total += removed
        if removed < _BATCH:
            return total


def expire(ns: Namespace, now: float | None = None, retry: bool = False) -> Op[int]:
    """Remove the entries expired at ``now`` (default: the server's clock); how many."""
    at = "" if now is None else str(int(seconds(now, "now", ANY) * 1000))
    return (yield from _repeat("expire", at))


def evict(ns: Namespace, tag: _Tag, retry: bool = False) -> Op[int]:
    """Remove every entry with ``tag``; how many."""
    return (yield from _repeat("evict", _tag(tag)))


def clear(ns: Namespace, retry: bool = False) -> Op[int]:
    """Remove every entry of the namespace (and no other key); how many."""
    return (yield from _repeat("clear"))


# ----- the queue ---------------------------------------------------------------------------


def push(
    ns: Namespace,
    value: Any,
    prefix: str | None = None,
    side: _Side = "back",
    expire: float | None = None,
    read: bool = False,
    tag: _Tag = None,
    retry: bool = False,
) -> Op[Any]:
    """Add ``value`` at ``side`` of the queue ``prefix``; its key (D-054).

    :raises OverflowError: if that side has used every number (D-057)
    """
    keys = yield from _push(ns, [_payload(ns, value, read)], prefix, side, expire, tag)
    return keys[0]


def push_many(
    ns: Namespace,
    values: Iterable[Any],
    prefix: str | None = None,
    side: _Side = "back",
    expire: float | None = None,
    tag: _Tag = None,
    retry: bool = False,
) -> Op[list[Any]]:
    """Push several values in one script, in order; their keys. All or nothing: an
    :class:`OverflowError` writes none of them."""
    data = [_encode(ns, value) for value in values]
    if not data:
        return []
    return (yield from _push(ns, data, prefix, side, expire, tag))


def _push(
    ns: Namespace,
    data: list[bytes],
    prefix: str | None,
    side: object,
    expire: float | None,
    tag: _Tag,
) -> Op[list[Any]]:
    where = _side(side)
    ms = _expire_ms(expire)
    qid = _qid(prefix)
    try:
        numbers = yield _script("push", qid, where, ms, _tag(tag), *data)
    except redis.ResponseError as error:
        if "DCO_OVERFLOW" not in str(error):
            raise
        queue = "(int keys)" if prefix is None else prefix
        raise OverflowError(
            f'the queue "{queue}" has used every number at its {where} end (500 trillion '
            "pushes); nothing was overwritten. Drain it and start a new prefix"
        ) from None
    return [_item_key(prefix, number) for number in numbers]


#: An item as the queue's operations find it: ``(key, value, expire_time, tag)``.
_Item = tuple[Any, Any, float | None, Any]


def _first(ns: Namespace, prefix: str | None, side: str) -> Op[_Item | None]:
    """The first live item from ``side`` that this process can read, left in place (a
    ``peek``); None if there is none. A damaged one is removed (exactly that version)."""
    qid = _qid(prefix)
    while True:
        found = yield _script("peek", qid, side)
        if found is None:
            return None
        number, data, expires, revision, tagged = found
        key = _item_key(prefix, number)
        try:
            value = _decode(ns, data)
        except CorruptValueError:
            # No build could read it: remove it so that it stalls nobody.
            yield _script("take", b"q:" + qid + b":" + number, revision)
            if ns._on_decode_error == "miss":
                log.warning("diskcache_oxide: removed the damaged queue item %r", key)
                continue
            raise
        except DecodeError:
            # A pickle on a pickle=False cache, a type this process has not registered: the
            # item stays for a worker that can read it.
            if ns._on_decode_error == "miss":
                log.warning("diskcache_oxide: cannot decode the queue item %r", key)
                return None
            raise
        return key, value, _expires(expires), _untag(tagged)


#: The kind byte of a pickle's frame (docs/design.md 5.7): what a pull on ``pickle=False``
#: asks the script to leave at the front rather than take (D-064).
_PICKLE_KIND = b"\x06"


def _take(ns: Namespace, prefix: str | None, side: str, batch: bool) -> Op[_Item | None]:
    """Take the first live item from ``side`` with one ``pull`` script (D-064); None if there
    is none (or, with ``on_decode_error='miss'``, if the first cannot be decoded here).

    The script removes the item and returns it, except one whose frame is of a kind this
    process cannot read (a pickle on ``pickle=False``), which it leaves at the front. An item
    taken that still cannot be decoded here (an unregistered type, a raising decoder) is put
    back at its own number with ``restore`` before the error is raised; a damaged one stays
    removed (``CorruptValueError``, or logged and passed with ``'miss'``). In a ``batch``
    that already holds items (``pull_many``), an item that would raise ends the batch
    without raising and stays at the front, so the next call reports it (D-012)."""
    qid = _qid(prefix)
    unreadable = b"" if ns._pickle else _PICKLE_KIND
    while True:
        found = yield _script("pull", qid, side, unreadable)
        if found is None:
            return None
        taken, number, data, expires, revision, tagged = found
        key = _item_key(prefix, number)
        try:
            value = _decode(ns, data)
        except CorruptValueError:
            if ns._on_decode_error == "miss" or not batch:
                if not taken:  # a frame of an unreadable kind, damaged: remove that version
                    yield _script("take", b"q:" + qid + b":" + number, revision)
                if ns._on_decode_error == "miss":
                    log.warning("diskcache_oxide: removed the damaged queue item %r", key)
                    continue
                raise
            if taken:
                yield from _restore(qid, side, key, found)
            return None
        except Exception as error:
            # A pickle on a pickle=False cache (left by the script), or taken and then not
            # decoded: a type this process has not registered, a registered decoder that
            # raised. The item stays (or is put back) for a worker that can read it.
            if taken:
                yield from _restore(qid, side, key, found)
            if isinstance(error, DecodeError) and ns._on_decode_error == "miss":
                log.warning("diskcache_oxide: cannot decode the queue item %r", key)
                return None
            if batch:
                return None
            raise
        if not taken:
            # Left as unreadable but decoded after all (cannot happen with the kinds sent
            # today): take exactly that version, or look again if another worker did.
            if not (yield _script("take", b"q:" + qid + b":" + number, revision)):
                continue
        return key, value, _expires(expires), _untag(tagged)


def _restore(qid: bytes, side: str, key: Any, found: list[Any]) -> Op[None]:
    """Put back an item a pull took and could not decode, at its own number (D-064)."""
    _, number, data, expires, revision, tagged = found
    try:
        yield _script("restore", qid, side, number, data, expires, revision, tagged)
    except NotReplicatedError:
        # Put back on the master, not yet on enough replicas: the item is there; raising
        # this instead of the decode error would hide why the pull failed.
        log.warning(
            "diskcache_oxide: the queue item %r, which could not be decoded here, was put back "
            "on the master but not acknowledged by enough replicas (D-064)",
            key,
        )
    except Exception:
        log.error(
            "diskcache_oxide: the queue item %r was taken but could not be decoded here, and "
            "putting it back failed: it is lost (D-064)",
            key,
        )
        raise


def _shaped_item(item: _Item, expire_time: bool, tag: bool) -> Any:
    key, value, expires, tagged = item
    return shaped((key, value), expires, tagged, expire_time, tag)


def is_wait(request: Any) -> bool:
    """Whether ``request`` is a blocked pull's wait (a BLPOP), which takes nothing: a face
    may abandon it (cancel it) without losing an item."""
    return isinstance(request, Command) and request.args[0] == "BLPOP"


def blpop_seconds(wait: float) -> str:
    """BLPOP's timeout argument for a wait of ``wait`` seconds: rounded up to the millisecond
    and at least ``_SHORTEST``. Rounded down, the wait would end up to half a millisecond
    before the caller's deadline, and the caller would spend one more round trip (a take and
    a 1 ms BLPOP) on the sliver left; 0 would mean forever. The product is rounded to a
    millionth of a millisecond first, so that a float's error (2.007 * 1000 is
    2007.0000000000002) does not add a millisecond to a wait that was exact."""
    return f"{max(_SHORTEST, math.ceil(round(wait * 1000.0, 6)) / 1000.0):.3f}"


def _wait(ns: Namespace, wake: bytes, left: float) -> Command:
    wait = min(left, ns._slice)
    # Safe to send again: a wake-up token lost with a reply costs the waiter one slice at most
    # (it looks again after each), and the item itself is taken by a script.
    return Command(("BLPOP", wake, blpop_seconds(wait)), idempotent=True, reply=POPPED)


def pull(
    ns: Namespace,
    prefix: str | None = None,
    default: Any = (None, None),
    side: _Side = "front",
    expire_time: bool = False,
    tag: bool = False,
    retry: bool = False,
    timeout: float | None = None,
) -> Op[Any]:
    """Take the first item from ``side`` of the queue ``prefix``: ``(key, value)``, or
    ``default``. Exactly one caller gets each item. With ``timeout``, wait up to that many
    seconds for a push, blocked on the server (BLPOP on the queue's wake-up list, in slices
    within the client's socket timeout); each push leaves a token there, so a push between
    the empty try and the BLPOP is not missed."""
    where = _side(side)
    wait = seconds(timeout, "timeout", _TIMEOUT)
    deadline = None if wait is None else time.monotonic() + wait
    wake = ns._base + b"w:" + _qid(prefix)
    while True:
        item = yield from _take(ns, prefix, where, batch=False)
        if item is not None:
            return _shaped_item(item, expire_time, tag)
        if deadline is None:
            return missed(default, expire_time, tag)
        left = deadline - time.monotonic()
        if left <= 0:
            return missed(default, expire_time, tag)
        yield _wait(ns, wake, left)


def peek(
    ns: Namespace,
    prefix: str | None = None,
    default: Any = (None, None),
    side: _Side = "front",
    expire_time: bool = False,
    tag: bool = False,
    retry: bool = False,
) -> Op[Any]:
    """The first item from ``side`` of the queue ``prefix``, left in place."""
    item = yield from _first(ns, prefix, _side(side))
    if item is None:
        return missed(default, expire_time, tag)
    return _shaped_item(item, expire_time, tag)


def pull_many(
    ns: Namespace,
    n: int,
    prefix: str | None = None,
    side: _Side = "front",
    expire_time: bool = False,
    tag: bool = False,
    retry: bool = False,
    timeout: float | None = None,
) -> Op[list[Any]]:
    """Take up to ``n`` items from ``side``, each exactly once (one script per item, not one
    transaction: D-058); with ``timeout``, wait while there are none."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be an int >= 0, not {n!r}")
    out: list[Any] = []
    if n == 0:
        return out
    first = yield from pull(ns, prefix, ENOVAL, side, expire_time, tag, timeout=timeout)
    if first is ENOVAL or (isinstance(first, tuple) and first[0] is ENOVAL):
        return out
    out.append(first)
    while len(out) < n:
        item = yield from _take(ns, prefix, _side(side), batch=True)
        if item is None:
            break
        out.append(_shaped_item(item, expire_time, tag))
    return out
