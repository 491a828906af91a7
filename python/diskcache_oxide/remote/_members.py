"""How a cache key, and a claims namespace, is named inside a Redis namespace: a key's
*member* (D-054, D-058) and a claims namespace's id.

A key of the queue shape (an int up to 15 digits, or ``'{prefix}-'`` and exactly 15 digits)
is named by its queue and number, so a queue's items sort by number; every other key by its
frame from the binding's key codec. Its own module so that the errors (``_errors``, which name a
cache key in a message) and the operations (``_ops``, which import the errors) both read it
without an import cycle.
"""

from __future__ import annotations

import re
from typing import Any

from .. import _core

__all__ = ["claims_id", "key_of", "member"]

#: A key of the D-054 queue shape with a prefix: ``'{prefix}-'`` and exactly 15 ASCII digits.
_ITEM = re.compile(r"(.*)-([0-9]{15})", re.DOTALL)
_LAST = 999_999_999_999_999


def member(key: Any) -> bytes:
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


def key_of(data: bytes) -> Any:
    """The key a member names."""
    if data.startswith(b"q:i:"):
        return int(data[4:])
    if data.startswith(b"q:s"):
        return data[3:-16].decode("utf-8", "surrogatepass") + "-" + data[-15:].decode()
    return _core.decode_key(data[2:])


def claims_id(namespace: str) -> bytes:
    """The part of a claim's keys that names its claims namespace: the name's length, then the
    name, so that no namespace's keys are a prefix of another's."""
    name = namespace.encode("utf-8", "surrogatepass")
    return str(len(name)).encode() + b":" + name
