"""migrate() carries every entry of a python-diskcache 5.6.3 Cache: each kind of key and
value (native, value files, pickles inline and in files, every pickle protocol), expiry,
tags, insertion order and the settings; the report counts and explains what it did."""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from typing import Any

import diskcache
import diskcache_oxide as dco
import pytest
from migrate_support import KEYS, VALUES, build_source, entries, same

pytestmark = pytest.mark.oxide


@dataclasses.dataclass
class Point:
    x: int
    y: int


def _migrated(tmp_path: Any, **kwargs: Any) -> tuple[dict[Any, Any], Any, Any]:
    """Build the standard source, read it back through python-diskcache, migrate it."""
    source = build_source(str(tmp_path / "src"), **kwargs.pop("settings", {}))
    expected = entries(source)
    order = list(source)
    source.close()
    report = dco.migrate(tmp_path / "src", tmp_path / "dst", **kwargs)
    return expected, order, report


def test_every_key_and_value_comes_over_with_its_type(tmp_path: Any) -> None:
    expected, order, report = _migrated(tmp_path)
    with dco.Cache(tmp_path / "dst") as cache:
        got = entries(cache)
        assert list(cache) == order  # insertion order is the source's rowid order
    assert set(got) == set(expected)
    for key, (value, expire_time, tag) in expected.items():
        new_value, new_expire, new_tag = got[key]
        assert same(new_value, value), key
        assert same(new_tag, tag), key
        if expire_time is None:
            assert new_expire is None, key
        else:
            assert new_expire == pytest.approx(expire_time, abs=1.0), key
    assert report.total == len(expected) == len(VALUES) + len(KEYS)
    assert report.converted == report.total
    assert report.skipped == []


def test_the_report_counts_bytes_and_names_what_is_approximate(tmp_path: Any) -> None:
    _, _, report = _migrated(tmp_path)
    assert report.layout == "cache" and report.shards is None
    assert report.bytes > 3 * 100_000  # the large values alone
    assert "key" in report.carried and "tag" in report.carried
    assert report.approximated == {}  # nothing streamed: every field is exact
    text = report.summary()
    assert f"converted {report.converted} of {report.total}" in text
    assert report.entries_per_second > 0


def test_value_files_stay_value_files(tmp_path: Any) -> None:
    _migrated(tmp_path)
    with dco.Cache(tmp_path / "dst") as cache:
        with cache.read("large bytes") as reader:  # read() works only on a value file
            assert reader.read() == VALUES["large bytes"]
        assert cache.get("large text") == VALUES["large text"]


def test_text_value_files_read_as_python_diskcache_reads_them(tmp_path: Any) -> None:
    text = "windows\r\nline ends\rand mac ones\n" * 2000
    with diskcache.Cache(str(tmp_path / "src")) as source:
        source["text"] = text
        expected = source["text"]  # universal newlines on reading the text file
    dco.migrate(tmp_path / "src", tmp_path / "dst")
    with dco.Cache(tmp_path / "dst") as cache:
        assert cache["text"] == expected


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
def test_pickles_of_every_protocol_are_decoded_safely(tmp_path: Any, protocol: int) -> None:
    values = {
        name: VALUES[name]
        for name in (
            "bytes",
            "big int",
            "tuple",
            "set",
            "frozenset",
            "nested",
            "datetime utc",
            "datetime offset",
            "date",
            "time",
            "timedelta",
            "decimal",
            "uuid",
            "path",
        )
    }
    with diskcache.Cache(str(tmp_path / "src"), disk_pickle_protocol=protocol) as source:
        for name, value in values.items():
            source[("k", name)] = value
        source[b"raw bytes"] = b"\x00\xff"
        expected = entries(source)
    report = dco.migrate(tmp_path / "src", tmp_path / "dst")
    assert report.skipped == []
    with dco.Cache(tmp_path / "dst") as cache:
        got = entries(cache)
        assert cache.reset("disk_pickle_protocol") == protocol
    for key, (value, _, _) in expected.items():
        assert same(got[key][0], value), key


