"""DjangoCache behaves as Django documents its cache API: each call, keys and versions,
key functions, timeouts (default, None, 0, negative, float, long), invalid-key warnings,
get_or_set, incr/decr, the per-view cache and cache-backed sessions. Modelled on the
behaviours Django's own cache tests check, written for this backend."""

from __future__ import annotations

import pickle
import time
import warnings
import zlib
from typing import Any
from unittest import mock

import diskcache_oxide as dco
import pytest
from django.core.cache import DEFAULT_CACHE_ALIAS, CacheKeyWarning, cache, caches
from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache
from django.http import HttpResponse
from django.test import RequestFactory
from django.views.decorators.cache import cache_page

pytestmark = pytest.mark.oxide

MEMCACHED_CHARACTERS = (
    "Cache key contains characters that will cause errors if used with memcached: %r"
)


def a_function() -> int:
    return 42


class AClass:
    def method(self) -> int:
        return 24


class Unpicklable:
    def __getstate__(self) -> Any:
        raise pickle.PickleError("refusing to be pickled")


def test_the_backend_is_configured_by_its_import_path() -> None:
    backend = caches[DEFAULT_CACHE_ALIAS]  # `cache` is a proxy to it
    assert isinstance(backend, dco.DjangoCache) and isinstance(backend, BaseCache)


# ----- single keys ---------------------------------------------------------------------------


def test_set_then_get() -> None:
    cache.set("key", "value")
    assert cache.get("key") == "value"


def test_a_stored_none_is_returned_rather_than_the_default() -> None:
    cache.set("stored_none", None)
    assert cache.get("stored_none", default="default") is None


def test_get_of_an_absent_key_gives_the_default() -> None:
    assert cache.get("does_not_exist") is None
    assert cache.get("does_not_exist", "bang!") == "bang!"


def test_add_stores_only_an_absent_key() -> None:
    assert cache.add("added", "value") is True
    assert cache.add("added", "new value") is False
    assert cache.get("added") == "value"


def test_delete_says_whether_the_key_was_there() -> None:
    cache.set_many({"key1": "spam", "key2": "eggs"})
    assert cache.delete("key1") is True
    assert cache.get("key1") is None
    assert cache.get("key2") == "eggs"
    assert cache.delete("never_stored") is False


def test_has_key_and_in_see_live_keys_even_holding_none() -> None:
    cache.set("hello", "goodbye")
    cache.set("forever", "here", None)
    cache.set("null", None)
    assert cache.has_key("hello") is True
    assert cache.has_key("goodbye") is False
    assert cache.has_key("forever") is True
    assert cache.has_key("null") is True
    assert "hello" in cache and "null" in cache and "goodbye" not in cache


def test_incr_and_decr() -> None:
    cache.set("answer", 41)
    assert cache.incr("answer") == 42
    assert cache.get("answer") == 42
    assert cache.incr("answer", 10) == 52
    assert cache.incr("answer", -10) == 42
    assert cache.decr("answer") == 41
    assert cache.decr("answer", 10) == 31
    assert cache.decr("answer", -10) == 41
    for call in (cache.incr, cache.decr):
        with pytest.raises(ValueError):
            call("does_not_exist")
        with pytest.raises(ValueError):
            call("does_not_exist", -1)
    cache.set("null", None)
    with pytest.raises(TypeError):
        cache.incr("null")
    with pytest.raises(TypeError):
        cache.decr("null")


def test_incr_and_decr_keep_the_expiry() -> None:
    cache.set("counter", 1, timeout=cache.default_timeout * 10)
    _, expire_time = cache.get("counter", expire_time=True)
    assert cache.incr("counter") == 2
    assert cache.get("counter", expire_time=True) == (2, expire_time)
    assert cache.decr("counter") == 1
    assert cache.get("counter", expire_time=True) == (1, expire_time)


def test_an_expired_counter_cannot_be_incremented() -> None:
    cache.set("counter", 1, timeout=0.05)
    time.sleep(0.1)
    with pytest.raises(ValueError):
        cache.incr("counter")


def test_the_cache_works_after_close() -> None:
    cache.set("before", 1)
    cache.close()
    assert cache.get("before") == 1
    cache.set("after", 2)
    assert cache.get("after") == 2


