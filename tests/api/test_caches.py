"""The Caches registry: lazy opening, switching off, falling back to NullCache when a cache
cannot be opened, and refusing state (D-022, docs/state-isnt-cache.md)."""

from __future__ import annotations

import logging
from pathlib import Path

import diskcache_oxide as dco
import pytest
from diskcache_oxide.caches import ENV_VAR

pytestmark = pytest.mark.oxide


@pytest.fixture(autouse=True)
def _no_env_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)


def test_opens_lazily_and_hands_out_the_same_cache(tmp_path: Path) -> None:
    caches = dco.Caches(
        {
            "default": {"directory": tmp_path / "default"},
            "pages": {
                "directory": str(tmp_path / "pages"),
                "timeout": 2,
                "settings": {"cull_limit": 0},
            },
        }
    )
    assert not (tmp_path / "default").exists() and not (tmp_path / "pages").exists()
    assert sorted(caches) == ["default", "pages"] and len(caches) == 2 and "pages" in caches
    pages = caches["pages"]
    assert isinstance(pages, dco.Cache)
    assert (tmp_path / "pages").is_dir() and not (tmp_path / "default").exists()
    assert pages.timeout == 2 and pages.cull_limit == 0
    assert caches.get("pages") is pages and caches["pages"] is pages
    pages["k"] = "v"
    assert dco.Cache(tmp_path / "pages")["k"] == "v"
    assert caches.get("missing") is None
    with pytest.raises(KeyError, match="configured"):
        caches["missing"]
    caches.close()
    assert caches["pages"] is not pages  # reopened after close()
    caches.close()


def test_fanout_option(tmp_path: Path) -> None:
    with dco.Caches({"big": {"directory": tmp_path / "big", "fanout": {"shards": 3}}}) as caches:
        big = caches["big"]
        assert isinstance(big, dco.FanoutCache) and big.shards == 3
        assert big.timeout == 0.010
    with pytest.raises(ValueError, match="fanout"):
        dco.Caches({"big": {"fanout": {"shard": 3}}})
    with pytest.raises(ValueError, match="unknown configuration keys"):
        dco.Caches({"x": {"dir": "/tmp/x"}})


def test_switched_off_by_setting(tmp_path: Path) -> None:
    caches = dco.Caches({"default": {"directory": tmp_path / "c"}}, enabled=False)
    assert not caches.enabled
    cache = caches["default"]
    assert isinstance(cache, dco.NullCache)
    assert cache.set("k", 1) is False and cache.get("k") is None
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("value", ["1", "true", "YES", "on"])
def test_switched_off_by_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(ENV_VAR, value)
    caches = dco.Caches({"default": {"directory": tmp_path / "c"}}, enabled=True)
    assert not caches.enabled
    assert isinstance(caches["default"], dco.NullCache)
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("value", ["", "0", "false", "off", "No"])
def test_environment_values_that_keep_caching_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(ENV_VAR, value)
    caches = dco.Caches({"default": {"directory": tmp_path / "c"}})
    assert caches.enabled and isinstance(caches["default"], dco.Cache)
    caches.close()


# ----------------------------------------------------------------------------- fallback


def _file_in_the_way(tmp_path: Path) -> Path:
    path = tmp_path / "a-file"
    path.write_text("not a directory")
    return path


def _under_a_file(tmp_path: Path) -> Path:
    return _file_in_the_way(tmp_path) / "cache"


def _corrupt_database(tmp_path: Path) -> Path:
    directory = tmp_path / "corrupt"
    directory.mkdir()
    (directory / "cache.db").write_bytes(b"\x00garbage header, not SQLite" * 200)
    return directory


FAILURES = {
    "file in the way": (_file_in_the_way, OSError),
    "directory under a file": (_under_a_file, OSError),
    "corrupt database header": (_corrupt_database, dco.NotACacheError),
}


@pytest.mark.parametrize("cause", sorted(FAILURES))
def test_falls_back_to_null_cache_and_logs_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, cause: str
) -> None:
    make, error = FAILURES[cause]
    directory = make(tmp_path)
    caches = dco.Caches(
        {"pages": {"directory": directory}, "other": {"directory": tmp_path / "ok"}}
    )
    with caplog.at_level(logging.WARNING, logger="diskcache_oxide"):
        first = caches["pages"]
        second = caches.get("pages")
        assert caches["pages"] is first is second
    assert isinstance(first, dco.NullCache)
    assert first.set("k", 1) is False and first.get("k") is None
    records = [r for r in caplog.records if r.name == "diskcache_oxide"]
    assert len(records) == 1, records
    assert "'pages'" in records[0].getMessage() and records[0].levelno == logging.WARNING
    assert isinstance(caches.errors["pages"], error)
    assert isinstance(caches["other"], dco.Cache)  # the other caches still open
    caches.close()


def test_falls_back_on_a_layout_mismatch(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dco.FanoutCache(tmp_path / "f", shards=2).close()
    caches = dco.Caches({"pages": {"directory": tmp_path / "f"}})
    with caplog.at_level(logging.WARNING, logger="diskcache_oxide"):
        assert isinstance(caches["pages"], dco.NullCache)
        caches["pages"]
    assert len([r for r in caplog.records if "LayoutMismatchError" in r.getMessage()]) == 1
    assert isinstance(caches.errors["pages"], dco.LayoutMismatchError)


# ----------------------------------------------------------------------------- state isn't cache


def test_refuses_state_in_the_configuration(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="state-isnt-cache.md"):
        dco.Caches({"jobs": {"directory": tmp_path / "j", "settings": {"eviction_policy": "none"}}})


def test_refuses_a_directory_that_holds_state(tmp_path: Path) -> None:
    dco.Cache(tmp_path / "jobs", eviction_policy="none").close()
    caches = dco.Caches({"jobs": {"directory": tmp_path / "jobs"}})
    with pytest.raises(ValueError, match="state-isnt-cache.md"):
        caches["jobs"]
    # A switched-off registry opens nothing, so it cannot see the stored policy.
    off = dco.Caches({"jobs": {"directory": tmp_path / "jobs"}}, enabled=False)
    assert isinstance(off["jobs"], dco.NullCache)


# ------------------------------------------------- fallbacks that need root to set up


def _root_only() -> None:
    import os

    if os.geteuid() != 0:
        pytest.skip("needs root to mount a file system or to drop to another user")


def test_falls_back_on_a_read_only_file_system(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import subprocess

    _root_only()
    mount = tmp_path / "ro"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k,ro", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {done.stderr.strip()}")
    try:
        caches = dco.Caches({"pages": {"directory": mount / "cache"}})
        with caplog.at_level(logging.WARNING, logger="diskcache_oxide"):
            assert isinstance(caches["pages"], dco.NullCache)
        assert isinstance(caches.errors["pages"], OSError)
        assert sum(r.name == "diskcache_oxide" for r in caplog.records) == 1
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_falls_back_on_a_directory_without_permissions(tmp_path: Path) -> None:
    """chmod does not stop root, so the registry runs in a forked child that became nobody."""
    import os

    _root_only()
    locked = tmp_path / "locked"
    locked.mkdir()
    dco.Cache(str(locked / "cache")).close()
    os.chmod(locked, 0o700)  # owned by root: nobody may not enter it
    os.chmod(tmp_path, 0o755)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            os.setgid(65534)
            os.setuid(65534)
            caches = dco.Caches({"pages": {"directory": str(locked / "cache")}})
            ok = isinstance(caches["pages"], dco.NullCache) and isinstance(
                caches.errors["pages"], PermissionError
            )
            code = 0 if ok else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
