"""Security (issue 6, section 4): pickle=False never unpickles, value file names never
escape the cache directory, and what a cache creates is private to its owner (D-003,
D-005, D-027)."""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import stat
import tempfile
from pathlib import Path
from typing import Any

import diskcache_oxide as dco
import pytest

pytestmark = pytest.mark.oxide


class Bomb:
    """Unpickling this creates ``path``: proof that code ran."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


# ------------------------------------------------------------------ pickle=False never unpickles


@pytest.fixture
def planted(tmp_path: Path) -> tuple[str, Path]:
    """A cache holding a pickle bomb under every kind of access, planted by a pickle=True
    handle: a value, a queue item, a memoized result, a pickled key, a Deque and an Index."""
    directory = str(tmp_path / "c")
    marker = tmp_path / "pwned"
    writer = dco.Cache(directory, pickle=True, eviction_policy="none")
    writer.set("bomb", Bomb(marker))
    writer.push(Bomb(marker))

    @writer.memoize(name="f")
    def f(x: int) -> int:
        return x

    writer.set(f.__cache_key__(1), Bomb(marker))
    writer.close()
    assert not marker.exists(), "planting must not unpickle"
    return directory, marker


def _reads(reader: dco.Cache) -> dict[str, Any]:
    @reader.memoize(name="f")
    def f(x: int) -> int:
        return x

    return {
        "get": lambda: reader.get("bomb"),
        "getitem": lambda: reader["bomb"],
        "read": lambda: reader.read("bomb"),
        "pop": lambda: reader.pop("bomb"),
        "get_many": lambda: reader.get_many(["bomb"]),
        "peek": lambda: reader.peek(),
        "peekitem": lambda: reader.peekitem(),
        "pull": lambda: reader.pull(),
        "memoize": lambda: f(1),
    }


READS = ["get", "getitem", "read", "pop", "get_many", "peek", "peekitem", "pull", "memoize"]


@pytest.mark.parametrize("read", READS)
def test_pickle_false_raises_unsafe_and_never_unpickles(
    planted: tuple[str, Path], read: str
) -> None:
    directory, marker = planted
    reader = dco.Cache(directory)
    with pytest.raises(dco.UnsafeValueError):
        _reads(reader)[read]()
    assert not marker.exists(), f"{read} unpickled a planted value"


@pytest.mark.parametrize("read", ["get", "pop", "get_many", "peek", "pull", "memoize"])
def test_on_decode_error_miss_is_a_miss(
    planted: tuple[str, Path], read: str, caplog: pytest.LogCaptureFixture
) -> None:
    directory, marker = planted
    reader = dco.Cache(directory, on_decode_error="miss")
    with caplog.at_level(logging.WARNING, logger="diskcache_oxide"):
        result = _reads(reader)[read]()
    if read == "memoize":
        assert result == 1  # a miss: the function ran and its result replaced the bomb
    else:
        assert result in (None, (None, None), [None])
    assert not marker.exists()


def test_keys_iteration_deque_and_index(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    d = str(tmp_path / "keys")
    with dco.Cache(d, pickle=True) as writer:
        writer[Bomb(marker)] = 1  # a key the safe format cannot hold: pickled
    reader = dco.Cache(d)
    for walk in (list, lambda c: list(reversed(c)), lambda c: list(c.iterkeys())):
        with pytest.raises(dco.UnsafeValueError):
            walk(reader)
    # A Deque over a cache whose items a pickle=True writer filled.
    d = str(tmp_path / "deque")
    writer_deque = dco.Deque.fromcache(dco.Cache(d, pickle=True, eviction_policy="none"))
    writer_deque.append(Bomb(marker))
    deque = dco.Deque.fromcache(dco.Cache(d, eviction_policy="none"))
    for use in (list, lambda q: q[0], lambda q: q.peekleft(), lambda q: q.popleft()):
        with pytest.raises(dco.UnsafeValueError):
            use(deque)
    # An Index: values and keys.
    d = str(tmp_path / "index")
    writer_index = dco.Index.fromcache(dco.Cache(d, pickle=True, eviction_policy="none"))
    writer_index["v"] = Bomb(marker)
    writer_index[Bomb(marker)] = "k"
    index = dco.Index.fromcache(dco.Cache(d, eviction_policy="none"))
    for use in (
        lambda i: i["v"],
        lambda i: list(i.values()),
        lambda i: list(i.items()),
        lambda i: list(i),
        lambda i: i.peekitem(),
    ):
        with pytest.raises(dco.UnsafeValueError):
            use(index)
    assert not marker.exists()


def test_planted_directly_with_sqlite(tmp_path: Path) -> None:
    """A row rewritten with sqlite3 to hold a pickle (as an attacker with write access to
    cache.db would) is refused the same way."""
    marker = tmp_path / "pwned"
    d = str(tmp_path / "c")
    with dco.Cache(d, pickle=True) as writer:
        writer.set("template", Bomb(marker))  # an attacker's row, checksum and all
        writer.set("victim", "harmless")
    db = sqlite3.connect(os.path.join(d, "cache.db"))
    row = db.execute("SELECT kind, crc, value FROM cache WHERE key = 'template'").fetchone()
    db.execute("UPDATE cache SET kind = ?, crc = ?, value = ? WHERE key = 'victim'", row)
    db.execute("DELETE FROM cache WHERE key = 'template'")
    db.commit()
    db.close()
    reader = dco.Cache(d)
    with pytest.raises(dco.UnsafeValueError):
        reader.get("victim")
    assert not marker.exists()


# ------------------------------------------------------------------ value file names


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


# ------------------------------------------------------------------ permissions (D-027)


def _modes(directory: str) -> dict[str, int]:
    found = {".": stat.S_IMODE(os.stat(directory).st_mode)}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = os.path.join(root, name)
            found[os.path.relpath(path, directory)] = stat.S_IMODE(os.lstat(path).st_mode)
    return found


def _fill(cache: dco.Cache) -> None:
    cache.set("small", 1)
    cache.set("big", b"v" * 100_000)
    cache.push("item")


@pytest.fixture
def loose_umask() -> Any:
    old = os.umask(0)
    yield
    os.umask(old)


def test_new_caches_are_private(tmp_path: Path, loose_umask: None) -> None:
    d = str(tmp_path / "new" / "c")
    with dco.Cache(d) as cache:
        _fill(cache)
        modes = _modes(d)
    for name in ("cache.db", "cache.db-wal", "cache.db-shm", ".lock", "values"):
        assert name in modes, (name, modes)
    assert any(n.endswith(".val") for n in modes)
    for name, mode in modes.items():
        want = 0o700 if os.path.isdir(os.path.join(d, name)) else 0o600
        assert mode == want, f"{name}: {mode:o}"


def test_jobqueue_and_fanout_are_private(tmp_path: Path, loose_umask: None) -> None:
    q = str(tmp_path / "jobs")
    jobs = dco.JobQueue(q)
    jobs.put(b"j" * 100_000)
    f = str(tmp_path / "fan")
    fan = dco.FanoutCache(f, shards=2)
    fan.set("big", b"v" * 100_000)
    for d in (q, os.path.join(f, "000"), os.path.join(f, "001")):
        if not os.path.isdir(d):
            continue
        for name, mode in _modes(d).items():
            if name == "." and d != q:
                pass
            want = 0o700 if os.path.isdir(os.path.join(d, name)) else 0o600
            assert mode == want, f"{d}/{name}: {mode:o}"


def test_group_permissions_for_a_shared_queue(tmp_path: Path) -> None:
    d = str(tmp_path / "q")
    old = os.umask(0o022)  # a typical umask would strip group write
    try:
        with dco.Cache(d, permissions="group", eviction_policy="none") as cache:
            _fill(cache)
        with dco.Cache(d) as later:  # opened without the option: follows the directory
            later.set("big2", b"w" * 100_000)
    finally:
        os.umask(old)
    modes = _modes(d)
    assert len([n for n in modes if n.endswith(".val")]) == 2
    for name, mode in modes.items():
        want = 0o2770 if os.path.isdir(os.path.join(d, name)) else 0o660
        assert mode == want, f"{name}: {mode:o}"
    assert not any(mode & 0o007 for mode in modes.values()), "never world-accessible"


def test_permissions_setting_errors_name_it(tmp_path: Path) -> None:
    for bad in ("world", 0o777, "Group"):
        with pytest.raises(ValueError, match="permissions"):
            dco.Cache(str(tmp_path / "x"), permissions=bad)
    d = str(tmp_path / "private")
    dco.Cache(d).close()
    with pytest.raises(ValueError, match="permissions"):
        dco.Cache(d, permissions="group")
    # The setting is an open option, not persisted among the settings.
    with dco.Cache(str(tmp_path / "g"), permissions="group") as cache:
        assert "permissions" not in dict(
            sqlite3.connect(os.path.join(cache.directory, "cache.db")).execute(
                "SELECT name, value FROM settings"
            )
        )


def test_group_queue_is_usable_by_another_member(request: pytest.FixtureRequest) -> None:
    """A process of another user in the directory's group reads and writes a group queue."""
    if os.geteuid() != 0:
        pytest.skip("switching users needs root")
    base = tempfile.mkdtemp(prefix="dco-group-", dir="/tmp")
    os.chmod(base, 0o755)  # pytest's own temporary directories are root-only
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    tmp_path = Path(base)
    d = str(tmp_path / "q")
    gid = 12345
    with dco.Cache(d, permissions="group", eviction_policy="none") as cache:
        os.chown(d, 0, gid)
        cache.push(b"p" * 100_000)
    for root, dirs, files in os.walk(d):
        for name in dirs + files:
            os.chown(os.path.join(root, name), 0, gid)
    private = str(tmp_path / "p")
    with dco.Cache(private, eviction_policy="none") as cache:
        cache.push(1)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            os.setgroups([gid])
            os.setgid(gid)
            os.setuid(65534)
            with dco.Cache(d) as member:
                assert member.pull()[1] == b"p" * 100_000
                member.push(b"q" * 100_000)
                assert member.pull()[1] == b"q" * 100_000
            try:
                dco.Cache(private).pull()
                code = 3  # a private cache must not be readable
            except (OSError, dco.CacheError):
                code = 0
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
