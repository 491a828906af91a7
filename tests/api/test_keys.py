"""Keys: which keys are one key and which are distinct, keys of every type python-diskcache
takes (tuples, None, bools, frozensets, big ints, lists, dicts, sets), and odd ones (long,
unencodable, extreme numbers).

Everything here must hold for python-diskcache 5.6.3 too (check with
``DCO_TEST_REFERENCE=1``), except tests marked ``oxide``.
"""

from __future__ import annotations

import pytest

#: The conformance suite: each cache test runs on a directory, a Redis server and a cluster.
pytestmark = pytest.mark.backends

# ----------------------------------------------------------------------------- one key or two


def test_numeric_keys_one_and_one_point_zero_are_one_key(cache):
    cache[1] = "int"
    assert cache[1.0] == "int"
    cache[1.0] = "float"
    assert cache[1] == "float"
    assert len(cache) == 1


def test_true_is_not_one(cache):
    cache[1] = "int"
    cache[True] = "bool"
    assert cache[1] == "int"
    assert cache[True] == "bool"
    assert len(cache) == 2


def test_str_and_bytes_keys_are_distinct(cache):
    cache["a"] = "str"
    cache[b"a"] = "bytes"
    assert cache["a"] == "str"
    assert cache[b"a"] == "bytes"


@pytest.mark.parametrize(
    "key",
    [
        ("tuple", 1, 2.5),
        (),
        None,
        True,
        False,
        frozenset({1, 2, 3}),
        2**70,
        -(2**70),
        ("nested", ("deep", (None, b"x"))),
    ],
    ids=repr,
)
def test_non_native_keys(cache, key):
    cache[key] = "v"
    assert cache[key] == "v"
    assert key in cache
    assert list(cache) == [key]
    assert cache.delete(key) is True
    assert key not in cache


def test_tuple_key_equality_is_by_value(cache):
    cache[("a", 1)] = 1
    assert cache[("a", 1)] == 1
    assert ("a", 2) not in cache
    assert ("a",) not in cache


@pytest.mark.oxide  # python-diskcache: only by chance (pickle follows iteration order), D-011
def test_frozenset_keys_are_order_independent(cache):
    a = frozenset(["x", "y", "z", 1, 2, 3])
    b = frozenset([3, 2, 1, "z", "y", "x"])
    cache[a] = "set"
    assert cache[b] == "set"


# ----------------------------------------------------------------------------- odd keys


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


# ----------------------------------------------------------------------------- refused keys


class Plain:
    def __init__(self, v=1):
        self.v = v

    def __eq__(self, other):
        return type(other) is Plain and other.v == self.v


@pytest.mark.oxide  # python-diskcache stores a NaN key it can never find again (D-011)
def test_nan_key_raises_value_error(cache):
    with pytest.raises(ValueError):
        cache[float("nan")] = 1
    with pytest.raises(ValueError):
        cache.get(float("nan"))


@pytest.mark.oxide  # python-diskcache pickles any key
def test_unsupported_key_raises_type_error(cache):
    with pytest.raises(TypeError):
        cache[Plain()] = 1
    with pytest.raises(TypeError):
        cache.get(object())
