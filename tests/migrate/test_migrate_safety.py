"""migrate() never runs a pickle's code unless told the source is trusted, never changes the
source, never reads outside it, and never leaves a half-built destination."""

from __future__ import annotations

import os
import pathlib
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
from typing import Any

import diskcache
import diskcache_oxide as dco
import pytest
from migrate_support import build_source, entries, fingerprint, migration, same

pytestmark = pytest.mark.oxide


class RunsAShellCommand:
    """Pickles as a call to os.system: loading it runs the command."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (self.command,))


class OpensAFile:
    """Pickles as a call to open(path, 'w'): loading it creates the file."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def _poison(directory: str, key: str, payload: bytes) -> None:
    """Replace the pickled inline value of ``key`` with ``payload``, as an attacker with write
    access to the directory would."""
    db = sqlite3.connect(os.path.join(directory, "cache.db"))
    with db:
        changed = db.execute(
            "UPDATE Cache SET value = ?, mode = 4 WHERE key = ? AND raw = 1", (payload, key)
        ).rowcount
    db.close()
    assert changed == 1


def test_a_hostile_pickle_is_skipped_and_never_run(tmp_path: Any) -> None:
    marker = tmp_path / "pwned"
    with diskcache.Cache(str(tmp_path / "src")) as source:
        source["evil"] = RunsAShellCommand(f"touch {marker}")
        source["evil in a file"] = [RunsAShellCommand(f"touch {marker}")] + [0] * 20_000
        source[RunsAShellCommand(f"touch {marker}")] = "an evil key"
        source["good"] = {"still": "here"}
    report = dco.migrate(tmp_path / "src", tmp_path / "dst")
    assert not marker.exists()
    assert report.converted == 1
    assert len(report.skipped) == 3
    for skipped in report.skipped:
        assert "refused to unpickle" in skipped.reason
        assert "system" in skipped.reason  # posix.system (or nt.system): named, not called
    with dco.Cache(tmp_path / "dst") as cache:
        assert list(cache) == ["good"]


#: Pickles written by hand, as an attacker would: each must be refused without effect.
def _hostile_pickles(marker: pathlib.Path) -> dict[str, bytes]:
    quoted = repr(f"touch {marker}").encode()
    return {
        "os.system, protocol 0": b"cos\nsystem\n(S" + quoted + b"\ntR.",
        "posix.system, protocol 0": b"cposix\nsystem\n(S" + quoted + b"\ntR.",
        "eval": b'c__builtin__\neval\n(S\'__import__("os").system("true")\'\ntR.',
        "getattr escape through a class": (
            b"c__builtin__\ngetattr\n(cdatetime\ndatetime\nS'__subclasses__'\ntR."
        ),
        "copyreg reconstructing another class": (
            b"ccopy_reg\n_reconstructor\n(csubprocess\nPopen\nc__builtin__\nobject\nNtR."
        ),
        "codecs with another codec": b"c_codecs\nencode\n(S'x'\nS'rot13'\ntR.",
        "persistent id": b"P1\n.",
        "a class tampered with": b"cuuid\nUUID\n(N(dS'__eq__'\nNstb.",
        "a path class tampered with": b"cpathlib\nPurePosixPath\n(N(dS'__str__'\nNstb.",
        "truncated": b"\x80\x05\x95",
    }


def test_hand_written_hostile_pickles_are_refused(tmp_path: Any) -> None:
    marker = tmp_path / "pwned"
    pickles = _hostile_pickles(marker)
    src = str(tmp_path / "src")
    with diskcache.Cache(src) as source:
        for name in pickles:
            source[name] = ["placeholder"]  # a pickled inline value, replaced below
        source["a uuid after them"] = uuid.UUID(int=7)
        source["a path after them"] = pathlib.PurePosixPath("/a/b")
    for name, payload in pickles.items():
        _poison(src, name, payload)
    report = dco.migrate(src, tmp_path / "dst")
    assert not marker.exists()
    assert sorted(s.key for s in report.skipped) == sorted(pickles)
    # Nothing a pickle did changed how the later values load.
    assert uuid.UUID.__eq__ is not None and str(pathlib.PurePosixPath("/x")) == "/x"
    with dco.Cache(tmp_path / "dst") as cache:
        assert cache["a uuid after them"] == uuid.UUID(int=7)
        assert cache["a path after them"] == pathlib.PurePosixPath("/a/b")


