"""Eviction: size_limit and cull_limit, for each policy; expired items go first."""

from __future__ import annotations

import pytest

POLICIES = ["least-recently-stored", "least-recently-used", "least-frequently-used", "none"]


def fill(cache, n=10):
    for i in range(n):
        cache[f"k{i}"] = i


def present(cache):
    return {k for k in cache if k in cache}


@pytest.mark.parametrize("policy", POLICIES)
def test_no_eviction_below_size_limit(make_cache, policy):
    cache = make_cache(eviction_policy=policy, cull_limit=5)
    fill(cache, 50)
    assert len(cache) == 50


def test_least_recently_stored(make_cache):
    cache = make_cache(eviction_policy="least-recently-stored", cull_limit=2)
    fill(cache)
    for _i in range(10):  # reading does not matter to this policy
        cache.get("k0")
    cache.reset("size_limit", 0)  # every write now culls cull_limit items
    cache["new"] = "x"
    assert present(cache) == {f"k{i}" for i in range(2, 10)} | {"new"}
    cache["k5"] = "restored"  # storing again makes k5 the most recently stored
    cache["newer"] = "y"
    assert "k2" not in cache and "k3" not in cache
    assert "k5" in cache and "newer" in cache and "new" in cache


def test_least_recently_used(make_cache):
    cache = make_cache(eviction_policy="least-recently-used", cull_limit=2)
    fill(cache)
    for i in (0, 1, 2, 3):
        cache.get(f"k{i}")  # k4 and k5 are now the least recently used
    cache.reset("size_limit", 0)
    cache["new"] = "x"
    assert "k4" not in cache and "k5" not in cache
    assert present(cache) == {f"k{i}" for i in (0, 1, 2, 3, 6, 7, 8, 9)} | {"new"}


def test_least_frequently_used(make_cache):
    cache = make_cache(eviction_policy="least-frequently-used", cull_limit=2)
    fill(cache)
    for i in range(10):
        for _ in range(i + 1):  # k0 read once ... k9 ten times
            cache.get(f"k{i}")
    cache.reset("size_limit", 0)
    cache["new"] = "x"
    # python-diskcache culls after inserting, so the new item (never read) competes too;
    # either way k0, the least read of the old items, goes, and the well-read ones stay.
    assert "k0" not in cache
    assert {f"k{i}" for i in range(2, 10)} <= present(cache)
    assert len(cache) == 9


def test_policy_none_never_evicts(make_cache):
    cache = make_cache(eviction_policy="none", cull_limit=5, size_limit=0)
    fill(cache, 30)
    assert len(cache) == 30
    cache.cull()
    assert len(cache) == 30


@pytest.mark.parametrize("policy", POLICIES)
def test_expired_items_are_culled_first(make_cache, policy):
    cache = make_cache(eviction_policy=policy, cull_limit=0)
    fill(cache, 5)
    cache.set("e1", 1, expire=-300)
    cache.set("e2", 2, expire=-200)
    cache.set("e3", 3, expire=-100)
    assert len(cache) == 8
    cache.reset("cull_limit", 2)
    cache.reset("size_limit", 0)
    cache["new"] = "x"
    # the two that expired first are removed, and the cull limit is then spent
    assert set(cache) == {"k0", "k1", "k2", "k3", "k4", "e3", "new"}


def test_cull_limit_zero_disables_culling_on_write(make_cache):
    cache = make_cache(cull_limit=0, size_limit=0)
    fill(cache, 20)
    cache.set("dead", 1, expire=-1)
    assert len(cache) == 21


@pytest.mark.parametrize(
    "policy", ["least-recently-stored", "least-recently-used", "least-frequently-used"]
)
def test_cull_method_brings_volume_under_limit(make_cache, policy):
    cache = make_cache(eviction_policy=policy, cull_limit=0)
    for i in range(40):
        cache[i] = bytes(40_000)  # value files: volume is dominated by them
    cache.set("dead", 1, expire=-1)
    limit = cache.volume() - 10 * 40_000
    cache.reset("size_limit", limit)
    removed = cache.cull()
    assert removed >= 11  # the expired item plus at least ten files
    assert len(cache) == 41 - removed
    assert cache.volume() <= limit
    assert "dead" not in list(cache)


def test_cull_of_expired_with_policy_none(make_cache):
    cache = make_cache(eviction_policy="none", cull_limit=0)
    cache.set("dead", 1, expire=-1)
    cache.set("live", 1)
    cache.cull()
    assert list(cache) == ["live"]


def test_eviction_policy_can_change(make_cache):
    cache = make_cache(eviction_policy="none", cull_limit=2)
    fill(cache)
    cache.reset("eviction_policy", "least-recently-stored")
    cache.reset("size_limit", 0)
    cache["new"] = 1
    assert "k0" not in cache and "k1" not in cache and len(cache) == 9


def test_set_culls_at_most_cull_limit(make_cache):
    cache = make_cache(cull_limit=3)
    fill(cache, 20)
    cache.reset("size_limit", 0)
    cache["a"] = 1
    assert len(cache) == 18  # 20 + 1 - 3
    cache["b"] = 1
    assert len(cache) == 16
