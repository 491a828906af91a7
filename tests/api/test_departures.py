"""Each intended departure from python-diskcache (docs/decisions/D-011), pinned on both sides:
what python-diskcache does, and what diskcache_oxide does instead."""

from __future__ import annotations

import io
import math
import os
from collections import OrderedDict

import pytest

#: Each test with a cache runs on a directory, a Redis server and a cluster (the conformance
#: suite): the departures hold on every backend.
pytestmark = [pytest.mark.oxide, pytest.mark.backends]


@pytest.fixture
def both(make_cache, ref, tmp_path):
    reference = ref.Cache(str(tmp_path / "reference"))
    yield reference, make_cache("oxide")
    reference.close()


@pytest.mark.parametrize("value", [bytearray(b"ab"), io.BytesIO(b"x"), OrderedDict(a=1)], ids=type)
def test_types_outside_the_safe_format_are_refused(both, dc, value):
    reference, oxide = both
    assert reference.set("v", value) is True
    with pytest.raises(dc.UnsupportedTypeError):
        oxide.set("v", value)


def test_nan_value_reads_back_as_nan(both):
    reference, oxide = both
    reference["n"] = math.nan
    assert reference["n"] is None
    oxide["n"] = math.nan
    assert math.isnan(oxide["n"])


def test_nan_key_is_refused(both):
    reference, oxide = both
    reference[math.nan] = 1
    assert math.nan not in reference
    with pytest.raises(ValueError):
        oxide[math.nan] = 1


def test_iterkeys_native_order_is_kept(both):
    reference, oxide = both
    keys = [3, "b", b"z", (1,), None, 1.5, "a", True, 2**70]
    for cache in both:
        for key in keys:
            cache[key] = 1
    native = [1.5, 3, "a", "b", b"z"]
    for cache in (reference, oxide):
        got = [k for k in cache.iterkeys() if type(k) in (int, float, str, bytes) and k != 2**70]
        assert got == native
        assert sorted(map(repr, cache.iterkeys())) == sorted(map(repr, keys))


def test_memoize_typed_keys_hold_type_names(both):
    reference, oxide = both
    ref_key = reference.memoize(name="f", typed=True)(lambda x: x).__cache_key__(3)
    oxi_key = oxide.memoize(name="f", typed=True)(lambda x: x).__cache_key__(3)
    assert ref_key == ("f", 3, None, int)
    assert oxi_key == ("f", 3, None, "builtins.int")


def test_unknown_setting_is_refused(ref, dc, tmp_path):
    assert ref.Cache(str(tmp_path / "r"), no_such=1).no_such == 1
    with pytest.raises(ValueError):
        dc.Cache(str(tmp_path / "o"), no_such=1)
    cache = dc.Cache(str(tmp_path / "o2"))
    with pytest.raises(ValueError):
        cache.reset("no_such", 5)
    cache.close()


@pytest.mark.parametrize("name,value", [("size_limit", "10"), ("eviction_policy", "lol")])
def test_bad_setting_values_are_refused(dc, tmp_path, name, value):
    with pytest.raises(ValueError):
        dc.Cache(str(tmp_path / "o"), **{name: value})


def test_journal_mode_must_stay_wal(ref, dc, tmp_path):
    assert ref.Cache(str(tmp_path / "r"), sqlite_journal_mode="delete").sqlite_journal_mode == (
        "delete"
    )
    with pytest.raises(ValueError):
        dc.Cache(str(tmp_path / "o"), sqlite_journal_mode="delete")


def test_no_disk_classes(ref, dc, tmp_path):
    assert isinstance(ref.Cache(str(tmp_path / "r")).disk, ref.Disk)
    with pytest.raises(ValueError):
        dc.Cache(str(tmp_path / "o"), disk=ref.Disk)
    assert not hasattr(dc.Cache(str(tmp_path / "o2")), "disk")


def test_python_diskcache_directory_is_refused(ref, dc, tmp_path):
    directory = str(tmp_path / "legacy")
    ref.Cache(directory).set("a", 1)
    with pytest.raises(dc.NotACacheError):
        dc.Cache(directory)


def test_read_true_needs_a_file(both):
    reference, oxide = both
    assert reference.set("k", b"plain bytes", read=True) is True
    with pytest.raises((TypeError, AttributeError)):
        oxide.set("k", b"plain bytes", read=True)


def test_unsupported_tag_type(both, ref):
    reference, oxide = both
    with pytest.raises(Exception) as info:
        reference.set("k", 1, tag=(1, 2))
    assert not isinstance(info.value, TypeError)  # sqlite3.ProgrammingError
    with pytest.raises(TypeError):
        oxide.set("k", 1, tag=(1, 2))


class Boom(Exception):
    """Rolls a transaction back (not a RuntimeError: UnsupportedError is one)."""


@pytest.mark.needs("transact")
def test_rollback_restores_a_file_backed_value(both):
    reference, oxide = both
    for cache in (reference, oxide):
        cache["big"] = b"1" * 50_000
        with pytest.raises(Boom), cache.transact():
            cache["big"] = b"2" * 50_000
            raise Boom
    assert reference.get("big") is None  # its old value file was deleted before the rollback
    assert oxide.get("big") == b"1" * 50_000


@pytest.mark.needs("directory")
def test_check_ignores_files_it_did_not_create(both):
    reference, oxide = both
    for cache in (reference, oxide):
        cache["a"] = 1
        with open(os.path.join(cache.directory, "notes.txt"), "w") as handle:
            handle.write("someone else's")
    assert len(list(reference.check())) == 1
    reference.check(fix=True)
    assert not os.path.exists(os.path.join(reference.directory, "notes.txt"))
    assert list(oxide.check()) == []
    oxide.check(fix=True)
    assert os.path.exists(os.path.join(oxide.directory, "notes.txt"))


def test_values_nested_deeper_than_the_limit_are_refused(both):
    reference, oxide = both
    value: list = []
    for _ in range(300):
        value = [value]
    reference["deep"] = value
    assert reference["deep"] == value
    with pytest.raises(ValueError):
        oxide["deep"] = value


def test_self_referencing_values_are_refused(both):
    reference, oxide = both
    looped: list = []
    looped.append(looped)
    reference["cycle"] = looped
    got = reference["cycle"]
    assert got[0] is got
    with pytest.raises(ValueError):
        oxide["cycle"] = looped
