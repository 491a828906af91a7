"""read_only=True handles (D-019): reads work, writes raise ReadOnlyError, and the
directory is left byte for byte as it was."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import diskcache_oxide as dco
import pytest

pytestmark = pytest.mark.oxide

NOBODY = 65534


def snapshot(directory: str) -> dict[str, str | None]:
    """Every path under ``directory`` with its bytes' hash (None for directories)."""
    out: dict[str, str | None] = {}
    for root, dirs, files in os.walk(directory):
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), directory)] = None
        for f in files:
            path = os.path.join(root, f)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, directory)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def fill(directory: str, **settings: object) -> None:
    with dco.Cache(directory, **settings) as cache:
        cache.set("small", "hello", tag="t")
        cache.set("big", b"x" * 100_000)
        cache.set("gone", 1, expire=-1)
        cache.push("job")


@pytest.fixture
def filled(tmp_path: Path) -> str:
    directory = str(tmp_path / "c")
    fill(directory)
    return directory


def test_reads_work_and_nothing_is_written(filled: str) -> None:
    before = snapshot(filled)
    with dco.Cache(filled, read_only=True) as cache:
        assert cache.read_only and not cache.durable
        assert cache.get("small") == "hello"
        assert cache.get("small", tag=True) == ("hello", "t")
        assert cache.get("big") == b"x" * 100_000
        assert "small" in cache and "gone" not in cache
        assert cache.get("gone") is None
        assert len(cache) == len(list(cache)) >= 3
        assert cache.peekitem(last=False)[0] == "small"
        assert cache.peek()[1] == "job"
        assert cache.stats() == (0, 0)
        assert cache.volume() > 0
        assert cache.check() == []
        assert cache.get_many(["small", "nope"]) == ["hello", None]
        assert cache.reset("cull_limit") == 10
    assert snapshot(filled) == before


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.set("k", 1),
        lambda c: c.set("k", b"y" * 100_000),
        lambda c: c.__setitem__("k", 1),
        lambda c: c.add("k", 1),
        lambda c: c.delete("small"),
        lambda c: c.__delitem__("small"),
        lambda c: c.pop("small"),
        lambda c: c.incr("n"),
        lambda c: c.touch("small"),
        lambda c: c.push(1),
        lambda c: c.pull(),
        lambda c: c.set_many({"a": 1}),
        lambda c: c.delete_many(["small"]),
        lambda c: c.clear(),
        lambda c: c.expire(),
        lambda c: c.evict("t"),
        lambda c: c.cull(),
        lambda c: c.check(fix=True),
        lambda c: c.stats(reset=True),
        lambda c: c.reset("cull_limit", 3),
        lambda c: c.create_tag_index(),
        lambda c: c.transact().__enter__(),
    ],
)
def test_every_write_raises(filled: str, call) -> None:  # type: ignore[no-untyped-def]
    before = snapshot(filled)
    with dco.Cache(filled, read_only=True) as cache:
        with pytest.raises(dco.ReadOnlyError, match="read_only=True"):
            call(cache)
        assert cache.get("small") == "hello"
    assert snapshot(filled) == before
    assert issubclass(dco.ReadOnlyError, dco.CacheError)


def test_bookkeeping_reads_do_not_write(tmp_path: Path) -> None:
    directory = str(tmp_path / "c")
    fill(directory, statistics=1, eviction_policy="least-frequently-used")
    before = snapshot(directory)
    with dco.Cache(directory, read_only=True) as cache:
        assert cache.get("small") == "hello"
        assert cache.get("nope") is None
    assert snapshot(directory) == before


def test_missing_directory_or_database_raises(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(FileNotFoundError) as info:
        dco.Cache(str(missing), read_only=True)
    assert info.value.filename == str(missing)
    assert not missing.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="cache.db"):
        dco.Cache(str(empty), read_only=True)
    assert list(empty.iterdir()) == []
    with pytest.raises(ValueError):
        dco.Cache(None, read_only=True)


def test_changed_settings_raise(filled: str) -> None:
    before = snapshot(filled)
    with pytest.raises(ValueError, match="cull_limit"):
        dco.Cache(filled, read_only=True, cull_limit=3)
    dco.Cache(filled, read_only=True, cull_limit=10).close()
    assert snapshot(filled) == before


def test_sees_a_live_writer(filled: str) -> None:
    reader = dco.Cache(filled, read_only=True)
    with dco.Cache(filled) as writer:
        writer.set("new", 1)
        assert reader.get("new") == 1
        writer.set("new", 2)
        assert reader.get("new") == 2
    reader.close()


@pytest.fixture
def locked_down() -> Iterator[str]:
    """A cache whose files and directories have their write bits removed, outside the
    0700 pytest temp tree so another user can reach it."""
    top = tempfile.mkdtemp(prefix="dco-ro-", dir="/tmp")
    directory = os.path.join(top, "c")
    fill(directory)
    for root, dirs, files in os.walk(top):
        for f in files:
            os.chmod(os.path.join(root, f), 0o444)
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o555)
    os.chmod(top, 0o555)
    yield directory
    for root, dirs, _ in os.walk(top):
        os.chmod(root, 0o755)
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
    subprocess.run(["rm", "-rf", top], check=False)


