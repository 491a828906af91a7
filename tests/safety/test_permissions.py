"""What a cache creates is private to its owner (D-027): a Cache, JobQueue or FanoutCache makes
its directories 0700 and its files 0600 whatever the umask; ``permissions="group"`` shares a
queue with the directory's group (and never with the world), later handles follow the
directory, and another member of the group can use it while a private cache stays closed."""

from __future__ import annotations

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
    for name in ("cache.db", "cache.db-wal", "cache.db-shm", ".lock", ".notes", "values"):
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
