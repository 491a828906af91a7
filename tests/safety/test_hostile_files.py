"""Hostile or damaged files in a cache directory (D-035, threat model D-003).

Someone who can write into the cache directory swaps a value file for something else: a file
cut short or grown (a sparse 1 TiB file), a FIFO, a socket, a device, a directory, a symlink.
Or replaces ``values/``, ``.lock``, ``cache.db``, ``-wal`` or ``-shm`` with a symlink. Every
read path must raise an exception (never abort, never block), and nothing outside the directory
may be created, written, read or deleted. Value file names that escape the directory (an
absolute name, ``..``, a symlinked subdirectory) are never read, followed nor deleted. All
diskcache_oxide only.
"""

from __future__ import annotations

import contextlib
import gc
import os
import random
import shutil
import socket
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import diskcache_oxide as dco
import pytest
import support

pytestmark = pytest.mark.oxide

TIB = 1 << 40
BIG = 100_000  # bytes of a file-backed value (disk_min_file_size is 32 KiB)
BOUND = 20.0  # seconds any one call may take before it counts as a hang


def bounded(call: Callable[[], Any], seconds: float = BOUND) -> Any:
    """Run ``call`` in a daemon thread: its result, or its exception re-raised. Fails the test
    (rather than hanging it) if the call is still running after ``seconds``."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"the call blocked for more than {seconds} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def snapshot(root: Path) -> dict[str, Any]:
    """Every entry under ``root`` (not following links): its kind, and a file's bytes."""
    found: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode):
                with open(path, "rb") as handle:
                    found[os.path.relpath(path, root)] = handle.read()
            else:
                found[os.path.relpath(path, root)] = stat.S_IFMT(mode)
    return found


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[Path]:
    """A sentinel directory beside the cache that nothing may touch."""
    root = tmp_path / "outside"
    root.mkdir()
    (root / "secret.txt").write_bytes(b"not the cache's")
    (root / "ab").mkdir()
    (root / "ab" / "keep.val").write_bytes(b"k" * 10)
    before = snapshot(root)
    yield root
    assert snapshot(root) == before, "something outside the cache directory was touched"


def files_of(directory: str) -> set[str]:
    """The value files in a cache, relative to ``values/``. (Found by listing rather than by
    asking cache.db with Python's sqlite3: a second SQLite in the process that closes the
    database drops the engine's POSIX locks on it.)"""
    values = os.path.join(directory, "values")
    return {os.path.relpath(p, values) for p in support.value_files(values)}


def store(cache: Any, key: str, value: Any) -> str | None:
    """``cache[key] = value``; the name of the value file it made, if any."""
    before = files_of(cache.directory)
    cache.set(key, value)
    (made,) = files_of(cache.directory) - before or {None}
    return made


@contextlib.contextmanager
def inside(directory: str) -> Iterator[None]:
    """Work in ``directory`` briefly (a socket path must be short)."""
    here = os.getcwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(here)


def plant(path: str, kind: str, outside: Path) -> Any:
    """Replace the value file at ``path`` with a hostile object of ``kind``. Returns what must
    stay alive while the test runs (a bound socket)."""
    if kind in ("truncated", "extended"):
        with open(path, "r+b") as handle:
            handle.truncate(1000 if kind == "truncated" else TIB)
        return None
    os.remove(path)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with inside(os.path.dirname(path)):
            sock.bind(os.path.basename(path))
        sock.listen(1)
        return sock
    elif kind == "device":
        try:
            os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # like /dev/zero
        except PermissionError:
            pytest.skip("making a device node needs root")
    elif kind == "directory":
        os.mkdir(path)
    elif kind == "symlink":
        os.symlink(outside / "secret.txt", path)
    elif kind == "symlink-dev-zero":
        os.symlink("/dev/zero", path)
    elif kind == "symlink-fifo":
        fifo = outside.parent / "fifo-outside"
        if not fifo.exists():
            os.mkfifo(fifo)
        os.symlink(fifo, path)
    elif kind == "dangling":
        os.symlink(outside / "created-by-the-cache", path)
    else:
        raise AssertionError(kind)
    return None