def test_the_safe_format_stores_plain_data() -> None:
    values = {
        "string": "this is a string",
        "int": 42,
        "bool": True,
        "list": [1, 2, 3, 4],
        "tuple": (1, 2, 3, 4),
        "dict": {"A": 1, "B": 2},
        "unicode": "Iñtërnâtiônàlizætiøn",
        "binary": zlib.compress(b"value_to_be_compressed"),
    }
    for key, value in values.items():
        cache.set(key, value)
        assert cache.get(key) == value and type(cache.get(key)) is type(value)


@pytest.mark.parametrize(
    "value", [a_function, AClass, AClass()], ids=["function", "class", "object"]
)
def test_what_the_safe_format_cannot_store_is_refused_with_what_to_do(value: Any) -> None:
    for call in (cache.set, cache.add):
        with pytest.raises(
            dco.UnsupportedTypeError, match="'pickle': True to this cache's OPTIONS"
        ):
            call("unsafe", value)
    with pytest.raises(TypeError):  # UnsupportedTypeError is a TypeError
        cache.set_many({"unsafe": value})
    assert cache.get("unsafe") is None


@pytest.mark.parametrize("value", [a_function, AClass], ids=["function", "class"])
def test_with_pickle_in_options_functions_and_classes_are_stored(value: Any) -> None:
    pickled = caches["pickled"]
    pickled.set("value", value)
    assert pickled.get("value") is value


def test_with_pickle_an_unpicklable_value_raises_the_pickle_error() -> None:
    pickled = caches["pickled"]
    with pytest.raises(pickle.PickleError):
        pickled.set("unpicklable", Unpicklable())
    with pytest.raises(pickle.PickleError):
        pickled.add("unpicklable", Unpicklable())


def test_model_instances_need_pickle_and_read_back_without_side_effects() -> None:
    from testapp.models import Poll

    poll = Poll.objects.create(question="Well?")
    with pytest.raises(dco.UnsupportedTypeError, match="OPTIONS"):
        cache.set("poll", poll)
    pickled = caches["pickled"]
    pickled.set("poll", poll)
    cached = pickled.get("poll")
    assert cached == poll and cached.question == "Well?" and cached.asked == poll.asked
    pickled.set("polls", Poll.objects.defer("question"))
    assert [p.pk for p in pickled.get("polls")] == [poll.pk]


# ----- many keys -----------------------------------------------------------------------------


def test_get_many_returns_only_the_present_keys() -> None:
    cache.set_many({"a": "a", "b": "b", "c": "c", "d": "d"})
    assert cache.get_many(["a", "c", "d"]) == {"a": "a", "c": "c", "d": "d"}
    assert cache.get_many(["a", "b", "e"]) == {"a": "a", "b": "b"}
    assert cache.get_many(iter(["a", "b", "e"])) == {"a": "a", "b": "b"}
    cache.set_many({"x": None, "y": 1})
    assert cache.get_many(["x", "y"]) == {"x": None, "y": 1}
    assert cache.get_many([]) == {}


def test_set_many_stores_every_item_and_returns_no_failures() -> None:
    assert cache.set_many({"key1": "spam", "key2": "eggs"}) == []
    assert cache.get("key1") == "spam" and cache.get("key2") == "eggs"
    assert cache.set_many({}) == []
    assert cache.set_many({"binary": b"\x00\xff"}) == []
    assert cache.get("binary") == b"\x00\xff"


def test_set_many_takes_a_timeout() -> None:
    cache.set_many({"key1": "spam", "key2": "eggs"}, 0.2)
    assert cache.get("key1") == "spam"
    time.sleep(0.3)
    assert cache.get("key1") is None and cache.get("key2") is None


def test_delete_many_removes_the_keys_and_returns_none() -> None:
    cache.set_many({"key1": "spam", "key2": "eggs", "key3": "ham"})
    assert cache.delete_many(["key1", "key2"]) is None
    assert cache.get("key1") is None and cache.get("key2") is None
    assert cache.get("key3") == "ham"
    assert cache.delete_many([]) is None


def test_clear_empties_the_cache() -> None:
    cache.set_many({"key1": "spam", "key2": "eggs"})
    cache.clear()
    assert cache.get("key1") is None and cache.get("key2") is None


# ----- timeouts ------------------------------------------------------------------------------


def test_entries_expire() -> None:
    cache.set("expire1", "very quickly", 0.2)
    cache.set("expire2", "very quickly", 0.2)
    cache.set("expire3", "very quickly", 0.2)
    time.sleep(0.3)
    assert cache.get("expire1") is None
    assert cache.add("expire2", "new value") is True
    assert cache.get("expire2") == "new value"
    assert cache.has_key("expire3") is False


