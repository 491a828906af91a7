"""The safe value format (``pickle=False``, the default): what it refuses, and that it never
unpickles, through every read path: a value, a key, a queue item, a memoized result, a Deque or
Index item, a row forged with sqlite3, a directory python-diskcache wrote; with
``on_decode_error="miss"`` a planted pickle is a logged miss. A ``pickle=True`` handle pickles
only what the safe format cannot hold. Also the exception hierarchy. All diskcache_oxide only.
"""

from __future__ import annotations

import collections
import enum
import logging
import os
import sqlite3
from pathlib import Path
from typing import Any, NamedTuple

import diskcache_oxide as dco
import pytest

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


# ----------------------------------------------------------------------------- every read path


@pytest.fixture
def planted(tmp_path: Path) -> tuple[str, Path]:
    """A cache holding a pickle bomb under every kind of access, planted by a pickle=True
    handle: a value, a queue item, a memoized result, a pickled key, a Deque and an Index."""
    directory = str(tmp_path / "c")
    marker = tmp_path / "pwned"
    writer = dco.Cache(directory, pickle=True, eviction_policy="none")
    writer.set("bomb", Bomb(marker))
    writer.push(Bomb(marker))

    @writer.memoize(name="f")
    def f(x: int) -> int:
        return x

    writer.set(f.__cache_key__(1), Bomb(marker))
    writer.close()
    assert not marker.exists(), "planting must not unpickle"
    return directory, marker


def _reads(reader: dco.Cache) -> dict[str, Any]:
    @reader.memoize(name="f")
    def f(x: int) -> int:
        return x

    return {
        "get": lambda: reader.get("bomb"),
        "getitem": lambda: reader["bomb"],
        "read": lambda: reader.read("bomb"),
        "pop": lambda: reader.pop("bomb"),
        "get_many": lambda: reader.get_many(["bomb"]),
        "peek": lambda: reader.peek(),
        "peekitem": lambda: reader.peekitem(),
        "pull": lambda: reader.pull(),
        "memoize": lambda: f(1),
    }


READS = ["get", "getitem", "read", "pop", "get_many", "peek", "peekitem", "pull", "memoize"]


@pytest.mark.parametrize("read", READS)
def test_pickle_false_raises_unsafe_and_never_unpickles(
    planted: tuple[str, Path], read: str
) -> None:
    directory, marker = planted
    reader = dco.Cache(directory)
    with pytest.raises(dco.UnsafeValueError):
        _reads(reader)[read]()
    assert not marker.exists(), f"{read} unpickled a planted value"


@pytest.mark.parametrize("read", ["get", "pop", "get_many", "peek", "pull", "memoize"])
def test_on_decode_error_miss_is_a_miss(
    planted: tuple[str, Path], read: str, caplog: pytest.LogCaptureFixture
) -> None:
    directory, marker = planted
    reader = dco.Cache(directory, on_decode_error="miss")
    with caplog.at_level(logging.WARNING, logger="diskcache_oxide"):
        result = _reads(reader)[read]()
    if read == "memoize":
        assert result == 1  # a miss: the function ran and its result replaced the bomb
    else:
        assert result in (None, (None, None), [None])
    assert not marker.exists()


def test_keys_iteration_deque_and_index(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    d = str(tmp_path / "keys")
    with dco.Cache(d, pickle=True) as writer:
        writer[Bomb(marker)] = 1  # a key the safe format cannot hold: pickled
    reader = dco.Cache(d)
    for walk in (list, lambda c: list(reversed(c)), lambda c: list(c.iterkeys())):
        with pytest.raises(dco.UnsafeValueError):
            walk(reader)
    # A Deque over a cache whose items a pickle=True writer filled.
    d = str(tmp_path / "deque")
    writer_deque = dco.Deque.fromcache(dco.Cache(d, pickle=True, eviction_policy="none"))
    writer_deque.append(Bomb(marker))
    deque = dco.Deque.fromcache(dco.Cache(d, eviction_policy="none"))
    for use in (list, lambda q: q[0], lambda q: q.peekleft(), lambda q: q.popleft()):
        with pytest.raises(dco.UnsafeValueError):
            use(deque)
    # An Index: values and keys.
    d = str(tmp_path / "index")
    writer_index = dco.Index.fromcache(dco.Cache(d, pickle=True, eviction_policy="none"))
    writer_index["v"] = Bomb(marker)
    writer_index[Bomb(marker)] = "k"
    index = dco.Index.fromcache(dco.Cache(d, eviction_policy="none"))
    for use in (
        lambda i: i["v"],
        lambda i: list(i.values()),
        lambda i: list(i.items()),
        lambda i: list(i),
        lambda i: i.peekitem(),
    ):
        with pytest.raises(dco.UnsafeValueError):
            use(index)
    assert not marker.exists()


def test_planted_directly_with_sqlite(tmp_path: Path) -> None:
    """A row rewritten with sqlite3 to hold a pickle (as an attacker with write access to
    cache.db would) is refused the same way."""
    marker = tmp_path / "pwned"
    d = str(tmp_path / "c")
    with dco.Cache(d, pickle=True) as writer:
        writer.set("template", Bomb(marker))  # an attacker's row, checksum and all
        writer.set("victim", "harmless")
    db = sqlite3.connect(os.path.join(d, "cache.db"))
    row = db.execute("SELECT kind, crc, value FROM cache WHERE key = 'template'").fetchone()
    db.execute("UPDATE cache SET kind = ?, crc = ?, value = ? WHERE key = 'victim'", row)
    db.execute("DELETE FROM cache WHERE key = 'template'")
    db.commit()
    db.close()
    reader = dco.Cache(d)
    with pytest.raises(dco.UnsafeValueError):
        reader.get("victim")
    assert not marker.exists()