KINDS = [
    "truncated",
    "extended",
    "fifo",
    "socket",
    "device",
    "directory",
    "symlink",
    "symlink-dev-zero",
    "symlink-fifo",
    "dangling",
]

VALUES: dict[str, Any] = {
    "bytes": b"b" * BIG,  # read straight into a bytes sized by the row
    "str": "s" * BIG,  # read into memory, then decoded
    "dict": {"x": "y" * BIG},  # the safe format
}


def read_paths(cache: Any, key: str) -> dict[str, Callable[[], Any]]:
    """Every way to read one value."""

    def whole(got: Any) -> Any:
        if not hasattr(got, "read"):
            return got  # read=True returns anything but large bytes itself
        with got:
            return got.read()

    def read_handle() -> Any:
        return whole(cache.get(key, read=True))

    def via_read() -> Any:
        return whole(cache.read(key))

    return {
        "get": lambda: cache.get(key),
        "getitem": lambda: cache[key],
        "get-read": read_handle,
        "read": via_read,
        "get-expire-tag": lambda: cache.get(key, expire_time=True, tag=True),
        "values": lambda: [cache[k] for k in list(cache)],
        "peekitem": lambda: cache.peekitem(),
        "get_many": lambda: cache.get_many([key]),
        "pop": lambda: cache.pop(key),
    }


@pytest.mark.parametrize("value", sorted(VALUES))
@pytest.mark.parametrize("kind", KINDS)
def test_hostile_value_file(tmp_path: Path, outside: Path, kind: str, value: str) -> None:
    directory = str(tmp_path / "c")
    cache = dco.Cache(directory)
    name = store(cache, "k", VALUES[value])
    assert name
    keep = plant(os.path.join(directory, "values", name), kind, outside)  # noqa: F841
    for path, call in read_paths(cache, "k").items():
        with pytest.raises(dco.CorruptValueError) as info:
            bounded(call)
        assert name in str(info.value), (path, str(info.value))
        if kind == "extended":
            assert f"{TIB} bytes long, but its row says" in str(info.value), path
        assert "k" in cache, f"{path} removed the entry"

    found = [str(w.message) for w in bounded(cache.check)]
    assert any(name in m and "damaged entry" in m for m in found), found
    found = [str(w.message) for w in bounded(lambda: cache.check(fix=True))]
    assert any(name in m for m in found), found
    assert "k" not in cache
    assert bounded(cache.check) == []
    assert cache.get("k", "default") == "default"
    # The cache keeps working: the same value can be stored and read again.
    cache.set("k", VALUES[value])
    assert cache.get("k") == VALUES[value]
    assert bounded(cache.check) == []
    assert not (outside / "created-by-the-cache").exists()
    cache.close()


@pytest.mark.parametrize("kind", KINDS)
def test_hostile_value_file_through_the_other_handles(
    tmp_path: Path, outside: Path, kind: str
) -> None:
    """A read-only handle, a handle that counts hits (its reads are writes) and one with
    on_decode_error='miss'."""
    directory = str(tmp_path / "c")
    writer = dco.Cache(directory)
    name = store(writer, "k", b"b" * BIG)
    keep = plant(os.path.join(directory, "values", str(name)), kind, outside)  # noqa: F841
    counting = dco.Cache(directory, statistics=True, eviction_policy="least-recently-used")
    read_only = dco.Cache(directory, read_only=True)
    for handle in (counting, read_only):
        for call in read_paths(handle, "k").values():
            with pytest.raises((dco.CorruptValueError, dco.ReadOnlyError)):
                bounded(call)
        assert bounded(handle.check)
    lenient = dco.Cache(directory, on_decode_error="miss")
    assert bounded(lambda: lenient.get("k", "default")) == "default"
    with pytest.raises(dco.ReadOnlyError):
        read_only.check(fix=True)
    for handle in (counting, read_only, lenient, writer):
        handle.close()


