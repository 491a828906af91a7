"""Unit tests of the python-diskcache compatible API, one behaviour at a time.

Everything here must hold for python-diskcache 5.6.3 too (check with
``DCO_TEST_REFERENCE=1``), except tests marked ``oxide``.
"""

from __future__ import annotations

import os
import pickle
import threading
import time

import pytest
from backends import keep_expired
from support import value_files

#: The conformance suite: each cache test runs on a directory, a Redis server and a cluster.
pytestmark = pytest.mark.backends

# ----------------------------------------------------------------------------- module


def test_module_names(dc, ref):
    for name in ("Cache", "Timeout", "ENOVAL", "UNKNOWN", "DEFAULT_SETTINGS", "EVICTION_POLICY"):
        assert hasattr(dc, name), name
    assert repr(dc.ENOVAL) == "ENOVAL"
    assert repr(dc.UNKNOWN) == "UNKNOWN"
    assert dc.ENOVAL != dc.UNKNOWN
    assert dc.DEFAULT_SETTINGS == ref.DEFAULT_SETTINGS
    assert set(dc.EVICTION_POLICY) == set(ref.EVICTION_POLICY)
    assert issubclass(dc.Timeout, Exception)


def test_cache_without_directory_uses_fresh_temp_dir(dc):
    a = dc.Cache()
    b = dc.Cache()
    try:
        assert os.path.isdir(a.directory)
        assert a.directory != b.directory
        a["k"] = 1
        assert "k" not in b
    finally:
        a.close()
        b.close()


@pytest.mark.needs("directory")
def test_directory_and_timeout_attributes(make_cache, tmp_path):
    cache = make_cache("d", timeout=7.5)
    assert cache.directory == str(tmp_path / "d")
    assert cache.timeout == 7.5


def test_directory_is_created_with_parents(dc, tmp_path):
    path = tmp_path / "a" / "b" / "c"
    cache = dc.Cache(str(path))
    cache["x"] = 1
    assert path.is_dir()
    cache.close()


def test_pathlike_directory(dc, tmp_path):
    cache = dc.Cache(tmp_path / "p")
    cache["x"] = 1
    assert cache.directory == str(tmp_path / "p")
    cache.close()


# ----------------------------------------------------------------------------- set / get


def test_set_and_get(cache):
    assert cache.set("a", 1) is True
    assert cache.get("a") == 1
    assert cache.get("missing") is None
    assert cache.get("missing", default="dflt") == "dflt"


def test_set_overwrites(cache):
    cache.set("a", 1)
    cache.set("a", "two")
    assert cache.get("a") == "two"
    assert len(cache) == 1


@pytest.mark.parametrize(
    "value",
    [0, -1, 2**63 - 1, -(2**63), 1.5, -0.25, "", "text", "ünïcödé ✓", b"", b"\x00\xff", None],
)
def test_scalar_values_round_trip(cache, value):
    cache.set("k", value)
    got = cache.get("k", default="<missing>")
    assert got == value and type(got) is type(value)


def test_get_expire_time_and_tag_flags(cache, backend):
    # Redis gives the server's clock in whole ms (D-058)
    before = time.time() - (0.001 if backend.remote else 0.0)
    cache.set("a", 1, expire=100, tag="t")
    after = time.time()
    value, expire_time = cache.get("a", expire_time=True)
    assert value == 1
    assert before + 100 <= expire_time <= after + 100
    assert cache.get("a", tag=True) == (1, "t")
    value, expire_time, tag = cache.get("a", expire_time=True, tag=True)
    assert (value, tag) == (1, "t") and before + 100 <= expire_time <= after + 100


def test_get_flags_on_missing_key(cache):
    assert cache.get("nope", expire_time=True) == (None, None)
    assert cache.get("nope", tag=True) == (None, None)
    assert cache.get("nope", "d", expire_time=True, tag=True) == ("d", None, None)


def test_get_flags_without_expiry_or_tag(cache):
    cache.set("a", 1)
    assert cache.get("a", expire_time=True, tag=True) == (1, None, None)


@pytest.mark.parametrize("tag", ["text", 7, 2.5, b"raw"])
def test_tag_types(cache, tag):
    cache.set("a", 1, tag=tag)
    got = cache.get("a", tag=True)[1]
    assert got == tag and type(got) is type(tag)


