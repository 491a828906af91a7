"""Large values, which live in value files: they read back whole or as an open file
(``read=True``), the size from which a value gets a file, and that no value file outlives its
item (removed, overwritten, cleared, expired, culled, rolled back, or an ``add`` that lost),
and that a file already opened for reading stays readable when its item is overwritten or
deleted.

Everything here must hold for python-diskcache 5.6.3 too (check with
``DCO_TEST_REFERENCE=1``), except tests marked ``oxide``.
"""

from __future__ import annotations

import io
import os

import pytest
from support import value_files

BIG = 50_000


def big(n=0):
    return bytes([n % 256]) * BIG


# ----------------------------------------------------------------------------- reading them back


def test_large_bytes_round_trip(cache):
    data = os.urandom(1 << 20)
    cache.set("big", data)
    assert cache.get("big") == data


def test_large_str_round_trip(cache):
    text = "λx.x " * 20_000
    cache.set("big", text)
    assert cache.get("big") == text


def test_read_true_returns_a_file_for_large_bytes(cache):
    data = os.urandom(40_000)
    cache.set("big", data)
    with cache.get("big", read=True) as handle:
        assert handle.read() == data
    with cache.read("big") as handle:
        assert handle.read() == data


def test_read_true_names_its_file_by_a_str_path(cache):
    # python-diskcache returns open(full_path, 'rb'), whose name is a str path: callers build
    # paths from it (python-diskcache's and its fork's test_check do full_path + "_moved").
    cache.set("f", big(3))
    with cache.get("f", read=True) as handle:
        assert isinstance(handle.name, str)
        assert os.path.isfile(handle.name)
        assert os.path.realpath(handle.name).startswith(os.path.realpath(cache.directory))


def test_read_missing_raises(cache):
    with pytest.raises(KeyError):
        cache.read("missing")


def test_set_from_file_with_read_true(cache):
    data = os.urandom(70_000)
    assert cache.set("f", io.BytesIO(data), read=True) is True
    assert cache.get("f") == data
    with cache.read("f") as handle:
        assert handle.read() == data
    small = b"abc"
    cache.set("small", io.BytesIO(small), read=True)
    assert cache.get("small") == small


def test_add_from_file_with_read_true(cache):
    data = os.urandom(50_000)
    assert cache.add("f", io.BytesIO(data), read=True) is True
    assert cache.add("f", io.BytesIO(b"other"), read=True) is False
    assert cache["f"] == data


def test_read_true_on_large_str_returns_the_str(cache):
    text = "t" * BIG
    cache["s"] = text
    assert cache.get("s", read=True) == text


def test_text_of_many_bytes_but_few_characters(cache):
    text = "é" * 20_000  # 40,000 bytes of UTF-8
    cache["t"] = text
    assert cache.get("t", read=True) == text
    assert cache["t"] == text


def test_read_handle_survives_overwrite_and_delete(cache):
    cache["k"] = big(1)
    handle = cache.read("k")
    cache["k"] = big(2)
    with handle:
        assert handle.read() == big(1)
    handle = cache.read("k")
    del cache["k"]
    with handle:
        assert handle.read() == big(2)


# ----------------------------------------------------------------------------- the threshold


def test_disk_min_file_size_setting(make_cache):
    cache = make_cache(disk_min_file_size=100)
    cache.set("small", b"x" * 99)
    cache.set("large", b"y" * 100)
    with cache.read("large") as handle:
        assert handle.read() == b"y" * 100
    assert cache.get("small") == b"x" * 99


def test_read_true_threshold_is_disk_min_file_size(cache):
    assert cache.disk_min_file_size == 32768
    cache["below"] = b"b" * 32767
    cache["at"] = b"a" * 32768
    assert cache.get("below", read=True) == b"b" * 32767  # kept inline: the bytes themselves
    with cache.get("at", read=True) as handle:  # a value file: an open binary file
        assert handle.read() == b"a" * 32768
    assert len(value_files(cache.directory)) == 1


# ----------------------------------------------------------------------------- no file left behind


@pytest.mark.parametrize(
    "remove",
    [
        lambda c: c.delete("k"),
        lambda c: c.__delitem__("k"),
        lambda c: c.pop("k"),
        lambda c: c.evict("t"),
        lambda c: c.clear(),
        lambda c: c.set("k", 1),
        lambda c: (c.touch("k", -1), c.expire()),
        lambda c: (c.touch("k", -1), c.cull()),
        lambda c: (c.touch("k", -1), c.peekitem()),
        lambda c: (c.touch("k", -1), c.set("other", 1)),  # set culls expired items
    ],
    ids=[
        "delete",
        "delitem",
        "pop",
        "evict",
        "clear",
        "overwrite",
        "expire",
        "cull",
        "peekitem",
        "cull-on-set",
    ],
)
def test_removing_an_item_removes_its_value_file(cache, remove):
    cache.set("k", big(), tag="t")
    assert len(value_files(cache.directory)) == 1
    try:
        remove(cache)
    except KeyError:
        pass  # peekitem on a cache left empty
    assert value_files(cache.directory) == []


def test_overwriting_a_file_value_removes_the_old_file(cache):
    cache["big"] = os.urandom(50_000)
    cache["big"] = os.urandom(60_000)
    cache["big"] = 1
    files = value_files(cache.directory)
    assert files == [], files


def test_clear_removes_value_files(cache):
    for i in range(3):
        cache[i] = os.urandom(50_000)
    assert cache.clear() == 3
    files = value_files(cache.directory)
    assert files == [], files


def test_add_that_loses_leaves_no_value_file(cache):
    cache["k"] = big(1)
    assert cache.add("k", big(2)) is False
    assert len(value_files(cache.directory)) == 1
    assert cache["k"] == big(1)


def test_transact_rollback_removes_new_value_files(cache):
    with pytest.raises(RuntimeError), cache.transact():
        cache["big"] = os.urandom(50_000)
        raise RuntimeError("boom")
    assert "big" not in cache


@pytest.mark.oxide  # python-diskcache leaves the file behind (D-011)
def test_rolled_back_transaction_leaves_no_value_file(cache):
    with pytest.raises(RuntimeError), cache.transact():
        cache["big"] = big()
        raise RuntimeError
    assert "big" not in cache
    assert value_files(cache.directory) == []


@pytest.mark.oxide  # python-diskcache deletes the old file before the rollback (D-011)
def test_rolled_back_overwrite_keeps_the_old_value(cache):
    cache["big"] = big(1)
    with pytest.raises(RuntimeError), cache.transact():
        cache["big"] = big(2)
        raise RuntimeError
    assert cache["big"] == big(1)
    assert len(value_files(cache.directory)) == 1
