"""The queue calls on ``Cache``: push, pull, peek, their batches and blocking forms.

The contract is the "Work queues" page (its examples run in ``test_work_queues_page.py``), the
working spec ``docs/queue-api-spec.md`` and decisions D-012, D-013, D-054 and D-057. Tests
not marked ``oxide`` also describe python-diskcache 5.6.3 (``DCO_TEST_REFERENCE=1``).
"""

from __future__ import annotations

import collections
import logging
import os
import pickle
import re
import shutil
import sqlite3
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import support
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

START = 500_000_000_000_000
LAST = 999_999_999_999_999
SHORT = 0.3  # an expire= that passes during the test; long enough that setup finishes first
PAST_IT = 0.5  # sleep this long for a SHORT expiry to have passed

oxide = pytest.mark.oxide


#: The conformance suite: each test runs on a directory, a Redis server and a cluster.
pytestmark = pytest.mark.backends


@pytest.fixture
def q(make_cache: Any) -> Any:
    """A queue's cache, opened as the page says a queue's cache must be."""
    return make_cache("queue", eviction_policy="none")


def skey(prefix: str, number: int) -> str:
    return f"{prefix}-{number:015d}"


def drain(cache: Any, prefix: str | None = None, side: str = "front") -> list[Any]:
    items = []
    while True:
        key, value = cache.pull(prefix=prefix, side=side)
        if key is None:
            return items
        items.append((key, value))


