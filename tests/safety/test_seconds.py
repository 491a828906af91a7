"""Every duration parameter of the Python package goes through one check (_seconds.seconds,
D-052): the same inputs are accepted and refused as before, with the same exception types,
and every refusal reads "<name> must be ... number of seconds ..., not <what>"."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.oxide

dc = pytest.importorskip("diskcache_oxide")
from diskcache_oxide import Claims, JobQueue  # noqa: E402
from diskcache_oxide.recipes import Lock  # noqa: E402

NAN, INF = math.nan, math.inf


@pytest.fixture
def cache(tmp_path: Any) -> Any:
    with dc.Cache(str(tmp_path / "c"), eviction_policy="none") as c:
        yield c


def _cases(cache: Any) -> dict[str, Callable[[Any], object]]:
    claims = Claims(cache)
    return {
        "Cache(timeout=)": lambda v: dc.Cache(cache.directory, timeout=v),
        "memoize(expire=)": lambda v: cache.memoize(expire=v),
        "Claims.try_acquire(lease=)": lambda v: claims.try_acquire("k", lease=v),
        "Claims.acquire(timeout=)": lambda v: claims.acquire("busy", timeout=v),
        "get_or_compute(timeout=)": lambda v: cache.get_or_compute("k", int, timeout=v),
        "JobQueue(lease=)": lambda v: JobQueue(cache, lease=v),
        "Lock(expire=)": lambda v: Lock(cache, "lock", expire=v),
    }


# name -> (accepted, refused with ValueError, refused with TypeError)
TABLE: dict[str, tuple[list[Any], list[Any], list[Any]]] = {
    "Cache(timeout=)": ([0, 2.5], [-1, INF, NAN], ["1", True, None]),  # the range: Rust's
    "memoize(expire=)": ([None, 0, -1, 2.5, INF], [], ["1", True]),
    "Claims.try_acquire(lease=)": ([0.5, 3], [0, -1, INF, NAN], ["1", True, None]),
    "Claims.acquire(timeout=)": ([0, 0.01], [-1, NAN], ["1", True, None]),
    "get_or_compute(timeout=)": ([None, 0, 5, INF], [-1, NAN], ["1", True]),
    "JobQueue(lease=)": ([0, 5], [-1, INF, NAN], ["1", True, None]),
    "Lock(expire=)": ([None, 0.5, INF], [0, -1, NAN, "1", True], []),
}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_each_duration_accepts_and_refuses_as_before(cache: Any, name: str) -> None:
    call = _cases(cache)[name]
    accepted, bad_values, bad_types = TABLE[name]
    for value in accepted:
        call(value)
        for claim in Claims(cache).list():
            Claims(cache).break_claim(claim[0])
    for value in bad_values:
        with pytest.raises(ValueError, match=r"must be (None or )?a (finite )?number of seconds"):
            call(value)
    for value in bad_types:
        with pytest.raises(
            TypeError, match=r"must be (None or )?a (finite )?number of seconds.*, not \w+$"
        ):
            call(value)


def test_the_messages_say_the_rule(cache: Any) -> None:
    with pytest.raises(ValueError, match=r"^lease must be a finite number of seconds > 0, not 0$"):
        Claims(cache).try_acquire("k", lease=0)
    with pytest.raises(
        TypeError, match=r"^lease must be a finite number of seconds >= 0, not str$"
    ):
        JobQueue(cache, lease="1")
    with pytest.raises(ValueError, match=r"^expire must be None or a number of seconds > 0, not"):
        Lock(cache, "lock", expire=0)
