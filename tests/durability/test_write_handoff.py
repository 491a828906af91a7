"""The write lock's bell across processes (D-070): a writer kept waiting for the write lock by
another process sleeps on the futex word in ``cache.db-shm``; the holder's release rings it,
and a holder killed while it holds the lock (which never rings) still lets the writer in.

The word is read as a file (the ``-shm`` page is shared): its high 16 bits count sleepers, its
low 16 bits the rings. Nothing here is timed."""

from __future__ import annotations

import multiprocessing
import os
import signal
import struct
import threading
import time
from pathlib import Path
from typing import Any

import diskcache_oxide as dc
import pytest
from diskcache_oxide import _core

pytestmark = [
    pytest.mark.oxide,
    pytest.mark.skipif(
        _core.platform_backends()["wal_index_locks"] != "engine",
        reason="the bell is the engine's WAL index locks' (Linux, not with the portable fallbacks)",
    ),
]

SPAWN = multiprocessing.get_context("spawn")


def _word(directory: str) -> int:
    with open(os.path.join(directory, "cache.db-shm"), "rb") as shm:
        shm.seek(132)
        (value,) = struct.unpack("=I", shm.read(4))
    return int(value)


def _until_someone_sleeps(directory: str) -> bool:
    end = time.monotonic() + 20
    while time.monotonic() < end:
        if _word(directory) >> 16:
            return True
        time.sleep(0.001)
    return False


def _hold(directory: str, held: Any, release: Any) -> None:
    """Spawned: hold the write lock (inside transact) until told to let go."""
    cache = dc.Cache(directory)
    with cache.transact():
        cache.set("held", 1)
        held.set()
        release.wait(60)
    cache.close()


def test_a_writer_waiting_on_another_process_is_rung_awake_by_its_release(tmp_path: Path) -> None:
    directory = str(tmp_path / "c")
    cache = dc.Cache(directory)
    cache.set("x", 0)
    held, release = SPAWN.Event(), SPAWN.Event()
    holder = SPAWN.Process(target=_hold, args=(directory, held, release))
    holder.start()
    try:
        assert held.wait(60)
        writer = threading.Thread(target=cache.set, args=("w", 2))
        writer.start()
        assert _until_someone_sleeps(directory), "the refused writer never slept on the bell"
        rings = _word(directory) & 0xFFFF
        release.set()
        writer.join(60)
        assert not writer.is_alive()
        holder.join(60)
        after = _word(directory)
        assert after & 0xFFFF != rings, "the holder's release did not ring"
        assert after >> 16 == 0, f"a sleeper is still counted: {after:#x}"
        assert cache["w"] == 2 and cache["held"] == 1
    finally:
        release.set()
        holder.join(10)
        if holder.is_alive():
            holder.kill()
        cache.close()


def test_a_holder_killed_holding_the_lock_never_rings_and_the_writer_still_gets_in(
    tmp_path: Path,
) -> None:
    directory = str(tmp_path / "c")
    cache = dc.Cache(directory)
    cache.set("x", 0)
    held, release = SPAWN.Event(), SPAWN.Event()
    holder = SPAWN.Process(target=_hold, args=(directory, held, release))
    holder.start()
    try:
        assert held.wait(60)
        writer = threading.Thread(target=cache.set, args=("w", 3))
        writer.start()
        assert _until_someone_sleeps(directory)
        assert holder.pid is not None
        os.kill(holder.pid, signal.SIGKILL)
        holder.join(30)
        writer.join(60)
        assert not writer.is_alive(), "the writer stayed asleep behind a dead holder"
        assert _word(directory) >> 16 == 0
        assert cache["w"] == 3
        assert "held" not in cache  # the killed holder's transaction never committed
    finally:
        # Not release.set(): the holder died inside release.wait(), holding the Event's
        # internal lock, and notifying would wait for it forever.
        if holder.is_alive():
            holder.kill()
        cache.close()


FORK = multiprocessing.get_context("fork")


def _contend(directory: str, write: Any) -> None:
    """With a spawned process holding the write lock, run ``write`` (a child process, started
    and not yet joined, whose write must wait), see it sleep on the bell, release the holder,
    and check that the waiter got in and left the sleeper count at zero."""
    held, release = SPAWN.Event(), SPAWN.Event()
    holder = SPAWN.Process(target=_hold, args=(directory, held, release))
    holder.start()
    try:
        assert held.wait(60)
        write.start()
        assert _until_someone_sleeps(directory), "the refused writer never slept on the bell"
        rings = _word(directory) & 0xFFFF
        release.set()
        write.join(60)
        assert write.exitcode == 0, write.exitcode
        holder.join(60)
        after = _word(directory)
        assert after & 0xFFFF != rings, "the holder's release did not ring"
        assert after >> 16 == 0, f"a sleeper is still counted: {after:#x}"
    finally:
        release.set()
        for process in (holder, write):
            process.join(10)
            if process.is_alive():
                process.kill()


def test_a_forked_child_sleeps_on_the_bell_its_parent_mapped(tmp_path: Path) -> None:
    """The child inherits the parent's mapping of the ``-shm`` page (shared, not copied), so its
    sleep is on the same word the holder rings."""
    directory = str(tmp_path / "c")
    cache = dc.Cache(directory)
    cache.set("x", 0)  # the parent's handle has mapped the bell before the fork
    try:
        _contend(directory, FORK.Process(target=cache.set, args=("forked", 1)))
        assert cache["forked"] == 1 and cache["held"] == 1
    finally:
        cache.close()


def test_the_bell_of_a_shm_file_made_again_after_every_handle_closed(tmp_path: Path) -> None:
    """The last close deletes ``cache.db-shm``; the next open makes a new one, and the bell is
    mapped from the new file, not a stale mapping of the old one."""
    directory = str(tmp_path / "c")
    first = dc.Cache(directory)
    first.set("x", 0)
    first.close()
    assert not os.path.exists(os.path.join(directory, "cache.db-shm"))
    cache = dc.Cache(directory)
    cache.set("y", 0)
    try:
        _contend(directory, SPAWN.Process(target=_set, args=(directory, "again", 2)))
        assert cache["again"] == 2
    finally:
        cache.close()


def _set(directory: str, key: str, value: int) -> None:
    """Spawned: open the cache and write one key."""
    with dc.Cache(directory) as cache:
        cache.set(key, value)
