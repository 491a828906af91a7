"""The one check of "a number of seconds" in the Python package (issue 20, D-052).

Every parameter that is a duration (a lease, a timeout, an expiry, a delay) is checked here,
so they all accept the same things and say the same thing when they refuse one:

    ``<name> must be [None or ]a [finite ]number of seconds[ > 0| >= 0], not <what>``

where ``<what>`` is the type's name for a value that is not a number (``bool`` is not one)
and the value's ``repr`` for a number out of range. Each caller keeps the range it always had,
named by a :class:`Rule`; a few callers raise ``ValueError`` rather than ``TypeError`` for a
value that is not a number, because they always have (``recipes``' ``expire=``). The Rust
side checks the same on its own arguments (crates/binding).
"""

from __future__ import annotations

import math
from typing import Literal, overload

__all__ = [
    "ANY",
    "LEASE",
    "NONNEGATIVE",
    "POSITIVE",
    "TIMEOUT",
    "Rule",
    "seconds",
]


class Rule:
    """What a duration parameter accepts: ``low`` is the bound on the number (``'> 0'``,
    ``'>= 0'``, or None for any number), ``finite`` refuses infinity (NaN is refused by
    either bound), ``none`` accepts None (returned as None), and ``wrong_type`` is the
    exception raised for a value that is not a number.

    A plain class with slots: a ``NamedTuple`` cost a twentieth of the package's import
    time to create (issue 33)."""

    __slots__ = ("finite", "low", "none", "wrong_type")

    def __init__(
        self,
        low: Literal["> 0", ">= 0"] | None,
        finite: bool,
        none: bool = False,
        wrong_type: type[Exception] = TypeError,
    ) -> None:
        self.low = low
        self.finite = finite
        self.none = none
        self.wrong_type = wrong_type

    def __repr__(self) -> str:
        return (
            f"Rule({self.low!r}, finite={self.finite}, none={self.none}, "
            f"wrong_type={self.wrong_type.__name__})"
        )


#: Any number (``Cache(timeout=)``, ``memoize(expire=)`` with ``none``): only the type is
#: checked.
ANY = Rule(None, False)
#: A finite number >= 0 (``JobQueue``'s lease, delays and timeouts).
NONNEGATIVE = Rule(">= 0", True)
#: A finite number > 0 (a claim's lease).
LEASE = Rule("> 0", True)
#: A number >= 0, infinity included (a claim's or compute-once's ``timeout``).
TIMEOUT = Rule(">= 0", False)
#: A number > 0, infinity included.
POSITIVE = Rule("> 0", False)


def _wanted(rule: Rule) -> str:
    what = "None or a " if rule.none else "a "
    if rule.finite:
        what += "finite "
    what += "number of seconds"
    if rule.low is not None:
        what += " " + rule.low
    return what


@overload
def seconds(value: float, name: str, rule: Rule = ...) -> float: ...
@overload
def seconds(value: object, name: str, rule: Rule = ...) -> float | None: ...


def seconds(value: object, name: str, rule: Rule = NONNEGATIVE) -> float | None:
    """``value`` as a float of seconds, checked by ``rule``; None if the rule accepts None
    and ``value`` is None.

    :raises TypeError: (or ``rule.wrong_type``) if ``value`` is not an int or float (a bool
        is refused)
    :raises ValueError: if it is out of the rule's range (NaN always is, when there is a
        bound; infinity when the rule is ``finite``)
    """
    kind = value.__class__
    if kind is float or kind is int:  # the usual case first (a bool's class is bool)
        number = float(value)  # type: ignore[arg-type]
    elif value is None and rule.none:
        return None
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise rule.wrong_type(f"{name} must be {_wanted(rule)}, not {kind.__name__}")
    else:
        number = float(value)
    low = rule.low
    if low is None:
        return number
    if (
        not (number > 0 if low == "> 0" else number >= 0)
        or rule.finite
        and not math.isfinite(number)
    ):
        raise ValueError(f"{name} must be {_wanted(rule)}, not {value!r}")
    return number
