"""A redis-server of the tests' own, started on a free port of 127.0.0.1 with its own data
directory and stopped by pid (until tests/helpers/redis_servers.py lands with its fixtures)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def own_redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("redis", reason="redis-py: pip install 'diskcache_oxide[redis]'")
    if not os.path.exists(REDIS_SERVER):
        pytest.fail("redis-server is not installed (apt-get install redis-server)")
    data = tmp_path_factory.mktemp("redis-data")
    port = _free_port()
    process = subprocess.Popen(
        [
            REDIS_SERVER,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(data),
            "--logfile",
            str(Path(data) / "log"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import redis

    client = redis.Redis(port=port)
    for _ in range(200):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.025)
    else:
        os.kill(process.pid, signal.SIGKILL)
        pytest.fail("redis-server did not start")
    client.close()
    yield f"redis://127.0.0.1:{port}/0"
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
