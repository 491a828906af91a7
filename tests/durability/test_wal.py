"""The write-ahead log: its index locks seen from another process (D-033), and commits written
whole under every ``sqlite_synchronous`` setting (D-029).

The engine holds some lock releases back to make fewer `fcntl` calls. Another process must see
exactly SQLite's protocol: the write lock held for the whole of a transaction, and nothing held
once a call has returned.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import support
from diskcache_oxide import Cache, JobQueue

linux_locks = pytest.mark.skipif(sys.platform != "linux", reason="reads Linux fcntl locks")

# ----------------------------------------------------------------------------- index locks

# Prints, for each WAL index lock byte (120..127 of the -shm file), the lock another process
# holds on it: "-" none, "r" shared, "w" exclusive.
PROBE = textwrap.dedent(
    """
    import fcntl, os, struct, sys
    fd = os.open(sys.argv[1], os.O_RDWR)
    held = []
    for byte in range(120, 128):
        query = struct.pack("@hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, byte, 1, 0)
        kind = struct.unpack("@hhqqi4x", fcntl.fcntl(fd, fcntl.F_GETLK, query))[0]
        held.append({fcntl.F_UNLCK: "-", fcntl.F_RDLCK: "r", fcntl.F_WRLCK: "w"}[kind])
    print("".join(held))
    """
)


def locks_held(directory: str) -> str:
    shm = Path(directory) / "cache.db-shm"
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(shm)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.strip()


NOTHING = "-" * 8


@linux_locks
def test_no_lock_outlives_a_call(tmp_path: Path) -> None:
    with Cache(str(tmp_path)) as cache:
        calls = [
            lambda: cache.set("a", 1),
            lambda: cache.get("a"),
            lambda: cache.incr("n"),
            lambda: cache.add("b", 2),
            lambda: cache.delete("b"),
            lambda: cache.push("job", prefix="q"),
            lambda: cache.pull(prefix="q"),
            lambda: cache.set_many({i: i for i in range(50)}),
            lambda: len(cache),
            lambda: list(cache),
            lambda: cache.check(),
            lambda: cache.pull(prefix="q", timeout=0.05),
            lambda: cache.clear(),
        ]
        for call in calls:
            call()
            assert locks_held(str(tmp_path)) == NOTHING
        jobs = JobQueue(cache)
        job_calls = [lambda: jobs.put("work"), lambda: jobs.finish(jobs.take())]
        for call in job_calls:
            call()
            assert locks_held(str(tmp_path)) == NOTHING
    # Opening an existing cache, too, leaves nothing held.
    with Cache(str(tmp_path)):
        assert locks_held(str(tmp_path)) == NOTHING


@linux_locks
def test_a_transaction_holds_the_write_lock_until_it_ends(tmp_path: Path) -> None:
    with Cache(str(tmp_path)) as cache:
        cache.set("warm", 0)
        with cache.transact():
            cache.set("a", 1)
            inside = locks_held(str(tmp_path))
            cache.set("b", 2)
            assert locks_held(str(tmp_path)) == inside
        after = locks_held(str(tmp_path))
    # The write lock (byte 120) and one read slot (bytes 123..127), as SQLite holds them.
    assert inside[0] == "w", inside
    assert inside[1:3] == "--", inside
    assert inside[3:].count("r") == 1 and inside[3:].count("w") == 0, inside
    assert after == NOTHING


STOCK_WRITER = textwrap.dedent(
    """
    import sqlite3, sys
    db = sqlite3.connect(sys.argv[1], timeout=60, isolation_level=None)
    for _ in range(int(sys.argv[2])):
        db.execute("BEGIN IMMEDIATE")
        db.execute("UPDATE meta SET hits = hits + 1")
        db.execute("COMMIT")
    print(db.execute("PRAGMA integrity_check").fetchone()[0])
    """
)


@pytest.mark.slow
@linux_locks
def test_a_stock_sqlite_in_another_process_writes_alongside(tmp_path: Path) -> None:
    """Writers in both programs exclude each other: no update of either is lost."""
    rounds = 2000
    with Cache(str(tmp_path)) as cache:
        cache.set("warm", 0)
        stock = subprocess.Popen(
            [sys.executable, "-c", STOCK_WRITER, str(tmp_path / "cache.db"), str(rounds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        done = 0
        while stock.poll() is None:
            cache.incr("n")
            cache.set(done, done)
            done += 1
        out, _ = stock.communicate(timeout=60)
        assert stock.returncode == 0
        assert out.strip() == "ok"
        assert done > 0
        assert cache.get("n") == done
        assert len(cache) == done + 2
        assert cache.check() == []
        # statistics are off, so only the other program counted hits
        assert cache.stats(enable=False) == (rounds, 0)


# ----------------------------------------------------------------------------- whole commits


@pytest.mark.parametrize("sync", [0, 1, 2, 3])
def test_every_synchronous_setting_commits_whole(tmp_path, sync):
    """The engine writes each commit's WAL frames at once (D-029); with every
    ``sqlite_synchronous`` (FULL and EXTRA sync and may pad the WAL) small commits and a
    transaction larger than the write buffer read back whole, and the database is sound."""
    import diskcache_oxide as dco

    directory = str(tmp_path / "c")
    cache = dco.Cache(directory, sqlite_synchronous=sync)
    for i in range(300):
        cache.set(i, bytes([i % 256]) * (100 + i * 17))
    with cache.transact():
        for i in range(600):
            cache.set(("t", i), b"x" * 3000)
    reader = dco.Cache(directory)
    assert all(reader.get(i) == bytes([i % 256]) * (100 + i * 17) for i in range(300))
    assert all(reader.get(("t", i)) == b"x" * 3000 for i in range(600))
    assert support.integrity(directory) == "ok"


def test_writes_that_keep_the_gil_still_checkpoint(tmp_path: Path) -> None:
    """A small set is made holding the GIL, and its commit leaves the checkpoint (which syncs
    the disk) for after the call, with the GIL released (D-065). Threads sharing a handle
    writing 24,000 times must still see the WAL checkpointed and started over: without the
    deferred checkpoints it would grow to about 300 MB."""
    import threading

    cache = Cache(str(tmp_path / "c"))

    def write(n: int) -> None:
        for i in range(6000):
            cache.set(f"{n}-{i % 500}", b"v" * 50)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    wal = (tmp_path / "c" / "cache.db-wal").stat().st_size
    assert wal < 40 * 1024 * 1024, wal
    assert cache.get("3-499") == b"v" * 50
    cache.close()