@pytest.mark.parametrize("kind", KINDS)
def test_hostile_queue_item(tmp_path: Path, outside: Path, kind: str) -> None:
    directory = str(tmp_path / "c")
    cache = dco.Cache(directory)
    cache.push(b"q" * BIG, prefix="q")
    (name,) = files_of(directory)
    keep = plant(os.path.join(directory, "values", name), kind, outside)  # noqa: F841
    for call in (lambda: cache.peek(prefix="q"), lambda: cache.pull(prefix="q")):
        with pytest.raises(dco.CorruptValueError):
            bounded(call)
    bounded(lambda: cache.check(fix=True))
    assert bounded(lambda: cache.pull(prefix="q")) == (None, None)
    cache.close()


@pytest.mark.parametrize("kind", KINDS)
def test_hostile_job_value(tmp_path: Path, outside: Path, kind: str) -> None:
    directory = str(tmp_path / "c")
    jobs = dco.JobQueue(directory)
    jobs.put(b"j" * BIG)
    (name,) = files_of(directory)
    keep = plant(os.path.join(directory, "values", name), kind, outside)  # noqa: F841
    # A job whose value cannot be read is moved to the dead-letter list (D-047: the take goes
    # on past it and logs it, instead of raising), and nothing behind it is held up.
    assert bounded(jobs.take) is None
    assert jobs.counts().dead == 1
    bounded(jobs.cache.check)
    bounded(lambda: jobs.cache.check(fix=True))
    jobs.cache.close()


# -------------------------------------------------------------------------- fuzz


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_fuzz_swapped_value_files(tmp_path: Path, outside: Path, seed: int) -> None:
    """Random values, random files swapped for random hostile objects; every read path and
    check() must end in a value, a miss or an exception, never a crash or a hang, and
    check(fix=True) must leave a consistent cache."""
    rng = random.Random(seed)
    directory = str(tmp_path / "c")
    cache = dco.Cache(directory, statistics=rng.random() < 0.5)
    expected: dict[str, Any] = {}
    names: dict[str, str] = {}
    for i in range(12):
        value = rng.choice(list(VALUES.values()))
        if rng.random() < 0.3:
            value = f"small {i}"
        expected[f"k{i}"] = value
        made = store(cache, f"k{i}", value)
        if made:
            names[f"k{i}"] = made
    keep = []
    swapped = set()
    for key, name in names.items():
        if rng.random() < 0.6:
            kind = rng.choice(KINDS)
            if kind == "device" and os.geteuid() != 0:
                kind = "fifo"
            keep.append(plant(os.path.join(directory, "values", name), kind, outside))
            swapped.add(key)
    for key in rng.sample(sorted(expected), len(expected)):
        for path, call in read_paths(cache, key).items():
            if path in ("values", "peekitem", "pop"):
                continue  # run once below: they touch other keys too
            try:
                got = bounded(call)
            except dco.CorruptValueError:
                assert key in swapped or path == "values", (key, path)
                continue
            except KeyError:
                assert path in ("read", "getitem")
                continue
            assert key not in swapped, (key, path)
    for call in (lambda: [cache.get(k) for k in cache], cache.peekitem):
        with contextlib.suppress(dco.CorruptValueError):
            bounded(call)
    found = bounded(cache.check)
    assert len(found) >= len(swapped)
    bounded(lambda: cache.check(fix=True))
    assert bounded(cache.check) == []
    for key, value in expected.items():
        got = cache.get(key, "missing")
        assert got == ("missing" if key in swapped else value), key
    assert not (outside / "created-by-the-cache").exists()
    cache.close()
    del keep, got


# -------------------------------------------------------------------------- values/


