"""The safe value format: what pickle=False refuses, and that it never unpickles.

Also the exception hierarchy, corruption detection and on_decode_error.
All diskcache_oxide only.
"""

from __future__ import annotations

import collections
import enum
import logging
import os
import sqlite3
from typing import NamedTuple

import pytest
from support import value_files

pytestmark = pytest.mark.oxide


class Bomb:
    """Unpickling this creates ``path`` (``open(path, 'w')``): proof that code ran."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


class Point(NamedTuple):
    x: int
    y: int


class Color(enum.IntEnum):
    RED = 1


class MyStr(str):
    pass


class Plain:
    def __init__(self, v=1):
        self.v = v

    def __eq__(self, other):
        return type(other) is Plain and other.v == self.v


# ----------------------------------------------------------------------------- exceptions


def test_exception_hierarchy(dc):
    assert issubclass(dc.CacheError, Exception)
    for name in ("DecodeError", "FormatVersionError"):
        assert issubclass(getattr(dc, name), dc.CacheError), name
    for name in ("CorruptValueError", "UnsafeValueError", "UnknownTypeError"):
        assert issubclass(getattr(dc, name), dc.DecodeError), name
    assert issubclass(dc.UnsupportedTypeError, TypeError)
    assert issubclass(dc.Timeout, Exception)


# ----------------------------------------------------------------------------- pickle=False


def test_pickle_false_is_the_default(make_cache):
    cache = make_cache()
    with pytest.raises(TypeError):
        cache["obj"] = Plain()


@pytest.mark.parametrize(
    "value",
    [Plain(), object(), Point(1, 2), Color.RED, MyStr("x"), collections.OrderedDict(a=1)],
    ids=["class", "object", "namedtuple", "IntEnum", "str-subclass", "OrderedDict"],
)
def test_unsupported_value_raises_naming_the_type(make_cache, dc, value):
    """A value is either stored exactly (type included) or refused; never silently changed."""
    cache = make_cache()
    try:
        cache["v"] = value
    except dc.UnsupportedTypeError as exc:
        assert isinstance(exc, TypeError)
        assert type(value).__name__ in str(exc)
        assert "v" not in cache
    else:
        got = cache["v"]
        assert type(got) is type(value) and got == value, (
            f"{type(value).__name__} stored without error but came back as {type(got).__name__}"
        )


def test_unsupported_nested_value_is_refused_whole(make_cache, dc):
    cache = make_cache()
    cache["v"] = "before"
    with pytest.raises(dc.UnsupportedTypeError):
        cache["v"] = {"ok": [1, 2, {"bad": Plain()}]}
    assert cache["v"] == "before"


def test_unsupported_value_in_set_many_and_add(make_cache, dc):
    cache = make_cache()
    with pytest.raises(dc.UnsupportedTypeError):
        cache.add("a", Plain())
    assert "a" not in cache


def test_pickle_true_stores_only_unsupported_values_as_pickles(make_cache):
    writer = make_cache("d", pickle=True)
    writer["obj"] = Plain(5)
    writer["data"] = {"a": (1, 2)}
    assert writer["obj"] == Plain(5)
    reader = make_cache("d")  # pickle=False
    assert reader["data"] == {"a": (1, 2)}
    assert type(reader["data"]["a"]) is tuple


def test_planted_pickle_is_never_unpickled(make_cache, dc, tmp_path):
    marker = tmp_path / "pwned"
    writer = make_cache("d", pickle=True)
    writer["bomb"] = Bomb(marker)
    writer.set("nested", [1, Bomb(marker)])
    assert not marker.exists(), "writing must not unpickle"
    reader = make_cache("d")
    assert reader.pickle is False if hasattr(reader, "pickle") else True
    with pytest.raises(dc.UnsafeValueError):
        reader.get("bomb")
    with pytest.raises(dc.UnsafeValueError):
        reader["nested"]
    with pytest.raises(dc.UnsafeValueError):
        reader.peekitem(last=False)
    with pytest.raises(dc.UnsafeValueError):
        reader.pop("bomb")
    assert not marker.exists(), "a pickle=False handle unpickled a planted value"
    # the error is a DecodeError and says what to do
    try:
        reader.get("nested")
    except dc.DecodeError as exc:
        assert "pickle" in str(exc).lower()
    assert not marker.exists()


def test_planted_pickle_with_on_decode_error_miss(make_cache, tmp_path, caplog):
    marker = tmp_path / "pwned"
    writer = make_cache("d", pickle=True)
    writer["bomb"] = Bomb(marker)
    reader = make_cache("d", on_decode_error="miss")
    with caplog.at_level(logging.WARNING, logger="diskcache_oxide"):
        assert reader.get("bomb", default="dflt") == "dflt"
    assert not marker.exists()
    assert any(r.name.startswith("diskcache_oxide") for r in caplog.records)


def test_pickled_key_is_not_unpickled(make_cache, dc, tmp_path):
    marker = tmp_path / "pwned-key"
    writer = make_cache("d", pickle=True)
    writer[Bomb(marker)] = 1  # an unsupported key type: pickled by a pickle=True handle
    writer["plain"] = 2
    assert not marker.exists()
    reader = make_cache("d")
    with pytest.raises(dc.UnsafeValueError):
        list(reader)
    assert reader["plain"] == 2
    assert not marker.exists()


def test_pickle_true_reads_its_own_pickles(make_cache, tmp_path):
    marker = tmp_path / "expected"
    writer = make_cache("d", pickle=True)
    writer["bomb"] = Bomb(marker)
    writer.get("bomb")  # the caller opted in: unpickling happens
    assert marker.exists()


def test_python_diskcache_directory_is_never_unpickled(dc, ref, tmp_path):
    """Opening a directory python-diskcache wrote must not run its pickles."""
    marker = tmp_path / "pwned-by-diskcache"
    directory = str(tmp_path / "legacy")
    legacy = ref.Cache(directory)
    legacy["bomb"] = Bomb(marker)
    legacy[("tuple", "key")] = 1
    legacy.close()
    assert not marker.exists()
    try:
        cache = dc.Cache(directory)
        try:
            cache.get("bomb")
            list(cache)
        finally:
            cache.close()
    except Exception:
        pass  # refusing the directory is fine; running its code is not
    assert not marker.exists()


# ----------------------------------------------------------------------------- corruption


def _db(cache):
    return sqlite3.connect(os.path.join(cache.directory, "cache.db"))


def _columns(con):
    return [row[1] for row in con.execute("PRAGMA table_info(cache)")]


def _flip(blob):
    if isinstance(blob, str):
        return blob[:-1] + ("X" if blob[-1:] != "X" else "Y")
    b = bytearray(blob)
    b[len(b) // 2] ^= 0x55
    return bytes(b)


@pytest.mark.parametrize("value", ["a string value", b"some bytes", {"a": [1, 2, 3]}, (1, "t")])
def test_corrupt_inline_value_raises(make_cache, dc, value):
    cache = make_cache()
    cache["k"] = value
    cache.close()
    con = _db(cache)
    cols = _columns(con)
    assert "value" in cols and "crc" in cols, cols
    (blob,) = con.execute("SELECT value FROM cache WHERE key = ?", ("k",)).fetchone()
    con.execute("UPDATE cache SET value = ? WHERE key = ?", (_flip(blob), "k"))
    con.commit()
    con.close()
    cache = make_cache()
    with pytest.raises(dc.CorruptValueError):
        cache.get("k")
    with pytest.raises(dc.DecodeError):
        cache["k"]


def test_corrupt_checksum_raises(make_cache, dc):
    cache = make_cache()
    cache["k"] = "value"
    con = _db(cache)
    con.execute("UPDATE cache SET crc = crc + 1 WHERE key = ?", ("k",))
    con.commit()
    con.close()
    with pytest.raises(dc.CorruptValueError):
        cache.get("k")


def test_corrupt_value_file_raises(make_cache, dc):
    cache = make_cache()
    data = os.urandom(100_000)
    cache["big"] = data
    cache["bigdict"] = {"x": "y" * 100_000}
    files = value_files(cache.directory)
    assert len(files) == 2
    for path in files:
        with open(path, "r+b") as handle:
            handle.seek(50_000)
            byte = handle.read(1)
            handle.seek(50_000)
            handle.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(dc.CorruptValueError):
        cache.get("big")
    with pytest.raises(dc.CorruptValueError):
        cache.get("bigdict")


def test_truncated_value_file_raises(make_cache, dc):
    cache = make_cache()
    cache["big"] = {"x": "y" * 100_000}
    (path,) = value_files(cache.directory)
    with open(path, "r+b") as handle:
        handle.truncate(1000)
    with pytest.raises(dc.CorruptValueError):
        cache.get("big")


@pytest.mark.parametrize("length", [1000, 100_001])
def test_bytes_file_of_the_wrong_length_raises_naming_it(make_cache, dc, length):
    # Large bytes are read straight into the result, sized by the row: a file cut short or
    # grown behind the cache's back is caught before a byte is copied.
    cache = make_cache()
    cache["raw"] = b"x" * 100_000
    (path,) = value_files(cache.directory)
    with open(path, "r+b") as handle:
        handle.truncate(length)
    with pytest.raises(dc.CorruptValueError, match=f"{length} bytes long, but its row says 100000"):
        cache.get("raw")


def test_on_decode_error_miss_returns_default_and_logs(make_cache, caplog):
    cache = make_cache()
    cache["k"] = "value"
    con = _db(cache)
    con.execute("UPDATE cache SET crc = crc + 1 WHERE key = ?", ("k",))
    con.commit()
    con.close()
    lenient = make_cache(on_decode_error="miss")
    with caplog.at_level(logging.WARNING, logger="diskcache_oxide"):
        assert lenient.get("k", default="dflt") == "dflt"
    assert any(r.name.startswith("diskcache_oxide") for r in caplog.records), caplog.records


def test_on_decode_error_rejects_unknown_mode(dc, tmp_path):
    with pytest.raises((ValueError, TypeError)):
        dc.Cache(str(tmp_path / "x"), on_decode_error="ignore")
