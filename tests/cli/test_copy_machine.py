"""``admin.copy`` as a state machine (D-062): any sequence of sets (of several key types, with
tags and expiries), deletes, pushes at either end of two queues and pulls on a directory, then
a copy into a fresh Redis namespace, reads back the directory's live entries with their values,
tags and expiry times, each queue in its order; and copying that namespace into a new directory
gives them back again."""

from __future__ import annotations

import itertools
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import diskcache_oxide
import pytest
from cli_support import namespace_url
from diskcache_oxide import Cache, admin
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

pytestmark = [pytest.mark.oxide, pytest.mark.slow]

keys = st.one_of(
    st.text(max_size=6),
    st.integers(min_value=-5, max_value=2**40),
    st.tuples(st.text(max_size=3), st.integers(0, 9)),
    st.binary(max_size=4),
)
values = st.one_of(
    st.none(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.binary(max_size=20),
    st.lists(st.integers(), max_size=4),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=3),
)
tags = st.one_of(st.none(), st.sampled_from(["a", "b"]), st.integers(0, 3))
expiries = st.one_of(st.none(), st.sampled_from([3600.0, 86400.0, 0.0]))
prefixes = st.sampled_from([None, "jobs"])

_spaces = itertools.count()


def _entries(cache: Any) -> dict[Any, tuple[Any, float | None, Any]]:
    found = {}
    for key in admin.keys(cache, limit=None):
        entry = admin.entry(cache, key)
        if entry is not None:
            found[key] = entry
    return found


def _queues(cache: Any) -> dict[str | None, list[Any]]:
    return {
        prefix: [(item.key, item.value) for item in admin.queue_items(cache, prefix, limit=10**6)]
        for prefix in (None, "jobs")
    }


def _same(source: dict[Any, Any], copied: dict[Any, Any]) -> None:
    assert set(copied) == set(source)
    for key, (value, expires, tag) in source.items():
        theirs = copied[key]
        assert (theirs[0], theirs[2]) == (value, tag), key
        if expires is None or math.isinf(expires):
            assert theirs[1] is None or math.isinf(theirs[1]), key
        else:
            assert theirs[1] == pytest.approx(expires, abs=0.5), key


class CopyMachine(RuleBasedStateMachine):
    url: str  # the server's, set by the test

    @initialize()
    def open(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="dco-copy-"))
        self.cache = Cache(str(self.root / "src"), eviction_policy="none")

    def teardown(self) -> None:
        self.cache.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @rule(key=keys, value=values, tag=tags, expire=expiries)
    def set(self, key: Any, value: Any, tag: Any, expire: float | None) -> None:
        # An expiry of 0 is an entry that has expired by the time it is copied.
        self.cache.set(key, value, expire=expire, tag=tag)

    @rule(key=keys)
    def delete(self, key: Any) -> None:
        self.cache.delete(key)

    @rule(value=values, prefix=prefixes, front=st.booleans(), tag=tags)
    def push(self, value: Any, prefix: str | None, front: bool, tag: Any) -> None:
        self.cache.push(value, prefix=prefix, side="front" if front else "back", tag=tag)

    @rule(prefix=prefixes)
    def pull(self, prefix: str | None) -> None:
        self.cache.pull(prefix)

    @rule()
    def copy_and_back(self) -> None:
        space = f"m{next(_spaces)}"
        url = namespace_url(self.url, space)
        report = admin.copy(self.cache.directory, url)
        assert not report.skipped
        source = _entries(self.cache)
        assert report.entries == len(source)
        with admin.open_cache(url) as copied:
            _same(source, _entries(copied))
            assert _queues(copied) == _queues(self.cache)
        back = self.root / space
        admin.copy(url, back)
        with admin.open_cache(back) as again:
            _same(source, _entries(again))
            assert _queues(again) == _queues(self.cache)
        with diskcache_oxide.open(url) as copied:
            copied.clear()


def test_copy_keeps_what_any_sequence_of_calls_left(redis_url: str) -> None:
    machine = type("CopyMachineHere", (CopyMachine,), {"url": redis_url})
    run = settings(
        max_examples=25,
        stateful_step_count=25,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )(machine)
    run.TestCase().runTest()
