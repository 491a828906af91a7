"""FanoutCache: the same results as python-diskcache 5.6.3's FanoutCache, keys spread by a
stable hash, lock timeouts swallowed, transactions over every shard, no queue calls, and a
directory that records its layout (D-021)."""

from __future__ import annotations

import os
import pickle
import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import diskcache
import diskcache_oxide as dco
import pytest
from diskcache_oxide.fanout import QUEUE_CALLS, shard_hash

pytestmark = pytest.mark.oxide


@pytest.fixture
def fanout(tmp_path: Path) -> Any:
    cache = dco.FanoutCache(tmp_path / "fanout", shards=4)
    yield cache
    cache.close()


# ----------------------------------------------------------------------------- differential

NATIVE_KEYS = ["a", "b", "key-1", "key-22", b"bytes", b"", 0, 1, -7, 2**40, 1.5, -0.25, "é"]
OTHER_KEYS = [("t", 1), (None,), ("nested", ("x", b"y"))]
VALUES = [0, 1, -3, 2.5, "text", b"blob", b"x" * 40_000, None]


def _step(cache: Any, rng: random.Random) -> Any:
    key = rng.choice(NATIVE_KEYS + OTHER_KEYS)
    op = rng.choice(
        ["set", "get", "add", "incr", "decr", "pop", "delete", "touch", "in", "item", "del"]
    )
    expire = rng.choice([None, None, 1e6, -1000])
    tag = rng.choice([None, "red", "blue"])
    if op == "set":
        return cache.set(key, rng.choice(VALUES), expire=expire, tag=tag)
    if op == "get":
        return cache.get(key, default="<none>", tag=True)
    if op == "add":
        return cache.add(key, rng.choice(VALUES), expire=expire, tag=tag)
    if op in ("incr", "decr"):
        current = cache.get(key, 0)
        if type(current) is not int:
            return "skipped"
        return getattr(cache, op)(key, rng.randint(1, 5), default=rng.choice([0, 10]))
    if op == "pop":
        return cache.pop(key, default="<none>", tag=True)
    if op == "delete":
        return cache.delete(key)
    if op == "touch":
        return cache.touch(key, expire=rng.choice([None, 1e6]))
    if op == "in":
        return key in cache
    if op == "item":
        try:
            return cache[key]
        except KeyError:
            return "KeyError"
    try:
        del cache[key]
        return "deleted"
    except KeyError:
        return "KeyError"


@pytest.mark.parametrize("seed", range(4))
def test_same_results_as_python_diskcache(tmp_path: Path, seed: int) -> None:
    ours = dco.FanoutCache(tmp_path / "ours", shards=4)
    ref = diskcache.FanoutCache(str(tmp_path / "ref"), shards=4)
    rng_ours, rng_ref = random.Random(seed), random.Random(seed)
    try:
        for step in range(300):
            got, want = _step(ours, rng_ours), _step(ref, rng_ref)
            assert got == want, f"step {step}"
            if step % 50 == 49:
                assert len(ours) == len(ref)
                assert sorted(map(repr, ours)) == sorted(map(repr, ref))
        # Native keys land in the shard python-diskcache picks.
        for number in range(4):
            ours_keys = {repr(k) for k in ours._shards[number] if type(k) is not tuple}
            ref_keys = {repr(k) for k in ref._shards[number] if type(k) is not tuple}
            assert ours_keys == ref_keys, f"shard {number}"
        assert ours.evict("red") == ref.evict("red")
        assert ours.expire() == ref.expire()
        assert len(ours) == len(ref)
        assert ours.clear() == ref.clear()
        assert len(ours) == 0 == len(ref)
    finally:
        ours.close()
        ref.close()