def test_a_pickle_that_expands_without_bound_is_skipped(tmp_path: Any) -> None:
    """A few hundred bytes of pickle that share one list at every level would be 2**40 items
    written out as a tree: refused by size before it reaches the engine."""
    import pickle

    bomb: list[Any] = [0]
    for _ in range(40):
        bomb = [bomb, bomb]
    src = str(tmp_path / "src")
    with diskcache.Cache(src) as source:
        source["bomb"] = ["placeholder"]
        source["big but honest"] = list(range(200_000))
        source["shared but honest"] = [["the same list"] * 3] * 1000
    _poison(src, "bomb", pickle.dumps(bomb, protocol=5))
    started = time.monotonic()
    report = dco.migrate(src, tmp_path / "dst")
    assert time.monotonic() - started < 60
    assert [s.key for s in report.skipped] == ["bomb"]
    assert "refers to the same objects" in report.skipped[0].reason
    assert report.converted == 2


def test_trusted_really_unpickles(tmp_path: Any) -> None:
    """trusted=True is the full unpickle it says it is: the source's code runs."""
    marker = tmp_path / "created by the pickle"
    with diskcache.Cache(str(tmp_path / "src")) as source:
        source["opens"] = OpensAFile(str(marker))
    report = dco.migrate(tmp_path / "src", tmp_path / "dst", trusted=True)
    assert marker.exists()
    assert report.converted == 0  # a file object is not data: skipped
    assert "cannot store" in report.skipped[0].reason


def test_safe_loads_builds_every_safe_type() -> None:
    import pickle

    value = {"u": uuid.UUID(int=3), "p": pathlib.PureWindowsPath("C:/x"), "s": {1}, "b": b"\x00"}
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert same(migration.safe_loads(pickle.dumps(value, protocol)), value), protocol


def test_the_source_is_not_changed(tmp_path: Any) -> None:
    source = build_source(str(tmp_path / "src"), tag_index=1)
    source.close()
    before = fingerprint(str(tmp_path / "src"))
    assert "cache.db-wal" not in before  # a closed python-diskcache leaves no log
    dco.migrate(tmp_path / "src", tmp_path / "dst")
    assert fingerprint(str(tmp_path / "src")) == before


def test_a_source_open_in_python_diskcache_is_read_from_a_copy(tmp_path: Any) -> None:
    """With a live -wal (a process has the cache open), even a read-only SQLite connection
    would write the -shm file; migrate reads a private copy and sees every commit."""
    source = build_source(str(tmp_path / "src"))
    source["written last"] = "in the log only"
    try:
        expected = entries(source)  # python-diskcache's own reads update the -shm file
        before = fingerprint(str(tmp_path / "src"))
        assert "cache.db-wal" in before
        dco.migrate(tmp_path / "src", tmp_path / "dst")
        assert fingerprint(str(tmp_path / "src")) == before
    finally:
        source.close()
    with dco.Cache(tmp_path / "dst") as cache:
        assert cache["written last"] == "in the log only"
        assert set(entries(cache)) == set(expected)
    assert not [p for p in os.listdir(tmp_path) if "snapshot" in p]


def test_an_interrupted_migration_leaves_no_destination(tmp_path: Any) -> None:
    with diskcache.Cache(str(tmp_path / "src")) as source:
        for number in range(3000):
            source[number] = str(number)

    def stop(done: int, total: int) -> None:
        if done >= 1000:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        dco.migrate(tmp_path / "src", tmp_path / "dst", progress=stop)
    assert sorted(os.listdir(tmp_path)) == ["src"]