def test_values_directory_replaced_by_a_symlink(tmp_path: Path, outside: Path) -> None:
    directory = str(tmp_path / "c")
    cache = dco.Cache(directory)
    name = str(store(cache, "k", b"b" * BIG))
    values = os.path.join(directory, "values")
    # The link points at a directory laid out like values/, holding a file of the same name
    # and an orphan-looking one: neither may be read or deleted.
    (outside / name.split("/")[0]).mkdir(exist_ok=True)
    os.rename(os.path.join(values, name), outside / "moved.val")
    (outside / name).write_bytes(b"b" * BIG)
    before = snapshot(outside)

    shutil.rmtree(values)
    os.symlink(outside, values)
    for call in read_paths(cache, "k").values():
        with pytest.raises(dco.CorruptValueError, match="symbolic link"):
            bounded(call)
    with pytest.raises(OSError, match="never follows one; run check"):
        cache.set("new", b"n" * BIG)  # never written through the link
    found = [str(w.message) for w in cache.check()]
    assert any("values is a symbolic link" in m for m in found), found
    found = [str(w.message) for w in cache.check(fix=True)]
    assert snapshot(outside) == before
    assert not os.path.islink(values)
    assert cache.check() == []
    cache.set("k", b"again" * BIG)
    assert cache.get("k") == b"again" * BIG
    assert snapshot(outside) == before
    # Let the fixture's check pass: put back what this test added.
    os.remove(outside / name)
    os.remove(outside / "moved.val")
    os.rmdir(outside / name.split("/")[0]) if not os.listdir(outside / name.split("/")[0]) else None
    cache.close()


def test_values_subdirectory_replaced_by_a_symlink(tmp_path: Path, outside: Path) -> None:
    directory = str(tmp_path / "c")
    cache = dco.Cache(directory)
    name = str(store(cache, "k", b"b" * BIG))
    sub = os.path.join(directory, "values", name.split("/")[0])
    os.remove(os.path.join(directory, "values", name))
    os.rmdir(sub)
    os.symlink(outside / "ab", sub)
    for call in read_paths(cache, "k").values():
        with pytest.raises(dco.CorruptValueError):
            bounded(call)
    found = [str(w.message) for w in cache.check(fix=True)]
    assert any("unknown file" in m for m in found), found
    assert not os.path.lexists(sub)
    assert cache.check() == []
    cache.close()


@pytest.mark.parametrize("kind", ["file", "fifo"])
def test_values_replaced_by_something_else(tmp_path: Path, outside: Path, kind: str) -> None:
    directory = str(tmp_path / "c")
    cache = dco.Cache(directory)
    cache.set("k", b"b" * BIG)
    values = os.path.join(directory, "values")

    shutil.rmtree(values)
    if kind == "file":
        Path(values).write_bytes(b"x")
    else:
        os.mkfifo(values)
    with pytest.raises(dco.CorruptValueError):
        bounded(lambda: cache.get("k"))
    found = [str(w.message) for w in bounded(cache.check)]
    assert any("not a directory" in m for m in found), found
    bounded(lambda: cache.check(fix=True))
    assert bounded(cache.check) == []
    cache.set("k", b"b" * BIG)
    assert cache.get("k") == b"b" * BIG
    cache.close()


# -------------------------------------------------------------------------- .lock


def make_closed_cache(directory: str) -> None:
    cache = dco.Cache(directory)
    cache.set("k", b"b" * BIG)
    cache.close()
    del cache

    gc.collect()


@pytest.mark.parametrize("kind", ["dangling", "symlink", "fifo", "directory", "socket"])
def test_lock_file_replaced(tmp_path: Path, outside: Path, kind: str) -> None:
    directory = str(tmp_path / "c")
    make_closed_cache(directory)
    lock = os.path.join(directory, ".lock")
    os.remove(lock)
    keep = None
    if kind == "dangling":
        os.symlink(outside / "created-by-the-cache", lock)
    elif kind == "symlink":
        os.symlink(outside / "secret.txt", lock)
    elif kind == "fifo":
        os.mkfifo(lock)
    elif kind == "directory":
        os.mkdir(lock)
    else:
        keep = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with inside(directory):
            keep.bind(".lock")
    with pytest.raises(dco.NotACacheError) as info:
        bounded(lambda: dco.Cache(directory))
    message = str(info.value)
    assert ".lock" in message and "remove it" in message, message
    assert not (outside / "created-by-the-cache").exists()
    # A read-only handle takes no lock, and reads on.
    reader = dco.Cache(directory, read_only=True)
    assert reader.get("k") == b"b" * BIG
    reader.close()
    # Following the advice works.
    if kind == "directory":
        os.rmdir(lock)
    else:
        os.remove(lock)
    cache = dco.Cache(directory)
    assert cache.get("k") == b"b" * BIG
    cache.close()
    del keep