def test_whole_cache_calls_match_python_diskcache(tmp_path: Path) -> None:
    ours = dco.FanoutCache(tmp_path / "ours", shards=3, statistics=1, size_limit=3 * 2**20)
    ref = diskcache.FanoutCache(str(tmp_path / "ref"), shards=3, statistics=1, size_limit=3 * 2**20)
    try:
        for cache in (ours, ref):
            for number in range(50):
                cache.set(number, "v" * number, tag="even" if number % 2 == 0 else None)
            for number in range(60):
                cache.get(number)
            cache.set("old", 1, expire=-10)
        assert ours.stats() == ref.stats() == (50, 10)
        assert ours.stats(reset=True) == ref.stats(reset=True)
        assert ours.stats() == ref.stats() == (0, 0)
        assert ours.size_limit == ref.size_limit == 2**20
        assert ours.statistics == ref.statistics == 1
        assert ours.check() == [] and ref.check() == []
        assert ours.volume() > 0
        assert ours.expire() == ref.expire()
        assert ours.evict("even") == ref.evict("even") == 25
        assert ours.cull() == ref.cull() == 0
        assert sorted(ours) == sorted(ref)
        assert sorted(reversed(ours)) == sorted(ref)
        assert ours.reset("cull_limit") == ref.reset("cull_limit") == 10
        assert ours.reset("cull_limit", 5) == ref.reset("cull_limit", 5) == 5
        assert all(shard.cull_limit == 5 for shard in ours._shards)
    finally:
        ours.close()
        ref.close()


def test_memoize_across_shards(fanout: Any) -> None:
    calls: list[int] = []

    @fanout.memoize(typed=True)
    def square(x: int) -> int:
        calls.append(x)
        return x * x

    assert [square(n) for n in range(20)] == [n * n for n in range(20)]
    assert [square(n) for n in range(20)] == [n * n for n in range(20)]
    assert calls == list(range(20))
    assert fanout[square.__cache_key__(3)] == 9
    assert len({shard_hash(square.__cache_key__(n)) % 4 for n in range(20)}) > 1
    with pytest.raises(TypeError):
        fanout.memoize(square)


def test_read_and_large_values(fanout: Any) -> None:
    blob = os.urandom(100_000)
    assert fanout.set("big", blob)
    with fanout.read("big") as handle:
        assert handle.read() == blob
    with pytest.raises(KeyError):
        fanout.read("missing")


# ----------------------------------------------------------------------------- spreading


def test_keys_spread_over_every_shard(tmp_path: Path) -> None:
    with dco.FanoutCache(tmp_path / "c", shards=8) as cache:
        for number in range(800):
            cache[f"user:{number}"] = number
            cache[("page", number)] = number
        counts = [len(shard) for shard in cache._shards]
        assert sum(counts) == len(cache) == 1600
        assert min(counts) > 1600 / 8 / 3, counts
        assert sorted(os.listdir(cache.directory)) >= [f"{n:03d}" for n in range(8)]


def test_shard_hash_is_stable_across_processes() -> None:
    keys = [
        "a",
        b"b",
        3,
        2.5,
        2**80,
        True,
        None,
        ("t", 1, None),
        frozenset({"x", "y", "z", 1}),
        {"k": [1, 2]},
    ]
    here = [shard_hash(key) for key in keys]
    code = (
        f"from diskcache_oxide.fanout import shard_hash\nprint([shard_hash(k) for k in {keys!r}])"
    )
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == repr(here)


def test_equal_keys_hash_equal() -> None:
    assert shard_hash(frozenset({1, "a"})) == shard_hash(frozenset({"a", 1}))
    assert shard_hash({"a": 1, "b": 2}) == shard_hash({"b": 2, "a": 1})
    assert shard_hash(("a", 1)) != shard_hash(("a", True))
    assert shard_hash("abc") == diskcache.Disk(None).hash("abc")


# ----------------------------------------------------------------------------- timeouts


def _key_in_shard(cache: Any, number: int) -> str:
    return next(f"k{n}" for n in range(1000) if shard_hash(f"k{n}") % cache.shards == number)


