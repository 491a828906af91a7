"""Hostile or damaged input: stored bytes planted with a valid checksum, values nested too
deep, reference cycles. Every case must end in a Python exception, never a crash or a hang.

Stored bytes are planted straight into ``cache.db`` (table ``cache``: ``kind`` 5 is the safe
format, ``crc`` the CRC32C of ``value``), so only the decoder stands between them and the
caller.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap

import pytest
import support
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.oxide

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


# ----------------------------------------------------------------------------- writing


def run_isolated(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (a crash there cannot take the test run down)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([support.HELPERS, *filter(None, [env.get("PYTHONPATH")])])
    prelude = f"import {support.IMPL_NAME} as dc\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_very_deep_values_are_refused_not_crashing():
    result = run_isolated(
        """
        cache = dc.Cache()
        for depth in (300, 10_000, 1_000_000):
            value = []
            for _ in range(depth):
                value = [value]
            try:
                cache["deep"] = value
            except (ValueError, RecursionError) as exc:
                print("refused", depth)
        print("alive")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[-2] == "alive"
    assert "refused 1000000" in result.stdout


def test_reference_cycles_are_refused(cache):
    looped: list = []
    looped.append(looped)
    with pytest.raises((ValueError, RecursionError)):
        cache["cycle"] = looped
    d: dict = {}
    d["self"] = d
    with pytest.raises((ValueError, RecursionError)):
        cache["cycle"] = d
    assert "cycle" not in cache


def test_registered_type_encoding_to_itself_is_refused(cache, dc):
    class Selfish:
        pass

    dc.register_type(Selfish, "tests.Selfish", lambda s: s, lambda v: Selfish())
    try:
        with pytest.raises((ValueError, RecursionError, TypeError)):
            cache["s"] = Selfish()
    finally:
        dc.unregister_type(Selfish)


def test_registered_type_whose_encoder_raises(cache, dc):
    class Broken:
        pass

    def encode(obj):
        raise RuntimeError("encoder failed")

    dc.register_type(Broken, "tests.Broken", encode, lambda v: Broken())
    try:
        with pytest.raises(RuntimeError, match="encoder failed"):
            cache["b"] = Broken()
        assert "b" not in cache
    finally:
        dc.unregister_type(Broken)


def test_registered_type_whose_decoder_raises(cache, dc):
    class Fragile:
        pass

    def decode(value):
        raise RuntimeError("decoder failed")

    dc.register_type(Fragile, "tests.Fragile", lambda f: 1, decode)
    try:
        cache["f"] = Fragile()
        with pytest.raises(Exception, match="decoder failed"):
            cache["f"]
    finally:
        dc.unregister_type(Fragile)


def test_container_mutated_during_conversion(cache, dc):
    """An encoder that mutates the container being stored must not crash the binding
    (PyO3's dict iteration panics on such a change unless the binding copies first)."""
    outer: dict = {}
    items: list = []

    class Mutator:
        pass

    def encode(obj):
        outer.clear()
        outer.update({f"new{i}": i for i in range(50)})
        items.clear()
        return 0

    dc.register_type(Mutator, "tests.Mutator", encode, lambda v: Mutator())
    try:
        outer.update({"a": Mutator(), **{f"k{i}": i for i in range(50)}})
        items.extend([Mutator(), *range(50)])
        for container in (outer, items):
            try:
                cache["m"] = container
            except Exception:
                pass  # refusing is fine; a panic (BaseException) or a crash is not
        assert isinstance(cache.get("m", {}), (dict, list))
    finally:
        dc.unregister_type(Mutator)
