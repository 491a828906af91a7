"""Corner cases: value files left behind, file handles, odd keys, threads and transactions."""

from __future__ import annotations

import os
import threading

import pytest
import support
from support import value_files

BIG = 50_000


def big(n=0):
    return bytes([n % 256]) * BIG


# ----------------------------------------------------------------------------- value files


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


def test_add_that_loses_leaves_no_value_file(cache):
    cache["k"] = big(1)
    assert cache.add("k", big(2)) is False
    assert len(value_files(cache.directory)) == 1
    assert cache["k"] == big(1)


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


def test_read_true_on_large_str_returns_the_str(cache):
    text = "t" * BIG
    cache["s"] = text
    assert cache.get("s", read=True) == text


# ----------------------------------------------------------------------------- keys


def test_long_keys(cache):
    key = "k" * 100_000
    cache[key] = 1
    cache[key.encode()] = 2
    assert cache[key] == 1 and cache[key.encode()] == 2


def test_unencodable_str_raises_unicode_error(cache):
    with pytest.raises(UnicodeEncodeError):
        cache["\ud800"] = 1
    with pytest.raises(UnicodeEncodeError):
        cache["k"] = "\ud800"
    assert len(cache) == 0


def test_int_key_beyond_64_bits_is_not_a_float_key(cache):
    cache[2**63] = "big int"
    assert cache[2**63] == "big int"
    assert cache.get(float(2**63)) is None


@pytest.mark.parametrize("key", [float("inf"), float("-inf"), -0.0, 5e-324, -(2**63)])
def test_extreme_numeric_keys(cache, key):
    cache[key] = "x"
    assert cache[key] == "x"
    assert list(cache) == [key]


def test_mutable_container_keys_like_python_diskcache(cache):
    # python-diskcache pickles any key, so lists, dicts and sets work as keys there
    cache[[1, 2]] = "list"
    cache[{"a": 1}] = "dict"
    cache[{1, 2}] = "set"
    assert cache[[1, 2]] == "list"
    assert cache[{"a": 1}] == "dict"
    assert cache[{1, 2}] == "set"
    assert [1, 2, 3] not in cache


# ----------------------------------------------------------------------------- threads


def test_transaction_belongs_to_its_thread(cache):
    """Another thread's write on the same handle waits, and is not rolled back with it."""
    inside, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def holder():
        try:
            with cache.transact():
                cache["a"] = "rolled back"
                inside.set()
                release.wait(30)
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    def other():
        try:
            cache["b"] = "kept"  # blocks until the holder is done
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    t1 = threading.Thread(target=holder)
    t1.start()
    assert inside.wait(30)
    t2 = threading.Thread(target=other)
    t2.start()
    t2.join(0.3)
    release.set()
    t1.join(30)
    t2.join(30)
    assert not t1.is_alive() and not t2.is_alive()
    assert errors == []
    assert "a" not in cache
    assert cache["b"] == "kept"


def test_transact_in_many_threads_is_atomic(cache):
    """Read-modify-write inside transact() from several threads loses no update."""
    cache["total"] = 0

    def work():
        for _ in range(50):
            with cache.transact(retry=True):
                cache["total"] = cache["total"] + 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert cache["total"] == 200


def test_handle_used_from_a_thread_after_close_in_another(cache):
    cache["a"] = 1
    seen: list[object] = []
    t = threading.Thread(target=lambda: seen.append(cache["a"]))
    cache.close()
    t.start()
    t.join(30)
    assert seen == [1]


def test_many_handles_on_one_directory(make_cache):
    handles = [make_cache("shared") for _ in range(20)]
    for i, handle in enumerate(handles):
        handle[i] = i
    assert len(handles[0]) == 20
    for handle in handles:
        handle.close()
    assert os.path.isdir(handles[0].directory)


def test_read_true_threshold_is_disk_min_file_size(cache):
    assert cache.disk_min_file_size == 32768
    cache["below"] = b"b" * 32767
    cache["at"] = b"a" * 32768
    assert cache.get("below", read=True) == b"b" * 32767  # kept inline: the bytes themselves
    with cache.get("at", read=True) as handle:  # a value file: an open binary file
        assert handle.read() == b"a" * 32768
    assert len(value_files(cache.directory)) == 1


def test_text_of_many_bytes_but_few_characters(cache):
    text = "é" * 20_000  # 40,000 bytes of UTF-8
    cache["t"] = text
    assert cache.get("t", read=True) == text
    assert cache["t"] == text


@pytest.mark.parametrize("sync", [0, 1, 2, 3])
def test_every_synchronous_setting_commits_whole(tmp_path, sync):
    """The engine writes each commit's WAL frames at once (D-029); with every
    ``sqlite_synchronous`` (FULL and EXTRA sync and may pad the WAL) small commits and a
    transaction larger than the write buffer read back whole, and the database is sound."""
    import diskcache_oxide as dco

    directory = str(tmp_path / "c")
    cache = dco.Cache(directory, sqlite_synchronous=sync)
    for i in range(300):
        cache.set(i, bytes([i % 256]) * (100 + i * 17))
    with cache.transact():
        for i in range(600):
            cache.set(("t", i), b"x" * 3000)
    reader = dco.Cache(directory)
    assert all(reader.get(i) == bytes([i % 256]) * (100 + i * 17) for i in range(300))
    assert all(reader.get(("t", i)) == b"x" * 3000 for i in range(600))
    assert support.integrity(directory) == "ok"