def test_a_locked_shard_times_out_quietly(tmp_path: Path) -> None:
    cache = dco.FanoutCache(tmp_path / "c", shards=4, timeout=0.01)
    key = _key_in_shard(cache, 2)
    other = _key_in_shard(cache, 1)
    cache[key] = 5
    holder = dco.Cache(os.path.join(cache.directory, "002"), timeout=0.01)
    try:
        with holder.transact():
            holder.set("held", 1)
            assert cache.set(key, 6) is False
            assert cache.add("new-" + key, 1) is False or shard_hash("new-" + key) % 4 != 2
            assert cache.incr(key) is None
            assert cache.decr(key) is None
            assert cache.pop(key, default="dflt") == "dflt"
            assert cache.delete(key) is False
            assert cache.touch(key, 100) is False
            assert cache.get(key) == 5  # reads do not wait for a writer
            assert cache.set(other, 1) is True  # other shards are free
            with pytest.raises(dco.Timeout):
                cache._shards[2].set(key, 6)  # the shard itself raises
        assert cache.set(key, 6, retry=True) is True
        assert cache[key] == 6 and holder["held"] == 1
    finally:
        holder.close()
        cache.close()


def test_transact_locks_every_shard(tmp_path: Path) -> None:
    cache = dco.FanoutCache(tmp_path / "c", shards=4)
    contender = dco.FanoutCache(tmp_path / "c", shards=4, timeout=0.01)
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with cache.transact():
            cache.set("x", 1)
            inside.set()
            leave.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert inside.wait(30)
        for number in range(4):
            assert contender.set(_key_in_shard(contender, number), 1) is False
    finally:
        leave.set()
        thread.join(30)
    for number in range(4):
        assert contender.set(_key_in_shard(contender, number), 1) is True
    assert contender["x"] == 1
    contender.close()
    cache.close()


def test_transact_rolls_back_every_shard(fanout: Any) -> None:
    keys = [_key_in_shard(fanout, number) for number in range(4)]
    with pytest.raises(RuntimeError):
        with fanout.transact():
            for key in keys:
                fanout[key] = 1
            raise RuntimeError("roll back")
    assert len(fanout) == 0
    with fanout.transact():
        with fanout.transact():  # nests
            for key in keys:
                fanout.incr(key)
    assert [fanout[key] for key in keys] == [1, 1, 1, 1]
    with pytest.raises(ValueError):
        with fanout.transact(retry=False):
            pass


# ----------------------------------------------------------------------------- no queue


@pytest.mark.parametrize("name", sorted(QUEUE_CALLS))
def test_no_queue_calls(fanout: Any, name: str) -> None:
    with pytest.raises(AttributeError, match="Open a plain Cache in a directory of its own"):
        getattr(fanout, name)
    assert not hasattr(fanout, name)
    with pytest.raises(AttributeError):
        fanout.no_such_attribute  # noqa: B018


# ----------------------------------------------------------------------------- sub-stores, lifetime


def test_named_sub_cache(fanout: Any) -> None:
    sub = fanout.cache("pages/en")
    assert isinstance(sub, dco.Cache)
    assert sub.directory == os.path.join(fanout.directory, "cache", "pages", "en")
    assert fanout.cache("pages/en") is sub
    sub["k"] = 1
    assert "k" not in fanout
    deque, index = fanout.deque("d"), fanout.index("i")
    assert isinstance(deque, dco.Deque) and isinstance(index, dco.Index)
    assert deque.directory == os.path.join(fanout.directory, "deque", "d")
    assert index.directory == os.path.join(fanout.directory, "index", "i")


def test_pickle_reopens_without_resetting_settings(tmp_path: Path) -> None:
    cache = dco.FanoutCache(tmp_path / "c", shards=3, size_limit=3000, cull_limit=0)
    cache["a"] = 1
    copy = pickle.loads(pickle.dumps(cache))
    assert isinstance(copy, dco.FanoutCache)
    assert copy.directory == cache.directory and copy.shards == 3
    assert copy.timeout == cache.timeout
    assert copy["a"] == 1
    assert copy.size_limit == 1000 and copy.cull_limit == 0
    copy.close()
    cache.close()


def test_default_directory_and_context_manager() -> None:
    with dco.FanoutCache() as cache:
        cache["a"] = 1
        assert os.path.isdir(os.path.join(cache.directory, "007"))
        assert cache.timeout == 0.010
    with pytest.raises(ValueError):
        dco.FanoutCache(shards=0)
    with pytest.raises(ValueError):
        dco.FanoutCache(disk=object())


