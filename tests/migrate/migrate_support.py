"""Shared helpers of the migration tests: source directories built by python-diskcache
itself, a fingerprint of every file under a directory, a deep comparison that tells types
apart (``1`` is not ``1.0``, a tuple is not a list), and for hostile sources: SQL run on a
source from another process, the real command line, and its peak memory."""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import importlib
import json
import math
import os
import pathlib
import subprocess
import sys
import sysconfig
import uuid
import zoneinfo
from typing import Any

import diskcache

#: The module (the package attribute ``migrate`` is the function of the same name).
migration = importlib.import_module("diskcache_oxide.migrate")

BIG = 100_000  # longer than python-diskcache's 32 KiB min_file_size: goes to a value file

#: Values of every kind the safe format stores, as python-diskcache writes them: native
#: (int, float, str, bytes inline), value files (long bytes, long text), pickles inline and
#: in files (everything else).
VALUES: dict[str, Any] = {
    "int": 42,
    "negative int": -(2**63),
    "big int": 2**100,
    "float": 1.25,
    "negative zero": -0.0,
    "inf": math.inf,
    "str": "plain",
    "unicode": "Iñtërnâtiônàlizætiøn ✓",
    "empty str": "",
    "bytes": b"\x00\x01\xff",
    "empty bytes": b"",
    "none": None,
    "true": True,
    "false": False,
    "list": [1, "two", 3.0, None],
    "tuple": (1, (2, 3), []),
    "dict": {"a": 1, 2: "b", (3, 4): [5]},
    "set": {1, 2, 3},
    "frozenset": frozenset({"x", "y"}),
    "nested": {"users": [{"id": 1, "tags": ("a", "b"), "scores": {1.5, 2.5}}]},
    "datetime naive": dt.datetime(2024, 1, 2, 3, 4, 5, 678901),
    "datetime utc": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc),
    "datetime offset": dt.datetime(2024, 1, 2, tzinfo=dt.timezone(dt.timedelta(hours=-5), "EST")),
    "datetime zoneinfo": dt.datetime(2024, 6, 1, 12, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")),
    "date": dt.date(1999, 12, 31),
    "time": dt.time(23, 59, 59, 1),
    "timedelta": dt.timedelta(days=-1, seconds=5, microseconds=7),
    "decimal": decimal.Decimal("3.14159265358979323846"),
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "path": pathlib.PurePosixPath("/srv/data/file.txt"),
    "posix path": pathlib.Path("/tmp/x"),
    "large bytes": os.urandom(BIG),
    "large text": "line one\nline two ✓\n" * (BIG // 10),
    "large pickle": list(range(BIG // 4)),
}

#: Keys of each form python-diskcache stores: native (str, int, float, bytes) and pickled.
KEYS: list[Any] = [
    "a str key",
    7,
    -3,
    2.5,
    b"bytes key",
    ("tuple", "key", 1),
    (1, (2, 3)),
    2**80,
    None,
    True,
    frozenset({1, 2}),
    dt.date(2020, 2, 2),
]


def same(left: Any, right: Any) -> bool:
    """Equal, and of the same types all the way down (NaN equals NaN)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, float):
        return (math.isnan(left) and math.isnan(right)) or (
            left == right and math.copysign(1, left) == math.copysign(1, right)
        )
    if isinstance(left, (list, tuple)):
        return len(left) == len(right) and all(same(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, dict):
        return list(left) == list(right) and all(same(left[k], right[k]) for k in left)
    if isinstance(left, dt.datetime):
        return left == right and left.tzinfo == right.tzinfo and left.fold == right.fold
    return bool(left == right)


def fingerprint(root: str) -> dict[str, tuple[int, str]]:
    """Every file under ``root``: its relative path -> (mode, sha256 of its bytes)."""
    found: dict[str, tuple[int, str]] = {}
    for here, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files) + dirs:
            path = os.path.join(here, name)
            info = os.lstat(path)
            digest = ""
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as reader:
                    digest = hashlib.sha256(reader.read()).hexdigest()
            found[os.path.relpath(path, root)] = (info.st_mode, digest)
    return found


def entries(cache: Any) -> dict[Any, tuple[Any, Any, Any]]:
    """key -> (value, expire_time, tag) of every live entry, read through the cache's API."""
    found = {}
    for key in list(cache.iterkeys()) if hasattr(cache, "iterkeys") else list(cache):
        value, expire_time, tag = cache.get(key, expire_time=True, tag=True)
        found[key] = (value, expire_time, tag)
    return found


def build_source(directory: str, **settings: Any) -> diskcache.Cache:
    """A python-diskcache Cache holding :data:`VALUES` (some with expiry and tags) and
    :data:`KEYS`, left open (the caller closes it)."""
    cache = diskcache.Cache(directory, **settings)
    for number, (name, value) in enumerate(VALUES.items()):
        expire = 3600 + number if number % 3 == 0 else None
        tag = None if number % 4 else f"tag-{number % 8}"
        cache.set(name, value, expire=expire, tag=tag)
    for number, key in enumerate(KEYS):
        cache.set(key, {"key number": number}, tag=number)
    return cache


#: The console script installed next to this interpreter; ``python -m diskcache_oxide`` is
#: the same command where the script is missing (a tree built without `maturin develop`).
SCRIPT = pathlib.Path(sysconfig.get_path("scripts")) / "diskcache-oxide"

_TAMPER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.executescript(sys.stdin.read())
db.close()
"""


def tamper(directory: str | os.PathLike[str], sql: str) -> None:
    """Run the SQL script ``sql`` on the source database in ``directory`` from another process,
    as someone with write access to the directory would: not through python-diskcache, and
    not through anything this test process has open."""
    db = os.path.join(os.fspath(directory), "cache.db")
    subprocess.run(
        [sys.executable, "-c", _TAMPER, db], input=sql, text=True, check=True, timeout=60
    )


def cli(
    *args: object,
    cwd: str | os.PathLike[str] = "/",
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run the real command line (``diskcache-oxide ARGS``) in a process of its own."""
    command = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "diskcache_oxide"]
    return subprocess.run(
        [*command, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )


_MEASURED = """
import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps([done.returncode, done.stdout, done.stderr, peak]))
"""


def cli_peak_rss(
    *args: object, timeout: float = 300
) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run the command line as :func:`cli` does, from a fresh parent process whose only child it
    is, and return its result with its peak resident memory in bytes (Linux's ``ru_maxrss``)."""
    command = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "diskcache_oxide"]
    measured = subprocess.run(
        [sys.executable, "-c", _MEASURED, *command, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
        cwd="/",
    )
    status, stdout, stderr, peak = json.loads(measured.stdout)
    return subprocess.CompletedProcess(command, status, stdout, stderr), int(peak)


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The message of a command that failed as it should: exit status 1 and a single
    ``Error: ...`` line on stderr, no traceback."""
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]
