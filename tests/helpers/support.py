"""Helpers shared by the test modules (and importable by spawned worker processes).

Which implementation the suite runs against is chosen here, once, so spawned
children pick the same one: ``diskcache_oxide`` normally, or python-diskcache
5.6.3 itself when ``DCO_TEST_REFERENCE=1`` (useful to check that a test states
the reference behaviour; tests marked ``oxide`` are skipped then).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import os
import sys
import time
from typing import Any

# This folder (tests/helpers): pytest puts it on sys.path (pyproject.toml's `pythonpath`), and
# spawned children inherit that path, so they import these modules by name.
HELPERS = os.path.dirname(os.path.abspath(__file__))

REFERENCE_MODE = os.environ.get("DCO_TEST_REFERENCE", "") not in ("", "0")
IMPL_NAME = "diskcache" if REFERENCE_MODE else "diskcache_oxide"


def impl() -> Any:
    """The module under test."""
    return importlib.import_module(IMPL_NAME)


def reference() -> Any:
    """python-diskcache 5.6.3, the behavioural reference."""
    return importlib.import_module("diskcache")


# --------------------------------------------------------------------------------------
# Type-strict deep equality: 1 != 1.0 != True, tuple != list, -0.0 != 0.0, nan == nan,
# dict and set contents compared with the same strictness, dict order compared too.
# --------------------------------------------------------------------------------------


def strict_equal(a: Any, b: Any) -> bool:
    return _explain(a, b, "value") is None


def explain_difference(a: Any, b: Any) -> str | None:
    """None when ``a`` and ``b`` are strictly equal, else a sentence saying where they differ."""
    return _explain(a, b, "value")


def _explain(a: Any, b: Any, where: str) -> str | None:
    if type(a) is not type(b):
        return f"{where}: type {type(a).__name__} != {type(b).__name__} ({a!r} vs {b!r})"
    if isinstance(a, float):
        if math.isnan(a) and math.isnan(b):
            return None
        if a != b or math.copysign(1.0, a) != math.copysign(1.0, b):
            return f"{where}: {a!r} != {b!r}"
        return None
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{where}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            r = _explain(x, y, f"{where}[{i}]")
            if r:
                return r
        return None
    if isinstance(a, dict):
        ka, kb = list(a), list(b)
        if len(ka) != len(kb):
            return f"{where}: dict sizes {len(ka)} != {len(kb)}"
        for i, (x, y) in enumerate(zip(ka, kb, strict=False)):
            r = _explain(x, y, f"{where}.keys()[{i}]")
            if r:
                return r
            r = _explain(a[x], b[y], f"{where}[{x!r}]")
            if r:
                return r
        return None
    if isinstance(a, (set, frozenset)):
        if len(a) != len(b):
            return f"{where}: set sizes {len(a)} != {len(b)}"
        # elements are hashable; compare by a type-tagged canonical form
        ca = sorted(map(_canon, a), key=repr)
        cb = sorted(map(_canon, b), key=repr)
        if ca != cb:
            return f"{where}: {a!r} != {b!r}"
        return None
    try:
        equal = a == b
    except Exception:  # pragma: no cover - exotic types
        equal = False
    if not equal:
        return f"{where}: {a!r} != {b!r}"
    if hasattr(a, "tzinfo") and getattr(a, "tzinfo", None) != getattr(b, "tzinfo", None):
        return f"{where}: tzinfo {a.tzinfo!r} != {b.tzinfo!r}"
    if hasattr(a, "fold") and getattr(a, "fold", None) != getattr(b, "fold", None):
        return f"{where}: fold {a.fold!r} != {b.fold!r}"
    return None


def _canon(x: Any) -> Any:
    """A type-tagged, hashable, repr-sortable form of a hashable value."""
    if isinstance(x, float):
        if math.isnan(x):
            return ("float", "nan")
        return ("float", x.hex())
    if isinstance(x, tuple):
        return ("tuple", tuple(_canon(v) for v in x))
    if isinstance(x, frozenset):
        return ("frozenset", tuple(sorted((_canon(v) for v in x), key=repr)))
    return (type(x).__name__, repr(x))


def key_identity(key: Any) -> Any:
    """The identity of a cache key as both implementations see it.

    Native numbers compare numerically (``1`` and ``1.0`` are one key) but ``True`` is
    not ``1``; str and bytes are themselves; anything else (tuples, None, bools, ints
    beyond 64 bits, frozensets) is one key only with an identically typed value.
    """
    if type(key) is int and -(2**63) <= key < 2**63:
        return ("num", key)
    if type(key) is float:
        return ("num", key) if key != 0.0 else ("num", 0)
    if type(key) is str:
        return ("str", key)
    if type(key) is bytes:
        return ("bytes", key)
    return ("other", _canon(key))


def is_native_key(key: Any) -> bool:
    return (
        (type(key) is int and -(2**63) <= key < 2**63)
        or type(key) is float
        or type(key) in (str, bytes)
    )


@dataclasses.dataclass(frozen=True)
class Thing:
    """A plain class: the safe format cannot store it, so pickle=True handles pickle it."""

    name: str
    size: int = 0


def value_files(directory: str) -> list[str]:
    """Paths of the value files (``*.val``, as both implementations name them) in a cache."""
    return sorted(
        os.path.join(d, f)
        for d, _, names in os.walk(directory)
        for f in names
        if f.endswith(".val")
    )


def fill_disk(mount: str) -> str:
    """Write ballast into ``mount`` until its file system has not one block left (called
    again, it takes back whatever was freed since). Returns the ballast file's path."""
    ballast = os.path.join(mount, "ballast")
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    return ballast


