"""Handles opened before ``os.fork()`` keep working in the child (D-028).

Every child is waited for with a deadline and killed if it hangs; children leave with
``os._exit`` so they never return into pytest.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import pytest

pytestmark = [
    pytest.mark.oxide,
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork"),
]

HANG = 60.0
#: Lock timeout of the caches under test: well inside HANG, so a stuck child reports why.
TIMEOUT = 20


def fork(child: Callable[[], Any]) -> tuple[int, int]:
    """Fork; the child runs ``child()`` and exits 0 if it returns, 1 (printing why) if it raises.
    Returns the child's pid and the read end of a pipe that carries its traceback."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)  # not pytest-timeout's handler
            signal.alarm(int(HANG) + 10)  # a hung child dies on its own too
            child()
            code = 0
        except BaseException:
            os.write(w, traceback.format_exc().encode())
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def wait(pid: int, r: int, timeout: float = HANG) -> None:
    """Wait for a child from :func:`fork`; fail if it hangs (killing it) or did not exit 0."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(r)
            pytest.fail("the forked child hung")
        time.sleep(0.01)
    with os.fdopen(r, "rb") as f:
        why = f.read().decode()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, (status, why)


def fresh_process(directory: str, code: str) -> str:
    """Run ``code`` (with ``c`` an open Cache on ``directory``) in a new interpreter."""
    script = (
        f"import sys, diskcache_oxide as d\nc = d.Cache({directory!r})\n" + code + "\nc.close()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=HANG
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_handle_used_before_fork_works_in_the_child(tmp_path: Any, dc: Any) -> None:
    c = dc.Cache(str(tmp_path / "c"), timeout=TIMEOUT)
    jobs = dc.JobQueue(c)
    c.set("a", 1)
    c.incr("n")
    c.push("first", prefix="q")
    jobs.put("job-1")

    def child() -> None:
        assert c.get("a") == 1
        c.set("child", "hello")
        assert c.incr("n") == 2
        with c.transact():
            c.set("t1", 1)
            c.set("t2", 2)
        c.push("second", prefix="q")
        assert c.pull(prefix="q")[1] == "first"
        job = jobs.take(timeout=5)
        assert job is not None and job.value == "job-1"
        job.finish()
        jobs.put("from-child")

    wait(*fork(child))
    assert c.get("child") == "hello"
    assert c.incr("n") == 3
    assert (c.get("t1"), c.get("t2")) == (1, 2)
    assert c.pull(prefix="q")[1] == "second"
    job = jobs.take(timeout=5)
    assert job is not None and job.value == "from-child"
    job.finish()
    assert jobs.take(timeout=0) is None
    c.close()


def test_fork_while_another_thread_is_inside_a_transaction(tmp_path: Any, dc: Any) -> None:
    c = dc.Cache(str(tmp_path / "c"), timeout=TIMEOUT)
    c.set("a", 1)
    inside, done = threading.Event(), threading.Event()
    big = "x" * 4000  # enough rows that an unfinished transaction would spill to the WAL

    def hold() -> None:
        with c.transact():
            for i in range(3000):
                c.set(("row", i), big)
            inside.set()
            done.wait(HANG)
            c.set("y", 2)

    thread = threading.Thread(target=hold)
    thread.start()
    assert inside.wait(HANG)

    def child() -> None:
        assert c.get("a") == 1
        c.set("z", 3)  # waits for the parent's commit
        assert c.get("y") == 2
        assert c.get(("row", 2999)) == big
        with c.transact():
            c.incr("n")

    pid, r = fork(child)
    time.sleep(0.5)
    done.set()
    thread.join(HANG)
    assert not thread.is_alive()
    c.set("after", 4)  # the parent keeps writing while the child closes what it inherited
    wait(pid, r)
    assert (c.get("y"), c.get("z"), c.get("n"), c.get("after")) == (2, 3, 1, 4)
    assert all(c.get(("row", i)) == big for i in range(3000))
    assert c.check() == []
    c.close()
    assert fresh_process(str(tmp_path / "c"), "print(len(c), c.get('z'), c.check())") == (
        "3005 3 []"
    )


def test_the_forking_thread_itself_inside_a_transaction(tmp_path: Any, dc: Any) -> None:
    """The child's copy of the transaction is gone; its own writes wait for the parent's."""
    c = dc.Cache(str(tmp_path / "c"), timeout=TIMEOUT)
    with c.transact():
        c.set("p", 1)
        pid, r = fork(lambda: c.set("child", 1))
        time.sleep(0.3)
    wait(pid, r)
    assert (c.get("p"), c.get("child")) == (1, 1)
    c.close()


def test_many_forks_while_a_thread_hammers_writes(tmp_path: Any, dc: Any) -> None:
    c = dc.Cache(str(tmp_path / "c"), timeout=TIMEOUT)
    stop = threading.Event()
    written = [0]

    def hammer() -> None:
        while not stop.is_set():
            c.incr("parent")
            with c.transact():
                c.set(("p", written[0] % 50), written[0])
                c.incr("parent-tx")
            written[0] += 1

    thread = threading.Thread(target=hammer)
    thread.start()
    try:
        for i in range(20):
            while written[0] < 20 * (i + 1):  # let the hammer run between forks
                time.sleep(0.001)

            def child(i: int = i) -> None:
                c.incr("children")
                c.set(("child", i), i)
                assert c.get(("child", i)) == i

            wait(*fork(child))
    finally:
        stop.set()
        thread.join(HANG)
    assert c.get("children") == 20
    assert all(c.get(("child", i)) == i for i in range(20))
    assert c.get("parent") == c.get("parent-tx") == written[0]
    assert c.check() == []
    c.close()


def test_nobody_deletes_the_wal_under_a_child(tmp_path: Any, dc: Any) -> None:
    """The child takes real locks: when the parent closes and a third process opens, writes
    and closes, that process is not the last user, so it keeps the WAL the child writes to."""
    directory = str(tmp_path / "c")
    c = dc.Cache(directory, timeout=TIMEOUT)
    c.set("before", 1)
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()

    def child() -> None:
        c.set("c1", 1)
        os.write(from_child_w, b"1")
        assert os.read(to_child_r, 1) == b"2"  # the parent closed, a third process came and went
        c.set("c2", 2)
        assert c.get("third") == 3
        os.write(from_child_w, b"3")
        assert os.read(to_child_r, 1) == b"4"  # a fresh process has read c2

    pid, r = fork(child)
    try:
        assert os.read(from_child_r, 1) == b"1"
        c.close()
        fresh_process(directory, "c.set('third', 3)")
        os.write(to_child_w, b"2")
        assert os.read(from_child_r, 1) == b"3"
        # The child is still alive and has not closed anything: its commit must be in a WAL
        # that others can see.
        assert fresh_process(directory, "print(c.get('c1'), c.get('c2'))") == "1 2"
        os.write(to_child_w, b"4")
    finally:
        wait(pid, r)
        for fd in (to_child_r, to_child_w, from_child_r, from_child_w):
            os.close(fd)
    assert fresh_process(directory, "print(c.get('c2'), c.check())") == "2 []"


def test_a_directory_lock_held_by_a_thread_at_the_fork_is_released(tmp_path: Any, dc: Any) -> None:
    """A writer holds the directory lock while it writes a value file. A child that inherited
    its descriptor must not keep that lock once the parent's writer is done."""
    c = dc.Cache(str(tmp_path / "c"), timeout=5)
    reading, go = threading.Event(), threading.Event()

    class Slow:
        calls = 0

        def read(self, n: int) -> bytes:
            Slow.calls += 1
            if Slow.calls == 1:
                reading.set()
                go.wait(HANG)
                return b"v" * 1000
            return b""

    thread = threading.Thread(target=lambda: c.set("file", Slow(), read=True))
    thread.start()
    assert reading.wait(HANG)
    to_child_r, to_child_w = os.pipe()

    def child() -> None:
        assert os.read(to_child_r, 1) == b"1"
        c.check(fix=True)  # needs the exclusive directory lock
        c.set("child", 1)

    pid, r = fork(child)
    try:
        go.set()
        thread.join(HANG)
        c.check(fix=True)  # with the child alive
        os.write(to_child_w, b"1")
    finally:
        wait(pid, r)
        os.close(to_child_r)
        os.close(to_child_w)
    assert c.get("child") == 1
    c.close()


def test_fanout_cache_and_grandchildren(tmp_path: Any, dc: Any) -> None:
    f = dc.FanoutCache(str(tmp_path / "f"), shards=4, timeout=TIMEOUT)
    for i in range(20):
        f.set(i, i)

    def grandchild() -> None:
        assert f.get(1) == 1
        f.set("grandchild", 2)

    def child() -> None:
        assert f.get(0) == 0
        f.set("child", 1)
        wait(*fork(grandchild))
        assert f.get("grandchild") == 2

    wait(*fork(child))
    assert (f.get("child"), f.get("grandchild")) == (1, 2)
    f.close()
