"""Reads racing deletes, overwrites and culls of large (file-backed) values, across processes.

python-diskcache treats a value file that vanished between reading its row and opening the
file as a miss (it catches the IOError); so must we, on every read path: a reader sees a whole
value or the default (``read`` raises KeyError), never FileNotFoundError (D-035). Runs against
python-diskcache too with DCO_TEST_REFERENCE=1.
"""

from __future__ import annotations

import importlib
import multiprocessing
import random
import time
from typing import Any

import pytest
import support

pytestmark = pytest.mark.slow

SPAWN = multiprocessing.get_context("spawn")
KEYS = [f"k{i}" for i in range(6)]
SECONDS = 4.0


def value_for(rng: random.Random) -> bytes:
    """A large value that says whether it is whole: one byte repeated, length a multiple of 1000."""
    return bytes([rng.randrange(256)]) * (1000 * rng.randrange(40, 140))


def check_value(value: Any) -> None:
    assert isinstance(value, bytes), type(value)
    assert len(value) % 1000 == 0 and len(value) >= 40_000, len(value)
    assert value == value[:1] * len(value), "a torn value"


def writer(impl: str, directory: str, seed: int, barrier: Any) -> int:
    cache = importlib.import_module(impl).Cache(directory)
    rng = random.Random(seed)
    barrier.wait()
    deadline = time.monotonic() + SECONDS
    done = 0
    while time.monotonic() < deadline:
        key = rng.choice(KEYS)
        r = rng.random()
        if r < 0.6:
            cache.set(key, value_for(rng), retry=True)  # overwrite; culls past size_limit
        elif r < 0.9:
            cache.delete(key, retry=True)
        elif r < 0.97:
            cache.cull(retry=True)
        else:
            cache.clear(retry=True)
        done += 1
    cache.close()
    return done


def reader(impl: str, directory: str, seed: int, barrier: Any) -> tuple[dict[str, int], list[str]]:
    module = importlib.import_module(impl)
    cache = module.Cache(directory)
    rng = random.Random(seed)
    seen = {"hit": 0, "miss": 0}
    problems: list[str] = []

    def whole(got: Any) -> None:
        if got is None:
            seen["miss"] += 1
            return
        if hasattr(got, "read"):
            with got:
                got = got.read()
        check_value(got)
        seen["hit"] += 1

    def read_key(key: str) -> None:
        try:
            handle = cache.read(key)
        except KeyError:
            seen["miss"] += 1
            return
        whole(handle)

    ops = {
        "get(read=True)": lambda k: whole(cache.get(k, read=True)),
        "get": lambda k: whole(cache.get(k)),
        "read": read_key,
        "iterate get(read=True)": lambda k: [whole(cache.get(j, read=True)) for j in cache],
        "iterate get": lambda k: [whole(cache.get(j)) for j in cache.iterkeys()],
    }
    if hasattr(cache, "get_many"):
        ops["get_many"] = lambda k: [whole(v) for v in cache.get_many(KEYS)]
    barrier.wait()
    deadline = time.monotonic() + SECONDS
    while time.monotonic() < deadline and not problems:
        name = rng.choice(sorted(ops))
        try:
            ops[name](rng.choice(KEYS))
        except module.Timeout:
            continue  # the readers do not retry; a timeout is not what this test is about
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            problems.append(f"{name}: {type(exc).__name__}: {exc}")
    cache.close()
    return seen, problems


def test_readers_see_a_value_or_the_default_never_file_not_found(tmp_path: Any) -> None:
    directory = str(tmp_path / "c")
    seeder = support.impl().Cache(directory, size_limit=600_000, cull_limit=2)
    rng = random.Random(0)
    for key in KEYS:
        seeder.set(key, value_for(rng))
    seeder.close()
    writers, readers = 2, 3
    manager = SPAWN.Manager()
    try:
        barrier = manager.Barrier(writers + readers)
        with SPAWN.Pool(writers + readers) as pool:
            w = [
                pool.apply_async(writer, (support.IMPL_NAME, directory, i, barrier))
                for i in range(writers)
            ]
            r = [
                pool.apply_async(reader, (support.IMPL_NAME, directory, 100 + i, barrier))
                for i in range(readers)
            ]
            written = [p.get(timeout=SECONDS + 120) for p in w]
            read = [p.get(timeout=SECONDS + 120) for p in r]
    finally:
        manager.shutdown()
    assert all(n > 0 for n in written), written
    problems = [p for _, found in read for p in found]
    assert problems == [], problems[:5]
    hits = sum(seen["hit"] for seen, _ in read)
    misses = sum(seen["miss"] for seen, _ in read)
    assert hits > 0 and misses > 0, (hits, misses)
    cache = support.impl().Cache(directory)
    assert [str(w.message) for w in cache.check()] == []
    cache.close()
