"""FanoutCore, the binding's routing of FanoutCache's calls on one key (D-069): each call is
the binding's, with Cache's signature; it lands a key in the shard ``shard_hash`` names, for
every kind of key; a shard that stays locked gives the miss the API table declares; shards
whose class guards its calls (a durable handle) and stand-ins a test assigns to ``_shards``
are called through Python, so what they add still runs."""

from __future__ import annotations

import inspect
import logging
import math
import os
import threading
from pathlib import Path
from typing import Any
from unittest import mock

import diskcache_oxide as dco
import pytest
from diskcache_oxide import _api, _core
from diskcache_oxide.fanout import shard_hash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.oxide

ROUTED_CALLS = [call for call in _api.CALLS if call.name in _api.FANOUT_CORE]


def _bare(signature: inspect.Signature) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


def test_the_binding_routes_only_calls_the_table_gives_fanoutcache() -> None:
    assert {call.name for call in ROUTED_CALLS} == _api.FANOUT_CORE
    # The list the binding checks a shard's class against (a subclass overriding one of these
    # is called through Python) is the same set, with no name twice.
    assert len(_core.FanoutCore._ROUTED) == len(_api.FANOUT_CORE)
    assert set(_core.FanoutCore._ROUTED) == _api.FANOUT_CORE
    assert all(call.fanout is not None for call in ROUTED_CALLS)
    # What is generated instead (get_or_compute) catches nothing: its module imports no Timeout.
    generated = [c for c in _api.CALLS if c.fanout is not None and c.name not in _api.FANOUT_CORE]
    assert generated and all(call.fanout is _api.ROUTED for call in generated)


@pytest.mark.parametrize("name", [call.name for call in ROUTED_CALLS])
def test_each_routed_call_is_the_bindings_with_caches_signature(name: str) -> None:
    assert name in vars(_core.FanoutCore)
    assert getattr(dco.FanoutCache, name) is getattr(_core.FanoutCore, name)
    if not name.startswith("__"):
        routed = inspect.signature(getattr(dco.FanoutCache, name))
        assert _bare(routed) == _bare(inspect.signature(getattr(dco.Cache, name)))
        assert f"`Cache.{name}` on the shard that holds `key`" in (
            getattr(dco.FanoutCache, name).__doc__ or ""
        )


# ----------------------------------------------------------------------------- placement

_KEYS = st.one_of(
    st.text(),
    st.binary(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.booleans(),
    st.tuples(st.integers(), st.text(max_size=5)),
)


@pytest.fixture(scope="module")
def placed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    cache = dco.FanoutCache(tmp_path_factory.mktemp("placed") / "fanout", shards=7)
    yield cache
    cache.close()


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=_KEYS)
def test_a_key_lands_in_the_shard_shard_hash_names(placed: Any, key: Any) -> None:
    # The binding hashes str, bytes, int and float itself and asks shard_hash for the rest;
    # either way the key must be where shard_hash (python-diskcache's hash) puts it.
    placed.set(key, "v")
    expected = shard_hash(key) % 7
    for number, shard in enumerate(placed._shards):
        assert (key in shard) == (number == expected), (key, number, expected)
    assert placed.get(key) == "v" and key in placed
    assert placed.delete(key) is True


def test_edge_floats_and_ints_route_like_shard_hash(
    placed: Any,
) -> None:
    for key in (-0.0, 0.0, math.inf, -math.inf, 2**63 - 1, -(2**63), 2**63):
        placed[key] = 1
        assert key in placed._shards[shard_hash(key) % 7]
        placed.pop(key)
    # NaN is refused as a key (it never equals itself) by the shard, as Cache refuses it.
    with pytest.raises(ValueError, match="NaN cannot be a cache key"):
        placed.set(math.nan, 1)


def test_a_str_with_lone_surrogates_is_refused_as_cache_refuses_it(placed: Any) -> None:
    # The binding has no UTF-8 for it, so shard_hash hashes it; the shard refuses it as Cache
    # does, whichever shard that is.
    with dco.Cache() as plain:
        with pytest.raises(UnicodeEncodeError):
            plain.set("\ud800", 1)
    with pytest.raises(UnicodeEncodeError):
        placed.set("\ud800", 1)


# ----------------------------------------------------------------------------- a locked shard


def _key_in_shard(cache: Any, number: int, prefix: str = "k") -> str:
    return next(
        f"{prefix}{n}" for n in range(10_000) if shard_hash(f"{prefix}{n}") % cache.shards == number
    )