def test_touch_gives_a_new_timeout() -> None:
    cache.set("expire1", "very quickly", timeout=0.2)
    assert cache.touch("expire1", timeout=2) is True
    time.sleep(0.3)
    assert cache.has_key("expire1") is True
    assert cache.touch("expire1", timeout=0.1) is True
    time.sleep(0.2)
    assert cache.has_key("expire1") is False
    assert cache.touch("nonexistent") is False


def test_touch_without_a_timeout_uses_the_default() -> None:
    short = caches["short"]  # TIMEOUT 1
    short.set("key", "value", timeout=0.1)
    assert short.touch("key") is True
    time.sleep(0.2)
    assert short.has_key("key") is True
    assert short.get("key", expire_time=True)[1] == pytest.approx(time.time() + 0.8, abs=0.3)


def test_the_default_timeout_is_the_cache_s_timeout() -> None:
    assert cache.default_timeout == 300
    cache.set("key", "value")
    assert cache.get("key", expire_time=True)[1] == pytest.approx(time.time() + 300, abs=5)
    forever = caches["forever"]  # TIMEOUT None
    forever.set("key", "value")
    assert forever.get("key", expire_time=True) == ("value", None)
    assert forever.get_backend_timeout(DEFAULT_TIMEOUT) is None


def test_none_as_a_timeout_caches_forever() -> None:
    cache.set("key1", "eggs", None)
    assert cache.get("key1", expire_time=True) == ("eggs", None)
    assert cache.add("key2", "ham", None) is True
    assert cache.add("key1", "new eggs", None) is False
    assert cache.get("key1") == "eggs"
    cache.set_many({"key3": "sausage", "key4": "lobster bisque"}, None)
    assert cache.get("key3") == "sausage" and cache.get("key4") == "lobster bisque"
    cache.set("key5", "belgian fries", timeout=0.1)
    assert cache.touch("key5", timeout=None) is True
    time.sleep(0.2)
    assert cache.get("key5") == "belgian fries"


@pytest.mark.parametrize("timeout", [0, -1, -0.5, -3600])
def test_zero_and_negative_timeouts_do_not_cache(timeout: float) -> None:
    cache.set("key1", "eggs", timeout)
    assert cache.get("key1") is None
    assert cache.add("key2", "ham", timeout) is True
    assert cache.get("key2") is None
    cache.set_many({"key3": "sausage", "key4": "lobster bisque"}, timeout)
    assert cache.get("key3") is None and cache.get("key4") is None
    cache.set("key5", "belgian fries", timeout=5)
    assert cache.touch("key5", timeout=timeout) is True
    assert cache.get("key5") is None
    cache.set("replaced", "old")
    cache.set("replaced", "new", timeout)
    assert cache.get("replaced") is None  # the old value is gone too


def test_a_live_key_is_not_added_even_with_a_zero_timeout() -> None:
    cache.set("live", "value")
    assert cache.add("live", "other", 0) is False
    assert cache.get("live") == "value"


def test_float_and_long_timeouts() -> None:
    cache.set("key1", "spam", 100.2)
    assert cache.get("key1") == "spam"
    month = 60 * 60 * 24 * 30 + 1  # memcached would read this as a date; here it is seconds
    cache.set("key2", "eggs", month)
    assert cache.add("key3", "ham", month) is True
    cache.set_many({"key4": "sausage"}, month)
    for key in ("key2", "key3", "key4"):
        _, expire_time = cache.get(key, expire_time=True)
        assert expire_time == pytest.approx(time.time() + month, abs=5)


# ----- keys, versions and key functions ------------------------------------------------------


def test_a_key_prefix_keeps_entries_apart() -> None:
    cache.set("somekey", "value")
    prefixed = caches["prefix"]
    assert prefixed.has_key("somekey") is False
    prefixed.set("somekey", "value2")
    assert cache.get("somekey") == "value"
    assert prefixed.get("somekey") == "value2"


def test_make_key_follows_django_s_layout() -> None:
    assert cache.make_key("k") == ":1:k"
    assert cache.make_key("k", version=3) == ":3:k"
    assert caches["prefix"].make_key("k") == "cacheprefix:1:k"
    assert caches["v2"].make_key("k") == ":2:k"
    assert caches["custom_key"].make_key("k") == "CUSTOM--1-k"


