"""Many real processes on one cache directory (multiprocessing with 'spawn', and fork)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time

import pytest
import support

pytestmark = pytest.mark.slow

SPAWN = multiprocessing.get_context("spawn")


def run_all(pool_args, target, timeout=180):
    """Run ``target(*args)`` in one spawned process per args; return the results in order."""
    with SPAWN.Pool(len(pool_args)) as pool:
        pending = [pool.apply_async(target, args) for args in pool_args]
        deadline = time.monotonic() + timeout
        results = [p.get(timeout=max(1.0, deadline - time.monotonic())) for p in pending]
    return results


def test_four_processes_incr_one_key(tmp_path, dc):
    directory = str(tmp_path / "incr")
    dc.Cache(directory).close()
    manager = SPAWN.Manager()
    try:
        barrier = manager.Barrier(4)
        results = run_all(
            [(support.IMPL_NAME, directory, "counter", 1000, barrier) for _ in range(4)],
            support.worker_incr,
        )
    finally:
        manager.shutdown()
    assert all(1 <= r <= 4000 for r in results)
    assert max(results) == 4000
    cache = dc.Cache(directory)
    assert cache["counter"] == 4000
    cache.close()


def test_concurrent_large_and_small_values_are_never_torn(tmp_path, dc):
    directory = str(tmp_path / "torn")
    keys = ["k0", "k1"]
    seeder = dc.Cache(directory)
    for i, key in enumerate(keys):
        seeder[key] = support.payload(i, 10)
    seeder.close()
    manager = SPAWN.Manager()
    try:
        barrier = manager.Barrier(4)
        args = [
            ("w", (support.IMPL_NAME, directory, keys, 300, 1, barrier)),
            ("w", (support.IMPL_NAME, directory, keys, 300, 2, barrier)),
            ("r", (support.IMPL_NAME, directory, keys, 1500, barrier)),
            ("r", (support.IMPL_NAME, directory, keys, 1500, barrier)),
        ]
        with SPAWN.Pool(4) as pool:
            pending = [
                pool.apply_async(support.worker_writer if kind == "w" else support.worker_reader, a)
                for kind, a in args
            ]
            results = [p.get(timeout=240) for p in pending]
    finally:
        manager.shutdown()
    assert results[0] == 300 and results[1] == 300
    for seen, misses, problems in results[2:]:
        assert problems == [], problems
        assert seen > 0
        if not support.REFERENCE_MODE:
            # The keys always exist, so a miss means a read lost a race with a writer replacing
            # the value file (python-diskcache returns the default then; diskcache_oxide must not).
            assert misses == 0, f"{misses} spurious misses out of {seen + misses} reads"
    cache = dc.Cache(directory)
    for key in keys:
        assert support.check_payload(cache[key]) is None
    assert list(cache.check()) == []
    cache.close()


def test_sixteen_processes_open_a_fresh_directory_at_once(tmp_path, dc):
    directory = str(tmp_path / "fresh" / "cache")  # does not exist yet
    manager = SPAWN.Manager()
    try:
        barrier = manager.Barrier(16)
        results = run_all(
            [(support.IMPL_NAME, directory, i, barrier) for i in range(16)],
            support.worker_open_at_once,
            timeout=240,
        )
    finally:
        manager.shutdown()
    assert results == [("ok", i) for i in range(16)]
    cache = dc.Cache(directory)
    assert sorted(cache[f"opener-{i}"] for i in range(16)) == list(range(16))
    assert len(cache) == 16
    cache.close()


def test_processes_doing_random_work_leave_a_consistent_cache(tmp_path, dc):
    directory = str(tmp_path / "random")
    dc.Cache(directory).close()
    steps = 400
    manager = SPAWN.Manager()
    try:
        barrier = manager.Barrier(4)
        results = run_all(
            [(support.IMPL_NAME, directory, i, steps, 1000 + i, barrier) for i in range(4)],
            support.worker_random_ops,
            timeout=240,
        )
    finally:
        manager.shutdown()
    cache = dc.Cache(directory)
    try:
        expected = {k: v for model, _ in results for k, v in model.items()}
        actual = {k: cache[k] for k in cache if k != "shared-total"}
        assert actual == expected
        assert cache.get("shared-total", 0) == sum(n for _, n in results)
        assert len(cache) == len(expected) + ("shared-total" in cache)
        assert list(cache.check()) == []
        assert len(support.value_files(cache.directory)) == sum(
            1 for v in expected.values() if isinstance(v, bytes) and len(v) >= 32768
        )
    finally:
        cache.close()


def test_handle_passed_to_spawned_processes(cache):
    cache["from-parent"] = {"nested": ("value", 1)}
    results = run_all([(cache, 100) for _ in range(3)], support.worker_use_pickled_handle)
    assert results == [{"nested": ("value", 1)}] * 3
    assert cache["via-handle"] == 300


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_handle_used_after_fork(cache):
    cache["before"] = 1
    cache.incr("n")
    assert cache["before"] == 1  # the parent has an open connection now
    pid = os.fork()
    if pid == 0:  # child: must not return into pytest
        code = 1
        try:
            ok = cache["before"] == 1
            cache["child"] = "hello from the child"
            ok = ok and cache.incr("n") == 2
            ok = ok and cache.get("child") == "hello from the child"
            code = 0 if ok else 2
        except BaseException:
            code = 3
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    status = None
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.02)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung")
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    # and the parent's handle still works, and sees the child's writes
    assert cache["child"] == "hello from the child"
    assert cache.incr("n") == 3


def test_a_reader_sees_each_write_of_another_process_at_once(tmp_path, dc):
    """Repeated reads may be served without touching SQLite's locks (D-017); a commit by any
    process must still be seen by the very next read."""
    directory = str(tmp_path / "pingpong")
    reader = dc.Cache(directory)
    ours, theirs = SPAWN.Pipe()
    writer = SPAWN.Process(
        target=support.worker_ping_pong_writer, args=(support.IMPL_NAME, directory, 300, theirs)
    )
    writer.start()
    try:
        for expected in range(300):
            assert ours.poll(60), "the writer process stopped answering"
            assert ours.recv() == expected
            for _ in range(3):
                assert reader.get("n") == expected
            ours.send("ack")
    finally:
        writer.join(60)
        if writer.is_alive():
            writer.kill()
    assert writer.exitcode == 0
    reader.close()


@pytest.mark.parametrize("seed", [1, 2])
def test_a_reader_sees_every_kind_of_write_of_another_process(tmp_path, dc, seed):
    """The reader keeps every key remembered between the writer's writes; each write's note
    (D-065) must make it forget exactly what changed: sets, adds, deletes, incrs, pops,
    expiries, tag evictions, queue pushes and pulls, a transaction of more rows than a note
    names, clears. The reader reads every key three times after each write."""
    directory = str(tmp_path / "model")
    reader = dc.Cache(directory)
    ours, theirs = SPAWN.Pipe()
    writer = SPAWN.Process(
        target=support.worker_model_writer,
        args=(support.IMPL_NAME, directory, seed, 250, theirs),
    )
    writer.start()
    try:
        rounds = 0
        while True:
            assert ours.poll(60), "the writer process stopped answering"
            expected = ours.recv()
            if expected is None:
                break
            for _ in range(3):
                assert {k: reader.get(k) for k in expected} == expected, rounds
            ours.send("ack")
            rounds += 1
        assert rounds == 250
    finally:
        writer.join(60)
        if writer.is_alive():
            writer.kill()
    assert writer.exitcode == 0
    reader.close()


@pytest.mark.oxide
def test_a_write_by_a_stock_sqlite_is_seen_by_the_next_read(tmp_path):
    """A stock SQLite that writes the database leaves no note (D-065): the memo of recent
    reads must then forget everything, not keep what it remembered."""
    import diskcache_oxide

    directory = tmp_path / "stock"
    cache = diskcache_oxide.Cache(str(directory))
    cache.set("a", 1)
    cache.set("b", 2)
    for _ in range(3):  # remembered now
        assert (cache.get("a"), cache.get("b")) == (1, 2)
    cache.set("c", 3)  # a note of ours, so the chain is live when the stock write comes
    assert (cache.get("a"), cache.get("b")) == (1, 2)
    # In a process of its own: a second copy of SQLite in this one would drop our locks when
    # it closed (docs/reliability.md).
    stock = (
        "import sqlite3, sys\n"
        "db = sqlite3.connect(sys.argv[1])\n"
        "with db:\n"
        "    db.execute(\"UPDATE cache SET expire_time = 1 WHERE key = 'a'\")\n"
        "db.close()\n"
    )
    subprocess.run([sys.executable, "-c", stock, str(directory / "cache.db")], check=True)
    assert cache.get("a") is None
    assert cache.get("b") == 2
    cache.set("d", 4)  # and notes work again after it
    assert (cache.get("a"), cache.get("b"), cache.get("d")) == (None, 2, 4)
    cache.close()