def test_getitem_setitem_delitem(cache):
    cache["a"] = [1, 2]
    assert cache["a"] == [1, 2]
    del cache["a"]
    with pytest.raises(KeyError):
        cache["a"]
    with pytest.raises(KeyError):
        del cache["a"]


def test_contains(cache):
    cache["a"] = None
    assert "a" in cache
    assert "b" not in cache
    cache.set("expired", 1, expire=-1)
    assert "expired" not in cache


def test_len_counts_items(cache):
    assert len(cache) == 0
    for i in range(10):
        cache[i] = i
    assert len(cache) == 10
    cache.delete(3)
    assert len(cache) == 9


# ----------------------------------------------------------------------------- expiry


def test_expire_in_the_past_is_a_miss(cache):
    cache.set("gone", 1, expire=-1)
    assert cache.get("gone") is None
    assert cache.get("gone", default=5) == 5
    with pytest.raises(KeyError):
        cache["gone"]


def test_expiry_after_a_short_delay(cache):
    cache.set("short", 1, expire=0.05)
    cache.set("long", 2, expire=3600)
    deadline = time.time() + 10
    while cache.get("short") is not None and time.time() < deadline:
        time.sleep(0.05)
    assert cache.get("short") is None
    assert cache.get("long") == 2


@pytest.mark.needs("keep_expired")
def test_expired_items_count_in_len_until_removed(cache):
    cache.set("live", 1)
    cache.reset("cull_limit", 0)  # keep set() from culling the expired item
    cache.set("dead", 1, expire=-1)
    assert len(cache) == 2
    assert cache.expire() == 1
    assert len(cache) == 1


@pytest.mark.needs("keep_expired")
def test_expire_removes_only_expired(cache):
    cache.reset("cull_limit", 0)
    for i in range(5):
        cache.set(f"dead{i}", i, expire=-10)
    for i in range(3):
        cache.set(f"live{i}", i, expire=3600)
    cache.set("forever", 1)
    assert cache.expire() == 5
    assert sorted(cache) == ["forever", "live0", "live1", "live2"]
    assert cache.expire() == 0


def test_expire_with_explicit_now(cache):
    cache.set("a", 1, expire=100)
    cache.set("b", 2, expire=1000)
    assert cache.expire(now=time.time() + 500) == 1
    assert "a" not in cache and "b" in cache


def test_touch(cache):
    cache.set("a", 1, expire=-1)
    assert cache.touch("a", expire=100) is False  # expired items cannot be touched
    cache.set("b", 2, expire=30)
    assert cache.touch("b", expire=3600) is True
    assert cache.get("b", expire_time=True)[1] > time.time() + 1000
    assert cache.touch("b") is True  # no expire: never expires
    assert cache.get("b", expire_time=True) == (2, None)
    assert cache.touch("missing") is False


def test_set_on_expired_key_replaces_it(cache):
    cache.set("a", 1, expire=-1)
    cache.set("a", 2)
    assert cache["a"] == 2


# ----------------------------------------------------------------------------- add


def test_add(cache):
    assert cache.add("a", 1) is True
    assert cache.add("a", 2) is False
    assert cache["a"] == 1


def test_add_over_expired(cache):
    keep_expired(cache)
    cache.set("a", 1, expire=-1)
    assert cache.add("a", 2, expire=100, tag="t") is True
    assert cache.get("a", tag=True) == (2, "t")


# ----------------------------------------------------------------------------- pop / delete


def test_pop(cache):
    cache.set("a", "v", expire=100, tag="t")
    value, expire_time, tag = cache.pop("a", expire_time=True, tag=True)
    assert (value, tag) == ("v", "t") and expire_time > time.time()
    assert "a" not in cache
    assert cache.pop("a") is None
    assert cache.pop("a", default=3) == 3
    assert cache.pop("a", default=3, expire_time=True) == (3, None)
    assert cache.pop("a", tag=True) == (None, None)


def test_pop_expired_is_default(cache):
    keep_expired(cache)
    cache.set("a", 1, expire=-1)
    assert cache.pop("a", "d") == "d"


def test_delete(cache):
    cache["a"] = 1
    assert cache.delete("a") is True
    assert cache.delete("a") is False


