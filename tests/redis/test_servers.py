"""The real servers the Redis backend's tests run on (tests/helpers/redis_servers.py and the
fixtures of tests/conftest.py): a single server and a three-master cluster start and answer,
the cluster spreads keys over the slots of all three masters, ``restart()`` keeps AOF data,
``pause()`` makes a client time out and ``resume()`` brings it back, a failover promotes a
replica, and no server outlives ``stop()``, ``close()`` or the death of the process that
started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
import redis_servers
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster as ClusterClient
from redis.retry import Retry
from redis_servers import RedisCluster, RedisServer, pid_alive

HELPERS = str(Path(__file__).resolve().parents[1] / "helpers")


def _gone(pids: list[int], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while any(pid_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_server_answers(redis_server: RedisServer, redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    assert client.ping()
    client.set("k", b"v")
    assert client.get("k") == b"v"
    assert redis_url == f"redis://127.0.0.1:{redis_server.port}/0"
    info = client.info("server")
    assert info["tcp_port"] == redis_server.port
    assert Path(client.config_get("dir")["dir"]) == redis_server.dir.resolve()
    assert client.config_get("save")["save"] == ""
    assert client.config_get("appendonly")["appendonly"] == "no"
    client.close()


def test_server_answers_on_its_unix_socket(redis_server: RedisServer, redis_url: str) -> None:
    client = redis.Redis.from_url(redis_server.unix_url)
    client.set("over-unix", 1)
    assert redis.Redis.from_url(redis_url).get("over-unix") == b"1"
    client.close()


def test_redis_url_gives_each_test_an_empty_server_1(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    assert client.dbsize() == 0
    client.set("left-behind", 1)
    client.select(3)
    client.set("left-behind-in-db-3", 1)


def test_redis_url_gives_each_test_an_empty_server_2(redis_url: str) -> None:
    # Runs after _1 (file order): what it left in db 0 and db 3 is gone.
    client = redis.Redis.from_url(redis_url)
    assert client.dbsize() == 0
    assert redis.Redis.from_url(redis_url.rsplit("/", 1)[0] + "/3").dbsize() == 0


def test_cluster_holds_keys_on_all_three_masters(
    redis_cluster: RedisCluster, redis_cluster_url: str
) -> None:
    assert len(redis_cluster.masters) == 3 and len(redis_cluster.nodes) == 3
    client = ClusterClient.from_url(redis_cluster_url)
    for node in redis_cluster.nodes:
        info = redis_servers.info_fields(node.command("CLUSTER", "INFO"))
        assert info["cluster_state"] == "ok"
        assert info["cluster_slots_assigned"] == str(redis_servers.SLOTS)
    keys = [f"key:{i}" for i in range(300)]
    for key in keys:
        client.set(key, key)
    assert [client.get(key) for key in keys] == [key.encode() for key in keys]
    # Every master holds some of them, in its own slots.
    counts = [node.command("DBSIZE") for node in redis_cluster.masters]
    assert all(count > 0 for count in counts) and sum(counts) == len(keys)
    slots = {client.keyslot(key) for key in keys}
    assert len(slots) > 200
    # A hash tag puts a queue's keys in one slot, so one script can touch them all.
    tagged = [f"{{queue:mail}}:{part}" for part in ("items", "leases", "dead")]
    assert len({client.keyslot(key) for key in tagged}) == 1
    client.close()


def test_cluster_url_gives_each_test_an_empty_cluster_1(redis_cluster_url: str) -> None:
    client = ClusterClient.from_url(redis_cluster_url)
    assert client.dbsize(target_nodes=ClusterClient.PRIMARIES) == 0
    client.mset_nonatomic({f"left:{i}": i for i in range(50)})
    client.close()


def test_cluster_url_gives_each_test_an_empty_cluster_2(redis_cluster_url: str) -> None:
    client = ClusterClient.from_url(redis_cluster_url)
    assert client.dbsize(target_nodes=ClusterClient.PRIMARIES) == 0
    client.close()


def test_restart_keeps_aof_data(make_redis_server: Callable[..., RedisServer]) -> None:
    server = make_redis_server(appendonly=True, appendfsync="always")
    port, directory, first_pid = server.port, server.dir, server.pid
    client = redis.Redis.from_url(server.url)
    client.mset({f"k{i}": i for i in range(100)})
    client.close()
    server.restart()  # SIGTERM, then the same port and directory
    assert (server.port, server.dir) == (port, directory) and server.pid != first_pid
    client = redis.Redis.from_url(server.url)
    assert client.dbsize() == 100 and client.get("k42") == b"42"
    client.set("after-restart", 1)
    client.close()
    server.kill()  # SIGKILL: with appendfsync always, what was acknowledged is in the AOF
    assert server.pid is None
    server.start()
    client = redis.Redis.from_url(server.url)
    assert client.dbsize() == 101 and client.get("after-restart") == b"1"
    client.close()


def test_without_aof_a_restart_starts_empty(make_redis_server: Callable[..., RedisServer]) -> None:
    server = make_redis_server()
    server.command("SET", "k", "v")
    server.restart()
    assert server.command("DBSIZE") == 0


def test_pause_makes_a_client_time_out_and_resume_recovers(
    make_redis_server: Callable[..., RedisServer],
) -> None:
    server = make_redis_server()
    client = redis.Redis.from_url(
        server.url, socket_timeout=0.5, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0)
    )
    client.set("k", b"v")
    server.pause()
    begun = time.monotonic()
    with pytest.raises(redis.exceptions.TimeoutError, match="[Tt]imeout"):
        client.get("k")
    assert 0.4 < time.monotonic() - begun < 3.0
    server.resume()
    assert client.get("k") == b"v"
    client.close()


def test_stop_leaves_no_process(make_redis_server: Callable[..., RedisServer]) -> None:
    server = make_redis_server()
    pid = server.pid
    assert pid is not None and pid_alive(pid)
    server.stop()
    assert not pid_alive(pid) and server.pid is None
    # A paused server stops too (SIGTERM is held until SIGCONT, which stop() sends).
    server.start()
    pid = server.pid
    assert pid is not None
    server.pause()
    server.stop()
    assert not pid_alive(pid)
    server.close()
    assert not server.dir.exists()


def test_start_failure_says_why(make_redis_server: Callable[..., RedisServer]) -> None:
    with pytest.raises(redis_servers.RedisServerError, match="exited .* log"):
        make_redis_server(extra=["--no-such-option", "1"])


def test_cluster_stop_leaves_no_process(make_redis_cluster: Callable[..., RedisCluster]) -> None:
    cluster = make_redis_cluster()
    pids = cluster.pids
    assert len(pids) == 3 and all(pid_alive(pid) for pid in pids)
    cluster.stop()
    assert not any(pid_alive(pid) for pid in pids)
    cluster.close()
    assert not cluster.dir.exists()


@pytest.mark.slow
def test_cluster_fails_over_a_killed_master(
    make_redis_cluster: Callable[..., RedisCluster],
) -> None:
    cluster = make_redis_cluster(replicas=1)
    assert len(cluster.nodes) == 6
    client = ClusterClient.from_url(cluster.url)
    client.mset_nonatomic({f"k{i}": i for i in range(200)})
    # The replicas have the writes before the master dies. (WAIT would not show it here: it
    # waits for the writes of the connection that sends it, and these were sent on others.)
    cluster.wait_replicated()
    killed = cluster.kill_master(0)
    assert not killed.alive()
    cluster.wait_for_failover()
    masters = cluster.current_masters()
    assert len(masters) == 3 and killed not in masters
    assert sum(master in cluster.replica_nodes for master in masters) == 1
    client.close()
    client = ClusterClient.from_url(cluster.urls[1])
    assert [client.get(f"k{i}") for i in range(200)] == [str(i).encode() for i in range(200)]
    client.close()


def test_session_fixtures_survive_a_test_that_breaks_them(
    redis_server: RedisServer, redis_cluster: RedisCluster, request: pytest.FixtureRequest
) -> None:
    # A test that kills the session server gets the next redis_url on a running one.
    redis_server.kill()
    url = request.getfixturevalue("redis_url")
    assert redis.Redis.from_url(url).ping()
    # This one leaves the session server paused and a master of the session cluster killed:
    # the next test's fixtures mend them.
    redis_server.pause()
    redis_cluster.kill_master(1)
    assert not redis_cluster.healthy()


def test_fixtures_after_a_test_that_broke_them(
    redis_url: str, redis_cluster_url: str, redis_cluster: RedisCluster
) -> None:
    assert redis.Redis.from_url(redis_url, socket_timeout=2).ping()
    assert redis_cluster.healthy()
    client = ClusterClient.from_url(redis_cluster_url)
    client.mset_nonatomic({f"k{i}": i for i in range(100)})
    assert client.dbsize(target_nodes=ClusterClient.PRIMARIES) == 100
    client.close()


def _spawn_starter(tmp_path: Path, body: str) -> subprocess.Popen[str]:
    script = tmp_path / "starter.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": HELPERS},
    )


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "SIGINT"])
def test_an_interrupted_run_leaves_no_server(tmp_path: Path, how: str) -> None:
    # A process that started a server and a cluster dies without running its finalizers
    # (SIGKILL, an unhandled SIGTERM) or is interrupted (SIGINT): no server outlives it.
    redis_servers_missing = redis_servers.redis_missing()
    if redis_servers_missing:
        pytest.skip(redis_servers_missing)
    starter = _spawn_starter(
        tmp_path,
        """
        import signal, time, redis_servers
        # A background job of a shell without job control starts with SIGINT ignored.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        server = redis_servers.RedisServer()
        cluster = redis_servers.RedisCluster()
        print(*([server.pid] + cluster.pids), flush=True)
        time.sleep(120)
        """,
    )
    try:
        assert starter.stdout is not None
        pids = [int(pid) for pid in starter.stdout.readline().split()]
        assert len(pids) == 4 and all(pid_alive(pid) for pid in pids)
        os.kill(starter.pid, getattr(signal, how))
        starter.wait(30)
        assert _gone(pids), [pid for pid in pids if pid_alive(pid)]
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()
