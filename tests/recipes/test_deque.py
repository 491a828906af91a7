"""Deque: differential against python-diskcache 5.6.3's Deque, a hypothesis state machine
against collections.deque, and what only ours does.

Part of the conformance suite (tests/helpers/backends.py): the tests with a cache run on a
directory, a Redis server and a cluster (``Deque.fromcache(redis_cache)``). On Redis the calls
that take several cache calls as one transaction (``MULTI_CALL``, and a ``maxlen``) are the
``transact`` gap: their own tests are its strict xfails, and the random sequences there draw
from the other calls.
"""

from __future__ import annotations

import collections
import os
import pickle
import random
import uuid
from pathlib import Path
from typing import Any

import diskcache_oxide as dco
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

diskcache = pytest.importorskip("diskcache")

#: The conformance suite: each test with a cache runs on a directory, a Redis server and a
#: cluster.
pytestmark = [pytest.mark.oxide, pytest.mark.backends]

#: The calls that need several cache calls to be one transaction.
MULTI_CALL = ("setitem", "rotate", "reverse")

VALUES = st.one_of(st.integers(-5, 5), st.sampled_from(["a", "b", "c"]))


def outcome(call: Any) -> Any:
    """What a call did: ``('ok', result)`` or ``('raised', exception type)``."""
    try:
        return ("ok", call())
    except (IndexError, ValueError, TypeError) as exc:
        return ("raised", type(exc))


# ----------------------------------------------------------------------------- differential


def _random_step(rng: random.Random, whole: bool = True) -> tuple[str, tuple[Any, ...]]:
    """One random call; without ``whole``, never one of ``MULTI_CALL``."""
    value = rng.choice([0, 1, 2, "x", "y", -3])
    position = rng.randint(-5, 5)
    steps = [
        step
        for step in [
            ("append", (value,)),
            ("appendleft", (value,)),
            ("extend", ([value, value],)),
            ("extendleft", ([value, "z"],)),
            ("pop", ()),
            ("popleft", ()),
            ("peek", ()),
            ("peekleft", ()),
            ("getitem", (position,)),
            ("setitem", (position, value)),
            ("delitem", (position,)),
            ("remove", (value,)),
            ("count", (value,)),
            ("index", (value,)),
            ("contains", (value,)),
            ("rotate", (rng.randint(-7, 7),)),
            ("reverse", ()),
            ("len", ()),
            ("list", ()),
            ("reversed", ()),
            ("eq", ([0, 1],)),
            ("lt", ([1, "x"],)),
            ("iadd", ([value],)),
        ]
        if whole or step[0] not in MULTI_CALL
    ]
    return rng.choice(steps)


def _apply(deque: Any, name: str, args: tuple[Any, ...]) -> Any:
    if name == "getitem":
        return outcome(lambda: deque[args[0]])
    if name == "setitem":
        return outcome(lambda: deque.__setitem__(*args))
    if name == "delitem":
        return outcome(lambda: deque.__delitem__(args[0]))
    if name == "contains":
        return args[0] in deque
    if name == "len":
        return len(deque)
    if name == "list":
        return list(deque)
    if name == "reversed":
        return list(reversed(deque))
    if name == "eq":
        return (deque == args[0], deque != args[0])
    if name == "lt":
        return outcome(lambda: (deque < args[0], deque >= args[0]))
    if name == "iadd":
        deque += args[0]
        return list(deque)
    return outcome(lambda: getattr(deque, name)(*args))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("maxlen", [None, pytest.param(4, marks=pytest.mark.needs("transact"))])
def test_differential_against_python_diskcache(
    tmp_path: Path, make_cache: Any, backend: Any, seed: int, maxlen: int | None
) -> None:
    rng = random.Random(seed)
    ours = dco.Deque.fromcache(make_cache("ours", eviction_policy="none"), [1, 2], maxlen=maxlen)
    theirs = diskcache.Deque([1, 2], directory=str(tmp_path / "theirs"), maxlen=maxlen)
    whole = backend.has("transact")
    for step in range(120):
        name, args = _random_step(rng, whole)
        assert _apply(ours, name, args) == _apply(theirs, name, args), (step, name, args)
        assert list(ours) == list(theirs), (step, name, args)
    assert ours.maxlen == theirs.maxlen
    if whole:
        ours.maxlen = theirs.maxlen = 2
    assert list(ours) == list(theirs)
    ours.clear()
    theirs.clear()
    assert len(ours) == len(theirs) == 0


@pytest.mark.parametrize("name", MULTI_CALL)
@pytest.mark.needs("transact")
def test_calls_of_several_steps(make_cache: Any, name: str) -> None:
    ours = dco.Deque.fromcache(make_cache("d", eviction_policy="none"), [1, 2, 3])
    theirs = diskcache.Deque([1, 2, 3])
    args = {"setitem": (1, "x"), "rotate": (1,), "reverse": ()}[name]
    assert _apply(ours, name, args) == _apply(theirs, name, args)
    assert list(ours) == list(theirs)


