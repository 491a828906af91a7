"""A hypothesis state machine for the memo of recent reads and the notes that keep it (D-017,
D-065), against a dict.

Three handles on one directory each keep their own memo and read the others' commits from the
notes file; a stock SQLite connection writes the database behind all of them, leaving no
note. Every read is made twice, so the second one is answered from the memo whenever the
memo holds the key: each must equal the model. Writes of every kind come from any handle,
some inside a transaction larger than a note can name.

A second machine makes connections end and begin (issue 29): a handle reads and closes (a
request's life), or is replaced by a new one; all are closed at once; another process opens,
writes and closes (the last connection of all when ours are closed, so SQLite deletes the WAL
and the ``-shm``), or writes with a stock SQLite while no handle of ours may be open; a forked
child reads through a handle its parent may have closed; a read-only handle reads beside them.
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import diskcache_oxide as dco
import memo_workers
import pytest
import support
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


@pytest.fixture(scope="module")
def other_process() -> Iterator[Any]:
    """A second process that opens, writes and closes on request (memo_workers.serve_writes)."""
    spawn = multiprocessing.get_context("spawn")
    ours, theirs = spawn.Pipe()
    process = spawn.Process(target=memo_workers.serve_writes, args=(theirs,))
    process.start()
    yield ours
    ours.send(None)
    process.join(30)
    if process.is_alive():
        process.kill()


def test_the_memo_never_outlives_its_connections(tmp_path: Path, other_process: Any) -> None:
    counter = iter(range(10**6))
    #: Handles 0 to 2 write; the fourth is read-only.
    readers = st.integers(0, 3)

    class Lifecycle(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.directory = tmp_path / f"life-{next(counter)}"
            self.caches = [dco.Cache(str(self.directory)) for _ in range(3)]
            self.caches.append(dco.Cache(str(self.directory), read_only=True))
            self.model: dict[str, Any] = {}

        def elsewhere(self, how: str, key: str, value: Any) -> None:
            other_process.send((str(self.directory), how, key, value))
            assert other_process.poll(60), "the writing process stopped answering"
            assert other_process.recv() == "ok"

        def check(self, h: int) -> None:
            cache = self.caches[h]
            for _ in range(2):  # the first read of a new connection maps the WAL index
                assert {k: cache.get(k) for k in KEYS} == {k: self.model.get(k) for k in KEYS}

        @rule(h=handles, key=keys, value=values)
        def set(self, h: int, key: str, value: Any) -> None:
            self.caches[h].set(key, value)
            self.model[key] = value

        @rule(key=keys, value=st.one_of(st.none(), values))
        def another_process_writes(self, key: str, value: Any) -> None:
            self.elsewhere("cache", key, value)
            if value is None:
                self.model.pop(key, None)
            else:
                self.model[key] = value

        @rule(key=keys)
        def stock_sqlite_deletes_elsewhere(self, key: str) -> None:
            self.elsewhere("stock", key, None)
            self.model.pop(key, None)

        @rule(h=readers)
        def read_everything_twice(self, h: int) -> None:
            self.check(h)

        @rule(h=readers)
        def read_then_close(self, h: int) -> None:
            """A request's life: read, then close (the next call opens a connection again)."""
            self.check(h)
            self.caches[h].close()

        @rule(h=readers)
        def read_then_close_all(self, h: int) -> None:
            self.check(h)
            for cache in self.caches:
                cache.close()

        @rule(h=readers)
        def reopen(self, h: int) -> None:
            self.caches[h].close()
            self.caches[h] = dco.Cache(str(self.directory), read_only=h == 3)

        @rule(h=readers)
        def forked_child_reads(self, h: int) -> None:
            expected = {k: self.model.get(k) for k in KEYS}
            cache = self.caches[h]
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                code = 4  # an exception: never back into pytest from the child
                try:
                    same = all({k: cache.get(k) for k in KEYS} == expected for _ in range(2))
                    code = 0 if same else 3
                finally:
                    os._exit(code)
            assert support.wait_child(pid) == 0, "the forked child read a stale value"

        def teardown(self) -> None:
            for cache in self.caches:
                cache.close()

    run_state_machine_as_test(
        Lifecycle,
        settings=settings(
            max_examples=150,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        ),
    )