@pytest.mark.parametrize("durable", [False, True], ids=["plain", "durable"])
def test_a_locked_shard_gives_each_calls_declared_miss(
    tmp_path: Path, durable: bool, caplog: pytest.LogCaptureFixture
) -> None:
    cache = dco.FanoutCache(tmp_path / "c", shards=3, timeout=0.01, durable=durable)
    key, new = _key_in_shard(cache, 1), _key_in_shard(cache, 1, prefix="new")
    cache[key] = 5
    holder = dco.Cache(os.path.join(cache.directory, "001"), timeout=0.01)
    try:
        with holder.transact(), caplog.at_level(logging.WARNING, logger="diskcache_oxide"):
            holder.set("held", 1)
            # The table's misses: False for the writes, None for incr/decr, the default for pop.
            assert cache.set(key, 6) is False
            assert cache.add(new, 1) is False
            assert cache.touch(key, 100) is False
            assert cache.incr(key) is None
            assert cache.decr(key, 2) is None
            # A durable shard's guard answers first, with its own miss (shaped as asked).
            popped = cache.pop(key, default="dflt", tag=True)
            assert popped == (("dflt", None) if durable else "dflt")
            assert cache.delete(key) is False
            assert cache.get(key, tag=True) == (5, None)  # readers do not wait for a writer
            if durable:
                assert any("failed" in record.getMessage() for record in caplog.records)
        assert cache.set(key, 6, retry=True) is True
        assert cache.incr(key, 2) == 8 and cache.decr(key) == 7
        assert cache.pop(key) == 7 and key not in cache
    finally:
        holder.close()
        cache.close()


def test_the_item_protocols_wait_for_a_locked_shard(tmp_path: Path) -> None:
    # As on a Cache, [] = and del [] retry until the shard's writer is done.
    cache = dco.FanoutCache(tmp_path / "w", shards=2, timeout=0.01)
    key = _key_in_shard(cache, 0)
    holder = dco.Cache(os.path.join(cache.directory, "000"), timeout=0.01)
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with holder.transact():
            holder.set("held", 1)
            inside.set()
            leave.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert inside.wait(30)
        threading.Timer(0.2, leave.set).start()
        cache[key] = 7
        assert leave.is_set() and cache[key] == 7
        del cache[key]
        assert key not in cache
    finally:
        leave.set()
        thread.join(30)
        holder.close()
        cache.close()


def test_durable_shards_are_called_through_python(tmp_path: Path) -> None:
    with dco.FanoutCache(tmp_path / "d", shards=2, durable=True) as cache:
        guarded = type(cache._shards[0])
        assert guarded is not dco.Cache and guarded.set is not _core.CacheCore.set
        with mock.patch.object(guarded, "set", autospec=True, return_value=True) as patched:
            assert cache.set("a", 1) is True
        assert patched.call_count == 1


# ----------------------------------------------------------------------------- stand-ins


def test_a_stand_in_for_shards_is_used_until_it_is_deleted(tmp_path: Path) -> None:
    cache = dco.FanoutCache(tmp_path / "s", shards=4)
    opened = cache._shards
    shard = mock.Mock()
    shard.get.side_effect = dco.Timeout
    shard.set.side_effect = dco.Timeout
    shard.incr.side_effect = dco.Timeout
    shards = mock.Mock()
    shards.__getitem__ = mock.Mock(side_effect=lambda index: shard)
    with mock.patch.object(cache, "_shards", shards):
        assert cache._shards is shards
        assert cache.get("a", default="d") == "d"
        assert cache.set("a", 1) is False
        assert cache.incr("a") is None
        assert shards.__getitem__.call_args.args[0] == shard_hash("a") % 4
    assert cache._shards is opened
    assert cache.set("a", 1) is True and cache["a"] == 1
    cache.close()


def test_a_subclass_that_skips_init_is_told_what_to_do() -> None:
    class Skipped(dco.FanoutCache):
        def __init__(self) -> None:
            pass

    with pytest.raises(RuntimeError, match=r"must call super\(\).__init__"):
        Skipped().get("a")


def test_a_key_the_shard_refuses_raises_the_shards_error(tmp_path: Path) -> None:
    with dco.FanoutCache(tmp_path / "r", shards=2) as cache:
        with pytest.raises(dco.UnsupportedTypeError):
            cache.set("k", object())
        with pytest.raises(TypeError, match="delta"):
            cache.incr("n", "1")


def test_routing_holds_after_close_and_across_handles(tmp_path: Path) -> None:
    # FanoutCore keeps the shard handles, not their connections: a call after close() reopens,
    # and a second handle on the directory (another process's view) sees the same placement.
    cache = dco.FanoutCache(tmp_path / "c", shards=3)
    cache.set("a", 1)
    cache.close()
    assert cache.get("a") == 1 and cache.add("b", 2) is True
    other = dco.FanoutCache(tmp_path / "c", shards=3)
    assert other["b"] == 2 and other.pop("a") == 1 and "a" not in cache
    other.close()
    cache.close()