# -------------------------------------------------------------------------- cache.db, -wal, -shm


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
@pytest.mark.parametrize("kind", ["dangling", "symlink", "fifo"])
def test_database_files_replaced(tmp_path: Path, outside: Path, suffix: str, kind: str) -> None:
    directory = str(tmp_path / "c")
    make_closed_cache(directory)
    db = os.path.join(directory, "cache.db")
    for leftover in (db + "-wal", db + "-shm"):
        if os.path.exists(leftover):
            os.remove(leftover)
    path = db + suffix
    if suffix == "":
        os.rename(db, tmp_path / "real.db")
    if kind == "dangling":
        os.symlink(outside / "created-by-the-cache", path)
    elif kind == "symlink":
        target = tmp_path / "real.db" if suffix == "" else outside / "secret.txt"
        os.symlink(target, path)
    else:
        os.mkfifo(path)
    for read_only in (False, True):
        with pytest.raises(dco.NotACacheError) as info:
            bounded(lambda: dco.Cache(directory, read_only=read_only))  # noqa: B023
        message = str(info.value)
        assert f"cache.db{suffix} is" in message, message
        assert "not a regular file" in message and "remove it" in message, message
    assert not (outside / "created-by-the-cache").exists()
    os.remove(path)
    if suffix == "":
        os.rename(tmp_path / "real.db", db)
    cache = dco.Cache(directory)
    assert cache.get("k") == b"b" * BIG
    cache.close()


def test_database_link_planted_under_a_live_handle(tmp_path: Path, outside: Path) -> None:
    """A thread's first call opens its own connection: that open checks too."""
    directory = str(tmp_path / "c")
    make_closed_cache(directory)
    cache = dco.Cache(directory)
    assert cache.get("k") == b"b" * BIG
    shm = os.path.join(directory, "cache.db-shm")
    moved = os.path.join(directory, "moved-shm")
    os.rename(shm, moved)
    os.symlink(outside / "created-by-the-cache", shm)
    try:
        with pytest.raises(dco.NotACacheError, match="cache.db-shm"):
            bounded(lambda: cache.get("k"))  # a new thread: a new connection
        assert not (outside / "created-by-the-cache").exists()
    finally:
        os.remove(shm)
        os.rename(moved, shm)
    assert cache.get("k") == b"b" * BIG
    cache.close()


# -------------------------------------------------------------------------- fanout.json


@pytest.mark.parametrize("kind", ["fifo", "extended", "dangling"])
def test_fanout_marker_replaced(tmp_path: Path, outside: Path, kind: str) -> None:
    directory = str(tmp_path / "f")
    dco.FanoutCache(directory, shards=2).close()
    marker = os.path.join(directory, "fanout.json")
    if kind == "extended":
        with open(marker, "r+b") as handle:
            handle.truncate(TIB)
    else:
        os.remove(marker)
        if kind == "fifo":
            os.mkfifo(marker)
        else:
            os.symlink(outside / "created-by-the-cache", marker)
    with pytest.raises((dco.CacheError, OSError)):
        bounded(lambda: dco.FanoutCache(directory, shards=2))
    if kind != "dangling":
        with pytest.raises(dco.LayoutMismatchError):
            bounded(lambda: dco.Cache(directory))
    assert not (outside / "created-by-the-cache").exists()


# -------------------------------------------------------------------------- escaping names


