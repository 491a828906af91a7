"""A hypothesis state machine: the cache against a model (an ordered dict with expiry).

Culling on write is switched off (cull_limit=0) so the model needs no eviction rules;
expiry is "never", "far future" or "already past", so no outcome depends on timing.

Part of the conformance suite (tests/helpers/backends.py): the same machine runs on a Redis
server and a cluster, where the model knows the two things D-058 says differ: a write removes
up to 10 expired entries after it writes (it cannot be switched off, capability
``keep_expired``), and a float key equal to an int is listed back as the int.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import support
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

pytestmark = [pytest.mark.slow, pytest.mark.backends]

#: How many expired entries a Redis write removes before it writes (the scripts' CULL).
REDIS_CULL = 10

KEYS = ["a", "b", "c", "", 0, 1, 1.0, 7, -2.5, b"a", b"b", True, None, (1, "x"), ("y",)]
keys = st.sampled_from(KEYS)
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1000, 1000),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.lists(st.integers(-5, 5), max_size=3),
    st.tuples(st.text(max_size=3), st.integers(-5, 5)),
    st.dictionaries(st.text(max_size=3), st.integers(-5, 5), max_size=3),
)
expiries = st.sampled_from([None, 1e6, -1000.0])
tags = st.sampled_from([None, "red", "blue", 5])
handles = st.integers(0, 1)


@dataclass
class Entry:
    key: Any  # the key object as first stored (python-diskcache keeps it on update)
    value: Any
    expired: bool
    tag: Any
    no_expiry: bool  # stored with expire=None (get(expire_time=True) gives None)
    expired_at: int = 0  # the order in which entries expired (a Redis write culls the first)


class CacheMachine(RuleBasedStateMachine):
    def __init__(self, make_cache: Callable[..., Any], remote: bool) -> None:
        super().__init__()
        self.remote = remote
        name = "sm" + uuid.uuid4().hex[:12]
        # two handles on one directory (or namespace); every rule picks one (the second reads
        # its settings from the directory), so state kept per handle instead of on disk shows
        # up as a mismatch. A Redis namespace has no cull_limit: its writes cull (see cull()).
        self.caches = [
            make_cache(name) if remote else make_cache(name, cull_limit=0),
            make_cache(name),
        ]
        self.model: dict[Any, Entry] = {}  # insertion ordered, keyed by key identity
        self.expirations = 0

    def teardown(self) -> None:
        for cache in self.caches:
            cache.close()

    # -- helpers
    def live(self, key: Any) -> Entry | None:
        entry = self.model.get(support.key_identity(key))
        return entry if entry is not None and not entry.expired else None

    def listed(self, key: Any) -> Any:
        """The key as the cache lists it back: on Redis a float equal to an int is the int."""
        if self.remote and type(key) is float and key.is_integer():
            return int(key)
        return key

    def cull(self) -> None:
        """A Redis write then removes up to 10 expired entries, the first to expire first (its
        own, if it stored one already expired)."""
        if not self.remote:
            return
        expired = sorted((e.expired_at, ident) for ident, e in self.model.items() if e.expired)
        for _, ident in expired[:REDIS_CULL]:
            del self.model[ident]

    def expired_now(self, entry: Entry) -> None:
        self.expirations += 1
        entry.expired_at = self.expirations

    def store(self, key: Any, value: Any, expire: Any, tag: Any) -> None:
        ident = support.key_identity(key)
        expired = expire is not None and expire < 0
        if ident in self.model:
            entry = self.model[ident]
            entry.value, entry.expired, entry.tag = value, expired, tag
            entry.no_expiry = expire is None
        else:
            entry = self.model[ident] = Entry(self.listed(key), value, expired, tag, expire is None)
        if expired:
            self.expired_now(entry)

    @staticmethod
    def assert_same(expected: Any, actual: Any) -> None:
        problem = support.explain_difference(expected, actual)
        assert problem is None, f"expected {expected!r}, got {actual!r}: {problem}"

    # -- rules
    @rule(h=handles, key=keys, value=values, expire=expiries, tag=tags)
    def set(self, h, key, value, expire, tag):
        assert self.caches[h].set(key, value, expire=expire, tag=tag) is True
        self.store(key, value, expire, tag)
        self.cull()

    @rule(h=handles, key=keys, value=values, expire=expiries, tag=tags)
    def add(self, h, key, value, expire, tag):
        expected = self.live(key) is None
        self.assert_same(expected, self.caches[h].add(key, value, expire=expire, tag=tag))
        if expected:
            self.store(key, value, expire, tag)
            self.cull()

    @rule(h=handles, key=keys)
    def get(self, h, key):
        entry = self.live(key)
        got, expire_time, tag = self.caches[h].get(key, "<miss>", expire_time=True, tag=True)
        if entry is None:
            self.assert_same(("<miss>", None, None), (got, expire_time, tag))
        else:
            self.assert_same(entry.value, got)
            self.assert_same(entry.tag, tag)
            assert (expire_time is None) == entry.no_expiry

    @rule(h=handles, key=keys)
    def getitem(self, h, key):
        entry = self.live(key)
        if entry is None:
            with pytest.raises(KeyError):
                self.caches[h][key]
        else:
            self.assert_same(entry.value, self.caches[h][key])

    @rule(h=handles, key=keys)
    def contains(self, h, key):
        assert (key in self.caches[h]) == (self.live(key) is not None)

    @rule(h=handles, key=keys)
    def delete(self, h, key):
        entry = self.live(key)
        assert self.caches[h].delete(key) is (entry is not None)
        if entry is not None:
            del self.model[support.key_identity(key)]

    @rule(h=handles, key=keys)
    def pop(self, h, key):
        entry = self.live(key)
        got = self.caches[h].pop(key, "<miss>", tag=True)
        if entry is None:
            self.assert_same(("<miss>", None), got)
        else:
            self.assert_same((entry.value, entry.tag), got)
            del self.model[support.key_identity(key)]

    @rule(h=handles, key=keys, delta=st.integers(-3, 3), default=st.sampled_from([0, 100, None]))
    def incr(self, h, key, delta, default):
        entry = self.live(key)
        if entry is None:
            if default is None:
                with pytest.raises(KeyError):
                    self.caches[h].incr(key, delta, default=None)
                return
            self.assert_same(default + delta, self.caches[h].incr(key, delta, default=default))
            self.store(key, default + delta, None, None)
            return
        numeric = (int, float) if support.REFERENCE_MODE else (int, float, bool)
        if type(entry.value) in numeric:  # incr of a bool: D-011 departure
            expected = entry.value + delta
            self.assert_same(expected, self.caches[h].incr(key, delta, default=default))
            entry.value = expected
        else:
            with pytest.raises(TypeError):
                self.caches[h].incr(key, delta, default=default)

    @rule(h=handles, key=keys, expire=expiries)
    def touch(self, h, key, expire):
        entry = self.live(key)
        assert self.caches[h].touch(key, expire=expire) is (entry is not None)
        if entry is not None:
            entry.expired = expire is not None and expire < 0
            entry.no_expiry = expire is None
            if entry.expired:
                self.expired_now(entry)

    @rule(h=handles, tag=st.sampled_from(["red", "blue", 5]))
    def evict(self, h, tag):
        doomed = [
            ident for ident, e in self.model.items() if e.tag == tag and type(e.tag) is type(tag)
        ]
        assert self.caches[h].evict(tag) == len(doomed)
        for ident in doomed:
            del self.model[ident]

    @rule(h=handles)
    def expire(self, h):
        doomed = [ident for ident, e in self.model.items() if e.expired]
        assert self.caches[h].expire() == len(doomed)
        for ident in doomed:
            del self.model[ident]

    @rule(h=handles, last=st.booleans())
    def peekitem(self, h, last):
        order = list(self.model.items())
        if last:
            order.reverse()
        for ident, entry in order:
            if entry.expired:
                del self.model[ident]  # peekitem removes the expired items it passes
                continue
            got = self.caches[h].peekitem(last=last, tag=True)
            self.assert_same(((entry.key, entry.value), entry.tag), got)
            return
        with pytest.raises(KeyError):
            self.caches[h].peekitem(last=last)

    @precondition(lambda self: len(self.model) > 3)
    @rule(h=handles)
    def clear(self, h):
        assert self.caches[h].clear() == len(self.model)
        self.model.clear()

    @rule(h=handles, reverse=st.booleans())
    def iterate(self, h, reverse):
        expected = [e.key for e in self.model.values()]
        if reverse:
            expected.reverse()
        self.assert_same(
            expected, list(reversed(self.caches[h])) if reverse else list(self.caches[h])
        )

    @rule(h=handles)
    def close(self, h):
        self.caches[h].close()  # the handle reopens on its next use

    # -- invariants
    @invariant()
    def length(self):
        assert len(self.caches[0]) == len(self.model)
        assert len(self.caches[1]) == len(self.model)


def test_cache_against_the_model(make_cache: Any, backend: Any) -> None:
    # Fewer on the cluster, whose client costs about 2 ms a step (CI time, docs/testing.md):
    # its scripts are the server's, and it adds only the routing.
    run_state_machine_as_test(
        lambda: CacheMachine(make_cache, backend.remote),
        settings=settings(
            max_examples=60 if backend.cluster else 150,
            stateful_step_count=50,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