def _as_nobody(directory: str) -> str:
    """Run reads in a forked child that dropped root (chmod alone does not stop root)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        status = 1
        try:
            os.close(read_fd)
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            lines = []
            try:
                dco.Cache(directory).close()
                lines.append("plain open worked")
            except OSError as exc:
                lines.append(f"plain open refused: {type(exc).__name__}")
            cache = dco.Cache(directory, read_only=True)
            lines.append(repr(cache.get("small")))
            lines.append(repr(len(cache.get("big"))))
            lines.append(repr(cache.peek()[1]))
            try:
                cache.set("k", 1)
            except dco.ReadOnlyError:
                lines.append("write refused")
            cache.close()
            os.write(write_fd, "\n".join(lines).encode())
            status = 0
        except BaseException as exc:
            os.write(write_fd, f"child failed: {exc!r}".encode())
        finally:
            os._exit(status)
    os.close(write_fd)
    with os.fdopen(read_fd) as fh:
        out = fh.read()
    _, status = os.waitpid(pid, 0)
    assert status == 0, out
    return out


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_directory_without_write_bits(locked_down: str) -> None:
    before = snapshot(locked_down)
    out = _as_nobody(locked_down)
    assert out.splitlines() == [
        "plain open refused: PermissionError",
        "'hello'",
        "100000",
        "'job'",
        "write refused",
    ], out
    assert snapshot(locked_down) == before


def test_layout_mismatch_exported() -> None:
    assert issubclass(dco.LayoutMismatchError, dco.CacheError)
    assert "LayoutMismatchError" in dco.__all__ and "ReadOnlyError" in dco.__all__


def test_cache_on_fanout_root_raises(tmp_path: Path) -> None:
    from diskcache_oxide import _core

    _core.claim_fanout(str(tmp_path), 4)
    before = snapshot(str(tmp_path))
    with pytest.raises(dco.LayoutMismatchError, match="shards=4"):
        dco.Cache(str(tmp_path))
    with pytest.raises(dco.LayoutMismatchError, match="shards=4"):
        _core.claim_fanout(str(tmp_path), 2)
    _core.claim_fanout(str(tmp_path), 4)
    assert snapshot(str(tmp_path)) == before
    cache_dir = tmp_path / "plain"
    dco.Cache(str(cache_dir)).close()
    with pytest.raises(dco.LayoutMismatchError, match="plain Cache"):
        _core.claim_fanout(str(cache_dir), 4)


def test_sees_a_writer_that_came_and_went(tmp_path: Path) -> None:
    """Opened while the cache was at rest (no -wal), the handle still sees a writer that
    opened, overwrote and added keys, and closed (checkpointing and deleting its WAL) between
    two of its calls: new values, not stale ones, and never "malformed"."""
    directory = str(tmp_path / "c")
    with dco.Cache(directory) as cache:
        for i in range(20):
            cache.set(i, i)
    reader = dco.Cache(directory, read_only=True)
    assert reader.get(1) == 1
    script = (
        "import diskcache_oxide as dc, sys\n"
        "with dc.Cache(sys.argv[1]) as c:\n"
        "    for i in range(20): c.set(i, i + 100)\n"
        "    for i in range(20, 300): c.set(i, 'x' * 1000)\n"
    )
    subprocess.run([sys.executable, "-c", script, directory], check=True, timeout=60)
    assert not os.path.exists(os.path.join(directory, "cache.db-wal"))
    assert reader.get(1) == 101
    assert reader.get(299) == "x" * 1000
    assert len(reader) == 300
    reader.close()


def _come_and_go(directory: str, rounds: int, committed: Any) -> None:
    """Open, write one generation of every key and a new key, close; then say so."""
    for generation in range(1, rounds + 1):
        with dco.Cache(directory) as cache:
            with cache.transact():
                for i in range(10):
                    cache.set(f"k{i}", generation)
                cache.set(f"new{generation}", generation)
                cache.set("generation", generation)
        committed.value = generation


@pytest.mark.slow
def test_follows_writers_that_open_write_and_close(tmp_path: Path) -> None:
    """A read-only reader checks every value against the generation that was committed (and
    its writer closed) before the read began, while writers come and go in other processes."""
    directory = str(tmp_path / "c")
    with dco.Cache(directory) as cache:
        for i in range(10):
            cache.set(f"k{i}", 0)
        cache.set("generation", 0)
    ctx = multiprocessing.get_context("spawn")
    committed = ctx.Value("q", 0)
    rounds = 150
    writer = ctx.Process(target=_come_and_go, args=(directory, rounds, committed))
    reader = dco.Cache(directory, read_only=True)
    checked = 0
    writer.start()
    try:
        while True:
            done = not writer.is_alive()
            floor = committed.value
            for key in ("generation", *(f"k{i}" for i in range(10))):
                seen = reader.get(key)
                assert seen is not None and seen >= floor, (key, seen, floor)
                checked += 1
            if floor:
                assert reader.get(f"new{floor}") == floor
            if done:
                break
    finally:
        writer.join(60)
        reader.close()
    assert writer.exitcode == 0
    assert committed.value == rounds
    with dco.Cache(directory, read_only=True) as last:
        assert last.get("generation") == rounds
    assert checked > rounds