def test_a_zoneinfo_datetime_comes_over(tmp_path: Any) -> None:
    value = VALUES["datetime zoneinfo"]
    with diskcache.Cache(str(tmp_path / "src")) as source:
        source["when"] = value
    dco.migrate(tmp_path / "src", tmp_path / "dst")
    with dco.Cache(tmp_path / "dst") as cache:
        assert same(cache["when"], value)


def test_expired_entries_are_left_behind_and_reported(tmp_path: Any) -> None:
    with diskcache.Cache(str(tmp_path / "src"), eviction_policy="none") as source:
        source.set("soon", 1, expire=0.05)
        source.set("later", 2, expire=60)
        source.set("never", 3)
    time.sleep(0.1)
    report = dco.migrate(tmp_path / "src", tmp_path / "dst")
    assert report.converted == 2
    assert [(s.key, s.reason) for s in report.skipped] == [("soon", "expired")]
    with dco.Cache(tmp_path / "dst") as cache:
        assert "soon" not in cache and cache["later"] == 2 and cache["never"] == 3
        assert cache.get("later", expire_time=True)[1] == pytest.approx(time.time() + 60, abs=2)


def test_the_settings_come_over(tmp_path: Any) -> None:
    settings = {
        "statistics": 1,
        "tag_index": 1,
        "eviction_policy": "least-frequently-used",
        "size_limit": 123_456_789,
        "cull_limit": 3,
        "sqlite_cache_size": 1000,
        "sqlite_mmap_size": 2**20,
        "sqlite_synchronous": 2,
        "disk_min_file_size": 1024,
        "disk_pickle_protocol": 3,
    }
    with diskcache.Cache(str(tmp_path / "src"), **settings) as source:
        source["inline before, a file now"] = b"x" * 2000
    report = dco.migrate(tmp_path / "src", tmp_path / "dst")
    with dco.Cache(tmp_path / "dst") as cache:
        for name, value in settings.items():
            assert cache.reset(name) == value, name
            assert report.settings[name] == value, name
        # disk_min_file_size applied before the entries were written: 2,000 bytes is a file.
        with cache.read("inline before, a file now") as reader:
            assert reader.read() == b"x" * 2000
    assert report.settings_skipped == []


def test_settings_python_diskcache_accepts_and_we_do_not_are_reported(tmp_path: Any) -> None:
    with diskcache.Cache(str(tmp_path / "src"), my_setting=5, statistics=1) as source:
        source["a"] = 1
        source.get("a")
        source.get("missing")
    report = dco.migrate(tmp_path / "src", tmp_path / "dst")
    skipped = {s.name: s for s in report.settings_skipped}
    assert skipped["my_setting"].value == 5
    assert "not a setting" in skipped["my_setting"].reason
    assert skipped["hits"].value == 1 and skipped["misses"].value == 1
    assert "my_setting" in report.summary()


def test_a_non_wal_journal_mode_is_reported_and_wal_kept(tmp_path: Any) -> None:
    with diskcache.Cache(str(tmp_path / "src"), sqlite_journal_mode="delete") as source:
        source["a"] = 1
    report = dco.migrate(tmp_path / "src", tmp_path / "dst")
    assert [s.name for s in report.settings_skipped] == ["sqlite_journal_mode"]
    assert "wal" in report.settings_skipped[0].reason
    with dco.Cache(tmp_path / "dst") as cache:
        assert cache["a"] == 1 and cache.reset("sqlite_journal_mode") == "wal"


def test_a_changed_auto_vacuum_is_in_place_when_the_copy_is_done(tmp_path: Any) -> None:
    with diskcache.Cache(str(tmp_path / "src"), sqlite_auto_vacuum=0) as source:
        source["a"] = 1
    dco.migrate(tmp_path / "src", tmp_path / "dst")
    with dco.Cache(tmp_path / "dst") as cache:
        assert cache.reset("sqlite_auto_vacuum") == 0 and cache["a"] == 1


