"""The command as a user runs it: the installed console script and ``python -m
diskcache_oxide`` in real processes (exit codes, stderr, --json parsed)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from cli_support import SCRIPT, Filled

COMMANDS = {
    "script": [str(SCRIPT)],
    "module": [sys.executable, "-m", "diskcache_oxide"],
}


def _run(how: str, *args: object) -> subprocess.CompletedProcess[str]:
    if how == "script" and not SCRIPT.exists():
        pytest.skip(f"no console script at {SCRIPT}: run `maturin develop` (make build)")
    return subprocess.run(
        [*COMMANDS[how], *map(str, args)], capture_output=True, text=True, timeout=60, cwd="/"
    )


@pytest.mark.parametrize("how", list(COMMANDS))
def test_exit_codes_and_json(filled: Filled, how: str) -> None:
    info = _run(how, "info", filled.directory, "--json")
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["jobs"]["mail"]["dead"] == 1
    jobs = _run(how, "jobs", filled.directory, "mail", "ls", "--state", "dead", "--json")
    assert [row["id"] for row in json.loads(jobs.stdout)] == [filled.dead]
    missing = _run(how, "get", filled.directory, "nope")
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == f"Error: no key 'nope' in {filled.directory}\n"
    usage = _run(how, "jobs", filled.directory)
    assert usage.returncode == 2 and "Usage:" in usage.stderr
    assert _run(how, "--version").returncode == 0


@pytest.mark.parametrize("how", list(COMMANDS))
def test_missing_and_foreign_directories(tmp_path: Path, how: str) -> None:
    missing = _run(how, "info", tmp_path / "nowhere")
    assert missing.returncode == 1
    assert missing.stderr.count("\n") == 1 and "Traceback" not in missing.stderr
    diskcache = pytest.importorskip("diskcache")
    with diskcache.Cache(str(tmp_path / "old")) as old:
        old["k"] = 1
    foreign = _run(how, "keys", tmp_path / "old")
    assert foreign.returncode == 1 and foreign.stderr.count("\n") == 1
    assert "diskcache-oxide migrate SRC DST" in foreign.stderr


def test_prog_name_follows_how_it_was_run(tmp_path: Path) -> None:
    assert "Usage: python -m diskcache_oxide" in _run("module", "--help").stdout
    assert "Usage: diskcache-oxide" in _run("script", "--help").stdout


def test_serve_prints_its_address_and_answers(filled: Filled) -> None:
    # Port 0: the command binds a free port and prints it; SIGINT stops it cleanly.
    proc = subprocess.Popen(
        [sys.executable, "-m", "diskcache_oxide", "serve", str(filled.directory), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "(read-only)" in line, line
        url = line.split(" at ")[1].split()[0]
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url + "api/state", timeout=10) as response:
            state = json.loads(response.read())
        assert state["stats"]["claims"] == 1 and state["actions"] is False
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""


def test_serve_on_a_missing_directory_fails_at_once(tmp_path: Path) -> None:
    done = _run("module", "serve", tmp_path / "nowhere", "--port", "0")
    assert done.returncode == 1 and "no directory" in done.stderr


def test_read_commands_beside_a_writer_change_only_the_shm(filled: Filled) -> None:
    # What the help and the guide say: a read command writes nothing of the cache, but
    # while a writer has it open SQLite's shared index (cache.db-shm) is updated by the
    # reader too (it records where in the WAL it reads).
    from cli_support import digest
    from diskcache_oxide import Cache

    d = filled.directory
    with Cache(str(d)) as writer:
        writer["written"] = "by the writer"  # the WAL has frames the readers must see
        before = digest(d)
        assert "cache.db-wal" in before and "cache.db-shm" in before
        for args in (["info", d], ["keys", d], ["jobs", d, "mail", "ls"], ["claims", d, "ls"]):
            done = _run("module", *args)
            assert done.returncode == 0, (args, done.stderr)
        after = digest(d)
    changed = {name for name in set(before) | set(after) if before.get(name) != after.get(name)}
    assert changed <= {"cache.db-shm"}, changed


def test_a_reader_that_stops_early_gets_no_error(tmp_path: Path) -> None:
    # `diskcache-oxide keys DIR | head`: once head has gone, the command stops quietly
    # (more output than a pipe holds, so that a write fails however stdout is buffered).
    from diskcache_oxide import Cache

    with Cache(str(tmp_path / "c")) as cache:
        for n in range(5000):
            cache[f"key-{n:06}-" + "x" * 40] = n
    for args in (["keys", "--limit", 0], ["keys", "--limit", 0, "--json"]):
        proc = subprocess.Popen(
            [*COMMANDS["module"], args[0], str(tmp_path / "c"), *map(str, args[1:])],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline()
        proc.stdout.close()
        error = proc.stderr.read()
        # 1 when a write failed; 0 is possible too, with PYTHONUNBUFFERED, where one large
        # write to a pipe that closes is cut short without an error.
        assert proc.wait(timeout=60) in (0, 1), error
        assert error == "", error
