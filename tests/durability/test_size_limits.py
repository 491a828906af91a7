"""Caches filled to several times their size limit keep data, as python-diskcache's do.

The same sets run against python-diskcache 5.6.3 and diskcache_oxide, under every eviction
policy that culls, for `Cache` and `FanoutCache`, with values stored inline in the database
and in value files, in one process and in several. Each run must end with about as many
entries as python-diskcache keeps, a volume and files on disk bounded near the limit, and a
new set that is kept.
"""

from __future__ import annotations

import multiprocessing
import os
from typing import Any

import pytest
import support

pytestmark = pytest.mark.oxide

POLICIES = ["least-recently-stored", "least-recently-used", "least-frequently-used"]
LIMIT = 2 << 20  # 2 MiB
# 10 kB lives in the database (under disk_min_file_size, 32 kB); 100 kB in a value file.
SIZES = {"inline": 10_000, "file": 100_000}
FILL = 5  # times the limit


def _fill(cache: Any, start: int, count: int, size: int) -> None:
    """Set `count` keys; read a few of the older ones on the way, so LRU and LFU differ."""
    value = b"v" * size
    for i in range(start, start + count):
        cache.set(i, value)
        if i % 7 == 0 and i > start:
            cache.get(i - 1)


def _disk_bytes(directory: str) -> int:
    """Bytes of every file under the directory (database, WAL, value files)."""
    total = 0
    for where, _, names in os.walk(directory):
        for name in names:
            total += os.path.getsize(os.path.join(where, name))
    return total


def _run(mod: Any, directory: str, *, fanout: bool, policy: str, size: int) -> dict[str, Any]:
    opts: dict[str, Any] = {"size_limit": LIMIT, "eviction_policy": policy}
    cache = mod.FanoutCache(directory, shards=4, **opts) if fanout else mod.Cache(directory, **opts)
    count = FILL * LIMIT // size
    _fill(cache, 0, count, size)
    fresh_key = 10**9
    cache.set(fresh_key, b"n" * size)
    result = {
        "len": len(cache),
        "volume": cache.volume(),
        "fresh_kept": cache.get(fresh_key) == b"n" * size,
    }
    cache.close()
    result["disk"] = _disk_bytes(directory)
    result["directories"] = 4 if fanout else 1
    return result


def _assert_close(ours: dict[str, Any], theirs: dict[str, Any], size: int) -> None:
    assert ours["fresh_kept"], f"a new set was evicted at once: {ours}"
    assert ours["len"] > 0, f"the cache emptied itself: {ours}"
    # python-diskcache culls 10 entries per write once at the limit, so counts move in
    # steps; ours must stay within a cull's worth and a fifth of its count.
    slack = max(10, theirs["len"] // 5)
    assert abs(ours["len"] - theirs["len"]) <= slack, f"ours {ours} vs python-diskcache {theirs}"
    # The volume stays within one cull's worth of entries above the limit.
    assert ours["volume"] <= LIMIT + 11 * size, ours
    # Everything on disk stays near the limit: the WAL is checkpointed every 1,000 frames
    # (4 MiB), the database shrinks as entries go, and each directory holds its 1 MiB
    # reserve for removals on a full disk (D-039).
    reserves = ours["directories"] << 20
    assert ours["disk"] <= LIMIT + 11 * size + (5 << 20) + reserves, ours


@pytest.mark.parametrize("where", sorted(SIZES))
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("fanout", [False, True], ids=["Cache", "FanoutCache"])
def test_fill_past_the_limit_keeps_data(
    tmp_path: Any, ref: Any, dc: Any, fanout: bool, policy: str, where: str
) -> None:
    size = SIZES[where]
    theirs = _run(ref, str(tmp_path / "ref"), fanout=fanout, policy=policy, size=size)
    ours = _run(dc, str(tmp_path / "oxide"), fanout=fanout, policy=policy, size=size)
    _assert_close(ours, theirs, size)


def test_volume_shrinks_as_entries_go(dc: Any, tmp_path: Any) -> None:
    """Deleting entries gives their pages back: the volume falls, not only the count."""
    cache = dc.Cache(str(tmp_path / "c"))
    for i in range(500):
        cache.set(i, "x" * 10_000)
    full = cache.volume()
    for i in range(500):
        del cache[i]
    emptied = cache.volume()
    cache.close()
    assert emptied < full // 10, (full, emptied)


_DISABLE_AUTO_VACUUM = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("PRAGMA auto_vacuum = 0")
db.execute("VACUUM")
print(db.execute("PRAGMA auto_vacuum").fetchone()[0])
"""

_AUTO_VACUUM = """
import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("PRAGMA auto_vacuum").fetchone()[0])
"""


def _sqlite(script: str, db: str) -> str:
    import subprocess
    import sys

    # Another copy of SQLite in this process would drop the cache's locks (docs/reliability.md).
    done = subprocess.run(
        [sys.executable, "-c", script, db], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


def test_a_directory_without_auto_vacuum_is_repaired_on_open(dc: Any, tmp_path: Any) -> None:
    """Directories made before the fix have auto_vacuum off; opening one turns it on."""
    directory = str(tmp_path / "old")
    cache = dc.Cache(directory, size_limit=LIMIT)
    cache.set("kept", [1, 2, 3])
    cache.close()
    db = os.path.join(directory, "cache.db")
    assert _sqlite(_DISABLE_AUTO_VACUUM, db) == "0"
    cache = dc.Cache(directory, size_limit=LIMIT)
    assert cache["kept"] == [1, 2, 3]
    _fill(cache, 0, FILL * LIMIT // 10_000, 10_000)
    cache.set("fresh", b"n")
    assert cache.get("fresh") == b"n"
    assert 0 < len(cache) and cache.volume() <= LIMIT + 11 * 10_000
    cache.close()
    assert _sqlite(_AUTO_VACUUM, db) == "1"


def _proc_fill(impl_name: str, directory: str, index: int, size: int, barrier: Any) -> None:
    mod = support.impl() if impl_name != "diskcache" else support.reference()
    cache = mod.Cache(directory, size_limit=LIMIT, timeout=60)
    barrier.wait(timeout=60)
    per = FILL * LIMIT // size // 4
    _fill(cache, index * 10**6, per, size)
    cache.close()


@pytest.mark.slow
@pytest.mark.parametrize("where", sorted(SIZES))
def test_four_processes_fill_past_the_limit(tmp_path: Any, ref: Any, dc: Any, where: str) -> None:
    size = SIZES[where]
    ctx = multiprocessing.get_context("spawn")
    results = {}
    for mod in (ref, dc):
        directory = str(tmp_path / mod.__name__)
        mod.Cache(directory, size_limit=LIMIT).close()
        barrier = ctx.Barrier(4)
        procs = [
            ctx.Process(target=_proc_fill, args=(mod.__name__, directory, i, size, barrier))
            for i in range(4)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
            assert p.exitcode == 0, f"{mod.__name__} worker exited {p.exitcode}"
        cache = mod.Cache(directory, size_limit=LIMIT)
        cache.set("fresh", b"n" * size)
        results[mod.__name__] = {
            "len": len(cache),
            "volume": cache.volume(),
            "fresh_kept": cache.get("fresh") == b"n" * size,
        }
        cache.close()
        results[mod.__name__]["disk"] = _disk_bytes(directory)
        results[mod.__name__]["directories"] = 1
        if mod is dc:
            assert support.integrity(directory) == "ok"
    _assert_close(results[dc.__name__], results[ref.__name__], size)