def test_delete_expired_is_false(cache):
    keep_expired(cache)
    cache.set("a", 1, expire=-1)
    assert cache.delete("a") is False


# ----------------------------------------------------------------------------- incr / decr


def test_incr_decr(cache):
    assert cache.incr("n") == 1
    assert cache.incr("n", 10) == 11
    assert cache.decr("n") == 10
    assert cache.decr("n", 20) == -10
    assert cache["n"] == -10
    assert cache.incr("m", default=100) == 101
    assert cache.decr("d", default=0) == -1


def test_incr_missing_with_default_none_raises(cache):
    with pytest.raises(KeyError):
        cache.incr("missing", default=None)
    with pytest.raises(KeyError):
        cache.decr("missing", default=None)


def test_incr_expired_starts_from_default(cache):
    keep_expired(cache)
    cache.set("n", 50, expire=-1)
    assert cache.incr("n", 1, default=10) == 11
    assert cache.get("n", expire_time=True) == (11, None)


def test_incr_expired_with_default_none_raises(cache):
    keep_expired(cache)
    cache.set("n", 50, expire=-1)
    with pytest.raises(KeyError):
        cache.incr("n", default=None)


def test_incr_keeps_expiry_and_tag(cache):
    cache.set("n", 1, expire=3600, tag="t")
    assert cache.incr("n") == 2
    value, expire_time, tag = cache.get("n", expire_time=True, tag=True)
    assert value == 2 and tag == "t" and expire_time is not None


def test_incr_float(cache):
    cache["f"] = 1.5
    assert cache.incr("f", 2) == 3.5


def test_incr_on_non_number_raises_type_error(cache):
    cache["s"] = "text"
    with pytest.raises(TypeError):
        cache.incr("s")
    assert cache["s"] == "text"


# ----------------------------------------------------------------------------- iteration


def test_iter_is_insertion_order_and_reversed(cache):
    keys = ["c", 1, b"b", "a", 3.5, 2]
    for k in keys:
        cache[k] = k
    assert list(cache) == keys
    assert list(reversed(cache)) == keys[::-1]


def test_iter_keeps_position_on_overwrite(cache):
    for k in "abc":
        cache[k] = 0
    cache["a"] = 1
    assert list(cache) == ["a", "b", "c"]


@pytest.mark.needs("keep_expired")
def test_iter_includes_expired(cache):
    cache.reset("cull_limit", 0)
    cache.set("a", 1, expire=-1)
    cache.set("b", 2)
    assert list(cache) == ["a", "b"]


def test_iterkeys_sorted_order(cache):
    keys = [4, 1.5, -3, "b", "a", "", b"z", b"\x00", 0]
    for k in keys:
        cache[k] = 1
    # numbers, then text, then bytes (SQLite's order of native keys)
    assert list(cache.iterkeys()) == [-3, 0, 1.5, 4, "", "a", "b", b"\x00", b"z"]
    assert list(cache.iterkeys(reverse=True)) == [b"z", b"\x00", "b", "a", "", 4, 1.5, 0, -3]


def test_iterkeys_many_pages(cache):
    for i in range(250):
        cache[i] = i
    assert list(cache.iterkeys()) == list(range(250))
    assert list(cache.iterkeys(reverse=True)) == list(range(249, -1, -1))
    assert list(cache) == list(range(250))


def test_iteration_of_empty_cache(cache):
    assert list(cache) == []
    assert list(reversed(cache)) == []
    assert list(cache.iterkeys()) == []


def test_peekitem(cache):
    with pytest.raises(KeyError):
        cache.peekitem()
    for i, k in enumerate("abc"):
        cache.set(k, i, expire=100 if k == "c" else None, tag=k)
    assert cache.peekitem() == ("c", 2)
    assert cache.peekitem(last=False) == ("a", 0)
    (item, expire_time), tag = cache.peekitem(expire_time=True), cache.peekitem(tag=True)[1]
    assert item == ("c", 2) and expire_time > time.time() and tag == "c"
    assert cache.peekitem(last=False, expire_time=True, tag=True) == (("a", 0), None, "a")
    assert len(cache) == 3  # peeking does not remove


