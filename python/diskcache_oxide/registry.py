"""Process-wide registry of custom types for the safe value format (D-009).

A registered type is stored as its name plus whatever its ``encode`` function returns (which
must itself be storable in the safe format); reading it back calls ``decode`` on that. Lookup
is by exact type: a subclass must be registered on its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from . import _core

__all__ = ["register_type", "registered_types", "unregister_type"]

T = TypeVar("T")

# type -> (name, encode); name -> (type, decode). Read by the binding; mutated only here.
_BY_TYPE: dict[type, tuple[str, Callable[[Any], Any]]] = {}
_BY_NAME: dict[str, tuple[type, Callable[[Any], Any]]] = {}
_LOCK = threading.Lock()

_core.set_registry(_BY_TYPE, _BY_NAME)


def _builtin() -> frozenset[type]:
    """The types the safe format stores on its own: registering one would change its meaning.

    Built when a type is registered, not at import: the modules they come from cost more to
    import than the rest of the package's ground floor (issue 33)."""
    import datetime
    import decimal
    import pathlib
    import uuid

    return frozenset(
        {
            type(None),
            bool,
            int,
            float,
            str,
            bytes,
            list,
            tuple,
            dict,
            set,
            frozenset,
            datetime.datetime,
            datetime.date,
            datetime.time,
            datetime.timedelta,
            decimal.Decimal,
            uuid.UUID,
            pathlib.PosixPath,
            pathlib.WindowsPath,
            pathlib.PurePosixPath,
            pathlib.PureWindowsPath,
        }
    )


def register_type(
    cls: type[T],
    name: str,
    encode: Callable[[T], Any],
    decode: Callable[[Any], T],
) -> None:
    """Let caches store instances of ``cls`` without pickle.

    :param cls: the class; matched exactly (``type(obj) is cls``), not its subclasses
    :param name: the stable name written with each value; keep it the same across
        versions of your program, and register it in every process that reads the cache
    :param encode: turns an instance into a value the safe format stores (None, bool,
        int, float, str, bytes, list, tuple, dict, set, frozenset, datetime types,
        Decimal, UUID, paths, or another registered type)
    :param decode: rebuilds the instance from what ``encode`` returned
    :raises ValueError: if ``name`` is registered for another class, ``cls`` is registered
        under another name, or ``cls`` is a type the safe format already stores
    :raises TypeError: if an argument has the wrong type
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_type: cls must be a class, not {type(cls).__name__}")
    if not isinstance(name, str) or not name:
        raise TypeError("register_type: name must be a non-empty str, e.g. 'myapp.Point'")
    if not callable(encode) or not callable(decode):
        raise TypeError("register_type: encode and decode must be callables")
    if cls in _builtin():
        raise ValueError(
            f"register_type: {cls.__qualname__} is stored by the safe format already; "
            "register only your own classes"
        )
    with _LOCK:
        known = _BY_NAME.get(name)
        if known is not None and known[0] is not cls:
            raise ValueError(
                f"register_type: the name {name!r} is already registered for "
                f"{_qualified(known[0])}; pick another name, or call "
                f"unregister_type({name!r}) first"
            )
        previous = _BY_TYPE.get(cls)
        if previous is not None and previous[0] != name:
            raise ValueError(
                f"register_type: {_qualified(cls)} is already registered as "
                f"{previous[0]!r}; a class has one name"
            )
        _BY_TYPE[cls] = (name, encode)
        _BY_NAME[name] = (cls, decode)


def unregister_type(cls_or_name: type | str) -> None:
    """Remove a registration, by class or by name. Unknown ones are ignored."""
    with _LOCK:
        if isinstance(cls_or_name, str):
            entry = _BY_NAME.pop(cls_or_name, None)
            if entry is not None:
                _BY_TYPE.pop(entry[0], None)
        else:
            known = _BY_TYPE.pop(cls_or_name, None)
            if known is not None:
                _BY_NAME.pop(known[0], None)


def registered_types() -> dict[str, type]:
    """The registered names and their classes."""
    with _LOCK:
        return {name: cls for name, (cls, _) in _BY_NAME.items()}


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
