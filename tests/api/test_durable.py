"""durable=True handles (D-020): operational errors are logged and become misses; bad
arguments still raise."""

from __future__ import annotations

import logging
import os
import pickle
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import diskcache_oxide as dco
import pytest

pytestmark = pytest.mark.oxide


@pytest.fixture
def directory(tmp_path: Path) -> str:
    directory = str(tmp_path / "c")
    with dco.Cache(directory) as cache:
        cache.set("small", "hello")
    return directory


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "diskcache_oxide" and r.levelno == logging.WARNING
    ]


def test_properties_and_pickling(directory: str) -> None:
    cache = dco.Cache(directory, durable=True)
    assert cache.durable and not cache.read_only
    assert isinstance(cache, dco.Cache)
    assert cache.get("small") == "hello"
    assert cache.set("k", 1) is True
    again = pickle.loads(pickle.dumps(cache))
    assert again.durable and again.get("k") == 1
    assert not dco.Cache(directory).durable

    class Mine(dco.Cache):
        pass

    mine = Mine(directory, durable=True)
    assert isinstance(mine, Mine) and mine.durable
    assert mine.set("m", 1) is True


def test_writes_on_a_read_only_handle_are_misses(
    directory: str, caplog: pytest.LogCaptureFixture
) -> None:
    cache = dco.Cache(directory, read_only=True, durable=True)
    caplog.set_level(logging.WARNING, logger="diskcache_oxide")
    assert cache.set("k", 1) is False
    assert cache.add("k", 1) is False
    assert cache.delete("small") is False
    assert cache.touch("small") is False
    assert cache.incr("n") is None
    assert cache.push("job") is None
    assert cache.push_many([1, 2]) == []
    assert cache.pull() == (None, None)
    assert cache.pull(default="d", expire_time=True, tag=True) == ("d", None, None)
    assert cache.pop("small", default=0, tag=True) == (0, None)
    assert cache.set_many({"a": 1}) is False
    assert cache.delete_many(["small"]) == 0
    assert cache.clear() == 0
    assert cache.decr("n") is None
    assert cache.expire() == 0
    assert cache.evict("t") == 0
    assert cache.cull() == 0
    assert cache.pull_many(2) == [] and cache.pull_many(2) is not cache.pull_many(2)
    cache["k"] = 1
    del cache["small"]
    assert cache.get("small") == "hello"  # nothing was changed
    assert len(warnings_of(caplog)) == 22
    assert "ReadOnlyError" in warnings_of(caplog)[0]


def test_reads_of_a_deleted_database_are_misses(
    directory: str, caplog: pytest.LogCaptureFixture
) -> None:
    cache = dco.Cache(directory, durable=True)
    assert "small" in cache
    os.remove(os.path.join(directory, "cache.db"))
    time.sleep(0.6)  # the handle checks for a deleted database every half second
    caplog.set_level(logging.WARNING, logger="diskcache_oxide")
    assert ("small" in cache) is False
    assert len(cache) == 0
    assert cache.volume() == 0
    assert cache.stats() == (0, 0)
    assert cache.peek(default="d") == "d"
    assert len(warnings_of(caplog)) == 5
    assert all("FileNotFoundError" in m for m in warnings_of(caplog))


def test_timeout_is_a_miss(directory: str, caplog: pytest.LogCaptureFixture) -> None:
    holder = dco.Cache(directory)
    durable = dco.Cache(directory, timeout=0.05, durable=True, statistics=0)
    caplog.set_level(logging.WARNING, logger="diskcache_oxide")
    with holder.transact():
        assert durable.set("k", 1) is False
        assert durable.delete("small") is False
        assert durable.push("job") is None
        assert durable.pull(default=None) is None
        assert durable.incr("n") is None
        assert durable.peekitem.__name__ == "peekitem"
        with pytest.raises(KeyError):
            durable.peekitem()
    assert all("Timeout" in m for m in warnings_of(caplog))
    assert len(warnings_of(caplog)) == 6
    assert durable.set("k", 1) is True
    assert durable.get("k") == 1


def test_corrupt_value_is_a_miss(directory: str, caplog: pytest.LogCaptureFixture) -> None:
    with sqlite3.connect(os.path.join(directory, "cache.db")) as db:
        db.execute("UPDATE cache SET crc = crc + 1 WHERE key = 'small'")
    with pytest.raises(dco.CorruptValueError):
        dco.Cache(directory).get("small")
    cache = dco.Cache(directory, durable=True)
    caplog.set_level(logging.WARNING, logger="diskcache_oxide")
    assert cache.get("small", default="d") == "d"
    assert cache.get("small", default="d", expire_time=True) == ("d", None)
    assert cache.get_many(["small", "nope"], default=0) == [0, 0]
    with pytest.raises(KeyError):
        cache["small"]
    with pytest.raises(KeyError):
        cache.read("small")
    assert len(warnings_of(caplog)) == 5
    assert "CorruptValueError" in warnings_of(caplog)[0]


def test_bad_arguments_still_raise(directory: str) -> None:
    cache = dco.Cache(directory, durable=True)
    with pytest.raises(dco.UnsupportedTypeError):
        cache.set("k", object())
    with pytest.raises(TypeError):
        cache.set(object(), 1)
    with pytest.raises(ValueError):
        cache.pull(side="middle")
    with pytest.raises(ValueError):
        dco.Cache(directory, timeout=-1, durable=True)


@pytest.fixture
def small_tmpfs(tmpfs: Callable[[str], str]) -> str:
    return tmpfs("512k")


def test_full_disk_is_a_miss(small_tmpfs: str, caplog: pytest.LogCaptureFixture) -> None:
    """A real full disk: a 512 KiB tmpfs filled with value files and rows."""
    cache = dco.Cache(os.path.join(small_tmpfs, "c"), durable=True)
    caplog.set_level(logging.WARNING, logger="diskcache_oxide")
    assert cache.set("first", "kept") is True
    stored = [cache.set(f"k{i}", os.urandom(40_000)) for i in range(40)]
    assert stored[0] is True and stored[-1] is False
    assert any("No space left" in m or "full" in m for m in warnings_of(caplog))
    assert cache.push(os.urandom(40_000)) is None
    assert cache.get("first") == "kept"
    # Once space is freed, the same handle writes again.
    for i in range(40):
        cache.delete(f"k{i}")
    assert cache.set("after", "x") is True


def test_read_only_file_system(small_tmpfs: str, caplog: pytest.LogCaptureFixture) -> None:
    """A cache on a file system remounted read-only: a read_only handle reads it, and a
    durable handle's writes are misses."""
    directory = os.path.join(small_tmpfs, "c")
    with dco.Cache(directory) as cache:
        cache.set("small", "hello")
    subprocess.run(["mount", "-o", "remount,ro", small_tmpfs], check=True)
    with pytest.raises(OSError):
        dco.Cache(directory)
    reader = dco.Cache(directory, read_only=True, durable=True)
    caplog.set_level(logging.WARNING, logger="diskcache_oxide")
    assert reader.get("small") == "hello"
    assert reader.set("k", 1) is False
    assert len(warnings_of(caplog)) == 1