def test_peekitem_skips_and_removes_expired(cache):
    keep_expired(cache)
    cache.set("a", 1)
    cache.set("b", 2, expire=-1)
    cache.set("c", 3, expire=-1)
    assert cache.peekitem() == ("a", 1)
    assert len(cache) == 1


# ----------------------------------------------------------------------------- tags / evict


def test_evict_by_tag(cache):
    for i in range(10):
        cache.set(i, i, tag="even" if i % 2 == 0 else "odd")
    cache.set("untagged", 1)
    assert cache.evict("even") == 5
    assert sorted(k for k in cache if k != "untagged") == [1, 3, 5, 7, 9]
    assert cache.evict("even") == 0
    assert cache.evict("nothing") == 0
    assert "untagged" in cache


def test_evict_many(cache):
    for i in range(350):
        cache.set(i, i, tag="t")
    assert cache.evict("t") == 350
    assert len(cache) == 0


@pytest.mark.needs("directory")
def test_tag_index(make_cache, tmp_path):
    cache = make_cache("t")
    assert cache.tag_index == 0
    cache.create_tag_index()
    assert cache.tag_index == 1
    cache.set("a", 1, tag="x")
    assert cache.evict("x") == 1
    cache.drop_tag_index()
    assert cache.tag_index == 0
    cache.close()
    again = make_cache("t", tag_index=True)
    assert again.tag_index == 1
    again.set("b", 2, tag="y")
    assert again.evict("y") == 1


# ----------------------------------------------------------------------------- clear


def test_clear(cache):
    for i in range(250):
        cache[i] = i
    assert cache.clear() == 250
    assert len(cache) == 0
    assert list(cache) == []
    assert cache.clear() == 0


# ----------------------------------------------------------------------------- transact


class Boom(Exception):
    """Raised inside a transaction to roll it back (not a RuntimeError: a backend's
    UnsupportedError is one, and must not pass for it)."""


@pytest.mark.needs("transact")
def test_transact_commits(cache):
    with cache.transact():
        cache["a"] = 1
        cache.incr("n")
        assert cache["a"] == 1
    assert cache["a"] == 1 and cache["n"] == 1


@pytest.mark.needs("transact")
def test_transact_rolls_back_on_exception(cache):
    cache["kept"] = 1
    with pytest.raises(Boom), cache.transact():
        cache["a"] = 1
        cache.incr("kept")
        raise Boom
    assert "a" not in cache
    assert cache["kept"] == 1


@pytest.mark.needs("transact")
def test_transact_is_reentrant(cache):
    with cache.transact():
        cache["a"] = 1
        with cache.transact():
            cache["b"] = 2
            with cache.transact():
                cache["c"] = 3
    assert [cache[k] for k in "abc"] == [1, 2, 3]


@pytest.mark.needs("transact")
def test_nested_exception_rolls_back_everything(cache):
    with pytest.raises(ValueError), cache.transact():
        cache["a"] = 1
        with cache.transact():
            cache["b"] = 2
            raise ValueError
    assert "a" not in cache and "b" not in cache


@pytest.mark.needs("transact")
def test_transact_isolation_between_threads(make_cache):
    cache = make_cache()
    inside = threading.Event()
    release = threading.Event()
    seen: list[object] = []
    errors: list[BaseException] = []

    def holder():
        try:
            with cache.transact():
                cache["x"] = "uncommitted"
                inside.set()
                release.wait(30)
        except BaseException as exc:  # the test raises it
            errors.append(exc)
            inside.set()

    t = threading.Thread(target=holder)
    t.start()
    assert inside.wait(30)
    if errors:
        raise errors[0]
    # A reader in another thread does not see the uncommitted write.
    reader = threading.Thread(target=lambda: seen.append(cache.get("x", "absent")))
    reader.start()
    reader.join(30)
    release.set()
    t.join(30)
    assert seen == ["absent"]
    assert cache["x"] == "uncommitted"


# ----------------------------------------------------------------------------- memoize


def test_memoize_caches_results(cache):
    calls = []

    @cache.memoize()
    def square(x):
        calls.append(x)
        return x * x

    assert square(3) == 9
    assert square(3) == 9
    assert square(4) == 16
    assert calls == [3, 4]
    assert square.__wrapped__(3) == 9
    assert calls == [3, 4, 3]