def _one_file(d: str) -> tuple[sqlite3.Connection, str]:
    db = sqlite3.connect(os.path.join(d, "cache.db"))
    (name,) = db.execute("SELECT filename FROM cache WHERE key = 'f'").fetchone()
    return db, name


def test_symlinked_subdirectory_is_never_followed(tmp_path: Path) -> None:
    """crates/engine/tests/cache.rs covers a symlinked file and escaping names on get; this
    adds a symlink in place of the value file's subdirectory, and delete/check(fix)."""
    d = str(tmp_path / "c")
    outside = tmp_path / "outside"
    outside.mkdir()
    cache = dco.Cache(d)
    cache.set("f", b"x" * 40_000)
    db, name = _one_file(d)
    sub, file = name.split("/")
    victim = outside / file
    victim.write_bytes(b"secret")
    values = os.path.join(d, "values")
    os.remove(os.path.join(values, name))
    os.rmdir(os.path.join(values, sub))
    os.symlink(outside, os.path.join(values, sub))
    with pytest.raises(dco.CorruptValueError):
        cache.get("f")
    assert cache.delete("f") is True
    cache.check(fix=True)
    assert victim.read_bytes() == b"secret"


@pytest.mark.parametrize("kind", ["absolute", "dotdot", "symlink"])
def test_escaping_names_are_never_read_nor_deleted(tmp_path: Path, kind: str) -> None:
    d = str(tmp_path / "c")
    secret = tmp_path / "secret.val"
    secret.write_bytes(b"do not read or delete")
    cache = dco.Cache(d)
    cache.set("f", b"x" * 40_000)
    db, name = _one_file(d)
    if kind == "symlink":
        path = os.path.join(d, "values", name)
        os.remove(path)
        os.symlink(secret, path)
    else:
        evil = str(secret) if kind == "absolute" else "ab/../../../secret.val"
        db.execute("UPDATE cache SET filename = ? WHERE key = 'f'", (evil,))
        db.commit()
    with pytest.raises(dco.CorruptValueError):
        cache.get("f")
    with pytest.raises(dco.CorruptValueError):
        cache.read("f")
    with pytest.raises(dco.CorruptValueError):
        cache.pop("f")
    cache.check(fix=True)
    cache.clear()
    assert secret.read_bytes() == b"do not read or delete"


# -------------------------------------------------------------------------- .notes


@pytest.mark.parametrize("kind", ["dangling", "symlink", "fifo", "directory", "garbage", "short"])
def test_notes_file_replaced(tmp_path: Path, outside: Path, kind: str) -> None:
    """``.notes`` (D-065) is only a hint for the memo of recent reads: whatever is put in its
    place, the cache opens, never writes through it to a file outside, and every read sees
    every write (the memo forgets everything at each commit, as it did before notes)."""
    directory = str(tmp_path / "c")
    make_closed_cache(directory)
    notes = os.path.join(directory, ".notes")
    os.remove(notes)
    if kind == "dangling":
        os.symlink(outside / "created-by-the-cache", notes)
    elif kind == "symlink":
        os.symlink(outside / "secret.txt", notes)
    elif kind == "fifo":
        os.mkfifo(notes)
    elif kind == "directory":
        os.mkdir(notes)
    elif kind == "garbage":
        with open(notes, "wb") as f:
            f.write(os.urandom(256 * 512))
    else:
        with open(notes, "wb") as f:
            f.write(b"\xff" * 700)  # a torn slot, then nothing
    secret = (outside / "secret.txt").read_bytes()
    cache = bounded(lambda: dco.Cache(directory))
    other = dco.Cache(directory)
    for i in range(50):
        cache.set("n", i)
        assert other.get("n") == i
        assert other.get("n") == i
        other.set("m", i)
        assert cache.get("m") == i
    assert cache.get("k") == b"b" * BIG
    cache.close()
    other.close()
    assert not (outside / "created-by-the-cache").exists()
    assert (outside / "secret.txt").read_bytes() == secret