def test_a_failure_while_writing_leaves_no_destination(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with diskcache.Cache(str(tmp_path / "src")) as source:
        for number in range(3000):
            source[number] = str(number)
    calls = {"n": 0}
    original = dco.Cache._import_many

    def failing_import(self: Any, rows: Any) -> Any:
        # The second batch of 1,000 fails as a full disk would, after the first was written.
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(28, "No space left on device")
        return original(self, rows)

    monkeypatch.setattr(dco.Cache, "_import_many", failing_import)
    with pytest.raises(OSError, match="No space"):
        dco.migrate(tmp_path / "src", tmp_path / "dst")
    assert sorted(os.listdir(tmp_path)) == ["src"]


@pytest.mark.slow
def test_a_killed_migration_never_leaves_a_usable_destination(tmp_path: Any) -> None:
    with diskcache.Cache(str(tmp_path / "src")) as source:
        for number in range(3000):
            source[number] = str(number)
    script = textwrap.dedent(
        f"""
        import os, signal, diskcache_oxide
        def die(done, total):
            if done >= 1000:
                os.kill(os.getpid(), signal.SIGKILL)
        diskcache_oxide.migrate({str(tmp_path / "src")!r}, {str(tmp_path / "dst")!r},
                                progress=die)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], check=False, timeout=120)
    assert done.returncode == -signal.SIGKILL
    assert not (tmp_path / "dst").exists()
    leftovers = [p for p in os.listdir(tmp_path) if p != "src"]
    assert all(p.startswith(".dst.migrating-") for p in leftovers)


def test_a_value_file_outside_the_directory_is_never_read(tmp_path: Any) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"do not copy me")
    src = str(tmp_path / "src")
    with diskcache.Cache(src) as source:
        for name in ("dotdot", "absolute", "link", "fifo", "missing", "grown"):
            source[name] = os.urandom(40_000)  # value files
    db = sqlite3.connect(os.path.join(src, "cache.db"))
    rows = dict(db.execute("SELECT key, filename FROM Cache"))
    with db:
        db.execute("UPDATE Cache SET filename = '../secret.txt' WHERE key = 'dotdot'")
        db.execute("UPDATE Cache SET filename = ? WHERE key = 'absolute'", (str(secret),))
    db.close()
    link = os.path.join(src, rows["link"])
    os.remove(link)
    os.symlink(secret, link)
    fifo = os.path.join(src, rows["fifo"])
    os.remove(fifo)
    os.mkfifo(fifo)
    os.remove(os.path.join(src, rows["missing"]))
    with open(os.path.join(src, rows["grown"]), "r+b") as grown:
        grown.truncate(2**40)  # a sparse terabyte: never read, never copied
    report = dco.migrate(src, tmp_path / "dst")  # a FIFO read would hang here
    reasons = {s.key: s.reason for s in report.skipped}
    assert "outside the cache directory" in reasons["dotdot"]
    assert "outside the cache directory" in reasons["absolute"]
    assert "cannot be opened" in reasons["link"]
    assert "not a regular file" in reasons["fifo"]
    assert "missing" in reasons["missing"]
    assert "1099511627776 bytes long, but its row says 40000" in reasons["grown"]
    assert report.converted == 0


def test_a_destination_in_the_way_is_refused_untouched(tmp_path: Any) -> None:
    with diskcache.Cache(str(tmp_path / "src")) as source:
        source["a"] = 1
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="new path"):
        dco.migrate(tmp_path / "src", tmp_path / "dst")
    assert os.listdir(tmp_path / "dst") == ["keep.txt"]
    (tmp_path / "empty").mkdir()
    assert dco.migrate(tmp_path / "src", tmp_path / "empty").converted == 1


def test_sources_that_are_not_python_diskcache_are_refused(tmp_path: Any) -> None:
    (tmp_path / "nothing").mkdir()
    with pytest.raises(dco.NotACacheError, match="neither cache.db"):
        dco.migrate(tmp_path / "nothing", tmp_path / "dst")
    with dco.Cache(tmp_path / "ours") as ours:
        ours["a"] = 1
    with pytest.raises(dco.NotACacheError, match="already a diskcache_oxide cache"):
        dco.migrate(tmp_path / "ours", tmp_path / "dst")
    dco.FanoutCache(tmp_path / "fan", shards=2).close()
    with pytest.raises(dco.NotACacheError, match="already a diskcache_oxide FanoutCache"):
        dco.migrate(tmp_path / "fan", tmp_path / "dst")
    other = tmp_path / "other"
    other.mkdir()
    sqlite3.connect(other / "cache.db").execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(dco.NotACacheError, match="not a python-diskcache"):
        dco.migrate(other, tmp_path / "dst")
    with diskcache.Cache(str(tmp_path / "src")) as source:
        source["a"] = 1
    with pytest.raises(ValueError, match="inside the source"):
        dco.migrate(tmp_path / "src", tmp_path / "src" / "dst")
    assert not (tmp_path / "dst").exists()