def test_fromcache_takes_a_cache_or_a_redis_cache() -> None:
    with pytest.raises(TypeError, match="takes a Cache or a RedisCache, not dict"):
        dco.Deque.fromcache({})  # type: ignore[arg-type]


@pytest.mark.needs("transact")
def test_fromcache_matches_python_diskcache(tmp_path: Path, make_cache: Any) -> None:
    ours_cache = make_cache("o", eviction_policy="none")
    theirs_cache = diskcache.Cache(str(tmp_path / "t"), eviction_policy="none")
    ours = dco.Deque.fromcache(ours_cache, "abcd", maxlen=3)
    theirs = diskcache.Deque.fromcache(theirs_cache, "abcd", maxlen=3)
    assert ours.cache is ours_cache
    assert list(ours) == list(theirs) == ["b", "c", "d"]
    assert ours.maxlen == theirs.maxlen == 3
    assert len(ours_cache) == len(theirs_cache) == 3


def test_empty_errors_match_python_diskcache(make_cache: Any) -> None:
    ours = dco.Deque.fromcache(make_cache("o", eviction_policy="none"))
    for deque in (ours, diskcache.Deque()):
        for call, message in [
            (deque.pop, "pop from an empty deque"),
            (deque.popleft, "pop from an empty deque"),
            (deque.peek, "peek from an empty deque"),
            (deque.peekleft, "peek from an empty deque"),
            (deque.__getitem__, "deque index out of range"),
        ]:
            with pytest.raises(IndexError, match=message):
                call(*([0] if message.startswith("deque index") else []))
        with pytest.raises(ValueError, match="value not in deque"):
            deque.remove(1)
        with pytest.raises(TypeError, match="integer argument expected"):
            deque.rotate(1.5)


# ----------------------------------------------------------------------------- state machine


class DequeMachine(RuleBasedStateMachine):
    """Our Deque against collections.deque with the same maxlen."""

    def __init__(self, make_cache: Any, whole: bool) -> None:
        super().__init__()
        # A maxlen and the MULTI_CALL rules only where the backend has transact.
        self.whole = whole
        self.maxlen = random.choice([None, 3]) if whole else None
        cache = make_cache(f"d{uuid.uuid4().hex[:12]}", eviction_policy="none")  # a fresh one
        self.ours = dco.Deque.fromcache(cache, maxlen=self.maxlen)
        self.model: collections.deque[Any] = collections.deque(maxlen=self.maxlen)

    @rule(value=VALUES)
    def append(self, value: Any) -> None:
        self.ours.append(value)
        self.model.append(value)

    @rule(value=VALUES)
    def appendleft(self, value: Any) -> None:
        self.ours.appendleft(value)
        self.model.appendleft(value)

    @rule(values=st.lists(VALUES, max_size=4))
    def extend(self, values: list[Any]) -> None:
        self.ours.extend(values)
        self.model.extend(values)

    @rule(values=st.lists(VALUES, max_size=4))
    def extendleft(self, values: list[Any]) -> None:
        self.ours.extendleft(values)
        self.model.extendleft(values)

    @rule()
    def pop(self) -> None:
        assert outcome(self.ours.pop) == outcome(self.model.pop)

    @rule()
    def popleft(self) -> None:
        assert outcome(self.ours.popleft) == outcome(self.model.popleft)

    @precondition(lambda self: len(self.model) > 0)
    @rule()
    def peeks(self) -> None:
        assert self.ours.peek() == self.model[-1]
        assert self.ours.peekleft() == self.model[0]

    @rule(index=st.integers(-4, 4))
    def getitem(self, index: int) -> None:
        assert outcome(lambda: self.ours[index]) == outcome(lambda: self.model[index])

    @precondition(lambda self: self.whole)
    @rule(index=st.integers(-4, 4), value=VALUES)
    def setitem(self, index: int, value: Any) -> None:
        ours = outcome(lambda: self.ours.__setitem__(index, value))
        assert ours == outcome(lambda: self.model.__setitem__(index, value))

    @rule(index=st.integers(-4, 4))
    def delitem(self, index: int) -> None:
        ours = outcome(lambda: self.ours.__delitem__(index))
        assert ours == outcome(lambda: self.model.__delitem__(index))

    @rule(value=VALUES)
    def remove(self, value: Any) -> None:
        assert outcome(lambda: self.ours.remove(value)) == outcome(lambda: self.model.remove(value))

    @rule(value=VALUES)
    def count_and_index(self, value: Any) -> None:
        assert self.ours.count(value) == self.model.count(value)
        assert outcome(lambda: self.ours.index(value)) == outcome(lambda: self.model.index(value))

    @precondition(lambda self: self.whole)
    @rule(steps=st.integers(-6, 6))
    def rotate(self, steps: int) -> None:
        self.ours.rotate(steps)
        self.model.rotate(steps)

    @precondition(lambda self: self.whole)
    @rule()
    def reverse(self) -> None:
        self.ours.reverse()
        self.model.reverse()

    @rule()
    def clear(self) -> None:
        self.ours.clear()
        self.model.clear()

    @invariant()
    def same_items(self) -> None:
        assert list(self.ours) == list(self.model)
        assert list(reversed(self.ours)) == list(reversed(self.model))
        assert len(self.ours) == len(self.model)

    def teardown(self) -> None:
        self.ours.cache.close()


