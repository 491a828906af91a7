"""Claims and compute-once over a cache directory: the one adapter between the pay-once code
and the binding (D-044, D-052).

:class:`DirectoryClaims` implements :class:`~diskcache_oxide._store.ClaimBackend` (and
:class:`~diskcache_oxide._store.ClaimRegistry`) for a :class:`~diskcache_oxide.Cache`: the
values are the cache's entries, the claims live in the directory's ``claims`` table, and a
waiter sleeps on the directory's bell. It is the only module of the pay-once code
(``claims.py``, ``aio/claims.py``, ``aio/turns.py``, ``_payonce.py``) that calls the
binding's claim methods, so a change to their names or shapes is made here alone.

A second backend (the Redis backend) plugs its claims into :class:`~diskcache_oxide.Claims`,
``get_or_compute`` and ``compute_once``, sync and async, with nothing but an object that
implements ``ClaimBackend`` (``ClaimRegistry`` for the inspection calls: ``holder``,
``list``, ``break_claim``): the protocol, the heartbeat, the waiting and the shielded async
turn are the drivers' (``_payonce``), not the backend's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._core import ClaimsCore

from .._sentinels import ENOVAL

__all__ = ["DirectoryClaims"]

_Record = tuple[str, str, int, float, float]


class DirectoryClaims:
    """The claims and values of one cache directory, through ``cache``'s binding."""

    __slots__ = ("cache",)

    def __init__(self, cache: Any) -> None:
        # Any, not Cache: core.py imports this folder (tests/api/test_layers.py).
        self.cache = cache

    @property
    def _claims(self) -> ClaimsCore:
        # Asked of the cache at each call, never kept: the binding answers for the handle as
        # it is now (closed and reopened, say).
        claims: ClaimsCore = self.cache._claims
        return claims

    def __repr__(self) -> str:
        return f"DirectoryClaims({self.cache.directory!r})"

    # ---- ClaimBackend ----

    def get(self, key: Any) -> Any:
        return self.cache.get(key, ENOVAL, retry=True)

    def store(self, key: Any, value: Any, expire: float | None, tag: Any) -> None:
        self.cache.set(key, value, expire, tag=tag, retry=True)

    def try_acquire(
        self, namespace: str, key: Any, lease: float, token: str, host: str, pid: int
    ) -> bool:
        return self._claims.acquire(namespace, key, lease, token, host, pid)

    def extend(self, namespace: str, key: Any, token: str, lease: float) -> bool:
        return self._claims.extend(namespace, key, token, lease) is not None

    def release(self, namespace: str, key: Any, token: str) -> bool:
        return self._claims.release(namespace, key, token)

    def wait_for_change(self, namespace: str, key: Any, seconds: float, value: bool) -> bool:
        return self._claims.wait(namespace, key, seconds, value)

    # ---- ClaimRegistry ----

    def holder(self, namespace: str, key: Any) -> _Record | None:
        return self._claims.holder(namespace, key)

    def break_claim(self, namespace: str, key: Any) -> bool:
        return self._claims.break_claim(namespace, key)

    def claims(self, namespace: str) -> list[tuple[Any, _Record]]:
        return [(row[1], row[2:]) for row in self._claims.list(namespace)]
