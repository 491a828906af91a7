"""Differential tests: one random sequence of operations runs against python-diskcache
5.6.3 and against the implementation under test, and every result is compared.

Time is kept out of the comparison: expiries are None, far in the future (1e6 s) or
well in the past (-1000 s), so whether an item has expired never depends on when an
operation runs; expire_time values are compared as "none / far future / past".

Every known, intended departure (docs/decisions/D-011) is excluded here explicitly:
- NaN float values (python-diskcache turns a top-level NaN into None): not generated.
- incr()/decr() on a stored bool, on an int beyond 64 bits, or with a result beyond 64
  bits: python-diskcache raises TypeError/OverflowError (it adds to pickle bytes, or cannot
  bind the sum); here Python's arithmetic applies. Such steps are skipped, on both sides,
  after checking the reference would have raised.
- The relative order of non-native keys (tuples, None, bools, big ints, frozensets) in
  iterkeys(): they sort by their encoded bytes, which are CBOR here and pickle there.
  iterkeys() is compared on the order of native keys and the set of all keys.
- A transact() block that is rolled back after touching a key whose value lives in a value
  file: python-diskcache deletes that file before the rollback and the key is lost. Such
  blocks are skipped on both sides.

``test_differential_on_redis`` (the conformance suite, tests/helpers/backends.py) runs the
same sequences against a RedisCache on a server and a cluster, without the ``transact`` and
``cull`` steps (those gaps' own tests are strict xfails in test_api.py), and with what D-058
says a namespace lists differently: a float key equal to an int is listed as the int.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import support
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow

# ----------------------------------------------------------------------------- strategies

KEYS = [
    "a",
    "b",
    "",
    "ünï",
    0,
    1,
    1.0,
    -5,
    2.5,
    -0.0,
    float("inf"),
    2**63 - 1,
    b"a",
    b"",
    True,
    False,
    None,
    (1, 2),
    ("a",),
    (1.0, 2),
    2**70,
    frozenset({1, "x"}),
]
# a few hot keys make collisions (set then incr, add over expired, ...) common
keys = st.sampled_from(["a", 1, True, (1, 2)]) | st.sampled_from(KEYS)

leaf_values = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.integers(min_value=-1000, max_value=1000)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.binary(max_size=12)
)
values = st.recursive(
    leaf_values,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(st.text(max_size=5) | st.integers(-5, 5), inner, max_size=4)
    ),
    max_leaves=10,
) | st.integers(0, 255).map(lambda b: bytes([b]) * 40_000)  # stored in a value file

expires = st.sampled_from([None, None, None, 1e6, -1000.0])
tags = st.sampled_from([None, None, "t1", "t2", 7])
flags = st.booleans()
defaults = st.sampled_from([None, "dflt", 0])

# no bools and no big ints: an incr inside the block can then never hit the incr departure
small_values = st.recursive(
    st.none()
    | st.integers(-1000, 1000)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.lists(inner, max_size=3).map(tuple),
    max_leaves=5,
)
# operations allowed inside a transact() block
sub_ops = st.one_of(
    st.tuples(st.just("set"), keys, small_values, expires, tags),
    st.tuples(st.just("add"), keys, small_values, expires, tags),
    st.tuples(st.just("get"), keys, defaults, flags, flags),
    st.tuples(st.just("pop"), keys, defaults, flags, flags),
    st.tuples(st.just("delete"), keys),
    st.tuples(st.just("incr"), keys, st.integers(-3, 3), st.sampled_from([0, None])),
    st.tuples(st.just("contains"), keys),
    st.tuples(st.just("len")),
)

ops = st.one_of(
    st.tuples(st.just("transact"), st.booleans(), st.lists(sub_ops, min_size=1, max_size=4)),
    st.tuples(st.just("set"), keys, values, expires, tags),
    st.tuples(st.just("get"), keys, defaults, flags, flags),
    st.tuples(st.just("add"), keys, values, expires, tags),
    st.tuples(st.just("pop"), keys, defaults, flags, flags),
    st.tuples(st.just("delete"), keys),
    st.tuples(st.just("getitem"), keys),
    st.tuples(st.just("delitem"), keys),
    st.tuples(
        st.just("incr"),
        keys,
        st.integers(-3, 3),
        st.sampled_from([0, 10, None]),
    ),
    st.tuples(st.just("decr"), keys, st.integers(-3, 3), st.sampled_from([0, None])),
    st.tuples(st.just("touch"), keys, expires),
    st.tuples(st.just("contains"), keys),
    st.tuples(st.just("len")),
    st.tuples(st.just("iter")),
    st.tuples(st.just("reversed")),
    st.tuples(st.just("iterkeys"), flags),
    st.tuples(st.just("peekitem"), flags, flags, flags),
    st.tuples(st.just("evict"), st.sampled_from(["t1", "t2", 7, "none"])),
    st.tuples(st.just("expire")),
    st.tuples(st.just("cull")),
    st.tuples(st.just("clear")),
    st.tuples(st.just("stats"), flags, flags),
)

# ----------------------------------------------------------------------------- execution


def norm_expire(x: Any) -> Any:
    if x is None:
        return None
    now = time.time()
    if x > now + 1000:
        return "far-future"
    if x < now - 100:
        return "past"
    return ("near", round(x - now))


def outcome(fn) -> tuple[str, Any]:
    try:
        return ("ok", fn())
    except KeyError:
        return ("raise", "KeyError")
    except TypeError:
        return ("raise", "TypeError")
    except ValueError:
        return ("raise", "ValueError")
    except Exception as exc:  # any other exception is compared by its name
        return ("raise", type(exc).__name__)


def with_flags(result: Any, expire_time: bool, tag: bool) -> Any:
    """Normalise the expire_time member of a (value, expire_time, tag) style result."""
    if expire_time and tag:
        value, et, tg = result
        return (value, norm_expire(et), tg)
    if expire_time:
        value, et = result
        return (value, norm_expire(et))
    return result


class Rollback(Exception):
    """Raised at the end of a transact() block that the sequence wants rolled back."""


def apply(cache: Any, op: tuple) -> tuple[str, Any]:
    name, *args = op
    if name == "transact":
        rollback, subs = args
        results: list = []
        try:
            with cache.transact():
                results.extend(apply(cache, sub) for sub in subs)
                if rollback:
                    raise Rollback
        except Rollback:
            return ("rolled back", results)
        return ("committed", results)
    if name == "set":
        key, value, expire, tag = args
        return outcome(lambda: cache.set(key, value, expire=expire, tag=tag))
    if name == "add":
        key, value, expire, tag = args
        return outcome(lambda: cache.add(key, value, expire=expire, tag=tag))
    if name == "get":
        key, default, et, tg = args
        return outcome(lambda: with_flags(cache.get(key, default, expire_time=et, tag=tg), et, tg))
    if name == "pop":
        key, default, et, tg = args
        return outcome(lambda: with_flags(cache.pop(key, default, expire_time=et, tag=tg), et, tg))
    if name == "delete":
        return outcome(lambda: cache.delete(args[0]))
    if name == "getitem":
        return outcome(lambda: cache[args[0]])
    if name == "delitem":

        def delitem():
            del cache[args[0]]

        return outcome(delitem)
    if name == "incr":
        key, delta, default = args
        return outcome(lambda: cache.incr(key, delta, default=default))
    if name == "decr":
        key, delta, default = args
        return outcome(lambda: cache.decr(key, delta, default=default))
    if name == "touch":
        key, expire = args
        return outcome(lambda: cache.touch(key, expire=expire))
    if name == "contains":
        return outcome(lambda: args[0] in cache)
    if name == "len":
        return outcome(lambda: len(cache))
    if name == "iter":
        return outcome(lambda: list(cache))
    if name == "reversed":
        return outcome(lambda: list(reversed(cache)))
    if name == "iterkeys":
        return outcome(lambda: keys_view(list(cache.iterkeys(reverse=args[0]))))
    if name == "peekitem":
        last, et, tg = args

        def peek():
            result = cache.peekitem(last=last, expire_time=et, tag=tg)
            if et and tg:
                item, e, t = result
                return (item, norm_expire(e), t)
            if et:
                item, e = result
                return (item, norm_expire(e))
            return result

        return outcome(peek)
    if name == "evict":
        return outcome(lambda: cache.evict(args[0]))
    if name == "expire":
        return outcome(lambda: cache.expire())
    if name == "cull":
        return outcome(lambda: cache.cull())
    if name == "clear":
        return outcome(lambda: cache.clear())
    if name == "stats":
        enable, reset = args
        return outcome(lambda: cache.stats(enable=enable, reset=reset))
    raise AssertionError(f"unknown op {name}")


def keys_view(keys_in_order: list) -> tuple:
    """iterkeys() compared as: native keys in order, plus the multiset of all keys (D-011)."""
    native = [k for k in keys_in_order if support.is_native_key(k)]
    # a number's identity by value: 1.0 and 1 are one key, however the backend lists it
    everything = sorted(repr(int_floats(support.key_identity(k))) for k in keys_in_order)
    return (native, everything)


def same(a: Any, b: Any) -> bool:
    return support.explain_difference(a, b) is None


I64 = range(-(2**63), 2**63)


def departs(ref_cache: Any, op: tuple) -> bool:
    """Whether this step falls under a D-011 departure (see the module docstring)."""
    if op[0] == "transact":
        rollback, subs = op[1], op[2]
        if any(departs(ref_cache, sub) for sub in subs):
            return True
        # python-diskcache loses file-backed values touched in a rolled-back transaction
        return rollback and any(
            isinstance(peek_reference(ref_cache, sub[1]), (bytes, str))
            and len(peek_reference(ref_cache, sub[1])) >= 32768
            for sub in subs
            if len(sub) > 1
        )
    return incr_departs(ref_cache, op)


def incr_departs(ref_cache: Any, op: tuple) -> bool:
    """Whether this incr/decr step falls under the D-011 incr departure (see above)."""
    if op[0] not in ("incr", "decr"):
        return False
    _, key, delta, _ = op
    current = peek_reference(ref_cache, key)
    if type(current) is bool:
        return True
    if type(current) is int:
        total = current + delta if op[0] == "incr" else current - delta
        return current not in I64 or total not in I64
    return False


def peek_reference(ref_cache: Any, key: Any) -> Any:
    """The reference's live value for ``key`` (None if absent), read without side effects:
    straight from its table, so no statistics or access times change. The pickles read
    here are the ones this test wrote a moment ago."""
    db_key, raw = ref_cache._disk.put(key)
    rows = ref_cache._sql(
        "SELECT mode, filename, value FROM Cache WHERE key = ? AND raw = ?"
        " AND (expire_time IS NULL OR expire_time > ?)",
        (db_key, raw, time.time()),
    ).fetchall()
    if not rows:
        return None
    ((mode, filename, value),) = rows
    return ref_cache._disk.fetch(mode, filename, value, False)


def int_floats(thing: Any) -> Any:
    """``thing`` with every float equal to an int made that int, in the tuples and lists of
    a result (not inside a key): how a Redis namespace lists the keys (D-058)."""
    if type(thing) is float and thing.is_integer():
        return int(thing)
    if type(thing) is list or (type(thing) is tuple and thing[:1] != ("other",)):
        return type(thing)(int_floats(item) for item in thing)
    return thing


LISTINGS = ("iter", "reversed", "iterkeys", "peekitem")


def run_differential(
    impl_module: Any,
    sequence: list[tuple],
    impl_options: dict[str, Any] | None = None,
    opener: Callable[[], Any] | None = None,
    **cache_settings: Any,
) -> None:
    ref = support.reference()
    dir_ref = tempfile.mkdtemp(prefix="dco-diff-ref-")
    dir_impl = tempfile.mkdtemp(prefix="dco-diff-impl-")
    ref_cache = ref.Cache(dir_ref, **cache_settings)
    if opener is not None:  # a RedisCache: its listings name float keys as ints
        impl_cache = opener()
    else:
        impl_cache = impl_module.Cache(dir_impl, **(impl_options or {}), **cache_settings)
    try:
        for step, op in enumerate(sequence):
            if departs(ref_cache, op):
                if op[0] in ("incr", "decr"):  # the reference does raise (and changes nothing)
                    assert apply(ref_cache, op)[0] == "raise", op
                continue
            expected = apply(ref_cache, op)
            actual = apply(impl_cache, op)
            if opener is not None and op[0] in LISTINGS:
                # both sides, so that a listed value (peekitem's) is compared as the other
                # steps compare it, and only the key's spelling is set aside
                expected, actual = int_floats(expected), int_floats(actual)
            assert same(expected, actual), (
                f"step {step}: {op!r}\n  python-diskcache: {expected!r}\n"
                f"  under test:       {actual!r}\n"
                f"  difference: {support.explain_difference(expected, actual)}"
            )
        final_ref = [list(ref_cache), len(ref_cache), keys_view(list(ref_cache.iterkeys()))]
        final_impl = [list(impl_cache), len(impl_cache), keys_view(list(impl_cache.iterkeys()))]
        if opener is not None:
            final_ref, final_impl = int_floats(final_ref), int_floats(final_impl)
        assert same(final_ref, final_impl), (final_ref, final_impl)
    finally:
        ref_cache.close()
        impl_cache.close()
        shutil.rmtree(dir_ref, ignore_errors=True)
        shutil.rmtree(dir_impl, ignore_errors=True)


@settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(sequence=st.lists(ops, min_size=1, max_size=40))
# Found by this test: an incr that fails on a non-number counted a hit.
@example(
    sequence=[
        ("stats", True, False),
        (
            "transact",
            False,
            [
                ("set", "a", None, None, None),
                ("get", "a", None, False, False),
                ("incr", "a", 0, 0),
                ("get", "a", None, False, False),
            ],
        ),
        ("stats", False, False),
    ]
)
def test_differential_random_sequences(dc, sequence):
    run_differential(dc, sequence)


#: The steps a RedisCache takes: all but transact() and cull() (the transact and culling gaps).
redis_ops = ops.filter(lambda op: op[0] not in ("transact", "cull"))


@pytest.mark.backends("redis", "cluster")
@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,  # make_cache opens a fresh namespace per example
    ],
)
@given(sequence=st.lists(redis_ops, min_size=1, max_size=40))
def test_differential_on_redis(dc, make_cache, backend, sequence):
    run_differential(dc, sequence, opener=lambda: make_cache(uuid.uuid4().hex[:12]))


@pytest.mark.parametrize(
    "policy", ["least-recently-stored", "least-recently-used", "least-frequently-used"]
)
@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(sequence=st.lists(ops, min_size=1, max_size=40))
def test_differential_under_eviction_pressure(dc, policy, sequence):
    """size_limit=0: every write culls (expired items first, then by policy)."""
    run_differential(dc, sequence, eviction_policy=policy, size_limit=0, cull_limit=2, statistics=1)


# With pickle=True, values and keys the safe format cannot express are pickled, as
# python-diskcache pickles them: the two must then agree on those too.
things = st.builds(support.Thing, st.text(max_size=4), st.integers(-3, 3))
pickle_keys = st.sampled_from(["a", 1, (1, 2)]) | things
pickle_values = (
    values | things | st.lists(things, max_size=3) | st.binary(max_size=8).map(bytearray)
)
pickle_ops = st.one_of(
    st.tuples(st.just("set"), pickle_keys, pickle_values, expires, tags),
    st.tuples(st.just("get"), pickle_keys, defaults, flags, flags),
    st.tuples(st.just("add"), pickle_keys, pickle_values, expires, tags),
    st.tuples(st.just("pop"), pickle_keys, defaults, flags, flags),
    st.tuples(st.just("delete"), pickle_keys),
    st.tuples(st.just("contains"), pickle_keys),
    st.tuples(st.just("iter")),
    st.tuples(st.just("iterkeys"), flags),
    st.tuples(st.just("peekitem"), flags, flags, flags),
    st.tuples(st.just("len")),
)


@pytest.mark.oxide
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(sequence=st.lists(pickle_ops, min_size=1, max_size=30))
def test_differential_with_pickle_true(dc, sequence):
    run_differential(dc, sequence, impl_options={"pickle": True})


def test_differential_harness_is_exact_against_itself():
    """The harness compares python-diskcache with itself without a single difference."""
    ref = support.reference()
    sequence = [
        ("set", "a", {"x": (1, 2)}, None, "t1"),
        ("set", 1, 5, 1e6, None),
        ("set", True, b"t", None, 7),
        ("get", "a", None, True, True),
        ("incr", 1, 2, 0),
        ("peekitem", True, True, True),
        ("touch", "a", -1000.0),
        ("get", "a", "dflt", False, False),
        ("iter",),
        ("iterkeys", False),
        ("evict", 7),
        ("len",),
    ]
    run_differential(ref, sequence)


# Hand-picked sequences that pin down corner cases; each one runs as its own test.
CORNER_CASES = {
    "one-and-one-point-zero": [("set", 1, "i", None, None), ("set", 1.0, "f", None, None)]
    + [("get", 1.0, None, False, False), ("iter",), ("len",)],
    "true-is-not-one": [("set", 1, "i", None, None), ("set", True, "b", None, None), ("iter",)],
    "expired-then-add": [("set", "a", 1, -1000.0, None), ("add", "a", 2, None, None)]
    + [("get", "a", None, True, True), ("len",)],
    "incr-expired": [("touch", "a", None), ("set", "a", 5, 1e6, "t1")]
    + [("touch", "a", -1000.0), ("incr", "a", 1, 10), ("get", "a", None, True, True)],
    "incr-non-int": [("set", "s", "text", None, None), ("incr", "s", 1, 0), ("get", "s")]
    + [("set", "f", 1.5, None, None), ("incr", "f", 2, 0), ("get", "f", None, False, False)],
    "incr-bool-skipped": [("set", "b", True, None, None), ("incr", "b", 1, 0), ("len",)],
    "incr-missing-no-default": [("incr", "x", 1, None), ("decr", "x", 1, None), ("len",)],
    "peekitem-skips-expired": [("set", "a", 1, None, None), ("set", "b", 2, None, None)]
    + [("touch", "b", -1000.0), ("peekitem", True, False, False), ("len",)],
    "peekitem-empty": [("peekitem", True, False, False), ("peekitem", False, True, True)],
    "evict-absent-tag": [("set", "a", 1, None, "t1"), ("evict", "t2"), ("evict", "t1")],
    "clear-then-order": [("set", "a", 1, None, None), ("set", "b", 2, None, None)]
    + [("clear",), ("set", "b", 1, None, None), ("set", "a", 1, None, None), ("iter",)],
    "overwrite-keeps-position": [("set", "a", 1, None, None), ("set", "b", 2, None, None)]
    + [("set", "a", 3, None, None), ("iter",), ("reversed",)],
    "delete-last-then-insert": [("set", "a", 1, None, None), ("set", "b", 2, None, None)]
    + [("delete", "b"), ("set", "c", 3, None, None), ("iter",)],
    "big-file-values": [("set", "f", b"x" * 40_000, None, None), ("get", "f", None, True, False)]
    + [("set", "f", b"y" * 40_000, None, "t1"), ("pop", "f", None, False, True), ("len",)],
    "expire-counts": [("set", "a", 1, None, None), ("set", "b", 1, 1e6, None)]
    + [("touch", "a", -1000.0), ("touch", "b", -1000.0), ("len",), ("expire",), ("len",)],
    "cull-with-expired": [("set", "a", 1, None, None), ("touch", "a", -1000.0)]
    + [("cull",), ("len",)],
    "set-expired-is-culled-at-once": [("set", "a", 1, -1000.0, None), ("len",), ("iter",)],
    "tuple-keys": [("set", (1, 2), "t", None, None), ("set", (1.0, 2), "f", None, None)]
    + [("get", (1, 2)), ("get", (1.0, 2)), ("len",)],
}


@pytest.mark.parametrize("case", list(CORNER_CASES))
def test_differential_corner_cases(dc, case):
    sequence = [_complete(op) for op in CORNER_CASES[case]]
    run_differential(dc, sequence)


def _complete(op: tuple) -> tuple:
    if op[0] == "get" and len(op) == 2:
        return ("get", op[1], None, False, False)
    return op


def test_differential_harness_detects_a_difference():
    """A subtly wrong implementation (incr that ignores the default) is caught."""
    ref = support.reference()

    class Wrong(ref.Cache):
        def incr(self, key, delta=1, default=0, retry=False):
            return super().incr(key, delta, 0 if default is not None else None, retry)

    class FakeModule:
        Cache = Wrong

    with pytest.raises(AssertionError, match="step 0"):
        run_differential(FakeModule, [("incr", "k", 1, 10)])


# The incr departure (D-011), asserted directly: python-diskcache raises, this one computes.
INCR_DEPARTURES = [
    (True, 1, 2),
    (False, -1, -1),
    (2**70, 1, 2**70 + 1),
    (2**63 - 1, 1, 2**63),
    (-(2**63), -1, -(2**63) - 1),
    (5, 2**70, 2**70 + 5),
]


@pytest.mark.oxide
@pytest.mark.parametrize("stored,delta,expected", INCR_DEPARTURES, ids=repr)
def test_incr_departure_computes_with_python_ints(
    make_cache, ref, tmp_path, stored, delta, expected
):
    reference = ref.Cache(str(tmp_path / "ref"))
    reference["n"] = stored
    with pytest.raises((TypeError, OverflowError)):
        reference.incr("n", delta)
    reference.close()
    cache = make_cache()
    cache.set("n", stored, expire=1e6, tag="t")
    got = cache.incr("n", delta)
    assert got == expected and type(got) is int
    value, expire_time, tag = cache.get("n", expire_time=True, tag=True)
    assert value == expected and type(value) is int
    assert tag == "t" and expire_time is not None