# ----------------------------------------------------------------------------- layout


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes() if path.is_file() else b"<dir>"
        for path in sorted(root.rglob("*"))
    }


def test_fanout_on_a_cache_directory_is_refused(tmp_path: Path) -> None:
    with dco.Cache(tmp_path / "plain") as plain:
        plain["a"] = 1
    before = _snapshot(tmp_path / "plain")
    with pytest.raises(dco.LayoutMismatchError):
        dco.FanoutCache(tmp_path / "plain", shards=2)
    assert _snapshot(tmp_path / "plain") == before


def test_cache_on_a_fanout_directory_is_refused(tmp_path: Path) -> None:
    with dco.FanoutCache(tmp_path / "f", shards=2) as cache:
        cache["a"] = 1
    assert (tmp_path / "f" / "fanout.json").exists()
    before = _snapshot(tmp_path / "f")
    with pytest.raises(dco.LayoutMismatchError):
        dco.Cache(tmp_path / "f")
    assert _snapshot(tmp_path / "f") == before


def test_another_shard_count_is_refused(tmp_path: Path) -> None:
    with dco.FanoutCache(tmp_path / "f", shards=4) as cache:
        cache["a"] = 1
    before = _snapshot(tmp_path / "f")
    with pytest.raises(dco.LayoutMismatchError):
        dco.FanoutCache(tmp_path / "f", shards=8)
    assert _snapshot(tmp_path / "f") == before
    with dco.FanoutCache(tmp_path / "f", shards=4) as cache:
        assert cache["a"] == 1


def test_read_only_fanout_writes_nothing(tmp_path: Path) -> None:
    with dco.FanoutCache(tmp_path / "f", shards=2) as cache:
        cache["a"] = 1
    before = _snapshot(tmp_path / "f")
    with dco.FanoutCache(tmp_path / "f", shards=2, read_only=True) as cache:
        assert cache["a"] == 1 and cache.read_only
        with pytest.raises(dco.ReadOnlyError):
            cache["b"] = 2
    with pytest.raises(dco.LayoutMismatchError):
        dco.FanoutCache(tmp_path / "f", shards=3, read_only=True)
    assert _snapshot(tmp_path / "f") == before


# ----------------------------------------------------------------------------- many keys


def test_bulk_calls_across_shards(fanout: Any) -> None:
    keys = [f"k{i}" for i in range(40)] + [7, 2.5, b"raw", ("t", 1)]
    assert fanout.set_many({k: repr(k) for k in keys}, tag="bulk") is True
    assert {shard_hash(k) % fanout.shards for k in keys} == set(range(fanout.shards))
    assert fanout.get_many(keys + ["absent"], default="-") == [repr(k) for k in keys] + ["-"]
    assert all(fanout.get(k, tag=True) == (repr(k), "bulk") for k in keys)
    fanout.set_many([("dup", 1), ("dup", 2)])  # pairs, the last one wins as in a dict
    assert fanout["dup"] == 2
    assert fanout.delete_many(keys[:10] + ["absent"]) == 10
    assert fanout.get_many(keys[:12]) == [None] * 10 + [repr(k) for k in keys[10:12]]
    assert len(fanout) == len(keys) - 10 + 1


def test_bulk_calls_with_a_locked_shard(tmp_path: Path) -> None:
    cache = dco.FanoutCache(tmp_path / "c", shards=4, timeout=0.01)
    locked, free = _key_in_shard(cache, 2), _key_in_shard(cache, 1)
    cache.set_many({locked: 1, free: 1})
    holder = dco.Cache(os.path.join(cache.directory, "002"), timeout=0.01)
    try:
        with holder.transact():
            holder.set("held", 1)
            assert cache.set_many({locked: 2, free: 2}) is False  # the free shard's part is stored
            assert cache.get_many([locked, free]) == [1, 2]  # reads do not wait for a writer
            assert cache.delete_many([locked, free]) == 1
        assert cache.get_many([locked, free]) == [1, None]
    finally:
        holder.close()
        cache.close()