def test_the_migrated_cache_evicts_by_the_source_policy(tmp_path: Any) -> None:
    with diskcache.Cache(str(tmp_path / "src"), eviction_policy="none") as source:
        for number in range(50):
            source[number] = b"v" * 5000  # inline
        source.reset("eviction_policy", "least-recently-stored")
    dco.migrate(tmp_path / "src", tmp_path / "dst")
    with dco.Cache(tmp_path / "dst") as cache:
        assert len(cache) == 50
        assert cache.reset("eviction_policy") == "least-recently-stored"
        cache.reset("size_limit", 0)
        cache.cull()
        assert len(cache) == 0


def test_classes_are_refused_by_default_with_what_to_do(tmp_path: Any) -> None:
    with diskcache.Cache(str(tmp_path / "src")) as source:
        source["point"] = Point(1, 2)
        source[Point(3, 4)] = "a key that is a class instance"
        source["fine"] = [1, 2]
    report = dco.migrate(tmp_path / "src", tmp_path / "dst")
    assert report.converted == 1
    reasons = {repr(s.key)[:20]: s.reason for s in report.skipped}
    assert len(report.skipped) == 2
    for reason in reasons.values():
        assert "Point" in reason and "trusted=True" in reason
    by_key = {s.key: s for s in report.skipped if s.key == "point"}
    assert "its value" in by_key["point"].reason
    # The undecodable key is reported by its stored bytes.
    assert any(isinstance(s.key, bytes) and "its key" in s.reason for s in report.skipped)


def test_trusted_with_pickle_keeps_classes_as_pickles(tmp_path: Any) -> None:
    with diskcache.Cache(str(tmp_path / "src")) as source:
        source["point"] = Point(1, 2)
        source["fine"] = {"a": 1}
    report = dco.migrate(tmp_path / "src", tmp_path / "dst", trusted=True, pickle=True)
    assert report.converted == 2 and report.pickled == 1 and report.skipped == []
    with dco.Cache(tmp_path / "dst", pickle=True) as cache:
        assert cache["point"] == Point(1, 2)
    with dco.Cache(tmp_path / "dst") as safe:  # the safe entries need no pickle to read
        assert safe["fine"] == {"a": 1}
        with pytest.raises(dco.UnsafeValueError):
            safe["point"]


def test_trusted_without_pickle_skips_what_the_safe_format_cannot_store(tmp_path: Any) -> None:
    with diskcache.Cache(str(tmp_path / "src")) as source:
        source["point"] = Point(1, 2)
    report = dco.migrate(tmp_path / "src", tmp_path / "dst", trusted=True)
    assert report.converted == 0
    assert "pickle=True" in report.skipped[0].reason


def test_trusted_with_a_registered_type_stores_it_safely(tmp_path: Any) -> None:
    with diskcache.Cache(str(tmp_path / "src")) as source:
        source["point"] = Point(1, 2)
    dco.register_type(Point, "tests.Point", dataclasses.astuple, lambda t: Point(*t))
    try:
        report = dco.migrate(tmp_path / "src", tmp_path / "dst", trusted=True)
        assert report.converted == 1 and report.pickled == 0
        with dco.Cache(tmp_path / "dst") as cache:
            assert cache["point"] == Point(1, 2)
    finally:
        dco.unregister_type(Point)


def test_progress_is_reported_from_zero_to_the_total(tmp_path: Any) -> None:
    with diskcache.Cache(str(tmp_path / "src")) as source:
        for number in range(2500):
            source[number] = number
    calls: list[tuple[int, int]] = []
    report = dco.migrate(
        tmp_path / "src", tmp_path / "dst", progress=lambda d, t: calls.append((d, t))
    )
    assert calls[0] == (0, 2500) and calls[-1] == (2500, 2500)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)
    assert len(calls) >= 3  # one per batch of 1,000
    assert report.converted == 2500


