"""Files deleted or damaged behind the cache's back: a value file or ``cache.db`` deleted, a
write-ahead log cut short or with garbage in it, damaged database pages. Each gives a clear
error or a consistent cache (a damaged WAL leaves a prefix of the commits, each whole), never a
crash.

Covered elsewhere: a full disk (``test_full_disk.py``, and under a ``durable=True`` handle
``api/test_durable.py``), a read-only file system and a directory without permissions
(``api/test_durable.py``, ``api/test_caches.py``, ``api/test_read_only.py``), a corrupt
database header (``api/test_caches.py``), damaged or forged stored values
(``safety/test_damaged_values.py``) and hostile files in the directory
(``safety/test_hostile_files.py``).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import diskcache_oxide as dco
import pytest
import support

pytestmark = pytest.mark.oxide


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "diskcache_oxide"]


# -------------------------------------------------------------- files deleted behind its back


def test_deleted_value_file_is_a_clear_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = str(tmp_path / "c")
    cache = dco.Cache(directory)
    cache.set("big", os.urandom(50_000))
    cache.set("small", 1)
    (path,) = support.value_files(directory)
    os.remove(path)
    name = os.path.relpath(path, os.path.join(directory, "values"))
    for call in (lambda: cache.get("big"), lambda: cache["big"], lambda: cache.read("big")):
        with pytest.raises(dco.CorruptValueError, match="missing") as info:
            call()
        assert name in str(info.value) and "check(fix=True)" in str(info.value)
    assert cache.get("small") == 1

    # a durable handle, and one handed out by the registry, treat it as a miss
    durable = dco.Cache(directory, durable=True)
    caplog.set_level(logging.WARNING, logger="diskcache_oxide")
    assert durable.get("big", "default") == "default"
    caches = dco.Caches({"pages": {"directory": directory, "settings": {"durable": True}}})
    assert caches["pages"].get("big") is None
    assert any("missing" in m for m in warnings_of(caplog))

    assert [w for w in cache.check() if name in str(w.message)]
    cache.check(fix=True)
    assert cache.check() == []
    assert "big" not in cache and cache.get("small") == 1
    caches.close()


def test_deleted_database_is_a_clear_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """SQLite keeps using an unlinked file; writes to it would be invisible to every other
    process, so the handle refuses to go on once it notices (within half a second)."""
    directory = str(tmp_path / "c")
    cache = dco.Cache(directory)
    durable = dco.Cache(directory, durable=True)
    cache.set("k", 1)
    assert durable.get("k") == 1
    os.remove(os.path.join(directory, "cache.db"))
    time.sleep(0.6)
    with pytest.raises(FileNotFoundError, match="deleted or replaced") as info:
        cache.set("k", 2)
    assert "open the cache again" in str(info.value)
    with pytest.raises(FileNotFoundError):
        cache.get("k")
    caplog.set_level(logging.WARNING, logger="diskcache_oxide")
    assert durable.set("k", 3) is False
    assert any("deleted or replaced" in m for m in warnings_of(caplog))
    cache.close()
    durable.close()

    # a new handle makes a new, empty cache, and the registry hands one out
    assert dco.Cache(directory).get("k") is None
    caches = dco.Caches({"pages": {"directory": directory}})
    assert isinstance(caches["pages"], dco.Cache)
    caches.close()


# ------------------------------------------------------------------------ a damaged WAL

WRITER = """
import os, sys
import diskcache_oxide as dco
cache = dco.Cache(sys.argv[1])
cache.reset("sqlite_auto_vacuum")  # opened
for i in range(int(sys.argv[2])):
    cache.set(f"k{i}", f"value {i}" * 20)
os._exit(0)  # no close: the WAL keeps every commit
"""

READER = """
import json, sys
import diskcache_oxide as dco
try:
    cache = dco.Cache(sys.argv[1])
    values = {k: cache.get(k) for k in (f"k{i}" for i in range(int(sys.argv[2])))}
    print(json.dumps({"ok": True, "values": values, "check": cache.check()}))
