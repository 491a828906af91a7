"""The named values every floor of the package may hand back: the ground floor (issue 31).

``ENOVAL`` (no value), ``UNKNOWN``, ``COMPUTING`` (another caller holds the claim) and
:class:`Outcome` (what a pay-once call did). This module imports nothing of the package, so
the cache, the features and both backends can share the same objects: a feature compares
``value is ENOVAL`` whichever backend answered. ``diskcache_oxide.core``, ``claims`` and the
package itself still export them under the names users know.
"""

from __future__ import annotations

import enum

__all__ = ["COMPUTING", "ENOVAL", "UNKNOWN", "Constant", "Outcome"]


class Constant(tuple[str]):
    """A named sentinel that shows its name as its repr (``ENOVAL``, ``UNKNOWN``)."""

    def __new__(cls, name: str) -> Constant:
        return super().__new__(cls, (name,))

    def __repr__(self) -> str:
        return str(self[0])


#: What a read returns for a key that holds no value (python-diskcache's sentinel).
ENOVAL = Constant("ENOVAL")
UNKNOWN = Constant("UNKNOWN")

#: What ``get_or_compute(..., if_computing="skip")`` returns when another caller holds the
#: claim: the value is being computed elsewhere, and this caller did not wait for it.
COMPUTING = Constant("COMPUTING")


class Outcome(enum.Enum):
    """What a pay-once call did, given by ``get_or_compute(..., outcome=True)`` beside the
    value (D-052)."""

    #: The value was there already: this call computed nothing and waited for nobody.
    CACHED = "cached"
    #: This call held the claim and computed the value (perhaps after waiting for another
    #: caller whose turn failed or whose claim ran out).
    COMPUTED = "computed"
    #: Another caller was computing the value; this call waited for it and returns what that
    #: caller stored.
    WAITED = "waited"
    #: Another caller was computing the value and ``if_computing='skip'`` returned
    #: :data:`COMPUTING` at once.
    SKIPPED = "skipped"

    def __repr__(self) -> str:
        return f"Outcome.{self.name}"
