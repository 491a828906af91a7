"""Small things an operator meets (issue 29, §6): ``--help`` names ``worker``; ``copy`` exits
with a documented nonzero status when it skipped something, and says how many. Run as real
``python -m diskcache_oxide`` processes, on directories and on the session's redis-server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import namespace_url
from diskcache_oxide import Cache, JobQueue

pytestmark = pytest.mark.oxide


class Opaque:
    """Stored as a pickle by a pickle=True handle: copy skips it without --pickle."""


def command(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "diskcache_oxide", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_help_names_the_worker_command_and_what_it_does() -> None:
    done = command("--help")
    assert done.returncode == 0, done.stderr
    about, _, rest = done.stdout.partition("Options:")
    assert "worker" in about  # the summary says the command runs the tasks' workers
    commands = rest.partition("Commands:")[2].split()
    assert "worker" in commands
    assert "3 copy skipped" in " ".join(about.split())


def _pickled(directory: Path) -> None:
    with Cache(str(directory), pickle=True) as cache:
        cache["plain"] = [1, 2]
        cache["opaque"] = Opaque()  # a pickle
        cache["other"] = Opaque()
        JobQueue(cache, "q").put({"n": 1})


@pytest.mark.parametrize("into", ["directory", "redis"])
def test_a_copy_that_skipped_exits_3_and_says_how_many(
    tmp_path: Path, into: str, request: pytest.FixtureRequest
) -> None:
    _pickled(tmp_path / "src")
    if into == "redis":
        dst = namespace_url(request.getfixturevalue("redis_url"), "skip")
    else:
        dst = str(tmp_path / "dst")
    done = command("copy", tmp_path / "src", dst)
    assert done.returncode == 3, (done.stdout, done.stderr)  # documented in --help
    assert "2 entries and 0 jobs skipped" in done.stderr
    assert "exit status 3" in done.stderr
    assert "'opaque'" in done.stdout and "'other'" in done.stdout  # the summary lists them
    assert "Traceback" not in done.stderr


def test_a_copy_that_skipped_exits_3_with_json_too(tmp_path: Path) -> None:
    _pickled(tmp_path / "src")
    done = command("copy", tmp_path / "src", tmp_path / "dst", "--json")
    assert done.returncode == 3, done.stderr
    report = json.loads(done.stdout)  # stdout stays strict JSON; the count goes to stderr
    assert sorted(s["key"] for s in report["skipped"]) == ["opaque", "other"]
    assert report["entries"] == 1 and report["jobs"] == 1


def test_a_complete_copy_exits_0(tmp_path: Path) -> None:
    with Cache(str(tmp_path / "src")) as cache:
        cache["plain"] = [1, 2]
    done = command("copy", tmp_path / "src", tmp_path / "dst")
    assert done.returncode == 0, done.stderr
    assert "skipped" not in done.stdout + done.stderr
