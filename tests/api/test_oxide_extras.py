"""What diskcache_oxide has beyond python-diskcache: batch calls, custom types,
handle options, format versioning."""

from __future__ import annotations

import os
import pickle
import sqlite3

import pytest
import support

pytestmark = pytest.mark.oxide


# ----------------------------------------------------------------------------- batch calls


def test_get_many_in_order_with_default(cache):
    cache["a"] = 1
    cache["b"] = {"x": (1, 2)}
    cache.set("gone", 3, expire=-1)
    assert cache.get_many(["b", "missing", "a", "gone"]) == [{"x": (1, 2)}, None, 1, None]
    assert cache.get_many(["missing"], default="d") == ["d"]
    assert cache.get_many([]) == []
    assert cache.get_many(iter(["a", "a"])) == [1, 1]


def test_set_many_from_mapping_and_pairs(cache):
    assert cache.set_many({"a": 1, "b": [2], 3: "three"}) is None
    assert cache["a"] == 1 and cache["b"] == [2] and cache[3] == "three"
    cache.set_many([("c", (1,)), ("d", b"x")], expire=1000, tag="batch")
    value, expire_time, tag = cache.get("c", expire_time=True, tag=True)
    assert value == (1,) and tag == "batch" and expire_time is not None
    assert cache.evict("batch") == 2
    assert list(cache) == ["a", "b", 3]


def test_set_many_overwrites_and_keeps_order(cache):
    cache.set_many({"a": 1, "b": 2})
    cache.set_many({"b": 20, "c": 30})
    assert list(cache) == ["a", "b", "c"]
    assert cache.get_many(["a", "b", "c"]) == [1, 20, 30]


def test_set_many_large_values(cache):
    big = os.urandom(100_000)
    cache.set_many({"big": big, "small": 1})
    assert cache.get_many(["big", "small"]) == [big, 1]


def test_set_many_is_all_or_nothing(cache, dc):
    class Unsupported:
        pass

    with pytest.raises(dc.UnsupportedTypeError):
        cache.set_many({"ok": 1, "bad": Unsupported()})
    assert "ok" not in cache
    assert len(cache) == 0


def test_delete_many(cache):
    cache.set_many({i: i for i in range(10)})
    assert cache.delete_many([0, 1, 2, 99]) == 3
    assert cache.delete_many([]) == 0
    assert list(cache) == list(range(3, 10))


def test_batch_calls_match_single_calls(make_cache):
    a = make_cache("a")
    b = make_cache("b")
    items = {f"k{i}": {"i": i, "s": str(i) * i} for i in range(50)}
    a.set_many(items)
    for key, value in items.items():
        b[key] = value
    keys = list(items) + ["nope"]
    assert a.get_many(keys) == [b.get(k) for k in keys]
    assert list(a) == list(b)


def test_batch_calls_inside_transact(cache):
    with pytest.raises(RuntimeError), cache.transact():
        cache.set_many({"a": 1, "b": 2})
        raise RuntimeError
    assert len(cache) == 0


# ----------------------------------------------------------------------------- custom types


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __eq__(self, other):
        return type(other) is Point and (other.x, other.y) == (self.x, self.y)

    def __hash__(self):
        return hash((self.x, self.y))


@pytest.fixture
def registered_point(dc):
    dc.register_type(Point, "tests.Point", lambda p: (p.x, p.y), lambda t: Point(*t))
    yield
    dc.unregister_type(Point)


def test_register_type_round_trip(cache, dc, registered_point):
    assert dc.registered_types()["tests.Point"] is Point
    cache["p"] = Point(1, 2)
    cache["nested"] = {"points": [Point(3, 4), Point(5, 6)]}
    assert cache["p"] == Point(1, 2)
    assert cache["nested"] == {"points": [Point(3, 4), Point(5, 6)]}


def test_unregistered_type_on_read_raises_unknown_type(cache, dc):
    dc.register_type(Point, "tests.Point", lambda p: [p.x, p.y], lambda t: Point(*t))
    try:
        cache["p"] = Point(1, 2)
    finally:
        dc.unregister_type("tests.Point")
    with pytest.raises(dc.UnknownTypeError) as info:
        cache["p"]
    assert "tests.Point" in str(info.value)
    assert isinstance(info.value, dc.DecodeError)
    with pytest.raises(dc.UnsupportedTypeError):
        cache["q"] = Point(1, 2)


def test_register_type_rejects_builtins_and_name_clashes(dc, registered_point):
    with pytest.raises(ValueError):
        dc.register_type(dict, "my.dict", dict, dict)

    class Other:
        pass

    with pytest.raises(ValueError):
        dc.register_type(Other, "tests.Point", lambda o: 1, lambda v: Other())
    with pytest.raises(TypeError):
        dc.register_type(Other, "", lambda o: 1, lambda v: Other())


def test_registered_subclass_is_not_covered(cache, dc, registered_point):
    class SubPoint(Point):
        pass

    with pytest.raises(dc.UnsupportedTypeError):
        cache["s"] = SubPoint(1, 2)


# ----------------------------------------------------------------------------- handle options


def test_handle_options_are_visible(make_cache):
    cache = make_cache(pickle=True, on_decode_error="miss")
    assert cache.pickle is True
    assert cache.on_decode_error == "miss"
    plain = make_cache("plain")
    assert plain.pickle is False
    assert plain.on_decode_error == "raise"