_INTEGRITY = """
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True, timeout=60)
print(", ".join(row[0] for row in db.execute("PRAGMA integrity_check")))
"""


def integrity(directory: str) -> str:
    """``PRAGMA integrity_check`` of a cache's database, as one string (``'ok'`` when sound).

    Asked of Python's own sqlite3 in a child process: a second copy of SQLite that opens and
    closes ``cache.db`` in a process with a cache handle open drops that handle's locks
    (docs/reliability.md, "Found")."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", _INTEGRITY, os.path.join(directory, "cache.db")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else f"integrity_check failed: {done.stderr}"


# --------------------------------------------------------------------------------------
# Worker functions for multi-process tests. They take the implementation's module name
# so a spawned child uses the same implementation as the parent.
# --------------------------------------------------------------------------------------


def _module(name: str) -> Any:
    return importlib.import_module(name)


def worker_incr(impl_name: str, directory: str, key: str, count: int, barrier: Any) -> int:
    mod = _module(impl_name)
    cache = mod.Cache(directory, timeout=60)
    barrier.wait(timeout=60)
    last = 0
    for _ in range(count):
        last = cache.incr(key, retry=True)
    cache.close()
    return last


def payload(generation: int, size: int) -> bytes:
    """A self-describing value: 8-byte generation, 8-byte size, then ``size`` fill bytes."""
    fill = bytes([generation % 251 + 1])
    return generation.to_bytes(8, "little") + size.to_bytes(8, "little") + fill * size


def check_payload(value: Any) -> str | None:
    """None if ``value`` is an intact payload, else what is wrong with it."""
    if value is None:
        return None
    if type(value) is not bytes:
        return f"not bytes: {type(value).__name__}"
    if len(value) < 16:
        return f"too short: {len(value)} bytes"
    generation = int.from_bytes(value[:8], "little")
    size = int.from_bytes(value[8:16], "little")
    body = value[16:]
    if len(body) != size:
        return f"generation {generation}: body {len(body)} bytes, header says {size}"
    fill = generation % 251 + 1
    if body.count(fill) != size:
        return f"generation {generation}: body holds bytes of another generation"
    return None


SIZES = (10, 3000, 40_000, 300_000)


def worker_writer(
    impl_name: str, directory: str, keys: list[str], rounds: int, seed: int, barrier: Any
) -> int:
    mod = _module(impl_name)
    cache = mod.Cache(directory, timeout=60)
    barrier.wait(timeout=60)
    generation = seed
    for i in range(rounds):
        key = keys[i % len(keys)]
        size = SIZES[(i + seed) % len(SIZES)]
        generation += 7
        cache.set(key, payload(generation, size), retry=True)
    cache.close()
    return rounds


def worker_reader(
    impl_name: str, directory: str, keys: list[str], rounds: int, barrier: Any
) -> tuple[int, int, list[str]]:
    """Returns (values seen, misses, problems)."""
    mod = _module(impl_name)
    cache = mod.Cache(directory, timeout=60)
    barrier.wait(timeout=60)
    seen = misses = 0
    problems: list[str] = []
    for i in range(rounds):
        key = keys[i % len(keys)]
        value = cache.get(key, retry=True)
        if value is None:
            misses += 1
            continue
        seen += 1
        problem = check_payload(value)
        if problem and len(problems) < 5:
            problems.append(problem)
    cache.close()
    return seen, misses, problems


def worker_open_at_once(impl_name: str, directory: str, index: int, barrier: Any) -> Any:
    """Open a fresh directory at the same instant as the others, write and read one item."""
    try:
        barrier.wait(timeout=120)
        mod = _module(impl_name)
        cache = mod.Cache(directory, timeout=60)
        cache.set(f"opener-{index}", index, retry=True)
        value = cache.get(f"opener-{index}")
        cache.close()
        return ("ok", value)
    except BaseException as exc:  # reported to the parent, which fails the test
        return ("error", f"{type(exc).__name__}: {exc}")


def worker_random_ops(
    impl_name: str, directory: str, index: int, steps: int, seed: int, barrier: Any
) -> tuple[dict[str, Any], int]:
    """Random operations on this worker's own keys (plus one shared counter); returns the
    worker's model of its keys, which the parent compares with the cache afterwards, and
    how many times it incremented the shared counter."""
    import random

    mod = _module(impl_name)
    cache = mod.Cache(directory, timeout=60)
    rng = random.Random(seed)
    model: dict[str, Any] = {}
    increments = 0
    barrier.wait(timeout=60)
    for step in range(steps):
        key = f"p{index}-{rng.randrange(12)}"
        op = rng.random()
        if op < 0.35:
            kind = rng.randrange(4)
            value: Any = (
                step
                if kind == 0
                else {"step": step, "by": index}
                if kind == 1
                else f"s{step}" * rng.randrange(1, 5)
                if kind == 2
                else bytes([step % 256]) * rng.choice((10, 40_000))
            )
            cache.set(key, value, retry=True)
            model[key] = value
        elif op < 0.5:
            assert cache.delete(key, retry=True) is (key in model), (key, "delete")
            model.pop(key, None)
        elif op < 0.6:
            added = cache.add(key, step, retry=True)
            assert added is (key not in model), (key, "add")
            if added:
                model[key] = step
        elif op < 0.7:
            got = cache.pop(key, "<missing>", retry=True)
            assert got == model.pop(key, "<missing>"), (key, "pop")
        elif op < 0.8:
            cache.incr("shared-total", retry=True)
            increments += 1
        else:
            got = cache.get(key, "<missing>", retry=True)
            assert got == model.get(key, "<missing>"), (key, "get", got)
    cache.close()
    return model, increments


def worker_use_pickled_handle(cache: Any, count: int) -> Any:
    """Receives a cache handle pickled by the parent (as multiprocessing does)."""
    for _ in range(count):
        cache.incr("via-handle", retry=True)
    return cache.get("from-parent")


def worker_hold_transaction(
    impl_name: str, directory: str, hold_event: Any, release_event: Any
) -> str:
    """Hold a write transaction until told to release it."""
    mod = _module(impl_name)
    cache = mod.Cache(directory, timeout=60)
    with cache.transact():
        cache.set("held", "by the holder")
        hold_event.set()
        release_event.wait(timeout=60)
    cache.close()
    return "released"


if __name__ == "__main__":  # pragma: no cover
    sys.exit("support.py is a helper module for the tests")


def worker_ping_pong_writer(impl_name: str, directory: str, rounds: int, conn: Any) -> None:
    """Write ``n = i`` and tell the other process, for ``rounds`` rounds (waiting for an ack)."""
    cache = _module(impl_name).Cache(directory)
    for i in range(rounds):
        cache.set("n", i)
        conn.send(i)
        conn.recv()
    cache.close()


def worker_model_writer(impl_name: str, directory: str, seed: int, rounds: int, conn: Any) -> None:
    """Make ``rounds`` random writes of every kind (set, add, delete, incr, pop, touch,
    expiry, push and pull, many rows in one transaction, cull, clear) and after each send the
    contents the other process must now read, waiting for its ack (D-065: each write's note
    must reach the reader's memo)."""
    import random

    rng = random.Random(seed)
    cache = _module(impl_name).Cache(directory)
    keys = [f"k{i}" for i in range(12)]
    model: dict[str, Any] = {}
    for round_ in range(rounds):
        key = rng.choice(keys)
        action = rng.randrange(11)
        if action == 0:
            cache.set(key, round_)
            model[key] = round_
        elif action == 1:
            if cache.add(key, f"added {round_}"):
                model[key] = f"added {round_}"
        elif action == 2:
            cache.delete(key)
            model.pop(key, None)
        elif action == 3:
            if isinstance(model.get(key, 0), int):
                model[key] = cache.incr(key, 2)
        elif action == 4:
            cache.pop(key)
            model.pop(key, None)
        elif action == 5 and key in model:
            cache.touch(key, 0.001)  # gone a moment later
            time.sleep(0.005)
            model.pop(key)
        elif action == 6:
            cache.set(key, b"x" * rng.randrange(100), tag="t")
            model[key] = cache.get(key)
        elif action == 7:
            with cache.transact():  # more rows than one note names
                for i in range(60):
                    cache.set(f"bulk{i}", round_)
                cache.set(key, [round_])
            model[key] = [round_]
        elif action == 8:
            cache.push(round_, prefix="q")
            cache.pull(prefix="q")
        elif action == 9:
            cache.evict("t")
            model = {k: v for k, v in model.items() if not isinstance(v, bytes)}
        else:
            if rng.random() < 0.2:
                cache.clear()
                model.clear()
            else:
                cache.set(key, {"round": round_})
                model[key] = {"round": round_}
        conn.send({k: model.get(k) for k in keys})
        conn.recv()
    conn.send(None)
    cache.close()


def wait_child(pid: int, timeout: float = 60.0) -> int:
    """The exit code of forked child ``pid``; a child still running after ``timeout`` is
    killed and the test fails, so a hang in a child never hangs the suite."""
    import os
    import signal
    import time

    deadline = time.monotonic() + timeout
    while not (done := os.waitpid(pid, os.WNOHANG))[0]:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError("the forked child hung")
        time.sleep(0.005)
    return os.waitstatus_to_exitcode(done[1])
