"""The engine's value and key frames for Python (`_core.encode_value` and friends): the one
codec a store without the cache's columns uses (the Redis backend, D-058). A frame holds the
very payload, kind and checksum a directory stores; damaged bytes and pickles are refused
as a directory refuses them."""

from __future__ import annotations

import datetime
import decimal
import sqlite3
import struct
import uuid
from typing import Any

import diskcache_oxide as dco
import pytest
from diskcache_oxide import _core

pytestmark = pytest.mark.oxide

VALUES: list[Any] = [
    0,
    -(2**63),
    2**80,
    1.5,
    float("inf"),
    "",
    "héllo",
    b"\0\xff",
    None,
    True,
    (1, "two", [3.0, {"four": b"5"}]),
    {"a": {1, 2}, "b": frozenset()},
    datetime.datetime(2026, 12, 2, 17, 30, tzinfo=datetime.timezone.utc),
    decimal.Decimal("1.10"),
    uuid.UUID(int=7),
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_a_value_comes_back_as_it_went_in(value: Any) -> None:
    back = _core.decode_value(_core.encode_value(value))
    assert back == value and type(back) is type(value)


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_a_frame_holds_the_bytes_a_directory_stores(tmp_path: Any, value: Any) -> None:
    cache = dco.Cache(str(tmp_path / "c"))
    cache.set("k", value)
    cache.close()
    db = sqlite3.connect(str(tmp_path / "c" / "cache.db"))
    kind, crc, stored = db.execute("SELECT kind, crc, value FROM cache WHERE key = 'k'").fetchone()
    db.close()
    if isinstance(stored, int):
        stored = struct.pack("<q", stored)
    elif isinstance(stored, float):
        stored = struct.pack("<d", stored)
    elif isinstance(stored, str):
        stored = stored.encode()
    frame = _core.encode_value(value)
    assert frame[:4] == b"DCO\x01"
    assert frame[4] == kind
    assert int.from_bytes(frame[5:9], "little") == crc & 0xFFFFFFFF
    assert frame[9:] == stored


class Point:
    def __init__(self, x: int) -> None:
        self.x = x

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Point) and other.x == self.x


def test_a_pickle_only_with_pickle_true_each_way() -> None:
    with pytest.raises(dco.UnsupportedTypeError):
        _core.encode_value(Point(1))
    frame = _core.encode_value(Point(1), pickle=True)
    assert frame[4] == 6  # the pickle kind
    with pytest.raises(dco.UnsafeValueError):
        _core.decode_value(frame)
    assert _core.decode_value(frame, pickle=True) == Point(1)
    # The safe format is still preferred when it can hold the value.
    assert _core.encode_value([1, 2], pickle=True) == _core.encode_value([1, 2])


@pytest.mark.parametrize(
    "frame",
    [b"", b"DCO", b"\x80\x05N.", b"DCO\x02\x03\0\0\0\0x", b"DCO\x01\x09\0\0\0\0"],
    ids=["empty", "short", "a pickle", "future version", "unknown kind"],
)
def test_foreign_bytes_are_a_corrupt_value_not_a_crash(frame: bytes) -> None:
    with pytest.raises(dco.CorruptValueError):
        _core.decode_value(frame)


def test_a_damaged_frame_fails_its_checksum() -> None:
    frame = bytearray(_core.encode_value("a value someone flips a bit of"))
    frame[-1] ^= 1
    with pytest.raises(dco.CorruptValueError, match="checksum"):
        _core.decode_value(bytes(frame))


def test_keys_a_directory_holds_as_one_have_one_frame() -> None:
    assert _core.encode_key(1) == _core.encode_key(1.0)
    assert _core.encode_key(0) == _core.encode_key(-0.0)
    assert _core.encode_key(1) != _core.encode_key("1") != _core.encode_key(b"1")
    for key in [7, 0.25, "k", b"k", (1, "x"), ("nested", (2, 3.5))]:
        assert _core.decode_key(_core.encode_key(key)) == key
    with pytest.raises(ValueError, match="NaN"):
        _core.encode_key(float("nan"))
    with pytest.raises(dco.CorruptValueError):
        _core.decode_key(b"?junk")
