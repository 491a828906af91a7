"""DjangoCache's asynchronous methods, python-diskcache's extras (read, tags and evict,
expire, pop, stats, memoize, cache(), deque(), index()), its configuration (SHARDS,
DATABASE_TIMEOUT, OPTIONS and the options it refuses, a Redis URL as LOCATION) and its import
without Django.

The suite runs on a directory and, with ``DCO_DJANGO_BACKEND=redis``, with every LOCATION a
Redis URL (conftest.py). What only a directory has (sub-caches beside the shards, cull, the
shard settings) is marked ``directory_only``: on Redis those tests run as strict xfails that
must raise the clear error (UnsupportedError, or AttributeError for an attribute a Redis cache
does not have), never a silent skip."""

from __future__ import annotations

import asyncio
import inspect
import io
import json
import os
import subprocess
import sys
import time
from typing import Any

import diskcache_oxide as dco
import pytest
from diskcache_oxide.errors import UnsupportedError
from django.core.cache import caches
from django.core.cache.backends.base import BaseCache
from django.core.exceptions import ImproperlyConfigured

pytestmark = pytest.mark.oxide

ON_REDIS = bool(os.environ.get("DCO_DJANGO_REDIS_URL"))

directory_only = pytest.mark.xfail(
    ON_REDIS,
    reason="a directory's: a Redis LOCATION refuses it, saying what to do instead",
    raises=(UnsupportedError, AttributeError),
    strict=True,
)


@pytest.fixture
def cache() -> Any:
    return caches["default"]


# ----- the asynchronous API ------------------------------------------------------------------


def test_every_async_method_does_what_its_sync_twin_does(cache: Any) -> None:
    async def scenario() -> None:
        assert await cache.aset("a", 1) is True
        assert await cache.aget("a") == 1
        assert await cache.aget("missing", "default") == "default"
        assert await cache.aadd("a", 2) is False
        assert await cache.aadd("b", 2) is True
        assert await cache.ahas_key("b") is True
        assert await cache.atouch("b", 100) is True
        assert await cache.aincr("a", 5) == 6
        assert await cache.adecr("a") == 5
        assert await cache.aset_many({"c": 3, "d": 4}) == []
        assert await cache.aget_many(["a", "c", "d", "zz"]) == {"a": 5, "c": 3, "d": 4}
        assert await cache.adelete_many(["c", "d"]) is None
        assert await cache.aget_many(["c", "d"]) == {}
        assert await cache.aget_or_set("e", lambda: "computed") == "computed"
        assert await cache.aget_or_set("e", "other") == "computed"
        assert await cache.aincr_version("e") == 2
        assert await cache.aget("e", version=2) == "computed"
        assert await cache.adecr_version("e", version=2) == 1
        assert await cache.adelete("a") is True
        assert await cache.adelete("a") is False
        with pytest.raises(ValueError):
            await cache.aincr("missing")
        assert await cache.aclear() >= 1
        assert await cache.aget("b") is None
        await cache.aclose()
        assert await cache.aset("after_close", 1) is True

    asyncio.run(scenario())


def test_async_incr_is_atomic(cache: Any) -> None:
    cache.set("counter", 0)

    async def many() -> list[int]:
        return list(await asyncio.gather(*(cache.aincr("counter") for _ in range(40))))

    results = asyncio.run(many())
    assert sorted(results) == list(range(1, 41))
    assert cache.get("counter") == 40


def test_every_async_method_is_our_own(cache: Any) -> None:
    """Django's base class composes some async calls from others (aincr from aget and aset,
    so not atomic); every one is defined here over the sync call of the same name."""
    names = [name for name, _ in inspect.getmembers(BaseCache) if name.startswith("a")]
    names = [n for n in names if inspect.iscoroutinefunction(getattr(BaseCache, n))]
    assert len(names) >= 16
    for name in names:
        assert getattr(type(cache), name) is not getattr(BaseCache, name), name


# ----- python-diskcache's extras -------------------------------------------------------------


