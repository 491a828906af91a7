"""NullCache: Cache's whole API, storing nothing (D-022)."""

from __future__ import annotations

import inspect
import pickle
import time
from pathlib import Path

import diskcache_oxide as dco
import pytest

pytestmark = pytest.mark.oxide


def _public(cls: type) -> set[str]:
    return {
        name
        for name in dir(cls)
        if not name.startswith("_") or name in {"__getitem__", "__setitem__", "__delitem__"}
    }


def test_has_the_whole_cache_api_with_the_same_parameters() -> None:
    cache_names = _public(dco.Cache)
    null = dco.NullCache()
    missing = {name for name in cache_names if not hasattr(null, name)}
    assert not missing
    for name in sorted(cache_names):
        theirs = getattr(dco.Cache, name)
        if not callable(theirs) or name in dco.DEFAULT_SETTINGS:
            continue
        ours = getattr(dco.NullCache, name)
        try:
            want = inspect.signature(theirs)
        except ValueError:
            continue
        got = inspect.signature(ours)
        assert list(got.parameters) == list(want.parameters), name
        for param in want.parameters.values():
            assert got.parameters[param.name].default == param.default, (name, param.name)


def test_reads_miss_with_the_cache_shapes(tmp_path: Path) -> None:
    null = dco.NullCache(tmp_path / "nothing")
    with dco.Cache(tmp_path / "real") as real:
        for kwargs in (
            {},
            {"expire_time": True},
            {"tag": True},
            {"expire_time": True, "tag": True},
        ):
            assert null.get("k", "d", **kwargs) == real.get("k", "d", **kwargs)
            assert null.pop("k", "d", **kwargs) == real.pop("k", "d", **kwargs)
            assert null.pull(**kwargs) == real.pull(**kwargs)
            assert null.peek(**kwargs) == real.peek(**kwargs)
        assert null.get_many(["a", "b"], default=0) == real.get_many(["a", "b"], default=0)
        assert null.pull_many(3) == real.pull_many(3) == []
    assert not (tmp_path / "nothing").exists()


def test_writes_store_nothing() -> None:
    cache = dco.NullCache()
    assert cache.set("k", 1) is False
    cache["k"] = 1
    assert cache.add("k", 1) is False
    assert cache.touch("k", 10) is False
    assert cache.delete("k") is False
    assert cache.set_many({"a": 1}) is None
    assert cache.delete_many(["a"]) == 0
    assert cache.get("k") is None and "k" not in cache
    with pytest.raises(KeyError):
        cache["k"]
    with pytest.raises(KeyError):
        del cache["k"]
    with pytest.raises(KeyError):
        cache.read("k")
    with pytest.raises(KeyError):
        cache.peekitem()
    assert cache.incr("n") == 1 and cache.incr("n", 5, default=10) == 15
    assert cache.decr("n") == -1
    with pytest.raises(KeyError):
        cache.incr("n", default=None)
    assert len(cache) == 0 and list(cache) == [] and list(reversed(cache)) == []
    assert list(cache.iterkeys()) == []
    assert cache.expire() == cache.evict("t") == cache.clear() == cache.cull() == 0
    assert cache.check() == [] and cache.stats() == (0, 0) and cache.volume() == 0


def test_queue_stores_nothing() -> None:
    cache = dco.NullCache()
    assert cache.push("job") is None
    assert cache.push_many(["a", "b"]) == [None, None]
    assert cache.pull() == (None, None)
    assert cache.pull(default="empty") == "empty"
    start = time.monotonic()
    assert cache.pull(timeout=0.2) == (None, None)
    assert time.monotonic() - start >= 0.19  # waits, so a worker loop does not spin
    assert cache.peek(prefix="q") == (None, None)


def test_transact_memoize_settings_lifetime() -> None:
    cache = dco.NullCache("/nowhere", timeout=3, size_limit=100)
    with cache.transact():
        cache.set("k", 1)
    calls: list[int] = []

    @cache.memoize()
    def double(x: int) -> int:
        calls.append(x)
        return 2 * x

    assert double(2) == 4 and double(2) == 4 and calls == [2, 2]
    assert double.__cache_key__(2)[-2:] == (2, None)
    assert cache.directory == "/nowhere" and cache.timeout == 3.0
    assert cache.size_limit == 100 and cache.eviction_policy == "least-recently-stored"
    assert cache.reset("cull_limit") == 10 and cache.reset("cull_limit", 0) == 0
    assert cache.reset("count") == 0
    with pytest.raises(AttributeError):
        cache.no_such_attribute  # noqa: B018
    copy = pickle.loads(pickle.dumps(cache))
    assert copy.directory == "/nowhere" and copy.size_limit == 100
    with cache as same:
        assert same is cache
