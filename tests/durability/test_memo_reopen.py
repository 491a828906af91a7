"""The memo of recent reads across the end and the start of a handle's connections (issue 29,
D-065).

When the last connection of all processes closes, SQLite checkpoints the WAL and deletes it
with the ``-shm``; the next connection rebuilds the WAL index header from an empty WAL, byte
for byte the header of every other empty WAL. A memo kept across ``close()`` therefore saw
"nothing changed" and served what it had read before, though other processes had written
since. python-diskcache has no memo and reads the new value in every case here; so must we.
"""

from __future__ import annotations

import multiprocessing
import os
from typing import Any

import memo_workers
import pytest
import support

pytestmark = pytest.mark.slow

SPAWN = multiprocessing.get_context("spawn")


def write_and_close(dc: Any, directory: str, value: str) -> None:
    """Another handle's whole life: open, write, close (its close is the last one)."""
    writer = dc.Cache(directory)
    writer.set("k", value)
    writer.close()


def test_a_handle_closed_and_used_again_reads_what_was_written_meanwhile(tmp_path, dc):
    directory = str(tmp_path / "c")
    write_and_close(dc, directory, "v0")
    reader = dc.Cache(directory)
    assert reader.get("k") == "v0"
    reader.close()
    write_and_close(dc, directory, "v1")
    assert reader.get("k") == "v1"  # the case: 'v0' from the memo
    reader.close()


def test_a_with_block_per_burst_reads_every_write(tmp_path, dc):
    directory = str(tmp_path / "c")
    reader = dc.Cache(directory)
    for i in range(20):
        write_and_close(dc, directory, f"v{i}")
        with reader:
            for _ in range(3):  # the second and third reads may come from the memo
                assert reader.get("k") == f"v{i}"


def test_two_handles_of_one_process_with_a_close_between(tmp_path, dc):
    directory = str(tmp_path / "c")
    a = dc.Cache(directory)
    a.set("k", "v0")
    a.close()
    b = dc.Cache(directory)  # opened on an empty WAL
    for _ in range(3):
        assert b.get("k") == "v0"
    b.close()
    a.set("k", "v1")
    a.close()
    assert b.get("k") == "v1"
    a.set("k", "v2")  # and while a stays open, b's notes carry on as before
    assert b.get("k") == "v2"
    a.close()
    b.close()


@pytest.mark.oxide
def test_a_read_only_handle_reads_what_was_written_after_its_close(tmp_path):
    import diskcache_oxide as dco

    directory = str(tmp_path / "c")
    write_and_close(dco, directory, "v0")
    holder = dco.Cache(directory)  # keeps a WAL, so the read-only handle maps its index
    reader = dco.Cache(directory, read_only=True)
    for _ in range(3):
        assert reader.get("k") == "v0"
    reader.close()
    holder.close()
    write_and_close(dco, directory, "v1")
    holder = dco.Cache(directory)
    assert reader.get("k") == "v1"
    reader.close()
    holder.close()


def test_a_child_forked_after_its_parent_closed_reads_the_new_value(tmp_path, dc):
    directory = str(tmp_path / "c")
    write_and_close(dc, directory, "v0")
    reader = dc.Cache(directory)
    for _ in range(3):
        assert reader.get("k") == "v0"
    reader.close()
    write_and_close(dc, directory, "v1")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0 if reader.get("k") == "v1" else 3
        reader.close()
        os._exit(code)
    assert support.wait_child(pid) == 0, "the child read a stale value"
    assert reader.get("k") == "v1"
    reader.close()


@pytest.mark.parametrize("kind", ["cache", "fanout", "django"])
def test_a_reader_that_closes_after_each_burst_sees_each_writer_process(tmp_path, kind):
    """The shape that made 76% of reads stale: short-lived writers in another process, and a
    reader that closes after every burst (Django closes its caches after every request)."""
    if kind == "django":
        pytest.importorskip("django")
    directory = str(tmp_path / kind)
    open_reader = memo_workers._opener(support.IMPL_NAME, kind, directory)
    reader = open_reader()
    reader.set("k", "start")
    reader.close()
    rounds = 40
    ours, theirs = SPAWN.Pipe()
    writer = SPAWN.Process(
        target=memo_workers.write_then_close_each_round,
        args=(support.IMPL_NAME, kind, directory, rounds, theirs),
    )
    writer.start()
    stale: list[tuple[int, Any]] = []
    try:
        for expected in range(rounds):
            assert ours.poll(60), "the writer process stopped answering"
            assert ours.recv() == expected
            for _ in range(3):  # a request's reads: the later ones may come from the memo
                got = reader.get("k")
                if got != f"v{expected}":
                    stale.append((expected, got))
            # Django's request_finished handler calls close() on each cache it made.
            reader.close()
            ours.send("ack")
    finally:
        writer.join(60)
        if writer.is_alive():
            writer.kill()
    assert writer.exitcode == 0
    assert stale == [], f"{len(stale)} stale reads of {rounds * 3}"
    reader.close()