def test_custom_key_functions_keep_entries_apart() -> None:
    cache.set("answer1", 42)
    assert caches["custom_key"].get("answer1") is None
    assert caches["custom_key2"].get("answer1") is None
    caches["custom_key"].set("answer2", 42)
    assert cache.get("answer2") is None
    assert caches["custom_key"].get("answer2") == 42
    assert caches["custom_key2"].get("answer2") == 42  # the same function, by import path


def test_versions_of_get_and_set() -> None:
    v2 = caches["v2"]
    cache.set("answer1", 42)
    assert cache.get("answer1") == 42 and cache.get("answer1", version=1) == 42
    assert cache.get("answer1", version=2) is None
    assert v2.get("answer1") is None and v2.get("answer1", version=1) == 42
    cache.set("answer2", 42, version=2)
    assert cache.get("answer2") is None and v2.get("answer2") == 42
    v2.set("answer3", 42)
    assert cache.get("answer3") is None and cache.get("answer3", version=2) == 42
    v2.set("answer4", 42, version=1)
    assert cache.get("answer4") == 42 and v2.get("answer4") is None


def test_versions_of_add() -> None:
    v2 = caches["v2"]
    assert cache.add("answer1", 42, version=2) is True
    assert cache.add("answer1", 37, version=2) is False
    assert cache.add("answer1", 37, version=1) is True
    assert cache.get("answer1", version=1) == 37 and cache.get("answer1", version=2) == 42
    assert v2.add("answer2", 42) is True
    assert v2.add("answer2", 37) is False
    assert v2.add("answer2", 37, version=1) is True
    assert cache.get("answer2") == 37 and v2.get("answer2") == 42


def test_versions_of_has_key_and_delete() -> None:
    v2 = caches["v2"]
    cache.set("answer1", 42)
    assert cache.has_key("answer1", version=1) is True
    assert cache.has_key("answer1", version=2) is False
    assert v2.has_key("answer1") is False and v2.has_key("answer1", version=1) is True
    cache.set("answer2", 37, version=1)
    cache.set("answer2", 42, version=2)
    assert v2.delete("answer2") is True
    assert cache.get("answer2", version=1) == 37 and cache.get("answer2", version=2) is None
    assert cache.delete("answer2", version=1) is True
    assert cache.get("answer2") is None


def test_versions_of_incr_and_decr() -> None:
    v2 = caches["v2"]
    cache.set("answer", 37, version=1)
    cache.set("answer", 42, version=2)
    assert cache.incr("answer") == 38
    assert cache.incr("answer", version=2) == 43
    assert v2.decr("answer") == 42
    assert v2.decr("answer", version=1) == 37
    assert cache.get("answer", version=1) == 37 and cache.get("answer", version=2) == 42


def test_versions_of_get_many_and_set_many() -> None:
    v2 = caches["v2"]
    cache.set_many({"ford": 37, "arthur": 42})
    assert cache.get_many(["ford", "arthur"]) == {"ford": 37, "arthur": 42}
    assert cache.get_many(["ford", "arthur"], version=2) == {}
    assert v2.get_many(["ford", "arthur"]) == {}
    assert v2.get_many(["ford", "arthur"], version=1) == {"ford": 37, "arthur": 42}
    v2.set_many({"zaphod": 1})
    assert cache.get_many(["zaphod"], version=2) == {"zaphod": 1}
    cache.delete_many(["ford"], version=1)
    assert cache.get_many(["ford", "arthur"]) == {"arthur": 42}


def test_incr_version_and_decr_version_move_an_entry() -> None:
    cache.set("answer", 42, version=2)
    assert cache.incr_version("answer", version=2) == 3
    assert cache.get("answer", version=2) is None
    assert cache.get("answer", version=3) == 42
    assert cache.decr_version("answer", version=3) == 2
    assert cache.get("answer", version=2) == 42
    v2 = caches["v2"]
    v2.set("answer2", 42)
    assert v2.incr_version("answer2") == 3
    assert v2.get("answer2") is None and v2.get("answer2", version=3) == 42
    with pytest.raises(ValueError):
        cache.incr_version("does_not_exist")
    with pytest.raises(ValueError):
        cache.decr_version("does_not_exist", version=2)
    cache.set("null", None)
    assert cache.incr_version("null") == 2
    assert cache.has_key("null", version=2)