def test_pickled_handle_keeps_its_options(make_cache):
    cache = make_cache(pickle=True, on_decode_error="miss", timeout=2)
    clone = pickle.loads(pickle.dumps(cache))
    try:
        assert (clone.pickle, clone.on_decode_error, clone.timeout) == (True, "miss", 2)
        assert clone.directory == cache.directory
    finally:
        clone.close()


def test_custom_disk_is_refused(dc, ref, tmp_path):
    with pytest.raises(ValueError):
        dc.Cache(str(tmp_path / "d"), disk=ref.Disk)


def test_unknown_setting_is_refused(dc, tmp_path):
    with pytest.raises((ValueError, TypeError, dc.CacheError)):
        dc.Cache(str(tmp_path / "d"), no_such_setting=1)


def test_newer_format_version_is_refused(dc, tmp_path):
    directory = tmp_path / "future"
    cache = dc.Cache(str(directory))
    cache["a"] = 1
    cache.close()
    con = sqlite3.connect(directory / "cache.db")
    con.execute("PRAGMA user_version = 999")
    con.commit()
    con.close()
    with pytest.raises(dc.FormatVersionError) as info:
        dc.Cache(str(directory))["a"]
    assert "999" in str(info.value)


def test_python_diskcache_directory_is_refused_clearly(dc, ref, tmp_path):
    directory = str(tmp_path / "legacy")
    legacy = ref.Cache(directory)
    legacy["a"] = 1
    legacy.close()
    with pytest.raises(dc.CacheError):
        dc.Cache(directory)["a"]


def test_version(dc):
    assert isinstance(dc.__version__, str) and dc.__version__


# ----------------------------------------------------------------------------- check()


def test_check_reports_and_removes_orphan_value_files(cache, dc):
    cache["big"] = bytes(50_000)
    (kept,) = support.value_files(cache.directory)
    sub = os.path.dirname(kept)
    orphan = os.path.join(sub, "0" * 30 + ".val")
    with open(orphan, "wb") as handle:
        handle.write(b"left behind by a crash")
    found = cache.check()
    assert any(issubclass(w.category, dc.UnknownFileWarning) for w in found), found
    cache.check(fix=True)
    assert not os.path.exists(orphan)
    assert os.path.exists(kept)
    assert list(cache.check()) == []
    assert cache["big"] == bytes(50_000)


def test_check_picks_each_warning_class_by_problem_not_by_text(cache, dc, tmp_path):
    # The binding chooses the class from the engine's problem (D-050): an orphan file is an
    # UnknownFileWarning, everything else a plain UserWarning, with the message as before.
    cache["big"] = bytes(50_000)
    (kept,) = support.value_files(cache.directory)
    orphan = os.path.join(os.path.dirname(kept), "0" * 30 + ".val")
    with open(orphan, "wb") as handle:
        handle.write(b"orphan")
    with sqlite3.connect(os.path.join(cache.directory, "cache.db")) as db:
        db.execute("UPDATE meta SET count = count + 5")
    db.close()
    found = {str(w.message): w.category for w in cache.check()}
    assert found[f"unknown file: {orphan}"] is dc.UnknownFileWarning
    (count,) = [m for m in found if m.startswith("meta.count != COUNT(cache)")]
    assert count == "meta.count != COUNT(cache); 6 != 1"
    assert found[count] is UserWarning
    assert not any(issubclass(c, dc.EmptyDirWarning) for c in found.values())
    cache.check(fix=True)
    values = os.path.join(cache.directory, "values")
    os.rename(values, str(tmp_path / "moved"))
    os.symlink(str(tmp_path / "moved"), values)
    (problem,) = [w for w in cache.check() if str(w.message).startswith("values is")]
    assert problem.category is UserWarning
    assert str(problem.message) == (
        f"values is a symbolic link, not a directory: {values} was not followed; "
        "check(fix=True) removes it (a link itself, never what it points to) and the cache "
        "makes a new values directory"
    )


def test_check_leaves_foreign_files_alone(cache):
    cache["a"] = 1
    foreign = os.path.join(cache.directory, "notes.txt")
    with open(foreign, "w") as handle:
        handle.write("not the cache's")
    cache.check(fix=True)
    assert os.path.exists(foreign)


def test_check_finds_a_damaged_value_file(cache):
    cache["big"] = bytes(50_000)
    (path,) = support.value_files(cache.directory)
    with open(path, "r+b") as handle:
        handle.write(b"\x01")
    assert len(list(cache.check())) >= 1


def test_an_object_whose_str_is_not_a_path_is_refused_as_a_directory(tmp_path, monkeypatch) -> None:
    """A cache object passed where a directory belongs raises, naming where it goes, and
    makes no directory named after its repr in the working directory."""
    from diskcache_oxide import Cache

    class Handle:  # like a RedisCache: no __str__ of its own
        pass

    monkeypatch.chdir(tmp_path)
    with pytest.raises(TypeError, match="directory must be a path .* not Handle"):
        Cache(Handle())  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
    # What python-diskcache takes str() of still opens: a number names a directory.
    Cache(7).close()  # type: ignore[arg-type]
    assert [p.name for p in tmp_path.iterdir()] == ["7"]
