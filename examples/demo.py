"""diskcache_oxide demo: one cache directory, two processes.

The parent process stores a few values, then starts a child process (this same script,
run with ``--child``). The child reads the values back with their exact types, both
processes bump one shared counter at the same time, and a memoized function computed by
the parent is served to the child from the cache without running again.

Run it with ``make demo`` (builds the extension first) or ``python examples/demo.py``.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from decimal import Decimal

import diskcache_oxide as dc

INCREMENTS = 500
CALLS_KEY = "calls-of-slow-square"


def say(who: str, message: str) -> None:
    print(f"[{who:<6}] {message}", flush=True)


def open_cache(directory: str) -> tuple[dc.Cache, Callable[[int], int]]:
    """The shared cache, and a function memoized in it (the same entry in every process)."""
    cache = dc.Cache(directory)

    @cache.memoize(name="slow_square")
    def slow_square(x: int) -> int:
        cache.incr(CALLS_KEY)  # counts how often the body really runs, in any process
        time.sleep(0.5)  # pretend this is expensive
        return x * x

    return cache, slow_square


def wait_for(cache: dc.Cache, key: str, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while key not in cache:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def parent() -> int:
    directory = tempfile.mkdtemp(prefix="diskcache-oxide-demo-")
    try:
        return run_parent(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def run_parent(directory: str) -> int:
    cache, slow_square = open_cache(directory)
    say("parent", f"opened a cache in {directory} (pid {os.getpid()})")

    profile = {
        "name": "Ada",
        "languages": ("python", "rust"),
        "scores": [9.5, 8.25],
        "address": {"city": "London", "postcode": None},
        "balance": Decimal("12.50"),
    }
    launched = dt.datetime(2025, 7, 1, 9, 30, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    cache["profile"] = profile
    cache.set("launched", launched, tag="demo")
    cache.set("greeting", "hello from the parent", expire=60)
    say("parent", "stored a nested dict, a time-zone aware datetime and a greeting (60 s)")

    try:
        cache["socket"] = object()
    except dc.UnsupportedTypeError as exc:
        say("parent", f"refused to store an arbitrary object, no pickling: {exc}")

    started = time.perf_counter()
    result = slow_square(12)
    say("parent", f"slow_square(12) = {result}, computed in {time.perf_counter() - started:.2f} s")

    say("parent", "starting the child process")
    child = subprocess.Popen([sys.executable, __file__, "--child", directory])
    if not wait_for(cache, "child-ready"):
        child.kill()
        say("parent", "the child never became ready")
        return 1
    cache["go"] = True  # both processes now increment at the same time
    seen = [cache.incr("counter", retry=True) for _ in range(INCREMENTS)]
    say(
        "parent",
        f"incremented the shared counter {INCREMENTS} times (saw {seen[0]} .. {seen[-1]})",
    )
    try:
        code = child.wait(timeout=60)
    except subprocess.TimeoutExpired:
        child.kill()
        say("parent", "the child did not finish in time")
        return 1
    if code != 0:
        say("parent", f"the child failed with exit code {code}")
        return 1

    counter = cache["counter"]
    calls = cache.get(CALLS_KEY, 0)
    reply = cache.get("reply")
    say("parent", f"the child says: {reply!r}")
    say("parent", f"shared counter = {counter} (expected {2 * INCREMENTS})")
    say("parent", f"slow_square's body ran {calls} time(s) across both processes")
    ok = counter == 2 * INCREMENTS and calls == 1 and reply is not None
    cache.close()
    print()
    print(
        ("OK" if ok else "FAILED")
        + f": 2 processes shared one cache: values round-tripped with their types, "
        f"counter reached {counter}, memoized call computed {calls}x and served from cache."
    )
    return 0 if ok else 1


def child(directory: str) -> int:
    cache, slow_square = open_cache(directory)
    who = "child"
    say(who, f"opened the same directory (pid {os.getpid()})")

    profile = cache["profile"]
    launched = cache["launched"]
    say(who, f"read profile: {profile}")
    assert type(profile["languages"]) is tuple, "tuples stay tuples"
    assert type(profile["balance"]) is Decimal
    assert launched.utcoffset() == dt.timedelta(hours=2), "time zone kept"
    say(who, f"read launched: {launched.isoformat()} (tuple, Decimal and tz all intact)")
    say(who, f"read greeting: {cache['greeting']!r}")

    cache["child-ready"] = True
    if not wait_for(cache, "go"):
        return 1
    seen = [cache.incr("counter", retry=True) for _ in range(INCREMENTS)]
    say(
        who,
        f"incremented the shared counter {INCREMENTS} times (saw {seen[0]} .. {seen[-1]}), "
        "concurrently with the parent",
    )

    started = time.perf_counter()
    result = slow_square(12)
    elapsed = time.perf_counter() - started
    say(who, f"slow_square(12) = {result} in {elapsed * 1e6:.0f} us: served from the cache")

    cache["reply"] = f"hi parent, child {os.getpid()} was here"
    cache.close()
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        sys.exit(child(sys.argv[2]))
    sys.exit(parent())
