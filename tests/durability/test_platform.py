"""The portable fallbacks (D-040): forced on Linux, they are the ones in use, and a blocked
worker in one process is still woken by a push from another."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.oxide

_BLOCKED_PULL = """
import json, subprocess, sys, time
import diskcache_oxide as dc
from diskcache_oxide import _core
cache = dc.Cache(sys.argv[1], eviction_policy="none")
pusher = subprocess.Popen([sys.executable, "-c",
    "import time, sys, diskcache_oxide as dc; time.sleep(0.3); "
    "dc.Cache(sys.argv[1]).push('woken')", sys.argv[1]])
key, value = cache.pull(timeout=10)
pusher.wait(30)
print(json.dumps({"backends": _core.platform_backends(), "value": value}))
"""


def _run(directory: str, portable: bool) -> dict[str, object]:
    import json

    env = dict(os.environ)
    env.pop("DISKCACHE_OXIDE_PORTABLE", None)
    if portable:
        env["DISKCACHE_OXIDE_PORTABLE"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", _BLOCKED_PULL, directory],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux pieces")
def test_linux_uses_inotify_and_the_engine_locks(tmp_path: object) -> None:
    result = _run(str(tmp_path), portable=False)
    assert result["backends"] == {
        "wake": "inotify",
        "wal_index_locks": "engine",
        "preallocate": "posix_fallocate",
    }
    assert result["value"] == "woken"


def test_forced_fallbacks_are_in_use_and_still_wake_a_blocked_pull(tmp_path: object) -> None:
    result = _run(str(tmp_path), portable=True)
    backends = result["backends"]
    assert isinstance(backends, dict)
    assert backends["wake"] == "polling" and backends["wal_index_locks"] == "sqlite"
    assert result["value"] == "woken"


def test_the_suite_knows_whether_it_runs_forced() -> None:
    """`make portable-test` runs the queue, job and claim tests with the fallbacks forced:
    check that this process really uses what its environment asks for."""
    from diskcache_oxide import _core

    forced = os.environ.get("DISKCACHE_OXIDE_PORTABLE", "") not in ("", "0")
    wake = _core.platform_backends()["wake"]
    assert wake == ("polling" if forced or not sys.platform.startswith("linux") else "inotify")
