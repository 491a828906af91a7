"""The package imports and works on a Python built without sqlite3, zlib or ctypes.

The engine bundles its own SQLite, so nothing but `migrate` (which reads python-diskcache's
database through Python's sqlite3) needs `_sqlite3`; FanoutCache's shard hash uses zlib's
adler32 when it is there and an equal pure-Python one when not; the tasks' parent-death signal
imports ctypes when a child starts. Minimal and musl builds of CPython often lack one of these
(issue 30, point 7). Each test runs a fresh interpreter whose import system refuses those
modules, as such a build would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from diskcache_oxide.fanout import _python_adler32, shard_hash

# Installed first in the child: every import of a blocked module (or its C part) fails, as
# it does where the module was not built.
BLOCK = """
import sys

BLOCKED = {"sqlite3", "_sqlite3", "zlib", "ctypes", "_ctypes"}


class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"No module named {name!r} (blocked by the test)", name=name)
        return None


sys.meta_path.insert(0, Refuse())
"""

USE = """
import tempfile

import diskcache_oxide as dc
from diskcache_oxide import Cache, FanoutCache, JobQueue

for name in ("sqlite3", "_sqlite3", "zlib", "ctypes", "_ctypes"):
    assert name not in sys.modules, name

with Cache(tempfile.mkdtemp()) as cache:
    cache["k"] = {"v": [1, 2]}
    assert cache["k"] == {"v": [1, 2]}
    cache.push("item", prefix="q")
    assert cache.pull(prefix="q")[1] == "item"
    jobs = JobQueue(cache, "jobs", lease=30)
    jobs.put({"n": 1})
    with jobs.take(timeout=5) as job:
        assert job.value == {"n": 1}

with FanoutCache(tempfile.mkdtemp(), shards=4) as fanout:
    for i in range(20):
        fanout[f"key-{i}"] = i
    assert [fanout[f"key-{i}"] for i in range(20)] == list(range(20))
    print("shards", [dc.fanout.shard_hash(k) % 4 for k in ("a", b"b", 1.5, ("t", 1))])

from diskcache_oxide.migrate import MigrationError

try:
    dc.migrate(sys.argv[1], tempfile.mkdtemp() + "/new")
except MigrationError as error:
    assert "sqlite3" in str(error) and "Python built with sqlite3" in str(error), error
    print("migrate:", error)
else:
    raise AssertionError("migrate ran without sqlite3")
"""


def run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_package_works_with_sqlite3_zlib_and_ctypes_blocked(tmp_path: Path) -> None:
    # A python-diskcache directory to migrate, written here (python-diskcache needs sqlite3):
    # the child must refuse it with a message that says what to do, not an ImportError.
    import diskcache

    with diskcache.Cache(str(tmp_path / "old")) as old:
        old["k"] = "v"
    proc = run(BLOCK + USE, str(tmp_path / "old"))
    assert proc.returncode == 0, proc.stderr
    # The shards are the ones zlib's adler32 gives (python-diskcache's), computed here with it.
    expected = [shard_hash(k) % 4 for k in ("a", b"b", 1.5, ("t", 1))]
    assert f"shards {expected}" in proc.stdout


def test_blocking_works() -> None:
    """The finder really refuses: without it, the first test could pass on a Python that
    merely had not imported the modules yet."""
    proc = run(BLOCK + "import zlib")
    assert proc.returncode != 0
    assert "blocked by the test" in proc.stderr


@pytest.mark.parametrize("size", [0, 1, 3, 5551, 5552, 5553, 70_000])
def test_python_adler32_is_zlibs(size: int) -> None:
    data = bytes((i * 131 + 7) % 256 for i in range(size))
    assert _python_adler32(data) == zlib.adler32(data)
    assert _python_adler32(b"\xff" * size) == zlib.adler32(b"\xff" * size)
