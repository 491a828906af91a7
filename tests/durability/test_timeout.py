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
        # The Python spelling of the advice is the binding's; the engine's says "retry".
        with pytest.raises(dc.Timeout) as info:
            other.set("y", 2)
        assert str(info.value) == (
            "the cache database stayed locked past the handle's timeout; retry, pass "
            "retry=True, or open the cache with a larger timeout"
        )
        with pytest.raises(dc.Timeout) as info:
            other.clear()
        assert info.value.args == (
            0,
            "the cache database stayed locked past the handle's timeout after 0 entries were "
            "removed; call again to remove the rest, pass retry=True, or open the cache with a "
            "larger timeout",
        )
    finally:
        release.set()
        t.join(60)
    other.set("y", 2)
    assert other["x"] == 1 and other["y"] == 2


@pytest.mark.parametrize("call", ["clear", "expire", "evict", "cull"])
def test_batch_removals_time_out_with_their_count(holder, dc, call):
    """python-diskcache raises ``Timeout(count)`` from its batch removals: ``args[0]`` is how
    many entries went before the lock timed out (here none: the lock is held throughout)."""
    cache, release, proc = holder
    try:
        args = {"evict": ("t",), "expire": (), "clear": (), "cull": ()}[call]
        with pytest.raises(dc.Timeout) as info:
            if call == "cull":  # python-diskcache culls only past its size limit
                cache.reset("size_limit", 0, update=False)
            getattr(cache, call)(*args)
        assert info.value.args[0] == 0
    finally:
        release.set()
    proc.join(60)


ROWS = 60_000


def test_a_retried_clear_counts_every_batch(tmp_path, dc):
    """With retry=True a clear that meets another handle's transactions between its batches
    waits and goes on, and its count covers every batch (a resumed call once counted only
    what it removed after the last timeout)."""
    directory = str(tmp_path / "c")
    cache = dc.Cache(directory, timeout=0.005)
    with cache.transact():  # 600 batches: long enough for the other handle to cut in
        for i in range(ROWS):
            cache.set(i, i)
    other = dc.Cache(directory)
    stop = threading.Event()
    hogged = []

    def hog():
        while not stop.is_set():
            with other.transact():
                other.get("x")
                other.set("x", 1)
                stop.wait(0.02)
            hogged.append(1)
            stop.wait(0.002)

    thread = threading.Thread(target=hog)
    thread.start()
    try:
        while not hogged:
            pass
        removed = cache.clear(retry=True)
    finally:
        stop.set()
        thread.join(30)
    # every int key was removed and counted; "x" may have been removed, and set again, more
    # than once
    assert set(cache) <= {"x"}
    assert ROWS <= removed <= ROWS + len(hogged) + 1, removed


@pytest.mark.oxide
def test_opening_waits_for_the_directory_lock_whatever_the_timeout(tmp_path):
    """An open waits up to 60 s for another opener's directory lock, as python-diskcache's
    opening statements retry for 60 s: a FanoutCache or Django backend opens its shards with
    a timeout of 10 ms, and threads opening the same shards at once must not fail (D-055)."""
    import fcntl
    import os
    import time

    import diskcache_oxide as dco

    directory = str(tmp_path / "c")
    dco.Cache(directory).close()
    fd = os.open(os.path.join(directory, ".lock"), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # what another handle holds while it opens
    threading.Timer(0.5, lambda: os.close(fd)).start()
    started = time.monotonic()
    cache = dco.Cache(directory, timeout=0.01)
    assert time.monotonic() - started >= 0.4
    # The handle's own timeout is unchanged for its calls.
    assert cache.timeout == 0.01
    cache.close()


@pytest.mark.oxide
def test_threads_open_the_same_fanout_cache_at_once(tmp_path):
    """Django makes a backend per thread, each a FanoutCache opening its shards with a 10 ms
    timeout; none of them may time out on the others' opens."""
    from concurrent.futures import ThreadPoolExecutor

    import diskcache_oxide as dco

    for round_ in range(5):
        directory = str(tmp_path / f"f{round_}")
        with ThreadPoolExecutor(max_workers=8) as pool:
            caches = list(pool.map(lambda d: dco.FanoutCache(d, shards=8), [directory] * 8))
        for cache in caches:
            cache.close()