def test_read_returns_a_file_of_the_value(cache: Any) -> None:
    cache.set("blob", io.BytesIO(b"file contents"), read=True)
    with cache.read("blob") as reader:
        assert reader.read() == b"file contents"
    handle = cache.get("blob", read=True)
    with handle:
        assert handle.read() == b"file contents"
    with pytest.raises(KeyError):
        cache.read("missing")


def test_tags_evict_and_the_tag_index(cache: Any) -> None:
    cache.create_tag_index()
    cache.set("a", 1, tag="group")
    cache.set("b", 2, tag="group")
    cache.add("c", 3, tag="other")
    assert cache.get("a", tag=True) == (1, "group")
    assert cache.evict("group") == 2
    assert cache.get("a") is None and cache.get("c") == 3
    cache.drop_tag_index()
    assert cache.evict("other") == 1


def test_expire_removes_expired_entries(cache: Any) -> None:
    cache.set("soon", 1, timeout=0.05)
    cache.set("later", 2)
    time.sleep(0.1)
    assert cache.expire() == 1
    assert cache.get("later") == 2


def test_pop_removes_and_returns(cache: Any) -> None:
    cache.set("key", "value", tag="t")
    assert cache.pop("key", tag=True) == ("value", "t")
    assert cache.pop("key", "gone") == "gone"


def test_stats_count_hits_and_misses(cache: Any) -> None:
    cache.stats(enable=True, reset=True)
    cache.set("a", 1)
    cache.get("a")
    cache.get("missing")
    assert cache.stats() == (1, 1)
    cache.stats(enable=False, reset=True)


def test_incr_with_a_default(cache: Any) -> None:
    assert cache.incr("new_counter", default=10) == 11
    assert cache.decr("other_counter", 2, default=0) == -2


@directory_only
def test_cull(cache: Any) -> None:
    assert cache.cull() >= 0


def test_memoize_caches_results_by_arguments(cache: Any) -> None:
    calls: list[tuple[Any, ...]] = []

    @cache.memoize(tag="memo")
    def add(x: int, y: int = 0) -> int:
        calls.append((x, y))
        return x + y

    assert add(1, 2) == 3 and add(1, 2) == 3 and add(1, y=2) == 3
    assert calls == [(1, 2), (1, 2)]  # positional and keyword calls are different keys
    key = add.__cache_key__(1, 2)  # type: ignore[attr-defined]
    assert key[0].endswith("add") and cache.store.get(cache.make_key(key)) == 3
    assert cache.evict("memo") == 2
    assert add(1, 2) == 3 and len(calls) == 3


def test_memoize_with_a_zero_timeout_never_stores(cache: Any) -> None:
    calls: list[int] = []

    @cache.memoize(timeout=0)
    def once(x: int) -> int:
        calls.append(x)
        return x

    once(1)
    once(1)
    assert calls == [1, 1]


def test_memoize_needs_parentheses(cache: Any) -> None:
    with pytest.raises(TypeError, match="parentheses"):

        @cache.memoize  # type: ignore[arg-type]
        def f() -> None: ...


def test_memoize_keys_are_versioned_and_raise_no_key_warnings(cache: Any) -> None:
    import warnings

    @cache.memoize(name="versioned", version=7)
    def f(text: str) -> str:
        return text.upper()

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert f("with spaces in it") == "WITH SPACES IN IT"
    assert cache.make_key(("versioned", "with spaces in it", None), version=7).startswith(":7:")


@directory_only
def test_named_caches_deques_and_indexes(cache: Any) -> None:
    named = cache.cache("reports")
    named["total"] = 3
    assert cache.cache("reports")["total"] == 3
    assert os.path.isdir(os.path.join(cache.directory, "cache", "reports"))
    deque = cache.deque("jobs")
    deque.append("a")
    deque.appendleft("b")
    assert list(cache.deque("jobs")) == ["b", "a"]
    index = cache.index("users")
    index["ada"] = {"langs": ["python"]}
    assert dict(cache.index("users")) == {"ada": {"langs": ["python"]}}


# ----- configuration -------------------------------------------------------------------------


