"""A hypothesis state machine for the memo of recent reads and the notes that keep it (D-017,
D-065), against a dict.

Three handles on one directory each keep their own memo and read the others' commits from the
notes file; a stock SQLite connection writes the database behind all of them, leaving no
note. Every read is made twice, so the second one is answered from the memo whenever the
memo holds the key: each must equal the model. Writes of every kind come from any handle,
some inside a transaction larger than a note can name.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import diskcache_oxide as dco
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

pytestmark = [pytest.mark.oxide, pytest.mark.slow]

KEYS = [f"k{i}" for i in range(8)]
keys = st.sampled_from(KEYS)
handles = st.integers(0, 2)
values = st.one_of(st.integers(-50, 50), st.text(max_size=6), st.binary(max_size=6))


def test_the_memo_never_serves_a_stale_value(tmp_path: Path) -> None:
    counter = iter(range(10**6))

    class Memo(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            directory = tmp_path / f"memo-{next(counter)}"
            self.caches = [dco.Cache(str(directory)) for _ in range(3)]
            self.stock = sqlite3.connect(directory / "cache.db", isolation_level=None)
            self.model: dict[str, Any] = {}

        @rule(h=handles, key=keys, value=values)
        def set(self, h: int, key: str, value: Any) -> None:
            self.caches[h].set(key, value)
            self.model[key] = value

        @rule(h=handles, key=keys)
        def delete(self, h: int, key: str) -> None:
            self.caches[h].delete(key)
            self.model.pop(key, None)

        @rule(h=handles, key=keys)
        def incr(self, h: int, key: str) -> None:
            if isinstance(self.model.get(key, 0), int):
                self.model[key] = self.caches[h].incr(key, 3)

        @rule(h=handles, key=keys)
        def expire_now(self, h: int, key: str) -> None:
            if key in self.model:
                self.caches[h].touch(key, -1)  # expired at once
                del self.model[key]

        @rule(h=handles, key=keys, value=values, rows=st.sampled_from([2, 60]))
        def transaction(self, h: int, key: str, value: Any, rows: int) -> None:
            cache = self.caches[h]
            with cache.transact():
                for i in range(rows):
                    cache.set(f"bulk{i}", i)
                cache.set(key, value)
            self.model[key] = value

        @rule(key=keys)
        def stock_sqlite_deletes(self, key: str) -> None:
            self.stock.execute("DELETE FROM cache WHERE key = ? AND raw = 1", (key,))
            self.model.pop(key, None)

        @rule(h=handles)
        def read_everything_twice(self, h: int) -> None:
            cache = self.caches[h]
            for _ in range(2):
                assert {k: cache.get(k) for k in KEYS} == {k: self.model.get(k) for k in KEYS}

        def teardown(self) -> None:
            self.stock.close()
            for cache in self.caches:
                cache.close()

    run_state_machine_as_test(
        Memo,
        settings=settings(
            max_examples=40,
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        ),
    )
