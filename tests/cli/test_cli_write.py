"""The commands that change something (jobs retry/bury/purge, claims release, check --fix,
vacuum, migrate), and what the command line says when its libraries are missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_support import Filled, Run
from diskcache_oxide import Cache, JobQueue, admin


def _state(filled: Filled, job_id: int) -> str | None:
    with admin.open_cache(filled.directory) as cache:
        row = admin.job(cache, job_id)
    return None if row is None else row.state


def test_retry_a_dead_job(filled: Filled, run: Run) -> None:
    result = run("jobs", filled.directory, "mail", "retry", filled.dead)
    assert result.exit_code == 0, result.output
    assert f"job {filled.dead} is back in 'mail'" in result.stdout
    assert _state(filled, filled.dead) == "ready"
    again = run("jobs", filled.directory, "mail", "retry", filled.dead)
    assert again.exit_code == 1 and "is ready, not dead" in again.stderr
    assert run("jobs", filled.directory, "mail", "retry").exit_code == 2  # no ids, no --all
    assert run("jobs", filled.directory, "mail", "retry", 1, "--all").exit_code == 2


def test_retry_all_and_with_delay(filled: Filled, run: Run) -> None:
    result = run("jobs", filled.directory, "mail", "retry", "--all", "--delay", 60)
    assert result.exit_code == 0, result.output
    assert _state(filled, filled.dead) == "scheduled"
    assert "no dead jobs" in run("jobs", filled.directory, "mail", "retry", "--all").stdout


def test_bury(filled: Filled, run: Run) -> None:
    result = run(
        "jobs", filled.directory, "mail", "bury", filled.ready, filled.leased, "--reason", "bad"
    )
    assert result.exit_code == 0, result.output
    assert _state(filled, filled.ready) == "dead" and _state(filled, filled.leased) == "dead"
    with admin.open_cache(filled.directory) as cache:
        row = admin.job(cache, filled.ready)
        assert row is not None and row.error == "bad"
    again = run("jobs", filled.directory, "mail", "bury", filled.dead)
    assert again.exit_code == 1 and "already dead" in again.stderr
    other = run("jobs", filled.directory, "mail", "bury", filled.other)
    assert other.exit_code == 1 and _state(filled, filled.other) == "ready"


def test_purge_asks_first(filled: Filled, run: Run) -> None:
    declined = run("jobs", filled.directory, "mail", "purge", input="n\n")
    assert declined.exit_code == 1 and "Aborted" in declined.output
    assert _state(filled, filled.dead) == "dead"
    accepted = run("jobs", filled.directory, "mail", "purge", input="y\n")
    assert accepted.exit_code == 0 and "deleted 1 dead jobs" in accepted.stdout
    assert _state(filled, filled.dead) is None
    result = run("jobs", filled.directory, "mail", "purge", "--yes", "--json")
    assert json.loads(result.stdout) == {"queue": "mail", "purged": 0}


def test_release_a_claim(filled: Filled, run: Run) -> None:
    result = run("claims", filled.directory, "release", filled.claim_key)
    assert result.exit_code == 0, result.output
    with admin.open_cache(filled.directory) as cache:
        assert admin.claims(cache) == []
    again = run("claims", filled.directory, "release", filled.claim_key)
    assert again.exit_code == 1 and "no live claim" in again.stderr


def test_check_and_fix(tmp_path: Path, run: Run, run_json: Any) -> None:
    directory = tmp_path / "c"
    with Cache(str(directory)) as cache:
        cache["big"] = b"x" * 100_000  # in a value file
        cache["small"] = 1
    assert run("check", directory).exit_code == 0
    (value_file,) = (directory / "values").rglob("*.val")
    value_file.unlink()
    found = run("check", directory)
    assert found.exit_code == 1 and "file not found" in found.stdout
    fixed = run("check", directory, "--fix", "--json")
    assert fixed.exit_code == 0, fixed.output
    report = json.loads(fixed.stdout)
    assert report["ok"] and report["fixed"] and len(report["problems"]) == 1
    assert run_json("check", directory) == {
        "directory": str(directory),
        "ok": True,
        "problems": [],
        "fixed": False,
        "remaining": [],
    }


def test_vacuum(tmp_path: Path, run: Run) -> None:
    directory = tmp_path / "c"
    with Cache(str(directory), sqlite_auto_vacuum=0) as cache:
        cache.set_many({f"k{n}": "v" * 500 for n in range(2000)})
        cache.clear()
    result = run("vacuum", directory, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["freed"] > 0 and report["after"] < report["before"]
    assert "freed" in run("vacuum", directory).stdout


class Opaque:
    """A class the safe format cannot store: its pickle is skipped by default."""

    def __init__(self, n: int) -> None:
        self.n = n


def test_migrate(tmp_path: Path, run: Run) -> None:
    diskcache = pytest.importorskip("diskcache")
    with diskcache.Cache(str(tmp_path / "old")) as old:
        for n in range(2500):
            old[f"k{n}"] = {"n": n}
        old.set("tagged", b"bytes", tag="t")
        old["opaque"] = Opaque(1)
    result = run("migrate", tmp_path / "old", tmp_path / "new")
    assert result.exit_code == 0, result.output
    assert "converted 2501 of 2502 entries" in result.stdout
    assert "skipped 1 entries" in result.stdout and "'opaque'" in result.stdout
    assert "migrating" in result.stderr  # the progress bar, on stderr
    with Cache(str(tmp_path / "new"), read_only=True) as new:
        assert new["k2499"] == {"n": 2499} and new.get("tagged", tag=True) == (b"bytes", "t")
    again = run("migrate", tmp_path / "old", tmp_path / "new")
    assert again.exit_code == 1 and "Traceback" not in again.output
    report = json.loads(run("migrate", tmp_path / "old", tmp_path / "new2", "--json").stdout)
    assert report["converted"] == 2501 and report["total"] == 2502
    assert [s["key"] for s in report["skipped"]] == ["opaque"]
    assert report["skipped"][0]["reason"]
    not_diskcache = run("migrate", tmp_path / "new", tmp_path / "new3")
    assert not_diskcache.exit_code == 1


def test_serve_without_the_dashboard_libraries(
    filled: Filled, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn now fails
    result = run("serve", filled.directory)
    assert result.exit_code == 1
    assert "pip install 'diskcache_oxide[dashboard]'" in result.stderr
    assert "uvicorn" in result.stderr


HIDE = "import sys\nfor name in {names!r}: sys.modules[name] = None\n"


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd="/"
    )


def test_without_click_the_command_says_what_to_install() -> None:
    code = HIDE.format(names=["click"]) + "from diskcache_oxide.cli import main\nmain(['info'])\n"
    done = _python(code)
    assert done.returncode == 1
    assert done.stderr == (
        "diskcache-oxide: the command line needs click, which is not installed: "
        "pip install 'diskcache_oxide[cli]'\n"
    )


def test_every_module_imports_without_the_extras() -> None:
    # As the wheel check does in a bare virtualenv: walk and import every module.
    code = HIDE.format(names=["click", "rich", "starlette", "uvicorn", "jinja2"]) + (
        "import importlib, pkgutil, diskcache_oxide\n"
        "names = [m.name for m in pkgutil.walk_packages(diskcache_oxide.__path__, "
        "'diskcache_oxide.')]\n"
        "for name in names: importlib.import_module(name)\n"
        "print(' '.join(n for n in names if 'cli' in n or 'dash' in n or 'main' in n))\n"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    imported = done.stdout.split()
    for name in (
        "diskcache_oxide.cli._app",
        "diskcache_oxide.dashboard",
        "diskcache_oxide.__main__",
    ):
        assert name in imported


def test_leased_job_of_a_dead_worker_can_be_buried(filled: Filled, run: Run) -> None:
    # The lease was taken by a handle that is closed now (its worker is gone); bury still works
    # and the job keeps its last attempt count.
    with Cache(str(filled.directory)) as cache:
        before = JobQueue(cache).get(filled.leased)
        assert before is not None and before.state == "leased"
    assert run("jobs", filled.directory, "mail", "bury", filled.leased).exit_code == 0
    assert _state(filled, filled.leased) == "dead"
    assert os.path.isdir(filled.directory)
