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
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _cluster_port() -> int:
    """A free port whose cluster bus port (10000 above it) is free and valid too."""
    import random

    while True:
        port = random.randrange(20000, 55000)
        try:
            with socket.socket() as one, socket.socket() as bus:
                one.bind(("127.0.0.1", port))
                bus.bind(("127.0.0.1", port + 10000))
            return port
        except OSError:
            continue


def _start(data: Path, port: int, *extra: str) -> subprocess.Popen[bytes]:
    """A redis-server on 127.0.0.1:``port`` with its data in ``data``, answering PING."""
    import redis

    data.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
        + ["--appendonly", "no", "--dir", str(data), "--logfile", str(data / "log"), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    for _ in range(400):
        try:
            client.ping()
            client.close()
            return process
        except redis.ConnectionError:
            time.sleep(0.025)
    _stop(process)
    pytest.fail(f"redis-server did not start on port {port}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()


def _cluster_info(client: Any) -> bytes:
    """CLUSTER INFO as the server sends it (redis-py parses it into a dict when it can)."""
    info = client.execute_command("CLUSTER INFO")
    if isinstance(info, dict):
        return "".join(f"{k}:{v}\n" for k, v in info.items()).encode()
    return bytes(info)


def _need_redis() -> None:
    pytest.importorskip("redis", reason="redis-py: pip install 'diskcache_oxide[redis]'")
    if not os.path.exists(REDIS_SERVER):
        pytest.fail("redis-server is not installed (apt-get install redis-server)")


@pytest.fixture(scope="session")
def own_redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a single redis-server of this session's own."""
    _need_redis()
    port = _free_port()
    process = _start(tmp_path_factory.mktemp("redis-data"), port)
    yield f"redis://127.0.0.1:{port}/0"
    _stop(process)


@pytest.fixture(scope="session")
def own_cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL (``?cluster=1``) of a three-master Redis Cluster on 127.0.0.1 of this session's
    own, its slots split in three with CLUSTER ADDSLOTSRANGE and joined with CLUSTER MEET."""
    _need_redis()
    import redis

    root = tmp_path_factory.mktemp("redis-cluster")
    ports = [_cluster_port() for _ in range(3)]
    processes = [
        _start(
            root / str(port),
            port,
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            str(root / str(port) / "nodes.conf"),
        )
        for port in ports
    ]
    try:
        clients = [redis.Redis(port=port) for port in ports]
        bounds = [0, 5461, 10923, 16384]
        for index, client in enumerate(clients):
            client.execute_command("CLUSTER ADDSLOTSRANGE", bounds[index], bounds[index + 1] - 1)
        for client in clients[1:]:
            client.execute_command("CLUSTER MEET", "127.0.0.1", ports[0])
        for _ in range(400):
            if all(b"cluster_state:ok" in _cluster_info(c) for c in clients):
                break
            time.sleep(0.05)
        else:
            pytest.fail("the cluster did not come up")
        for client in clients:
            client.close()
        yield f"redis://127.0.0.1:{ports[0]}/0?cluster=1"
    finally:
        for process in processes:
            _stop(process)