def corrupt_inline_value(directory: str, key: Any) -> None:
    """Damage the stored bytes of ``key`` (an inline value) behind the cache's back."""
    db = sqlite3.connect(os.path.join(directory, "cache.db"), timeout=30)
    try:
        (value,) = db.execute("SELECT value FROM cache WHERE key = ?", (key,)).fetchone()
        if isinstance(value, str):
            damaged: Any = value[:-1] + ("x" if value[-1] != "x" else "y")
        else:
            raw = bytearray(value)
            raw[len(raw) // 2] ^= 0xFF
            damaged = bytes(raw)
        with db:
            db.execute("UPDATE cache SET value = ? WHERE key = ?", (damaged, key))
    finally:
        db.close()


# ----------------------------------------------------------------------------- key shapes


def test_push_with_a_prefix_numbers_str_keys_from_500_trillion(q: Any) -> None:
    keys = [q.push(i, prefix="transcode") for i in range(3)]
    assert keys == [skey("transcode", START + i) for i in range(3)]
    assert all(type(k) is str for k in keys)
    assert [q[k] for k in keys] == [0, 1, 2]


def test_push_without_a_prefix_uses_int_keys(q: Any) -> None:
    keys = [q.push(letter) for letter in "abc"]
    assert keys == [START, START + 1, START + 2]
    assert all(type(k) is int for k in keys)
    assert q.pull() == (START, "a")


def test_push_to_the_front_numbers_downwards(q: Any) -> None:
    assert q.push("b", prefix="p", side="front") == skey("p", START)
    assert q.push("a", prefix="p", side="front") == skey("p", START - 1)
    assert q.push("c", prefix="p") == skey("p", START + 1)
    assert [v for _, v in drain(q, "p")] == ["a", "b", "c"]


def test_pull_takes_the_oldest_item_first(q: Any) -> None:
    for i in range(5):
        q.push(i, prefix="fifo")
    assert [v for _, v in drain(q, "fifo")] == [0, 1, 2, 3, 4]


def test_pull_from_the_back_makes_a_stack(q: Any) -> None:
    for i in range(5):
        q.push(i, prefix="stack")
    assert [v for _, v in drain(q, "stack", side="back")] == [4, 3, 2, 1, 0]


def test_push_front_and_pull_front_make_a_stack_too(q: Any) -> None:
    for i in range(3):
        q.push(i, prefix="s", side="front")
    assert [v for _, v in drain(q, "s")] == [2, 1, 0]


def test_both_ends_make_a_deque(q: Any) -> None:
    model: collections.deque[int] = collections.deque()
    for i in range(6):
        if i % 2:
            q.push(i, prefix="d", side="front")
            model.appendleft(i)
        else:
            q.push(i, prefix="d")
            model.append(i)
    assert q.pull(prefix="d", side="back")[1] == model.pop()
    assert q.pull(prefix="d")[1] == model.popleft()
    assert [v for _, v in drain(q, "d")] == list(model)


def test_each_prefix_is_its_own_queue(q: Any) -> None:
    q.push("e1", prefix="email")
    q.push("t1", prefix="transcode")
    q.push("e2", prefix="email")
    q.push("int")
    assert q.pull(prefix="transcode") == (skey("transcode", START), "t1")
    assert q.pull(prefix="email") == (skey("email", START), "e1")
    assert q.pull() == (START, "int")
    assert q.pull(prefix="email") == (skey("email", START + 1), "e2")


def test_pull_on_an_empty_queue_returns_the_default(q: Any) -> None:
    assert q.pull() == (None, None)
    assert q.pull(prefix="nothing") == (None, None)
    marker = object()
    assert q.pull(prefix="nothing", default=marker) is marker
    assert q.peek(prefix="nothing") == (None, None)
    assert q.peek(prefix="nothing", default=marker) is marker


def test_values_round_trip_exactly(q: Any) -> None:
    values = [
        {"episode": 510, "step": "transcode"},
        (1, 2.5, "x"),
        b"\x00bytes",
        None,
        [1, [2, (3,)]],
        True,
        -0.0,
    ]
    for value in values:
        q.push(value, prefix="v")
    for value in values:
        _, got = q.pull(prefix="v")
        assert support.explain_difference(got, value) is None


@pytest.mark.needs("directory")
def test_large_values_live_in_files_and_are_removed_when_pulled(q: Any) -> None:
    big = b"x" * 200_000
    q.push(big, prefix="big")
    assert len(support.value_files(q.directory)) == 1
    assert q.peek(prefix="big")[1] == big
    assert q.pull(prefix="big")[1] == big
    assert support.value_files(q.directory) == []


def test_push_read_true_stores_a_file_object(q: Any, tmp_path: Any) -> None:
    source = tmp_path / "payload.bin"
    source.write_bytes(b"streamed")
    with open(source, "rb") as f:
        key = q.push(f, prefix="r", read=True)
    assert q.pull(prefix="r") == (key, b"streamed")


# ----------------------------------------------------------------------------- peek, peekitem


def test_peek_leaves_the_item(q: Any) -> None:
    q.push("a", prefix="p")
    q.push("b", prefix="p")
    assert q.peek(prefix="p") == (skey("p", START), "a")
    assert q.peek(prefix="p", side="back") == (skey("p", START + 1), "b")
    assert q.peek(prefix="p") == (skey("p", START), "a")
    assert len(q) == 2
    assert q.pull(prefix="p") == (skey("p", START), "a")


def test_pull_and_peek_flags_return_expire_time_and_tag(q: Any, backend: Any) -> None:
    # Redis keeps expiry times in whole milliseconds of the server's clock (D-058).
    slack = 0.001 if backend.remote else 0.0
    before = time.time()
    key = q.push("v", prefix="f", expire=100, tag="group")
    ((k, v), expire_time, tag) = q.peek(prefix="f", expire_time=True, tag=True)
    assert (k, v, tag) == (key, "v", "group")
    assert before + 100 - slack <= expire_time <= time.time() + 100 + slack
    assert q.peek(prefix="f", tag=True) == ((key, "v"), "group")
    assert q.peek(prefix="f", expire_time=True) == ((key, "v"), expire_time)
    assert q.pull(prefix="f", expire_time=True, tag=True) == ((key, "v"), expire_time, "group")
    key = q.push("w", prefix="f")
    assert q.pull(prefix="f", expire_time=True, tag=True) == ((key, "w"), None, None)


def test_the_default_is_shaped_like_the_flags(q: Any) -> None:
    assert q.pull(prefix="f", expire_time=True, tag=True) == ((None, None), None, None)
    assert q.pull(prefix="f", expire_time=True) == ((None, None), None)
    assert q.pull(prefix="f", tag=True) == ((None, None), None)
    assert q.peek(prefix="f", expire_time=True, tag=True) == ((None, None), None, None)
    assert q.peek(prefix="f", tag=True, default="d") == ("d", None)


def test_peekitem_sees_the_whole_cache(q: Any) -> None:
    q.set("first", 1)
    q.push("item", prefix="p")
    q.set("last", 2)
    assert q.peekitem() == ("last", 2)
    assert q.peekitem(last=False) == ("first", 1)
    q.delete("first")
    assert q.peekitem(last=False) == (skey("p", START), "item")
    assert q.peekitem(last=False, expire_time=True, tag=True) == (
        (skey("p", START), "item"),
        None,
        None,
    )


def test_peekitem_on_an_empty_cache_raises_key_error(q: Any) -> None:
    with pytest.raises(KeyError):
        q.peekitem()


@pytest.mark.needs("directory")
@oxide
def test_peek_takes_no_write_lock(make_cache: Any, dc: Any) -> None:
    """Watchers can peek while a writer holds the lock; a pull has to wait for it."""
    q = make_cache("locked", eviction_policy="none")
    key = q.push("watched", prefix="p")
    directory = q.directory
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        writer = dc.Cache(directory)
        with writer.transact():
            writer.set("held", 1)
            holding.set()
            release.wait(30)
        writer.close()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert holding.wait(30)
        impatient = make_cache("locked", timeout=0.2)
        assert impatient.peek(prefix="p") == (key, "watched")
        assert impatient.peek(prefix="p", side="back") == (key, "watched")
        with pytest.raises(dc.Timeout):
            impatient.pull(prefix="p")
    finally:
        release.set()
        thread.join(30)
    assert q.pull(prefix="p") == (key, "watched")


# ----------------------------------------------------------------------------- expiry, tags


@oxide
def test_expired_items_are_passed_over_and_stay_on_disk(q: Any) -> None:
    q.push("stale", prefix="e", expire=SHORT)
    q.push("fresh", prefix="e")
    q.push("stale at the back", prefix="e", expire=SHORT)
    time.sleep(PAST_IT)
    assert q.peek(prefix="e") == (skey("e", START + 1), "fresh")
    assert q.peek(prefix="e", side="back") == (skey("e", START + 1), "fresh")
    assert len(q) == 3  # nothing removed by looking
    assert q.pull(prefix="e", side="back") == (skey("e", START + 1), "fresh")
    assert q.pull(prefix="e") == (None, None)
    assert q.peek(prefix="e") == (None, None)
    assert len(q) == 2  # the two expired items are still on disk
    assert skey("e", START) not in q
    assert q.expire() == 2
    assert len(q) == 0


@oxide
def test_expired_items_keep_their_numbers_until_removed(q: Any) -> None:
    q.push("live", prefix="e")
    q.push("stale", prefix="e", expire=SHORT)
    time.sleep(PAST_IT)
    assert q.push("next", prefix="e") == skey("e", START + 2)
    assert q.pull(prefix="e") == (skey("e", START), "live")
    assert q.pull(prefix="e") == (skey("e", START + 2), "next")
    q.expire()
    assert q.push("after expire()", prefix="e") == skey("e", START)


@oxide
def test_expired_items_are_removed_by_the_cleanup_of_later_writes(q: Any) -> None:
    for i in range(3):
        q.push(i, prefix="e", expire=SHORT)
    time.sleep(PAST_IT)
    assert len(q) == 3
    q.set("some other write", 1)
    assert len(q) == 1
    assert q.peek(prefix="e") == (None, None)


def test_evict_cancels_a_tagged_group_wherever_it_sits(q: Any) -> None:
    q.push("a", prefix="t", tag="batch-7")
    q.push("b", prefix="t")
    q.push("c", prefix="t", tag="batch-7")
    q.push("d", prefix="t")
    q.push("e", prefix="other", tag="batch-7")
    q.push("f", prefix="t", tag="batch-8")
    assert q.evict("batch-7") == 3
    assert [v for _, v in drain(q, "t")] == ["b", "d", "f"]
    assert q.pull(prefix="other") == (None, None)


# ----------------------------------------------------------------------------- reuse of keys


def test_keys_are_reused_at_the_front(q: Any) -> None:
    first = q.push("a", prefix="r")
    q.push("b", prefix="r")
    assert q.pull(prefix="r") == (first, "a")
    assert q.push("again", prefix="r", side="front") == first


def test_an_emptied_queue_starts_again_at_500_trillion(q: Any) -> None:
    for i in range(3):
        q.push(i, prefix="r")
    drain(q, "r")
    assert q.push("x", prefix="r") == skey("r", START)
    assert q.push("y") == START


# ----------------------------------------------------------------------------- D-054


ORDINARY = {
    "transcode-settings": {"preset": "slow"},
    "transcode-512": "an ordinary key that sorts inside the range",
    "transcode-5000": "a shorter one, also inside the range",
    "transcode-5000000000000000": "sixteen digits: too long",
    "transcode-50000000000000x": "fifteen characters, not all digits",
    "transcode-": "nothing after the dash",
}


@oxide
def test_d054_ordinary_keys_are_never_pulled_numbered_or_counted(q: Any) -> None:
    for key, value in ORDINARY.items():
        q.set(key, value)
    assert q.peek(prefix="transcode") == (None, None)
    assert q.pull(prefix="transcode") == (None, None)
    assert q.pull_many(10, prefix="transcode") == []
    # numbering ignores them: the first item is the queue's first number at both ends
    assert q.push("first", prefix="transcode") == skey("transcode", START)
    assert q.push("front", prefix="transcode", side="front") == skey("transcode", START - 1)
    assert q.push("back", prefix="transcode") == skey("transcode", START + 1)
    assert q.peek(prefix="transcode", side="back") == (skey("transcode", START + 1), "back")
    assert [v for _, v in drain(q, "transcode")] == ["front", "first", "back"]
    assert [v for _, v in drain(q, "transcode", side="back")] == []
    for key, value in ORDINARY.items():
        assert q[key] == value
    assert len(q) == len(ORDINARY)


@oxide
def test_d054_another_queue_sharing_the_prefix_is_left_alone(q: Any) -> None:
    hd = [q.push(f"hd{i}", prefix="transcode-hd") for i in range(3)]
    one = [q.push(f"one{i}", prefix="transcode-1") for i in range(3)]  # sorts inside the range
    assert hd[0] == "transcode-hd-500000000000000"
    assert one[0] == "transcode-1-500000000000000"
    assert q.push("t", prefix="transcode") == skey("transcode", START)
    assert q.push("t2", prefix="transcode", side="front") == skey("transcode", START - 1)
    assert [v for _, v in drain(q, "transcode", side="back")] == ["t", "t2"]
    assert q.peek(prefix="transcode") == (None, None)
    assert [v for _, v in drain(q, "transcode-hd")] == ["hd0", "hd1", "hd2"]
    assert [v for _, v in drain(q, "transcode-1")] == ["one0", "one1", "one2"]
    assert len(q) == 0


@oxide
def test_d054_int_queue_ignores_floats_and_out_of_range_ints(q: Any) -> None:
    q.set(START + 0.5, "a float inside the range")
    q.set(LAST + 1, "an int past the range")
    q.set(-1, "a negative int")
    q.set("500000000000000", "a str of digits")
    q.set(True, "a bool")
    q.set(2**70, "an int beyond 64 bits")
    q.set((START,), "a tuple")
    assert q.pull() == (None, None)
    assert q.push("a") == START
    assert q.push("b") == START + 1
    assert q.push("z", side="front") == START - 1
    assert [v for _, v in drain(q)] == ["z", "a", "b"]
    assert len(q) == 7
    assert q[START + 0.5] == "a float inside the range"


@oxide
def test_d054_len_counts_every_entry(q: Any) -> None:
    for key, value in ORDINARY.items():
        q.set(key, value)
    q.push("x", prefix="transcode")
    q.push("y", prefix="transcode-hd")
    q.push("z", prefix="transcode", expire=0.05)
    time.sleep(0.1)
    assert len(q) == len(ORDINARY) + 3


# ----------------------------------------------------------------------------- D-057


@oxide
@pytest.mark.parametrize("prefix", ["q", None], ids=["str", "int"])
def test_d057_push_past_the_back_raises_and_overwrites_nothing(q: Any, prefix: Any) -> None:
    last = skey(prefix, LAST) if prefix else LAST
    q.set(last, "the last item")
    before = len(q)
    with pytest.raises(OverflowError) as info:
        q.push("one too many", prefix=prefix)
    assert "back" in str(info.value)
    if prefix:
        assert repr(prefix) in str(info.value) or f'"{prefix}"' in str(info.value)
    assert q[last] == "the last item"
    assert len(q) == before
    assert q.pull(prefix=prefix, side="back") == (last, "the last item")


@oxide
@pytest.mark.parametrize("prefix", ["q", None], ids=["str", "int"])
def test_d057_push_past_the_front_raises_and_overwrites_nothing(q: Any, prefix: Any) -> None:
    first = skey(prefix, 0) if prefix else 0
    q.set(first, "the first item")
    with pytest.raises(OverflowError) as info:
        q.push("one too many", prefix=prefix, side="front")
    assert "front" in str(info.value)
    assert q[first] == "the first item"
    assert len(q) == 1
    # the other end still has room
    assert q.push("fine", prefix=prefix) == (skey(prefix, 1) if prefix else 1)


@oxide
def test_d057_the_bounds_themselves_are_usable(q: Any) -> None:
    q.set(skey("q", LAST - 1), "second to last")
    assert q.push("last", prefix="q") == skey("q", LAST)
    assert q.pull(prefix="q", side="back") == (skey("q", LAST), "last")


@oxide
def test_d057_push_many_that_would_overflow_writes_nothing(q: Any) -> None:
    q.set(skey("q", LAST - 1), "second to last")
    with pytest.raises(OverflowError):
        q.push_many(["fits", "does not"], prefix="q")
    assert skey("q", LAST) not in q
    assert len(q) == 1


# ----------------------------------------------------------------------------- transactions


def test_rollback_puts_a_pulled_item_back(q: Any) -> None:
    key = q.push("a", prefix="t")
    q.push("b", prefix="t")
    with pytest.raises(RuntimeError):
        with q.transact():
            assert q.pull(prefix="t") == (key, "a")
            raise RuntimeError("the worker failed before it committed")
    assert q.peek(prefix="t") == (key, "a")
    assert len(q) == 2


def test_rollback_undoes_a_push(q: Any) -> None:
    with pytest.raises(RuntimeError):
        with q.transact():
            q.push("a", prefix="t")
            assert q.peek(prefix="t")[1] == "a"
            raise RuntimeError
    assert q.peek(prefix="t") == (None, None)
    assert len(q) == 0


@pytest.mark.needs("transact")
def test_pull_and_set_commit_together(q: Any) -> None:
    q.push({"id": "j1"}, prefix="t")
    with q.transact():
        _, job = q.pull(prefix="t")
        q.set(f"running:{job['id']}", job)
    assert q.peek(prefix="t") == (None, None)
    assert q["running:j1"] == {"id": "j1"}


@oxide
def test_rollback_of_pull_many_puts_every_item_back(q: Any) -> None:
    q.push_many(list(range(5)), prefix="t")
    with pytest.raises(RuntimeError):
        with q.transact():
            assert [v for _, v in q.pull_many(3, prefix="t")] == [0, 1, 2]
            raise RuntimeError
    assert [v for _, v in drain(q, "t")] == [0, 1, 2, 3, 4]


# ----------------------------------------------------------------------------- decode rules


@dataclass
class Widget:
    """Not storable by the safe format: pickled by a pickle=True handle."""

    size: int


def widget_encode(w: Widget) -> int:
    return w.size


def widget_decode(size: int) -> Widget:
    return Widget(size)


@oxide
def test_a_pickled_item_stays_at_the_front_for_a_safe_handle(make_cache: Any, dc: Any) -> None:
    trusting = make_cache("shared", eviction_policy="none", pickle=True)
    trusting.push(Widget(3), prefix="w")
    trusting.push("plain", prefix="w")
    safe = make_cache("shared")
    for _ in range(2):  # it stays: every try raises again
        with pytest.raises(dc.UnsafeValueError):
            safe.pull(prefix="w")
    with pytest.raises(dc.UnsafeValueError):
        safe.peek(prefix="w")
    assert len(safe) == 2
    # a worker that can read it takes it, then the next item is free for anyone
    assert trusting.pull(prefix="w") == (skey("w", START), Widget(3))
    assert safe.pull(prefix="w") == (skey("w", START + 1), "plain")


@oxide
def test_a_pickled_item_with_miss_returns_the_default_and_stays(make_cache: Any) -> None:
    trusting = make_cache("shared", eviction_policy="none", pickle=True)
    trusting.push(Widget(3), prefix="w")
    trusting.push("behind it", prefix="w")
    missing = make_cache("shared", on_decode_error="miss")
    assert missing.pull(prefix="w") == (None, None)
    assert missing.pull(prefix="w", default="empty?") == "empty?"
    assert missing.pull_many(5, prefix="w") == []
    assert missing.peek(prefix="w") == (None, None)
    assert len(missing) == 2
    assert trusting.pull(prefix="w")[1] == Widget(3)


@oxide
def test_an_unregistered_type_stays_at_the_front(make_cache: Any, dc: Any) -> None:
    cache = make_cache("reg", eviction_policy="none")
    missing = make_cache("reg", on_decode_error="miss")
    dc.register_type(Widget, "tests.queue.Widget", widget_encode, widget_decode)
    try:
        cache.push(Widget(7), prefix="w")
        cache.push("behind it", prefix="w")
    finally:
        dc.unregister_type(Widget)
    # this process no longer knows the type: the item is left for a worker that does
    with pytest.raises(dc.UnknownTypeError):
        cache.pull(prefix="w")
    assert missing.pull(prefix="w") == (None, None)
    assert len(cache) == 2
    dc.register_type(Widget, "tests.queue.Widget", widget_encode, widget_decode)
    try:
        assert cache.pull(prefix="w") == (skey("w", START), Widget(7))
    finally:
        dc.unregister_type(Widget)
    assert cache.pull(prefix="w") == (skey("w", START + 1), "behind it")


@pytest.mark.needs("directory")
@oxide
def test_a_damaged_item_is_removed_and_pull_raises(q: Any, dc: Any) -> None:
    bad = q.push({"episode": 1, "payload": "x" * 50}, prefix="d")
    q.push({"episode": 2}, prefix="d")
    corrupt_inline_value(q.directory, bad)
    with pytest.raises(dc.CorruptValueError):
        q.pull(prefix="d")
    assert bad not in q
    assert len(q) == 1
    assert q.pull(prefix="d") == (skey("d", START + 1), {"episode": 2})


@pytest.mark.needs("directory")
@oxide
def test_a_damaged_item_under_miss_is_logged_and_skipped(
    make_cache: Any, caplog: pytest.LogCaptureFixture
) -> None:
    q = make_cache("dmg", eviction_policy="none", on_decode_error="miss")
    bad = q.push("text that will be damaged", prefix="d")
    q.push("good", prefix="d")
    corrupt_inline_value(q.directory, bad)
    with caplog.at_level(logging.WARNING, logger="diskcache_oxide"):
        assert q.pull(prefix="d") == (skey("d", START + 1), "good")
    assert any(r.name.startswith("diskcache_oxide") for r in caplog.records)
    assert len(q) == 0


@pytest.mark.needs("directory")
@oxide
def test_a_damaged_item_under_miss_is_removed_by_peek(make_cache: Any) -> None:
    q = make_cache("dmg", eviction_policy="none", on_decode_error="miss")
    bad = q.push(b"bytes that will be damaged", prefix="d")
    q.push("good", prefix="d")
    corrupt_inline_value(q.directory, bad)
    assert q.peek(prefix="d") == (skey("d", START + 1), "good")
    assert bad not in q
    assert len(q) == 1


@pytest.mark.needs("directory")
@oxide
def test_a_damaged_peek_raises_by_default(q: Any, dc: Any) -> None:
    bad = q.push({"a": 1}, prefix="d")
    corrupt_inline_value(q.directory, bad)
    with pytest.raises(dc.CorruptValueError):
        q.peek(prefix="d")


@pytest.mark.needs("directory")
@oxide
def test_a_damaged_value_file_is_removed(q: Any, dc: Any) -> None:
    bad = q.push(b"y" * 100_000, prefix="d")
    q.push("good", prefix="d")
    (path,) = support.value_files(q.directory)
    with open(path, "r+b") as f:
        f.seek(50_000)
        f.write(b"Z")
    with pytest.raises(dc.CorruptValueError):
        q.pull(prefix="d")
    assert bad not in q
    assert q.pull(prefix="d") == (skey("d", START + 1), "good")


@pytest.mark.needs("directory")
@oxide
def test_pull_many_under_miss_skips_damaged_items(make_cache: Any) -> None:
    q = make_cache("dmg", eviction_policy="none", on_decode_error="miss")
    keys = q.push_many([f"v{i}" for i in range(5)], prefix="d")
    corrupt_inline_value(q.directory, keys[1])
    corrupt_inline_value(q.directory, keys[3])
    assert q.pull_many(10, prefix="d") == [(keys[0], "v0"), (keys[2], "v2"), (keys[4], "v4")]
    assert len(q) == 0


# ----------------------------------------------------------------------------- iterkeys(prefix)


@oxide
def test_iterkeys_with_a_prefix_scans_only_those_keys_in_order(q: Any) -> None:
    q.set("running:b", 1)
    q.set("running:a", 2)
    q.set("runnin", 3)
    q.set("running;", 4)  # ';' sorts right after ':'
    q.set(42, 5)
    q.push("x", prefix="transcode")
    q.set("transcode-settings", 6)
    assert list(q.iterkeys(prefix="running:")) == ["running:a", "running:b"]
    assert list(q.iterkeys(prefix="running:", reverse=True)) == ["running:b", "running:a"]
    assert list(q.iterkeys(prefix="transcode-")) == [
        skey("transcode", START),
        "transcode-settings",
    ]
    assert list(q.iterkeys(prefix="nothing")) == []


@oxide
def test_iterkeys_prefix_survives_deleting_while_iterating(q: Any) -> None:
    keys = [f"running:{i:04d}" for i in range(250)]  # more than one page of 100
    for key in keys:
        q.set(key, key)
    q.set("other", 1)
    seen = []
    for key in q.iterkeys(prefix="running:"):
        seen.append(key)
        q.delete(key)
    assert seen == keys
    assert len(q) == 1


@oxide
def test_iterkeys_prefix_counts_a_queue(q: Any) -> None:
    q.push_many(list(range(120)), prefix="transcode")
    assert sum(1 for _ in q.iterkeys(prefix="transcode-")) == 120


# ----------------------------------------------------------------------------- batches


@oxide
def test_push_many_numbers_like_pushes_in_a_row(make_cache: Any) -> None:
    batched = make_cache("a", eviction_policy="none")
    single = make_cache("b", eviction_policy="none")
    for side in ("back", "front", "back"):
        values = [f"{side}{i}" for i in range(4)]
        assert batched.push_many(values, prefix="p", side=side) == [
            single.push(v, prefix="p", side=side) for v in values
        ]
    assert drain(batched, "p") == drain(single, "p")


@oxide
def test_push_many_without_prefix_and_with_expire_and_tag(q: Any) -> None:
    keys = q.push_many(["a", "b"], expire=100, tag="t")
    assert keys == [START, START + 1]
    ((_, v), expire_time, tag) = q.pull(expire_time=True, tag=True)
    assert (v, tag) == ("a", "t") and expire_time is not None
    assert q.evict("t") == 1


@oxide
def test_push_many_of_nothing(q: Any) -> None:
    assert q.push_many([], prefix="p") == []
    assert len(q) == 0


@oxide
def test_pull_many_returns_up_to_n_items_in_order(q: Any) -> None:
    keys = q.push_many(list(range(10)), prefix="p")
    assert q.pull_many(4, prefix="p") == list(zip(keys[:4], range(4), strict=True))
    assert q.pull_many(3, prefix="p", side="back") == [(keys[9], 9), (keys[8], 8), (keys[7], 7)]
    assert q.pull_many(100, prefix="p") == list(zip(keys[4:7], range(4, 7), strict=True))
    assert q.pull_many(5, prefix="p") == []


@oxide
def test_pull_many_with_flags(q: Any) -> None:
    k1 = q.push("a", prefix="p", tag="x")
    k2 = q.push("b", prefix="p")
    got = q.pull_many(5, prefix="p", expire_time=True, tag=True)
    assert got == [((k1, "a"), None, "x"), ((k2, "b"), None, None)]


@oxide
def test_pull_many_passes_over_expired_items(q: Any) -> None:
    q.push("stale", prefix="p", expire=0.05)
    q.push("live", prefix="p")
    time.sleep(0.15)
    assert [v for _, v in q.pull_many(5, prefix="p")] == ["live"]


@pytest.mark.needs("atomic_batches")
@oxide
def test_pull_many_is_one_transaction(q: Any) -> None:
    """Another thread never sees half a batch pulled: its pulls wait for the whole one."""
    q.push_many(list(range(2000)), prefix="p")
    other: list[Any] = []
    start = threading.Event()

    def pull_one() -> None:
        start.wait(10)
        other.append(q.pull(prefix="p", retry=True))

    thread = threading.Thread(target=pull_one)
    thread.start()
    start.set()
    batch = q.pull_many(1000, prefix="p", retry=True)
    thread.join(30)
    assert not thread.is_alive()
    numbers = [v for _, v in batch]
    (_, theirs) = other[0]
    # the single pull came either before the batch (so the batch starts at 1) or after it
    assert numbers == list(range(numbers[0], numbers[0] + 1000))
    assert (theirs == 0 and numbers[0] == 1) or (numbers[0] == 0 and theirs == 1000)


# ----------------------------------------------------------------------------- blocking pull


@oxide
def test_pull_with_timeout_returns_an_item_pushed_later_by_another_thread(q: Any) -> None:
    def push_later() -> None:
        time.sleep(0.2)
        q.push("late", prefix="b")

    thread = threading.Thread(target=push_later)
    started = time.monotonic()
    thread.start()
    try:
        assert q.pull(prefix="b", timeout=20) == (skey("b", START), "late")
    finally:
        thread.join(10)
    assert time.monotonic() - started < 15


@oxide
def test_pull_with_timeout_returns_the_default_when_nothing_comes(q: Any) -> None:
    started = time.monotonic()
    assert q.pull(prefix="b", timeout=0.3) == (None, None)
    assert q.pull(prefix="b", timeout=0.1, default="none") == "none"
    assert time.monotonic() - started < 10


@oxide
def test_pull_with_timeout_ignores_other_writes(q: Any) -> None:
    """Writes to other keys and queues wake the waiter, which finds nothing and waits on."""
    stop = threading.Event()

    def noise() -> None:
        i = 0
        while not stop.is_set():
            q.set(f"noise-{i % 10}", i, retry=True)
            q.push(i, prefix="other", retry=True)
            i += 1
            time.sleep(0.01)

    thread = threading.Thread(target=noise)
    thread.start()
    try:
        assert q.pull(prefix="b", timeout=0.5) == (None, None)
    finally:
        stop.set()
        thread.join(10)


@oxide
def test_a_waiting_pull_does_not_spin(q: Any) -> None:
    """D-013: the waiter sleeps until a write; a generous bound on CPU while it waits."""
    cpu = time.process_time()
    assert q.pull(prefix="b", timeout=1.0) == (None, None)
    assert time.process_time() - cpu < 0.5


@oxide
def test_pull_many_with_timeout_waits_only_while_empty(q: Any) -> None:
    q.push("ready", prefix="b")
    started = time.monotonic()
    assert [v for _, v in q.pull_many(10, prefix="b", timeout=5)] == ["ready"]
    assert time.monotonic() - started < 4  # returned what there was, did not wait for 10

    def push_later() -> None:
        time.sleep(0.2)
        q.push_many(["x", "y"], prefix="b")

    thread = threading.Thread(target=push_later)
    thread.start()
    try:
        assert [v for _, v in q.pull_many(10, prefix="b", timeout=20)] == ["x", "y"]
    finally:
        thread.join(10)
    assert q.pull_many(10, prefix="b", timeout=0.1) == []


@oxide
def test_pull_with_timeout_from_many_threads_hands_each_item_to_one(q: Any) -> None:
    got: list[Any] = []
    lock = threading.Lock()

    def worker() -> None:
        while True:
            key, value = q.pull(prefix="b", timeout=1.0, retry=True)
            if key is None:
                return
            with lock:
                got.append(value)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for i in range(200):
        q.push(i, prefix="b", retry=True)
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert sorted(got) == list(range(200))


# ----------------------------------------------------------------------------- arguments


@oxide
def test_side_must_be_front_or_back(q: Any) -> None:
    with pytest.raises(ValueError):
        q.push(1, side="middle")
    with pytest.raises(ValueError):
        q.pull(side="middle")
    with pytest.raises(ValueError):
        q.peek(side="top")


@oxide
def test_a_closed_cache_reopens_for_queue_calls(make_cache: Any) -> None:
    q = make_cache("c", eviction_policy="none")
    q.push("a", prefix="p")
    q.close()
    assert q.pull(prefix="p") == (skey("p", START), "a")


@pytest.mark.needs("directory")
@oxide
def test_queue_survives_reopening_the_directory(make_cache: Any, dc: Any) -> None:
    q = make_cache("c", eviction_policy="none")
    q.push_many([1, 2, 3], prefix="p")
    q.close()
    again = dc.Cache(q.directory)
    try:
        assert again.eviction_policy == "none"
        assert [v for _, v in drain(again, "p")] == [1, 2, 3]
    finally:
        again.close()


# ----------------------------------------------------------------------------- state machine


class QueueMachine(RuleBasedStateMachine):
    """The queue against a model: one deque of (number, value) per prefix, plus noise keys
    that sort inside the queues' ranges and must never disturb them (D-054)."""

    PREFIXES = ("jobs", "jobs-1", None)
    NOISE = ("jobs-512", "jobs-settings", "jobs-1-x", START + 0.5, LAST + 7)

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="queue-machine-")
        self.cache = support.impl().Cache(self.directory, eviction_policy="none")
        self.model: dict[Any, collections.deque[tuple[int, Any]]] = {
            p: collections.deque() for p in self.PREFIXES
        }
        self.noise: dict[Any, Any] = {}

    def teardown(self) -> None:
        self.cache.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def key(self, prefix: Any, number: int) -> Any:
        return number if prefix is None else skey(prefix, number)

    def next_number(self, prefix: Any, side: str) -> int:
        items = self.model[prefix]
        if not items:
            return START
        return items[-1][0] + 1 if side == "back" else items[0][0] - 1

    @rule(
        prefix=st.sampled_from(PREFIXES),
        side=st.sampled_from(["front", "back"]),
        value=st.integers() | st.text(max_size=5),
    )
    def push(self, prefix: Any, side: str, value: Any) -> None:
        number = self.next_number(prefix, side)
        assert self.cache.push(value, prefix=prefix, side=side) == self.key(prefix, number)
        if side == "back":
            self.model[prefix].append((number, value))
        else:
            self.model[prefix].appendleft((number, value))

    @rule(
        prefix=st.sampled_from(PREFIXES),
        side=st.sampled_from(["front", "back"]),
        values=st.lists(st.integers(), max_size=4),
    )
    def push_many(self, prefix: Any, side: str, values: list[int]) -> None:
        keys = self.cache.push_many(values, prefix=prefix, side=side)
        expected = []
        for value in values:
            number = self.next_number(prefix, side)
            expected.append(self.key(prefix, number))
            if side == "back":
                self.model[prefix].append((number, value))
            else:
                self.model[prefix].appendleft((number, value))
        assert keys == expected

    @rule(prefix=st.sampled_from(PREFIXES), side=st.sampled_from(["front", "back"]))
    def pull(self, prefix: Any, side: str) -> None:
        items = self.model[prefix]
        got = self.cache.pull(prefix=prefix, side=side)
        if not items:
            assert got == (None, None)
            return
        number, value = items.popleft() if side == "front" else items.pop()
        assert got == (self.key(prefix, number), value)

    @rule(
        prefix=st.sampled_from(PREFIXES),
        side=st.sampled_from(["front", "back"]),
        n=st.integers(1, 4),
    )
    def pull_many(self, prefix: Any, side: str, n: int) -> None:
        items = self.model[prefix]
        expected = []
        for _ in range(min(n, len(items))):
            number, value = items.popleft() if side == "front" else items.pop()
            expected.append((self.key(prefix, number), value))
        assert self.cache.pull_many(n, prefix=prefix, side=side) == expected

    @rule(prefix=st.sampled_from(PREFIXES), side=st.sampled_from(["front", "back"]))
    def peek(self, prefix: Any, side: str) -> None:
        items = self.model[prefix]
        got = self.cache.peek(prefix=prefix, side=side)
        if not items:
            assert got == (None, None)
        else:
            number, value = items[0] if side == "front" else items[-1]
            assert got == (self.key(prefix, number), value)

    @rule(key=st.sampled_from(NOISE), value=st.integers())
    def set_noise(self, key: Any, value: int) -> None:
        self.cache.set(key, value)
        self.noise[key] = value

    @precondition(lambda self: bool(self.noise))
    @rule(data=st.data())
    def delete_noise(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.noise, key=repr)))
        assert self.cache.delete(key)
        del self.noise[key]

    @invariant()
    def counts(self) -> None:
        assert len(self.cache) == sum(map(len, self.model.values())) + len(self.noise)


QueueMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_queue_state_machine = pytest.mark.oxide(QueueMachine.TestCase)


# ----------------------------------------------------------------------------- the guide


GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide-queue.md"


@oxide
def test_guide_code_blocks_run_and_print_what_they_say(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/guide-queue.md: its ```python blocks run in order as one session; a trailing
    comment on a print() line, or one starting with 'prints:', is the expected output."""
    text = GUIDE.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 8
    expected = []
    for block in blocks:
        for line in block.splitlines():
            code, _, comment = line.partition("  # ")
            if "print(" in code and comment:
                expected.append(comment)
            elif comment.startswith("prints: "):
                expected.append(comment[len("prints: ") :])
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    namespace: dict[str, Any] = {"__name__": "guide"}
    try:
        for i, block in enumerate(blocks):
            exec(compile(block, f"<guide-queue.md block {i + 1}>", "exec"), namespace)
    finally:
        if "queue" in namespace:
            namespace["queue"].close()
    assert capsys.readouterr().out.splitlines() == expected


# ----------------------------------------------------------------------------- pickle sanity


def test_widget_pickles() -> None:
    """The pickled-item tests rely on Widget being picklable by reference."""
    assert pickle.loads(pickle.dumps(Widget(1))) == Widget(1)
