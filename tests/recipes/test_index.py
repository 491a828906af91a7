"""Index: differential against python-diskcache 5.6.3's Index, a hypothesis state machine
against a dict, and what only ours does.

Part of the conformance suite (tests/helpers/backends.py): the tests with a cache run on a
directory, a Redis server and a cluster (``Index.fromcache(redis_cache)``).
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
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

diskcache = pytest.importorskip("diskcache")

#: The conformance suite: each test with a cache runs on a directory, a Redis server and a
#: cluster.
pytestmark = [pytest.mark.oxide, pytest.mark.backends]

KEYS = st.one_of(st.integers(0, 5), st.sampled_from(["a", "b", "c"]))
VALUES = st.one_of(st.integers(-3, 3), st.text(max_size=3), st.none())


def outcome(call: Any) -> Any:
    try:
        return ("ok", call())
    except (KeyError, ValueError, TypeError) as exc:
        return ("raised", type(exc))


# ----------------------------------------------------------------------------- differential


def _apply(index: Any, rng: random.Random) -> Any:
    # No float keys and no int keys inside the queue's number range: python-diskcache's
    # queue calls treat them as items (D-054), and a small int key at the front end makes
    # our pushes there run out of numbers (D-057).
    key = rng.choice(["a", "b", "c", -1, 10**16, b"k"])
    value = rng.choice([0, 1, "v", None, -2.5])
    name = rng.choice(
        [
            "set",
            "set",
            "get",
            "getitem",
            "delitem",
            "contains",
            "pop",
            "pop_default",
            "popitem",
            "popitem_first",
            "peekitem",
            "peekitem_first",
            "setdefault",
            "update",
            "push",
            "push_front",
            "pull",
            "pull_back",
            "eq_dict",
            "views",
        ]
    )
    if name == "set":
        index[key] = value
        return name, None
    if name == "get":
        return name, index.get(key, "default")
    if name == "getitem":
        return name, outcome(lambda: index[key])
    if name == "delitem":
        return name, outcome(lambda: index.__delitem__(key))
    if name == "contains":
        return name, key in index
    if name == "pop":
        return name, outcome(lambda: index.pop(key))
    if name == "pop_default":
        return name, index.pop(key, "gone")
    if name in ("popitem", "popitem_first"):
        return name, outcome(lambda: index.popitem(last=name == "popitem"))
    if name in ("peekitem", "peekitem_first"):
        return name, outcome(lambda: index.peekitem(last=name == "peekitem"))
    if name == "setdefault":
        return name, index.setdefault(key, value)
    if name == "update":
        index.update({key: value}, z=value)
        return name, None
    if name in ("push", "push_front"):
        side = "back" if name == "push" else "front"
        return name, index.push(value, prefix=rng.choice([None, "q"]), side=side)
    if name in ("pull", "pull_back"):
        side = "front" if name == "pull" else "back"
        return name, index.pull(prefix=rng.choice([None, "q"]), side=side)
    if name == "eq_dict":
        return name, (index == {"a": 0}, index != {"a": 0})
    return name, (list(index.keys()), list(index.values()), list(index.items()))


@pytest.mark.parametrize("seed", range(8))
def test_differential_against_python_diskcache(tmp_path: Path, make_cache: Any, seed: int) -> None:
    ours = dco.Index.fromcache(make_cache("ours", eviction_policy="none"), {"a": 1}, b=2)
    theirs = diskcache.Index(str(tmp_path / "theirs"), {"a": 1}, b=2)
    ours_rng, theirs_rng = random.Random(seed), random.Random(seed)
    for step in range(150):
        assert _apply(ours, ours_rng) == _apply(theirs, theirs_rng), step
        assert list(ours.items()) == list(theirs.items()), step
        assert list(reversed(ours)) == list(reversed(theirs)), step
        assert len(ours) == len(theirs)
    ours.clear()
    theirs.clear()
    assert len(ours) == len(theirs) == 0


def test_equality_rules_match_python_diskcache(tmp_path: Path) -> None:
    for module, where in ((dco, "o"), (diskcache, "t")):
        index = module.Index(str(tmp_path / where / "1"), [("a", 1), ("b", 2)])
        other = module.Index(str(tmp_path / where / "2"), [("b", 2), ("a", 1)])
        assert index == {"b": 2, "a": 1}
        assert index != {"b": 2, "a": 3}
        assert index != collections.OrderedDict([("b", 2), ("a", 1)])
        assert index == collections.OrderedDict([("a", 1), ("b", 2)])
        assert index != other
        del other["b"]
        other["b"] = 2
        assert index == other
        with pytest.raises(TypeError):
            hash(index)


def test_constructor_forms_match_python_diskcache(tmp_path: Path) -> None:
    for module, where in ((dco, "o"), (diskcache, "t")):
        assert dict(module.Index(None, {"x": 1})) == {"x": 1}
        assert dict(module.Index([("x", 1)], y=2)) == {"x": 1, "y": 2}
        named = module.Index(str(tmp_path / where), x=3)
        assert named.directory == str(tmp_path / where)
        assert repr(named) == f"Index({str(tmp_path / where)!r})"
        cache = module.Cache(str(tmp_path / where / "c"))
        assert module.Index.fromcache(cache, {"k": 1}).cache is cache
        assert cache["k"] == 1


def test_memoize_matches_python_diskcache(tmp_path: Path) -> None:
    calls: list[int] = []
    keys = []
    for module, where in ((dco, "o"), (diskcache, "t")):
        index = module.Index(str(tmp_path / where))

        @index.memoize(name="sq")
        def square(x: int) -> int:
            calls.append(x)
            return x * x

        assert square(3) == 9
        assert square(3) == 9
        keys.append(square.__cache_key__(3))
        assert list(index) == [keys[-1]]
    assert calls == [3, 3]
    assert keys[0] == keys[1]
    with pytest.raises(TypeError, match="name cannot be callable"):
        dco.Index().memoize(len)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- state machine


class IndexMachine(RuleBasedStateMachine):
    """Our Index against a dict (insertion-ordered, like the Index)."""

    def __init__(self, make_cache: Any) -> None:
        super().__init__()
        cache = make_cache(f"i{uuid.uuid4().hex[:12]}", eviction_policy="none")  # a fresh one
        self.ours = dco.Index.fromcache(cache)
        self.model: dict[Any, Any] = {}

    @rule(key=KEYS, value=VALUES)
    def set(self, key: Any, value: Any) -> None:
        self.ours[key] = value
        self.model[key] = value

    @rule(key=KEYS)
    def delete(self, key: Any) -> None:
        assert outcome(lambda: self.ours.__delitem__(key)) == outcome(
            lambda: self.model.__delitem__(key)
        )

    @rule(key=KEYS)
    def pop(self, key: Any) -> None:
        assert outcome(lambda: self.ours.pop(key)) == outcome(lambda: self.model.pop(key))

    @rule(key=KEYS, value=VALUES)
    def setdefault(self, key: Any, value: Any) -> None:
        assert self.ours.setdefault(key, value) == self.model.setdefault(key, value)

    @rule()
    def popitem(self) -> None:
        assert outcome(self.ours.popitem) == outcome(self.model.popitem)

    @rule(items=st.dictionaries(KEYS, VALUES, max_size=3))
    def update(self, items: dict[Any, Any]) -> None:
        self.ours.update(items)
        self.model.update(items)

    @rule(key=KEYS)
    def lookups(self, key: Any) -> None:
        assert (key in self.ours) == (key in self.model)
        assert self.ours.get(key, "d") == self.model.get(key, "d")

    @rule()
    def clear(self) -> None:
        self.ours.clear()
        self.model.clear()

    @invariant()
    def same_items(self) -> None:
        assert list(self.ours.items()) == list(self.model.items())
        assert list(reversed(self.ours)) == list(reversed(self.model))
        assert self.ours == self.model

    def teardown(self) -> None:
        self.ours.cache.close()


def test_index_against_a_dict(make_cache: Any) -> None:
    run_state_machine_as_test(
        lambda: IndexMachine(make_cache),
        settings=settings(max_examples=25, stateful_step_count=25, deadline=None),
    )


def test_fromcache_takes_a_cache_or_a_redis_cache() -> None:
    with pytest.raises(TypeError, match="takes a Cache or a RedisCache, not dict"):
        dco.Index.fromcache({})  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- ours


def test_comparing_with_a_non_mapping_is_not_equal() -> None:
    index = dco.Index({"a": 1})
    assert index != 5
    assert not (index == [("a", 1)])


def test_path_directory(tmp_path: Path) -> None:
    index = dco.Index(tmp_path / "i", a=1)
    assert index.directory == str(tmp_path / "i")
    assert dco.Index(os.fsencode(tmp_path / "i"))["a"] == 1


@pytest.mark.needs("pickling")
def test_pickle_reopens_the_same_items(make_cache: Any) -> None:
    index = dco.Index.fromcache(make_cache("i", eviction_policy="none"), a=1)
    clone = pickle.loads(pickle.dumps(index))
    assert clone.directory == index.directory
    clone["b"] = 2
    assert dict(index) == {"a": 1, "b": 2}


class Undo(Exception):
    """Rolls a transaction back (not a RuntimeError: UnsupportedError is one)."""


@pytest.mark.needs("transact")
def test_transact_rolls_back(make_cache: Any) -> None:
    index = dco.Index.fromcache(make_cache("i", eviction_policy="none"), a=1)
    with pytest.raises(Undo), index.transact():
        index["a"] = 2
        raise Undo
    assert index["a"] == 1


def test_update_is_one_transaction(make_cache: Any) -> None:
    index = dco.Index.fromcache(make_cache("i", eviction_policy="none"))
    with pytest.raises(dco.UnsupportedTypeError):
        index.update([("a", 1), ("b", object())])
    assert len(index) == 0


def test_popitem_empty_message(make_cache: Any) -> None:
    with pytest.raises(KeyError, match="dictionary is empty"):
        dco.Index.fromcache(make_cache("i", eviction_policy="none")).popitem()


def test_eviction_policy_is_none() -> None:
    assert dco.Index().cache.eviction_policy == "none"


def test_fanout_index(tmp_path: Path) -> None:
    fanout = dco.FanoutCache(str(tmp_path / "f"), shards=2)
    index = fanout.index("users")
    assert isinstance(index, dco.Index)
    assert index.directory == os.path.join(str(tmp_path / "f"), "index", "users")
    assert fanout.index("users") is index
    index.update(abc=123, ghi=789)
    assert index.popitem() == ("ghi", 789)
    assert len(fanout) == 0
    fanout.close()
    assert dict(fanout.index("users")) == {"abc": 123}
    fanout.close()