except dco.CacheError as exc:
    print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}))
"""

WRITES = 40


@pytest.fixture
def wal_directory(tmp_path: Path) -> tuple[str, int]:
    directory = str(tmp_path / "c")
    subprocess.run([sys.executable, "-c", WRITER, directory, str(WRITES)], check=True, timeout=60)
    size = os.path.getsize(os.path.join(directory, "cache.db-wal"))
    assert size > 4096 * WRITES, "the writer's commits should all be in the WAL"
    return directory, size


def read_back(directory: str) -> dict[str, object]:
    import json

    done = subprocess.run(
        [sys.executable, "-c", READER, directory, str(WRITES)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"the reader crashed ({done.returncode}): {done.stderr}"
    result: dict[str, object] = json.loads(done.stdout)
    return result


def assert_a_prefix_survived(directory: str, result: dict[str, object]) -> int:
    """The commits that survive a damaged WAL are a prefix of those made, each whole."""
    assert result["ok"], result
    values = result["values"]
    assert isinstance(values, dict)
    kept = [i for i in range(WRITES) if values[f"k{i}"] is not None]
    assert kept == list(range(len(kept))), kept
    for i in kept:
        assert values[f"k{i}"] == f"value {i}" * 20
    assert result["check"] == []
    assert support.integrity(directory) == "ok"
    return len(kept)


@pytest.mark.parametrize("where", [0, 16, 32 + 100, 0.5, -1])
def test_truncated_wal(wal_directory: tuple[str, int], where: float) -> None:
    directory, size = wal_directory
    cut = int(size * where) if isinstance(where, float) else (size - 1 if where < 0 else where)
    os.truncate(os.path.join(directory, "cache.db-wal"), cut)
    kept = assert_a_prefix_survived(directory, read_back(directory))
    if where == -1:
        assert kept == WRITES - 1  # only the last commit's last frame was cut
    # and the cache takes writes again
    cache = dco.Cache(directory)
    cache.set("after", 1)
    assert cache.get("after") == 1
    assert support.integrity(directory) == "ok"


@pytest.mark.parametrize("where", [0.3, 0.8])
def test_garbage_in_the_wal(wal_directory: tuple[str, int], where: float) -> None:
    directory, size = wal_directory
    with open(os.path.join(directory, "cache.db-wal"), "r+b") as f:
        f.seek(int(size * where))
        f.write(os.urandom(3000))
    assert_a_prefix_survived(directory, read_back(directory))


def test_garbage_wal_header(wal_directory: tuple[str, int]) -> None:
    directory, _ = wal_directory
    with open(os.path.join(directory, "cache.db-wal"), "r+b") as f:
        f.write(os.urandom(32))
    assert_a_prefix_survived(directory, read_back(directory))


def test_corrupt_page_in_the_database(tmp_path: Path) -> None:
    """Damage past the header: open may succeed, but reads of the damaged part raise a
    DatabaseError that says what to do, and nothing crashes."""
    directory = str(tmp_path / "c")
    with dco.Cache(directory) as cache:
        for i in range(300):
            cache.set(f"k{i}", f"value {i}" * 40)
    path = os.path.join(directory, "cache.db")
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        for page in range(2, size // 4096):
            f.seek(page * 4096 + 100)
            f.write(os.urandom(200))
    code = (
        "import sys, diskcache_oxide as dco\n"
        "try:\n"
        "    c = dco.Cache(sys.argv[1])\n"
        "    [c.get(f'k{i}') for i in range(300)]\n"
        "    print('read')\n"
        "except dco.CacheError as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, directory], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout.strip()
    assert out.startswith(("DatabaseError", "NotACacheError", "CorruptValueError")), out
    assert "move the directory aside" in out or "check" in out, out
