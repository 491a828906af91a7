"""Lock timeouts: a write blocked by another process's transaction raises Timeout,
and with retry=True it goes through once the holder lets go."""

from __future__ import annotations

import multiprocessing
import threading

import pytest
import support

pytestmark = pytest.mark.slow

SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture
def holder(tmp_path, dc):
    """A separate process holding a write transaction on a fresh cache directory."""
    directory = str(tmp_path / "locked")
    # Open the contender's handle before the lock is taken: python-diskcache writes its
    # settings when it opens a directory, so opening would itself wait for the holder.
    cache = dc.Cache(directory, timeout=0.1)
    cache.get("warm-up")
    hold, release = SPAWN.Event(), SPAWN.Event()
    proc = SPAWN.Process(
        target=support.worker_hold_transaction,
        args=(support.IMPL_NAME, directory, hold, release),
    )
    proc.start()
    try:
        assert hold.wait(60), "the holder never took its transaction"
        yield cache, release, proc
    finally:
        cache.close()
        release.set()
        proc.join(60)
        if proc.is_alive():  # pragma: no cover
            proc.kill()
            proc.join(10)


def test_write_times_out_while_another_process_holds_a_transaction(holder, dc):
    cache, release, proc = holder
    try:
        with pytest.raises(dc.Timeout):
            cache.set("k", "v")
        with pytest.raises(dc.Timeout):
            cache.incr("n")
        with pytest.raises(dc.Timeout):
            with cache.transact():
                pass
        # reads are not blocked by a writer (WAL)
        assert cache.get("k") is None
        assert cache.get("held") is None  # not committed yet
    finally:
        release.set()
    proc.join(60)
    assert proc.exitcode == 0


def test_retry_waits_for_the_holder(holder, dc):
    cache, release, proc = holder
    outcome: list[object] = []

    def write():
        try:
            outcome.append(cache.set("k", "written after release", retry=True))
        except BaseException as exc:  # pragma: no cover - reported below
            outcome.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    writer.join(0.5)  # still blocked: the holder has not released
    assert writer.is_alive() and outcome == []
    release.set()
    writer.join(60)
    assert not writer.is_alive(), "set(retry=True) never finished after the lock was released"
    assert outcome == [True]
    assert cache.get("k") == "written after release"
    assert cache.get("held") == "by the holder"


def test_timeout_between_threads_of_one_process(make_cache, dc):
    """Two handles in one process, the holder in another thread."""
    holder_cache = make_cache("t")
    other = make_cache("t", timeout=0.1)
    inside, release = threading.Event(), threading.Event()

    def hold():
        with holder_cache.transact():
            holder_cache["x"] = 1
            inside.set()
            release.wait(60)

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert inside.wait(60)
        with pytest.raises(dc.Timeout):
            other.set("y", 2)
    finally:
        release.set()
        t.join(60)
    other.set("y", 2)
    assert other["x"] == 1 and other["y"] == 2