def _times_in_source(directory: str) -> list[tuple[Any, tuple[float, Any, float, int]]]:
    """(key, (store_time, expire_time, access_time, access_count)) of every row of a
    python-diskcache Cache, in insertion order, as python-diskcache stored them."""
    with diskcache.Cache(directory) as source:
        keys = list(source)  # in rowid order
        rows = source._sql(
            "SELECT store_time, expire_time, access_time, access_count FROM Cache ORDER BY rowid"
        ).fetchall()
    return list(zip(keys, [tuple(row) for row in rows], strict=True))


def _times_in_destination(directory: Any) -> list[tuple[Any, tuple[float, Any, float, int]]]:
    """The same of a diskcache_oxide cache: the columns read from its database by a read-only
    SQLite connection of the test's own, the keys through our API (in the same rowid order)."""
    db = sqlite3.connect(f"file:{directory / 'cache.db'}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT store_time, expire_time, access_time, access_count FROM cache ORDER BY rowid"
        ).fetchall()
    finally:
        db.close()
    with dco.Cache(directory) as cache:
        keys = list(cache)  # in rowid order; iterating reads no entry, so updates no time
    return list(zip(keys, [tuple(row) for row in rows], strict=True))


def test_store_and_access_times_and_counts_are_carried_exactly(tmp_path: Any) -> None:
    """Through the real engine: every entry of a python-diskcache 5.6.3 Cache keeps its store
    time, expiry, access time and access count, to the bit, as read back from our database."""
    src = str(tmp_path / "src")
    # Counts first (least-frequently-used counts reads), then access times
    # (least-recently-used updates them), each entry read a different number of times, so
    # no field holds a default or the time of the copy.
    with diskcache.Cache(src, eviction_policy="least-frequently-used") as source:
        for number, key in enumerate(["inline", ("a", "tuple"), 7, 2.5, b"raw", "file"]):
            value = VALUES["large bytes"] if key == "file" else {"n": number}
            source.set(key, value, expire=3600 + number if number % 2 else None, tag=number)
            time.sleep(0.002)
        for number, key in enumerate(list(source)):
            for _ in range(number):
                source.get(key)
    with diskcache.Cache(src, eviction_policy="least-recently-used") as source:
        for key in list(source)[::2]:
            time.sleep(0.002)
            source.get(key)
    expected = _times_in_source(src)
    assert len({row[0] for _, row in expected}) == len(expected)  # six store times
    assert {row[3] for _, row in expected} == set(range(6))  # counts 0..5
    assert any(row[2] != row[0] for _, row in expected)  # some read after being stored

    report = dco.migrate(src, tmp_path / "dst")

    assert report.converted == report.total == 6 and report.streamed == 0
    assert _times_in_destination(tmp_path / "dst") == expected
    carried = {"store_time", "expire_time", "access_time", "access_count"}
    assert carried <= set(report.carried)
    assert report.approximated == {}


def test_times_are_carried_exactly_into_every_shard_of_a_fanout_cache(tmp_path: Any) -> None:
    src = tmp_path / "src"
    with diskcache.FanoutCache(str(src), shards=3, eviction_policy="least-frequently-used") as f:
        for number in range(60):
            f.set(("k", number), number, expire=None if number % 3 else 600 + number)
        for number in range(0, 60, 4):
            for _ in range(number % 5):
                f.get(("k", number))
    expected = dict(
        pair for shard in ("000", "001", "002") for pair in _times_in_source(str(src / shard))
    )
    report = dco.migrate(src, tmp_path / "dst")
    assert report.converted == 60 and report.approximated == {}
    got = dict(
        pair
        for shard in ("000", "001", "002")
        for pair in _times_in_destination(tmp_path / "dst" / shard)
    )
    assert got == expected
    assert {row[3] for row in got.values()} == {0, 1, 2, 3, 4}


def test_opening_a_python_diskcache_directory_names_migrate(tmp_path: Any) -> None:
    with diskcache.Cache(str(tmp_path / "src")) as source:
        source["a"] = 1
    with pytest.raises(dco.NotACacheError, match="migrate"):
        dco.Cache(tmp_path / "src")