def _operations(key: str) -> list[tuple[str, list[Any]]]:
    return [
        ("add", [key, 1]),
        ("get", [key]),
        ("set", [key, 1]),
        ("incr", [key]),
        ("decr", [key]),
        ("touch", [key]),
        ("delete", [key]),
        ("get_many", [[key, "b"]]),
        ("set_many", [{key: 1, "b": 2}]),
        ("delete_many", [[key, "b"]]),
        ("has_key", [key]),
    ]


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("key with spaces and 清", MEMCACHED_CHARACTERS % "key with spaces and 清"),
        (
            "a" * 250 + "清",
            "Cache key will cause errors if used with memcached: %r (longer than 250)"
            % ("a" * 250 + "清"),
        ),
    ],
    ids=["characters", "length"],
)
def test_keys_memcached_would_refuse_warn_on_every_call(key: str, message: str) -> None:
    original = cache.key_func
    cache.key_func = lambda key, *args: key  # as a custom key function that keeps the key
    try:
        for operation, args in _operations(key):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    getattr(cache, operation)(*args)
                except ValueError:  # incr/decr of an absent key
                    pass
            found = [w for w in caught if issubclass(w.category, CacheKeyWarning)]
            assert [str(w.message) for w in found][:1] == [message], operation
    finally:
        cache.key_func = original


def test_the_default_key_function_warns_about_spaces_too() -> None:
    with pytest.warns(CacheKeyWarning, match="key with spaces"):
        cache.get_many(["key with spaces"])


# ----- get_or_set ----------------------------------------------------------------------------


def test_get_or_set_stores_the_default_once() -> None:
    assert cache.get("projector") is None
    assert cache.get_or_set("projector", 42) == 42
    assert cache.get("projector") == 42
    assert cache.get_or_set("projector", 43) == 42
    assert cache.get_or_set("null", None) is None
    assert cache.get("null", "default") is None  # None was stored


def test_get_or_set_calls_a_callable_default_only_on_a_miss() -> None:
    calls: list[int] = []

    def compute() -> str:
        calls.append(1)
        return "value"

    assert cache.get_or_set("mykey", compute) == "value"
    assert cache.get_or_set("mykey", compute) == "value"
    assert calls == [1]
    assert cache.get_or_set("null", lambda: None) is None
    assert cache.get("null", "default") is None


def test_get_or_set_with_versions_and_a_missing_default() -> None:
    assert cache.get_or_set("brian", 1979, version=2) == 1979
    message = "get_or_set() missing 1 required positional argument: 'default'"
    with pytest.raises(TypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        cache.get_or_set("brian")  # type: ignore[call-arg]
    assert cache.get("brian", version=1) is None
    assert cache.get_or_set("brian", 42, version=1) == 42
    assert cache.get_or_set("brian", 1979, version=2) == 1979


def test_get_or_set_returns_the_default_when_add_loses_a_race() -> None:
    with mock.patch("diskcache_oxide.DjangoCache.add", return_value=False):
        assert cache.get_or_set("key", "default") == "default"


def test_get_or_set_with_a_zero_timeout_returns_without_keeping() -> None:
    assert cache.get_or_set("fries", "belgian", timeout=0) == "belgian"
    assert cache.has_key("fries") is False


# ----- Django features built on the cache ----------------------------------------------------


def test_the_per_view_cache_serves_a_response_once_computed() -> None:
    calls: list[int] = []

    @cache_page(60, cache="pickled")
    def view(request: Any) -> HttpResponse:
        calls.append(1)
        response = HttpResponse(f"call {len(calls)}")
        response.set_cookie("foo", "bar")
        return response

    factory = RequestFactory()
    first = view(factory.get("/cached"))
    second = view(factory.get("/cached"))
    assert first.content == second.content == b"call 1"
    assert calls == [1]
    assert second.cookies["foo"].value == "bar"


def test_the_per_view_cache_on_a_safe_cache_says_to_turn_pickle_on() -> None:
    @cache_page(60, cache="default")
    def view(request: Any) -> HttpResponse:
        return HttpResponse("not data")

    with pytest.raises(dco.UnsupportedTypeError, match="'pickle': True"):
        view(RequestFactory().get("/safe"))


def test_incr_is_atomic_across_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor

    cache.set("counter", 0)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: cache.incr("counter"), range(200)))
    assert sorted(results) == list(range(1, 201))


def test_cache_sessions_work_in_the_safe_format() -> None:
    from django.contrib.sessions.backends.cache import SessionStore

    session = SessionStore()
    session["user"] = {"id": 7, "name": "Ada", "roles": ["admin"]}
    session.save()
    again = SessionStore(session_key=session.session_key)
    assert again["user"] == {"id": 7, "name": "Ada", "roles": ["admin"]}
    again.delete()
    assert SessionStore(session_key=session.session_key).get("user") is None