def test_memoize_cache_key_and_name(cache):
    @cache.memoize(name="sq")
    def square(x, power=2):
        return x**power

    assert square(5, power=3) == 125
    key = square.__cache_key__(5, power=3)
    assert key[0] == "sq"
    assert cache[key] == 125
    assert square.__cache_key__(5) != key


def test_memoize_default_name_is_qualified(cache):
    @cache.memoize()
    def helper(x):
        return x

    key = helper.__cache_key__(1)
    assert key[0].endswith("test_memoize_default_name_is_qualified.<locals>.helper")
    assert key[0].startswith(helper.__module__)


def test_memoize_typed(cache):
    calls = []

    @cache.memoize(typed=True)
    def ident(x):
        calls.append(x)
        return x

    assert ident(3) == 3
    got = ident(3.0)
    assert got == 3.0 and type(got) is float
    assert calls == [3, 3.0]
    assert ident(3) == 3
    assert len(calls) == 2


def test_tuple_keys_are_type_strict(cache):
    # memoize keys are tuples: like python-diskcache, (3,) and (3.0,) are different keys
    cache[(3,)] = "int"
    assert (3.0,) not in cache
    assert (True,) not in cache
    cache[(3.0,)] = "float"
    assert cache[(3,)] == "int"


def test_memoize_ignore(cache):
    calls = []

    @cache.memoize(ignore={0, "verbose"})
    def compute(log, x, verbose=False):
        calls.append(x)
        return x + 1

    assert compute("a", 1, verbose=True) == 2
    assert compute("b", 1, verbose=False) == 2
    assert calls == [1]


def test_memoize_expire_and_tag(cache):
    @cache.memoize(expire=3600, tag="memo")
    def f(x):
        return [x]

    f(1)
    key = f.__cache_key__(1)
    value, expire_time, tag = cache.get(key, expire_time=True, tag=True)
    assert value == [1] and tag == "memo" and expire_time > time.time()
    assert cache.evict("memo") == 1


def test_memoize_expire_zero_does_not_store(cache):
    calls = []

    @cache.memoize(expire=0)
    def f(x):
        calls.append(x)
        return x

    f(1)
    f(1)
    assert calls == [1, 1]
    assert len(cache) == 0


def test_memoize_requires_call(cache):
    with pytest.raises(TypeError):

        @cache.memoize
        def f():
            return 1


def test_memoize_caches_none(cache):
    calls = []

    @cache.memoize()
    def f():
        calls.append(1)

    f()
    f()
    assert calls == [1]


# ----------------------------------------------------------------------------- settings


@pytest.mark.needs("settings")
def test_default_settings_as_attributes(cache, ref):
    for name, value in ref.DEFAULT_SETTINGS.items():
        assert getattr(cache, name) == value, name


@pytest.mark.needs("culling", "settings")
def test_settings_persist_across_reopen(make_cache):
    cache = make_cache(
        "s", size_limit=12345, cull_limit=3, eviction_policy="least-recently-used", statistics=1
    )
    assert cache.size_limit == 12345
    assert cache.eviction_policy == "least-recently-used"
    cache.close()
    again = make_cache("s")
    assert again.size_limit == 12345
    assert again.cull_limit == 3
    assert again.eviction_policy == "least-recently-used"
    assert again.statistics == 1


@pytest.mark.needs("settings")
def test_reset_reads_and_writes_settings(make_cache):
    cache = make_cache("r")
    assert cache.reset("cull_limit") == 10
    assert cache.reset("cull_limit", 4) == 4
    assert cache.cull_limit == 4
    other = make_cache("r")
    assert other.cull_limit == 4
    assert cache.reset("size_limit", 2**20, update=False) == 2**20
    assert cache.size_limit == 2**20
    third = make_cache("r")
    assert third.size_limit == 2**30  # update=False did not persist


@pytest.mark.needs("settings")
def test_reset_sees_changes_made_by_another_handle(make_cache):
    a = make_cache("shared")
    b = make_cache("shared")
    a.reset("cull_limit", 7)
    assert b.reset("cull_limit") == 7
    assert b.cull_limit == 7