@directory_only
def test_shards_database_timeout_and_options_reach_the_fanout_cache() -> None:
    two = caches["two_shards"]
    assert two.fanout.shards == 2 and two.fanout.timeout == 0.5
    with open(os.path.join(two.directory, "fanout.json")) as marker:
        assert json.load(marker)["shards"] == 2
    assert two.fanout.reset("size_limit") == 2**24 // 2  # the whole limit, over the shards
    assert caches["default"].fanout.shards == 8


def test_the_store_is_the_fanout_cache_or_the_redis_cache(cache: Any) -> None:
    if ON_REDIS:
        from diskcache_oxide.remote import RedisCache

        assert isinstance(cache.store, RedisCache)
        assert cache._where.startswith("redis://") and "?namespace=django-shared" in cache._where
        with pytest.raises(UnsupportedError, match="diskcache_oxide.open"):
            cache.cache("x")
        with pytest.raises(AttributeError, match=".store is its RedisCache"):
            cache.fanout  # noqa: B018
        # the entries are on the server: a second handle on the URL sees them
        cache.set("seen", 1)
        other = dco.DjangoCache(cache._where.replace("***", ""), {})
        assert other.get("seen") == 1
        other.close()
    else:
        assert cache.store is cache.fanout


def test_a_redis_location_refuses_the_directory_s_parameters(redis_url: str) -> None:
    for name, value in (("SHARDS", 4), ("DATABASE_TIMEOUT", 0.5)):
        with pytest.raises(ImproperlyConfigured, match=f"{name} configures a directory"):
            dco.DjangoCache(f"{redis_url}?namespace=refuse", {name: value})
    with pytest.raises(ImproperlyConfigured, match="culling|size_limit|maxmemory"):
        dco.DjangoCache(f"{redis_url}?namespace=refuse", {"OPTIONS": {"size_limit": 2**20}})


def test_a_redis_location_stores_on_the_server_and_nothing_on_disk(
    redis_url: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    location = f"{redis_url}?namespace=app"
    backend = dco.DjangoCache(location, {"TIMEOUT": 60, "OPTIONS": {"timeout": 5.0}})
    backend.set("k", {"v": 1})
    assert backend.get("k") == {"v": 1}
    assert asyncio.run(backend.aget("k")) == {"v": 1}
    again = dco.open(location)
    assert again.get(backend.make_key("k")) == {"v": 1}
    again.close()
    backend.close()
    assert os.listdir(tmp_path) == []  # no "redis:" directory beside the app


def test_a_file_url_location_is_a_directory(tmp_path: Any) -> None:
    backend = dco.DjangoCache(f"file://{tmp_path / 'd'}", {})
    backend.set("k", 1)
    assert backend.directory == str(tmp_path / "d") and backend.get("k") == 1
    backend.close()


def test_django_s_entry_count_options_are_refused_with_what_to_use(tmp_path: Any) -> None:
    for option, instead in (("MAX_ENTRIES", "size_limit"), ("CULL_FREQUENCY", "cull_limit")):
        with pytest.raises(ImproperlyConfigured, match=f"use '{instead}' instead"):
            dco.DjangoCache(str(tmp_path / option), {"OPTIONS": {option: 10}})


def test_an_unknown_option_is_refused(tmp_path: Any) -> None:
    with pytest.raises(ImproperlyConfigured, match="siz_limit"):
        dco.DjangoCache(str(tmp_path / "c"), {"OPTIONS": {"siz_limit": 10}})


def test_every_public_method_has_a_docstring() -> None:
    for name, member in inspect.getmembers(dco.DjangoCache):
        if name.startswith("_") or not (callable(member) or isinstance(member, property)):
            continue
        assert (getattr(member, "__doc__", None) or "").strip(), name


def test_the_package_imports_without_django() -> None:
    script = (
        "import sys\n"
        "sys.modules['django'] = None\n"
        "sys.modules['asgiref'] = None\n"
        "import diskcache_oxide, diskcache_oxide.djangocache\n"
        "try:\n"
        "    diskcache_oxide.DjangoCache\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert "needs Django" in done.stdout and "pip install django" in done.stdout
