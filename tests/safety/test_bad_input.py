"""Bad input: every public call given a wrong argument type or an out-of-range value raises
TypeError or ValueError whose message names the argument; a value the cache cannot store
(nested too deep, a reference cycle, a registered type whose encoder or decoder misbehaves)
raises a Python exception, never a crash or a hang.

The tables are the count reported in the reliability figures (``bad inputs tried``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import diskcache_oxide as dco
import pytest
import support

pytestmark = pytest.mark.oxide

NAN = float("nan")
INF = float("inf")

# (call, argument the message must name, bad value, expected exception)
Case = tuple[str, str, Any, type[Exception]]

CACHE: list[Any] = [
    ("set", "expire", "soon", TypeError),
    ("set", "expire", NAN, ValueError),
    ("set", "tag", [1], TypeError),
    ("add", "expire", "soon", TypeError),
    ("add", "tag", {}, TypeError),
    ("touch", "expire", "x", TypeError),
    ("incr", "delta", "1", TypeError),
    ("decr", "delta", "1", TypeError),
    ("push", "side", "middle", ValueError),
    ("push", "expire", "x", TypeError),
    ("pull", "side", "middle", ValueError),
    ("pull", "timeout", -1, ValueError),
    ("pull", "timeout", "x", TypeError),
    ("peek", "side", 3, ValueError),
    ("push_many", "side", "x", ValueError),
    ("pull_many", "n", -1, ValueError),
    ("pull_many", "n", "2", TypeError),
    ("evict", "tag", [1], TypeError),
    ("memoize", "expire", "x", TypeError),
    ("reset", "key", 3, TypeError),
    ("reset", "size_limit", -1, ValueError),
    ("reset", "eviction_policy", "random", ValueError),
]


def _call(cache: Any, method: str, arg: str, bad: Any) -> None:
    m = getattr(cache, method)
    if method in ("set", "add"):
        m("k", 1, **{arg: bad})
    elif method == "touch":
        m("k", **{arg: bad})
    elif method in ("incr", "decr"):
        m("n", **{arg: bad})
    elif method == "push":
        m(1, **{arg: bad})
    elif method == "push_many":
        m([1], **{arg: bad})
    elif method == "pull_many":
        m(bad)
    elif method == "memoize":
        m(**{arg: bad})(lambda: 1)()
    elif method == "reset":
        if arg == "key":
            m(bad, 1)
        else:
            m(arg, bad)
    elif method == "evict":
        m(bad)
    else:
        m(**{arg: bad})


@pytest.mark.parametrize(("method", "arg", "bad", "exc"), CACHE)
def test_cache_calls(tmp_path: Path, method: str, arg: str, bad: Any, exc: type[Exception]) -> None:
    cache = dco.Cache(str(tmp_path / "c"))
    cache.set("k", 1)
    with pytest.raises((TypeError, ValueError)) as info:
        _call(cache, method, arg, bad)
    assert isinstance(info.value, exc), info.value
    assert arg in str(info.value), f"{method}({arg}={bad!r}) -> {info.value!r}"


OPEN: list[Any] = [
    ({"timeout": -1}, "timeout"),
    ({"timeout": NAN}, "timeout"),
    ({"timeout": "x"}, "timeout"),
    ({"on_decode_error": "ignore"}, "on_decode_error"),
    ({"size_limit": -1}, "size_limit"),
    ({"size_limit": "big"}, "size_limit"),
    ({"cull_limit": -5}, "cull_limit"),
    ({"eviction_policy": "random"}, "eviction_policy"),
    ({"eviction_policy": 3}, "eviction_policy"),
    ({"statistics": 2}, "statistics"),
    ({"sqlite_journal_mode": "delete"}, "sqlite_journal_mode"),
    ({"sqlite_synchronous": 9}, "sqlite_synchronous"),
    ({"disk_min_file_size": -1}, "disk_min_file_size"),
    ({"no_such_setting": 1}, "no_such_setting"),
    ({"permissions": "world"}, "permissions"),
    ({"disk": object()}, "disk"),
]


@pytest.mark.parametrize(("kwargs", "arg"), OPEN)
def test_cache_open(tmp_path: Path, kwargs: dict[str, Any], arg: str) -> None:
    with pytest.raises((TypeError, ValueError)) as info:
        dco.Cache(str(tmp_path / "c"), **kwargs)
    assert arg in str(info.value) or (arg == "disk" and "Disk" in str(info.value)), info.value


def test_on_decode_error_rejects_unknown_mode(dc, tmp_path):
    with pytest.raises((ValueError, TypeError)):
        dc.Cache(str(tmp_path / "x"), on_decode_error="ignore")


JOBS: list[tuple[Callable[[Any], Any], str]] = [
    (lambda j: j.put(1, delay=-1), "delay"),
    (lambda j: j.put(1, delay="x"), "delay"),
    (lambda j: j.put(1, queue=3), "queue"),
    (lambda j: j.take(timeout=-1), "timeout"),
    (lambda j: j.take(lease="x"), "lease"),
    (lambda j: j.take_many(-1), "n"),
    (lambda j: j.dead(limit=-1), "limit"),
    (lambda j: j.requeue("x"), "job_id"),
    (lambda j: j.get("x"), "job_id"),
    (lambda j: j.finish("x"), "job"),
    (lambda j: dco.JobQueue(j.cache, queues=[]), "queues"),
    (lambda j: dco.JobQueue(j.cache, lease=-1), "lease"),
    (lambda j: dco.JobQueue(j.cache, max_attempts=-1), "max_attempts"),
    (lambda j: dco.JobQueue(3), "cache_or_directory"),
]


@pytest.mark.parametrize(("call", "arg"), JOBS)
def test_jobqueue_calls(tmp_path: Path, call: Callable[[Any], Any], arg: str) -> None:
    jobs = dco.JobQueue(str(tmp_path / "j"))
    with pytest.raises((TypeError, ValueError)) as info:
        call(jobs)
    assert arg in str(info.value), info.value


FANOUT: list[Any] = [
    (lambda d: dco.FanoutCache(d, shards=0), "shards"),
    (lambda d: dco.FanoutCache(d, shards="8"), "shards"),
    (lambda d: dco.FanoutCache(d, timeout=-1), "timeout"),
    (lambda d: dco.FanoutCache(d, size_limit=-1), "size_limit"),
    (lambda d: dco.FanoutCache(d).set("k", 1, expire="x"), "expire"),
    (lambda d: dco.FanoutCache(d).incr("k", delta="x"), "delta"),
    (lambda d: dco.FanoutCache(d).evict([1]), "tag"),
]


@pytest.mark.parametrize(("call", "arg"), FANOUT)
def test_fanout_calls(tmp_path: Path, call: Callable[[str], Any], arg: str) -> None:
    with pytest.raises((TypeError, ValueError)) as info:
        call(str(tmp_path / "f"))
    assert arg in str(info.value), info.value


def test_count() -> None:
    tried = len(CACHE) + len(OPEN) + len(JOBS) + len(FANOUT)
    print(f"bad inputs tried: {tried}")
    assert tried >= 55


def test_a_file_in_the_directory_path_is_not_a_directory(tmp_path: Any) -> None:
    """As with python-diskcache (os.makedirs): NotADirectoryError, naming the file."""
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    with pytest.raises(NotADirectoryError, match="afile"):
        dco.Cache(str(blocker / "sub"))


# ----------------------------------------------------------------------------- unstorable values


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


def test_a_value_whose_shared_references_multiply_is_refused_not_hung(tmp_path: Any) -> None:
    # 40 levels of [x, x] are 2**40 items written out: refused with a ValueError once past the
    # encoder's budget, instead of a set() that never returns; pickle=True keeps it.
    value: Any = [1]
    for _ in range(40):
        value = [value, value]
    with dco.Cache(str(tmp_path / "safe")) as cache:
        with pytest.raises(ValueError, match="shared list, dict or set"):
            cache.set("k", value)
        assert "k" not in cache
    with dco.Cache(str(tmp_path / "pickled"), pickle=True) as cache:
        cache.set("k", value)
        got = cache.get("k")
        for _ in range(40):  # the same shape, each level's two references one object
            assert len(got) == 2 and got[0] is got[1]
            got = got[0]
        assert got == [1]


def test_a_misspelled_setting_creates_nothing(tmp_path: Any) -> None:
    directory = tmp_path / "never"
    with pytest.raises(ValueError, match="unknown setting"):
        dco.Cache(str(directory), siz_limit=1)
    assert not directory.exists()