def test_stats(cache):
    assert cache.stats() == (0, 0)  # also enables statistics
    cache["a"] = 1
    cache.get("a")
    cache.get("a")
    cache.get("b")
    assert cache.stats() == (2, 1)
    assert cache.stats(reset=True) == (2, 1)
    assert cache.stats() == (0, 0)
    cache.stats(enable=False)
    cache.get("a")
    cache.get("zz")
    assert cache.stats(enable=False) == (0, 0)


@pytest.mark.needs("directory")
def test_volume_grows_with_data(cache):
    empty = cache.volume()
    assert empty > 0
    cache["big"] = os.urandom(1 << 20)
    assert cache.volume() >= empty + (1 << 20)


@pytest.mark.needs("directory")
def test_check_clean_cache(cache):
    cache["a"] = 1
    cache["big"] = os.urandom(50_000)
    assert list(cache.check()) == []
    assert list(cache.check(fix=True)) == []


@pytest.mark.needs("directory")
def test_check_finds_and_fixes_missing_value_file(cache):
    cache["big"] = os.urandom(50_000)
    cache["small"] = 1
    files = value_files(cache.directory)
    assert len(files) == 1
    os.remove(files[0])
    assert len(list(cache.check())) >= 1
    cache.check(fix=True)
    cache.check(fix=True)  # python-diskcache removes nested empty directories one level a pass
    assert list(cache.check()) == []
    assert cache["small"] == 1
    assert "big" not in cache


# ----------------------------------------------------------------------------- handles and threads


def test_context_manager_closes(dc, tmp_path):
    with dc.Cache(str(tmp_path / "cm")) as cache:
        cache["a"] = 1
    # a closed handle reopens on next use, as python-diskcache's does
    assert cache["a"] == 1
    cache.close()


def test_close_twice_is_harmless(cache):
    cache["a"] = 1
    cache.close()
    cache.close()


def test_two_handles_see_each_other(make_cache):
    a = make_cache("same")
    b = make_cache("same")
    a["x"] = 1
    assert b["x"] == 1
    b.incr("x")
    assert a["x"] == 2


@pytest.mark.needs("pickling")
def test_pickle_handle(make_cache):
    cache = make_cache("p", timeout=3)
    cache["a"] = {"b": 1}
    clone = pickle.loads(pickle.dumps(cache))
    try:
        assert clone.directory == cache.directory
        assert clone.timeout == 3
        assert clone["a"] == {"b": 1}
        clone["c"] = 2
        assert cache["c"] == 2
    finally:
        clone.close()


def test_threads_share_a_handle(cache):
    errors: list[BaseException] = []

    def work(n):
        try:
            for i in range(100):
                cache.incr("counter", retry=True)
                cache.set((n, i), i, retry=True)
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert cache["counter"] == 400
    assert len(cache) == 401


@pytest.mark.needs("transact")
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
                raise Boom
        except Boom:
            pass
        except BaseException as exc:  # the test raises it
            errors.append(exc)
            inside.set()

    def other():
        try:
            cache["b"] = "kept"  # blocks until the holder is done
        except BaseException as exc:  # pragma: no cover
            errors.append(exc)

    t1 = threading.Thread(target=holder)
    t1.start()
    assert inside.wait(30)
    if errors:
        raise errors[0]
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


@pytest.mark.needs("transact")
def test_transact_in_many_threads_is_atomic(cache):
    """Read-modify-write inside transact() from several threads loses no update."""
    cache["total"] = 0
    errors: list[BaseException] = []

    def work():
        try:
            for _ in range(50):
                with cache.transact(retry=True):
                    cache["total"] = cache["total"] + 1
        except BaseException as exc:  # the test raises it
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if errors:
        raise errors[0]
    assert cache["total"] == 200


def test_handle_used_from_a_thread_after_close_in_another(cache):
    cache["a"] = 1
    seen: list[object] = []
    t = threading.Thread(target=lambda: seen.append(cache["a"]))
    cache.close()
    t.start()
    t.join(30)
    assert seen == [1]


@pytest.mark.needs("directory")
def test_many_handles_on_one_directory(make_cache):
    handles = [make_cache("shared") for _ in range(20)]
    for i, handle in enumerate(handles):
        handle[i] = i
    assert len(handles[0]) == 20
    for handle in handles:
        handle.close()
    assert os.path.isdir(handles[0].directory)
