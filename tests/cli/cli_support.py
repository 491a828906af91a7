"""A cache directory with something in every place the CLI and the dashboard look: entries of
several key types, two queues on the keys, a job queue with a job in each state (ready,
scheduled, leased, dead) and a live claim. tests/dashboard uses it too."""

from __future__ import annotations

import hashlib
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diskcache_oxide import Cache, Claims, JobQueue

#: The console script installed next to this interpreter (`maturin develop` puts it there).
SCRIPT = Path(sysconfig.get_path("scripts")) / "diskcache-oxide"


#: The ``run`` fixture: ``run(*args, input=None)`` gives click's Result of the command.
Run = Callable[..., Any]


@dataclass
class Filled:
    directory: Path
    ready: int
    scheduled: int
    leased: int
    dead: int
    other: int  # a ready job in another job queue
    claim_key: str
    claim_token: str


def fill(directory: Path) -> Filled:
    """Fill ``directory`` (closing the cache afterwards: every lease and claim stays in it)."""
    cache = Cache(str(directory), eviction_policy="none")
    try:
        cache["greeting"] = "hello"
        cache[7] = {"seven": 7}
        cache[("user", 1)] = ["Ada", 1815]
        cache[b"raw"] = b"\x00\x01"
        cache.set("tagged", 1.5, tag="t")
        for n in range(3):
            cache.push({"to": f"user{n}@example.org"}, prefix="emails")
        cache.push("first int item")
        cache.push("second int item")
        jobs = JobQueue(cache, "mail", lease=600, max_attempts=1)
        # Ids in order: the dead job first, since it is taken before the others are put.
        jobs.put({"send": "doomed"})
        doomed = jobs.take()
        assert doomed is not None
        jobs.fail(doomed, RuntimeError("smtp said no"))
        jobs.put({"send": "taken"})
        taken = jobs.take()
        assert taken is not None
        ready = jobs.put({"send": "waiting", "body": "x" * 200})
        scheduled = jobs.put({"send": "later"}, delay=3600)
        other = JobQueue(cache, "reports").put("monthly")
        claim = Claims(cache).acquire("report:2025", lease=600)
        assert claim is not None
        return Filled(
            directory=directory,
            ready=ready,
            scheduled=scheduled,
            leased=taken.id,
            dead=doomed.id,
            other=other,
            claim_key="report:2025",
            claim_token=claim.token,
        )
    finally:
        cache.close()


def digest(directory: Path) -> dict[str, str]:
    """Every file under ``directory`` with the hash of its bytes (to show nothing changed)."""
    found = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            found[str(path.relative_to(directory))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def in_terminal(*args: object, columns: int = 250, timeout: float = 60) -> tuple[int, bytes]:
    """Run the console script with ``args`` on a pseudo-terminal of ``columns`` columns, as
    a user at a terminal runs it: its exit status and every byte it sent to the terminal
    (stdout and stderr both; the terminal turns each newline into CR LF)."""
    import fcntl
    import os
    import select
    import struct
    import subprocess
    import termios
    import time

    if not SCRIPT.exists():
        import pytest

        pytest.skip(f"no console script at {SCRIPT}: run `maturin develop` (make build)")
    master, slave = os.openpty()
    # A wide terminal, so that rich folds no line of the tables in the middle of the text
    # the tests look for.
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env["TERM"] = "xterm-256color"
    proc = subprocess.Popen(
        [str(SCRIPT), *map(str, args)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        cwd="/",
        close_fds=True,
    )
    os.close(slave)
    received = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the process exited and closed its end
                break
            if not chunk:
                break
            received += chunk
        status = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return status, bytes(received)


@dataclass
class FilledRedis:
    """A Redis namespace filled as :func:`fill` fills a directory (its URL names it), and the
    ids of its jobs of each state."""

    url: str
    claim_key: str
    claim_token: str
    ready: int = 0
    scheduled: int = 0
    leased: int = 0
    dead: int = 0


def namespace_url(server_url: str, namespace: str = "ops", cluster: bool = False) -> str:
    """``server_url`` (a fixture's, without a query) with the namespace, and ?cluster=1."""
    query = f"cluster=1&namespace={namespace}" if cluster else f"namespace={namespace}"
    return f"{server_url}?{query}"


def fill_redis(url: str) -> FilledRedis:
    """Fill the namespace of ``url`` with what :func:`fill` puts in a directory: five entries
    of several key types (one tagged), the emails queue and the int keys' queue, a live claim
    and a job in each state."""
    import diskcache_oxide

    cache = diskcache_oxide.open(url)
    try:
        cache["greeting"] = "hello"
        cache[7] = {"seven": 7}
        cache[("user", 1)] = ["Ada", 1815]
        cache[b"raw"] = b"\x00\x01"
        cache.set("tagged", 1.5, tag="t")
        for n in range(3):
            cache.push({"to": f"user{n}@example.org"}, prefix="emails")
        cache.push("first int item")
        cache.push("second int item")
        claim = Claims(cache).acquire("report:2025", lease=600)
        assert claim is not None
        filled = FilledRedis(url, "report:2025", claim.token)
        jobs = JobQueue(cache, "mail", lease=600, max_attempts=1)
        jobs.put({"send": "doomed"})
        doomed = jobs.take()
        assert doomed is not None
        jobs.fail(doomed, RuntimeError("smtp said no"))
        jobs.put({"send": "taken"})
        taken = jobs.take()
        assert taken is not None
        filled.ready = jobs.put({"send": "waiting", "body": "x" * 200})
        filled.scheduled = jobs.put({"send": "later"}, delay=3600)
        JobQueue(cache, "reports").put("monthly")
        filled.leased, filled.dead = taken.id, doomed.id
        return filled
    finally:
        cache.close()


def redis_snapshot(url: str) -> dict[bytes, tuple[bytes, int]]:
    """Every key of the namespace of ``url`` with its DUMP and whether it has a TTL: what a
    read that changes nothing leaves as it was (a single server's URL)."""
    import diskcache_oxide

    cache = diskcache_oxide.open(url)
    try:
        client = cache.client
        found = {}
        for key in client.scan_iter(match=b"dco:{" + cache.namespace.encode() + b"}:*"):
            found[key] = (client.dump(key), int(client.pttl(key) > 0))
        return found
    finally:
        cache.close()
