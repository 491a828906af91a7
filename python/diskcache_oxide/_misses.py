"""The misses: what a face gives back instead of the cache's answer, as functions.

The API table (``_api``, D-043) names them in its rows, and the faces ``make api`` generates
call them by their names (``_faces/null.py``, ``_faces/durable.py``, the Redis faces). They
live apart from the table so that a face imports these few functions and not the table,
which only the generator and NullCache's docstrings read (issue 33).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from ._sentinels import Outcome

R = TypeVar("R")


def shaped(value: Any, expires: Any, tag: Any, expire_time: Any, want_tag: Any) -> Any:
    """``value`` with its ``expires``/``tag`` as a call with these flags returns it:
    ``value``, ``(value, x)`` or ``(value, expires, tag)``, as :meth:`Cache.get` does."""
    if expire_time and want_tag:
        return (value, expires, tag)
    if expire_time:
        return (value, expires)
    if want_tag:
        return (value, tag)
    return value


def missed(default: Any, expire_time: Any, tag: Any) -> Any:
    """``default`` as a missing key reads: alone, or with None for each of ``expire_time``
    and ``tag`` asked for (``shaped(default, None, None, expire_time, tag)``)."""
    if expire_time and tag:
        return (default, None, None)
    if expire_time or tag:
        return (default, None)
    return default


def missing(key: Any) -> KeyError:
    """The error ``cache[key]`` raises for a missing key."""
    return KeyError(key)


def empty() -> KeyError:
    """The error ``peekitem()`` raises on an empty cache."""
    return KeyError("dictionary is empty")


def defaults(keys: Iterable[Any], default: Any) -> list[Any]:
    """``default`` for every key."""
    return [default for _ in keys]


def nothing_kept(values: Iterable[Any]) -> list[None]:
    """One None per value: no item was queued."""
    return [None for _ in values]


def nothing() -> Iterator[Any]:
    """An iterator over no keys."""
    return iter(())


def incremented(key: Any, delta: Any, default: Any) -> Any:
    """What ``incr`` returns for an absent key (KeyError if ``default`` is None)."""
    if default is None:
        raise KeyError(key)
    return default + delta


def decremented(key: Any, delta: Any, default: Any) -> Any:
    """What ``decr`` returns for an absent key (KeyError if ``default`` is None)."""
    return incremented(key, -delta, default)


def waited(timeout: float | None) -> None:
    """Sleep ``timeout`` seconds (if it is positive), as a pull waits for an item that never
    comes, so a worker loop over an empty queue does not spin."""
    if timeout is not None and timeout > 0:
        time.sleep(timeout)


def waited_missed(timeout: float | None, default: Any, expire_time: Any, tag: Any) -> Any:
    """``missed(default, expire_time, tag)`` after :func:`waited`."""
    waited(timeout)
    return missed(default, expire_time, tag)


def waited_none(timeout: float | None) -> list[Any]:
    """``[]`` after :func:`waited`."""
    waited(timeout)
    return []


def computed(
    fn: Callable[..., R],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    outcome: bool,
    pass_claim: bool,
) -> R | tuple[R, Outcome]:
    """``fn(*args, **kwargs)``: nothing stored, no claim taken (``claim=None`` with
    ``pass_claim``; with ``outcome``, in a pair with ``Outcome.COMPUTED``)."""
    value = fn(*args, claim=None, **kwargs) if pass_claim else fn(*args, **kwargs)
    if outcome:
        from ._sentinels import Outcome

        return value, Outcome.COMPUTED
    return value
