"""migrate() recognises a python-diskcache FanoutCache (shards 000/, 001/, ...) and makes a
diskcache_oxide FanoutCache of the same shard count, with each key in the shard our
FanoutCache looks in, the whole cache's size limit, and its named caches, deques and
indexes."""

from __future__ import annotations

from typing import Any

import diskcache
import diskcache_oxide as dco
import pytest
from migrate_support import KEYS, VALUES, same

pytestmark = pytest.mark.oxide


def _fanout_source(directory: str) -> tuple[dict[Any, Any], dict[str, Any]]:
    source = diskcache.FanoutCache(directory, shards=4, size_limit=2**26, tag_index=1)
    for number, (name, value) in enumerate(VALUES.items()):
        source.set(name, value, expire=600 if number % 2 else None, tag=f"t{number % 3}")
    for number, key in enumerate(KEYS):
        source.set(key, number)
    for number in range(500):
        source.set(("row", number), {"n": number})
    expected = {}
    for key in list(source):
        expected[key] = source.get(key, expire_time=True, tag=True)
    named = source.cache("reports/2024")
    named["total"] = 99
    deque = source.deque("jobs")
    deque.extend(["a", "b", {"c": 3}])
    deque.appendleft("first")
    index = source.index("users")
    index.update({"ada": {"langs": ("python",)}, "grace": {"langs": ("cobol",)}})
    extras = {
        "deque": list(deque),
        "index": dict(index),
        "named": {key: named[key] for key in named},
    }
    source.close()
    return expected, extras


def test_a_fanout_cache_comes_over_shard_for_shard(tmp_path: Any) -> None:
    expected, extras = _fanout_source(str(tmp_path / "src"))
    report = dco.migrate(tmp_path / "src", tmp_path / "dst")
    assert report.layout == "fanout" and report.shards == 4
    assert report.skipped == []
    assert report.converted == report.total == len(expected) + 1 + 4 + 2
    assert report.caches[:4] == ["000", "001", "002", "003"]
    assert sorted(report.caches[4:]) == ["cache/reports/2024", "deque/jobs", "index/users"]
    assert report.settings["size_limit"] == 2**26
    with dco.FanoutCache(tmp_path / "dst", shards=4) as fanout:
        assert len(fanout) == len(expected)
        for key, (value, expire_time, tag) in expected.items():
            new_value, new_expire, new_tag = fanout.get(key, expire_time=True, tag=True)
            assert same(new_value, value), key
            assert new_tag == tag
            assert (new_expire is None) == (expire_time is None)
        assert fanout.reset("tag_index") == 1
        assert fanout.evict("t1") > 0
        assert fanout.cache("reports/2024")["total"] == 99
        assert list(fanout.deque("jobs")) == extras["deque"]
        assert dict(fanout.index("users")) == extras["index"]


def test_the_shard_count_is_the_source_s(tmp_path: Any) -> None:
    with diskcache.FanoutCache(str(tmp_path / "src"), shards=3) as source:
        source["a"] = 1
    dco.migrate(tmp_path / "src", tmp_path / "dst")
    with pytest.raises(dco.LayoutMismatchError):
        dco.FanoutCache(tmp_path / "dst", shards=8)
    with dco.FanoutCache(tmp_path / "dst", shards=3) as fanout:
        assert fanout["a"] == 1


def test_native_keys_stay_in_the_shard_python_diskcache_used(tmp_path: Any) -> None:
    """Our FanoutCache picks a native key's shard as python-diskcache does (D-021), so each
    such entry lands in the destination shard of the same number."""
    keys = ["a", "bb", "user:1", b"raw", 12345, -7, 2.5]
    with diskcache.FanoutCache(str(tmp_path / "src"), shards=4) as source:
        for key in keys:
            source[key] = "value"
    dco.migrate(tmp_path / "src", tmp_path / "dst")
    for number in range(4):
        name = f"{number:03d}"
        with diskcache.Cache(str(tmp_path / "src" / name)) as shard:
            before = set(shard)
        with dco.Cache(tmp_path / "dst" / name) as shard:
            assert set(shard) == before, name


def test_a_setting_refused_in_every_shard_is_reported_once(tmp_path: Any) -> None:
    with diskcache.FanoutCache(
        str(tmp_path / "src"), shards=4, sqlite_journal_mode="delete", my_option=1
    ) as source:
        source["a"] = 1
    report = dco.migrate(tmp_path / "src", tmp_path / "dst")
    assert sorted(s.name for s in report.settings_skipped) == ["my_option", "sqlite_journal_mode"]
