"""Stored values that are not what was written: bytes forged with a valid checksum, an unknown
kind, a flipped byte in a row or a value file, a wrong checksum, a value file cut short or
grown. Each read raises a DecodeError (CorruptValueError where the bytes are damaged), or with
``on_decode_error="miss"`` is a logged miss; never wrong data, a crash or a hang.

Forged bytes are planted straight into ``cache.db`` (table ``cache``: ``kind`` 5 is the safe
format, ``crc`` the CRC32C of ``value``), so only the decoder stands between them and the
caller. Other things in place of a value file (a FIFO, a link, a directory ...) are in
``test_hostile_files.py``.
"""

from __future__ import annotations

import logging
import os
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import value_files

pytestmark = pytest.mark.oxide

# ----------------------------------------------------------------------------- forged bytes

ENCODED = 5  # the `kind` of a safe-format value


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def test_crc32c_helper():
    assert crc32c(b"123456789") == 0xE3069283


def plant(cache, key: str, payload: bytes, kind: int = ENCODED) -> None:
    """Replace the stored bytes of ``key`` (already present, stored inline) with ``payload``."""
    con = sqlite3.connect(os.path.join(cache.directory, "cache.db"))
    try:
        cur = con.execute(
            "UPDATE cache SET value = ?, crc = ?, kind = ? WHERE key = ?",
            (payload, crc32c(payload), kind, key),
        )
        assert cur.rowcount == 1
        con.commit()
    finally:
        con.close()


HOSTILE = {
    "deep-array": b"\x81" * 100_000 + b"\x80",
    "deep-map": b"\xa1\x00" * 50_000 + b"\x00",
    "huge-array-length": b"\x9b" + (2**62).to_bytes(8, "big"),
    "huge-bytes-length": b"\x5b" + (2**62).to_bytes(8, "big") + b"abc",
    "huge-text-length": b"\x7b" + (2**40).to_bytes(8, "big"),
    "truncated-array": b"\x83\x01\x02",
    "truncated-int": b"\x1b\x00\x00",
    "invalid-utf8": b"\x62\xff\xfe",
    "unknown-tag": b"\xd9\xff\xff\x01",
    "indefinite-length": b"\x9f\x01\xff",
    "reserved-additional-info": b"\x1c",
    "break-alone": b"\xff",
    "trailing-bytes": b"\x01\x02",
    "empty": b"",
    "bignum-not-bytes": b"\xc2\x01",
    "decimal-not-text": b"\xd9\xe5\xb6\x01",
    "date-out-of-range": b"\xd9\xe5\xb3\x83\x1a\x00\x0f\x42\x40\x0d\x20",
    "uuid-wrong-size": b"\xd8\x25\x43abc",
    "float16": b"\xf9\x3c\x00",
    "simple-value": b"\xf0",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_stored_bytes_raise_a_decode_error(make_cache, dc, name):
    cache = make_cache()
    cache["k"] = {"placeholder": [1]}
    plant(cache, "k", HOSTILE[name])
    try:
        value = cache.get("k")
    except dc.DecodeError:
        return
    # A few inputs may be legitimately decodable (e.g. a half-float); then they must be plain data.
    assert name in {"float16", "simple-value", "indefinite-length"}, (name, value)


def test_unknown_kind_is_corrupt(make_cache, dc):
    cache = make_cache()
    cache["k"] = "text"
    plant(cache, "k", b"text", kind=99)
    with pytest.raises(dc.CorruptValueError):
        cache.get("k")


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=st.binary(max_size=64))
def test_random_stored_bytes_never_crash(dc, tmp_path_factory, payload):
    cache = dc.Cache(str(tmp_path_factory.getbasetemp() / "fuzz"))
    try:
        cache["k"] = [0]
        plant(cache, "k", payload)
        try:
            cache.get("k")
        except dc.DecodeError:
            pass
    finally:
        cache.close()


# ----------------------------------------------------------------------------- damaged values


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