def test_deque_against_collections_deque(make_cache: Any, backend: Any) -> None:
    run_state_machine_as_test(
        lambda: DequeMachine(make_cache, backend.has("transact")),
        settings=settings(max_examples=25, stateful_step_count=25, deadline=None),
    )


# ----------------------------------------------------------------------------- ours


def test_maxlen_property_and_setter(tmp_path: Path) -> None:
    deque = dco.Deque("abcde", directory=str(tmp_path / "d"))
    assert deque.maxlen == float("inf")
    deque.maxlen = 3
    assert list(deque) == ["c", "d", "e"]
    deque.appendleft("z")
    assert list(deque) == ["z", "c", "d"]
    with pytest.raises(ValueError, match="non-negative"):
        dco.Deque(maxlen=-1)
    with pytest.raises(TypeError, match="maxlen"):
        dco.Deque(maxlen="3")  # type: ignore[arg-type]


def test_extend_with_itself_and_iadd(tmp_path: Path) -> None:
    deque = dco.Deque([1, 2], directory=str(tmp_path / "d"))
    deque.extend(deque)
    assert list(deque) == [1, 2, 1, 2]
    deque += [3]
    assert list(deque) == [1, 2, 1, 2, 3]
    deque.extendleft(deque)
    assert list(deque) == [3, 2, 1, 2, 1, 1, 2, 1, 2, 3]


def test_large_extend_is_batched_and_bounded(tmp_path: Path) -> None:
    deque = dco.Deque(range(2500), directory=str(tmp_path / "d"), maxlen=1200)
    assert len(deque) == 1200
    assert deque.peekleft() == 1300
    assert deque.peek() == 2499


def test_same_directory_is_the_same_deque(tmp_path: Path) -> None:
    one = dco.Deque(directory=str(tmp_path / "d"))
    two = dco.Deque(directory=str(tmp_path / "d"))
    one.append("x")
    assert two.popleft() == "x"
    assert len(one) == 0
    assert one.directory == str(tmp_path / "d")
    assert repr(one) == f"Deque(directory={str(tmp_path / 'd')!r})"


def test_pickle_and_copy_keep_directory_and_maxlen(tmp_path: Path) -> None:
    deque = dco.Deque("abc", directory=str(tmp_path / "d"), maxlen=5)
    clone = pickle.loads(pickle.dumps(deque))
    assert clone.directory == deque.directory
    assert clone.maxlen == 5
    assert list(clone) == ["a", "b", "c"]
    copied = deque.copy()
    assert copied.maxlen == 5
    copied.append("d")
    assert list(deque) == ["a", "b", "c", "d"]


def test_transact_and_unhashable(tmp_path: Path) -> None:
    deque = dco.Deque(directory=str(tmp_path / "d"))
    with deque.transact():
        deque.append(1)
        deque.append(2)
    assert deque == [1, 2]
    assert deque != (1, 2, 3)
    assert deque < [1, 3]
    with pytest.raises(TypeError):
        hash(deque)
    with pytest.raises(TypeError, match="integers"):
        deque["0"]  # type: ignore[index]


def test_safe_format_applies(tmp_path: Path) -> None:
    deque = dco.Deque(directory=str(tmp_path / "d"))
    with pytest.raises(dco.UnsupportedTypeError):
        deque.append(object())
    assert len(deque) == 0


def test_eviction_policy_is_none(tmp_path: Path) -> None:
    deque = dco.Deque(directory=str(tmp_path / "d"))
    assert deque.cache.eviction_policy == "none"


def test_fanout_deque(tmp_path: Path) -> None:
    fanout = dco.FanoutCache(str(tmp_path / "f"), shards=2)
    deque = fanout.deque("jobs/today", maxlen=2)
    assert isinstance(deque, dco.Deque)
    assert deque.directory == os.path.join(str(tmp_path / "f"), "deque", "jobs", "today")
    assert fanout.deque("jobs/today") is deque
    deque.extend("abc")
    assert list(deque) == ["b", "c"]
    assert len(fanout) == 0
    fanout.close()
    assert list(fanout.deque("jobs/today")) == ["b", "c"]
    fanout.close()
