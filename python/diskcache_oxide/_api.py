"""The Cache API, declared once (docs/decisions/D-043-the-api-table.md).

A public call of :class:`~diskcache_oxide.Cache` is declared in two parts, each in one place:

* **Its parameters, defaults and docstring** are Cache's own: the ``#[pyo3(signature)]`` and
  doc comment of the compiled core for the hot calls, the ``def`` in ``core.py`` for the
  Python ones. Their types are in ``_core.pyi`` (checked against the core by stubtest).
* **What every other face does with it** is its row in :data:`CALLS` below: what a
  :class:`~diskcache_oxide.NullCache` returns, what a durable handle returns on an
  operational error, what a :class:`~diskcache_oxide.FanoutCache` returns when a shard stays
  locked, and what :class:`~diskcache_oxide.AsyncCache` calls the awaitable.

At import, each face's methods are *generated* from the two: a function with exactly Cache's
signature (so ``help()`` and ``inspect.signature`` show it), whose body does the face's part
(returns the miss, forwards to the shard, runs the call in a thread). Their docstrings are
Cache's, after a first line from the row. The faces' types for mypy are generated too, into
``_faces.pyi``, by ``make api`` (:func:`write_faces_stub`; ``make lint`` checks it is current).
So adding a parameter to a call is one edit to Cache (and its stub line, which stubtest
checks); every face follows.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["CALLS", "Call", "Miss", "shaped"]


@dataclass(frozen=True)
class Miss:
    """What a face's call gives back instead of the cache's answer.

    :param code: a Python expression over the call's parameters that gives the result, or a
        ``raise`` statement; None: the face writes this member out itself
    :param said: the result in words, for the docstring's first line and the log
    """

    code: str | None
    said: str


#: A FanoutCache call forwarded to the shard of ``key`` without catching anything.
ROUTED = Miss("", "routed to the shard of ``key``")


@dataclass(frozen=True)
class Call:
    """One public member of Cache and how each face carries it.

    :param name: the member's name on Cache
    :param null: what a NullCache does
    :param durable: what a durable handle returns after logging an operational error (None:
        the call is not guarded: it raises as on any handle)
    :param fanout: a FanoutCache call forwarded to the shard of ``key``: what it returns when
        the shard stays locked (:data:`ROUTED`: nothing is caught); None: FanoutCache writes
        the member out itself, or has none
    :param aio: AsyncCache's name for the awaitable, which runs the call in the cache's
        executor; None: AsyncCache writes the member out itself, or has none
    :param spelled: how a log line names the call (``[]`` for ``__getitem__``)
    :param listed: parameters turned into a list before the call, so an iterator is read
        once, in the caller's thread (the miss may need its length)
    """

    name: str
    null: Miss
    durable: Miss | None = None
    fanout: Miss | None = None
    aio: str | None = None
    spelled: str = ""
    listed: tuple[str, ...] = ()

    @property
    def spoken(self) -> str:
        return self.spelled or self.name


def _written(said: str) -> Miss:
    return Miss(None, said)


def _returns(code: str, said: str | None = None) -> Miss:
    return Miss(code, said or f"returns {code}")


_SHAPED = "_shaped(default, None, None, expire_time, tag)"
_EMPTY = "raise KeyError('dictionary is empty')"

# fmt: off
# The misses, named so that the table below reads as a table.
FALSE, NONE, ZERO = _returns("False"), _returns("None"), _returns("0")
NOTHING = Miss("None", "does nothing")
DEFAULT = Miss(_SHAPED, "returns ``default`` (with ``expire_time``/``tag``, in a tuple with None "
                        "for each)")
DEFAULT_MISS = Miss(_SHAPED, "returns the default, shaped as a miss")
DEFAULT_EMPTY = Miss(_SHAPED, "returns the default, as for an empty queue")
BARE_DEFAULT = Miss("default", "returns the bare ``default``, as python-diskcache does")
KEY_ERROR = Miss("raise KeyError(key)", "raises KeyError")
KEY_MISSING = Miss("raise KeyError(key) from None", "raises KeyError, as for a missing key")
EMPTY = Miss(_EMPTY, "raises KeyError, as on an empty cache")
EMPTY_MISS = Miss(_EMPTY + " from None", "raises KeyError, as on an empty cache")
DEFAULTS = Miss("[default for _ in keys]", "returns ``default`` for every key")
NO_ITEMS = Miss("iter(())", "yields nothing")
INCR = Miss("_plus(key, default, delta)", "returns ``default + delta``, as for an absent key, "
                                          "and keeps nothing (KeyError if ``default`` is None)")
DECR = Miss("_plus(key, default, -delta)", "returns ``default - delta``, as for an absent key, "
                                           "and keeps nothing (KeyError if ``default`` is None)")
DROPPED = Miss("None", "the value is dropped")
PUSH_DROPPED = Miss("None", "returns None, and the item is dropped")
PUSH_FAILED = Miss("None", "returns None (the item was NOT queued)")
PUSHES_DROPPED = Miss("[None for _ in values]", "returns one None per value, and every item is "
                                                "dropped")
PUSHES_FAILED = Miss("[]", "returns [] (no item was queued)")
PULL_WAITS = Miss(f"_waited(timeout, {_SHAPED})", "returns ``default`` (shaped by "
                                                  "``expire_time``/``tag``) after waiting "
                                                  "``timeout`` seconds for an item that never "
                                                  "comes, so a worker loop does not spin")
PULLS_WAIT = Miss("_waited(timeout, [])", "returns ``[]`` after waiting ``timeout`` seconds")
PEEK = Miss(_SHAPED, "returns ``default`` (shaped by ``expire_time``/``tag``)")
SET_MANY = Miss("None", "returns None, and no pair is kept")

#: Every public member of Cache: what NullCache does, what a durable handle returns after an
#: operational error, what FanoutCache returns when the key's shard stays locked, and
#: AsyncCache's awaitable.
CALLS: tuple[Call, ...] = (
    # the handle: NullCache reports what it was made with
    Call("directory", _written("the directory it was made with, if any (nothing is created "
                               "there)")),
    Call("timeout", _written("the ``timeout`` it was made with")),
    Call("pickle", _written("the ``pickle`` setting it was made with (default False)")),
    Call("on_decode_error", _written("the ``on_decode_error`` setting it was made with (default "
                                     "``'raise'``)")),
    Call("read_only", _written("the ``read_only`` setting it was made with (default False)")),
    Call("durable", _written("the ``durable`` setting it was made with (default False)")),
    # name                NullCache       durable             FanoutCache    AsyncCache
    Call("set",           FALSE,          FALSE,              FALSE,         "set"),
    Call("__setitem__",   DROPPED,        Miss("None", "returns without storing"),
                                                              ROUTED,        "setitem", "[]="),
    Call("add",           FALSE,          FALSE,              FALSE,         "add"),
    Call("touch",         FALSE,          FALSE,              FALSE,         "touch"),
    Call("incr",          INCR,           NONE,               NONE,          "incr"),
    Call("decr",          DECR,           NONE,               NONE,          "decr"),
    Call("get",           DEFAULT,        DEFAULT_MISS,       BARE_DEFAULT,  "get"),
    Call("__getitem__",   KEY_ERROR,      KEY_MISSING,        ROUTED,        "getitem", "[]"),
    Call("read",          KEY_ERROR,      KEY_MISSING,        None,          "read"),
    Call("__contains__",  FALSE,          FALSE,              ROUTED,        "contains", "in"),
    Call("pop",           DEFAULT,        DEFAULT_MISS,       BARE_DEFAULT,  "pop"),
    Call("__delitem__",   KEY_ERROR,      Miss("None", "returns without deleting"),
                                                              ROUTED,        "delitem", "del []"),
    Call("delete",        FALSE,          FALSE,              FALSE,         "delete"),
    Call("peekitem",      EMPTY,          EMPTY_MISS,         None,          "peekitem"),
    Call("get_many",      DEFAULTS,       DEFAULTS,           None,          "get_many",
         listed=("keys",)),
    Call("set_many",      SET_MANY,       FALSE,              None,          "set_many"),
    Call("delete_many",   ZERO,           ZERO,               None,          "delete_many",
         listed=("keys",)),
    Call("expire",        ZERO,           ZERO,               None,          "expire"),
    Call("evict",         ZERO,           ZERO,               None,          "evict"),
    Call("clear",         ZERO,           ZERO,               None,          "clear"),
    Call("cull",          ZERO,           ZERO,               None,          "cull"),
    Call("check",         _returns("[]", "returns ``[]`` (no problems)"),
                                          None,               None,          "check"),
    Call("stats",         _returns("(0, 0)"), _returns("(0, 0)"), None,      "stats"),
    Call("volume",        ZERO,           ZERO,               None,          "volume"),
    Call("reset",         _written("reads the setting (the counters read 0) or remembers the new "
                                   "value (ValueError for an unknown setting, or for setting a "
                                   "counter)"),
                                          None,               None,          "reset"),
    Call("create_tag_index", NOTHING,     None,               None,          "create_tag_index"),
    Call("drop_tag_index", NOTHING,       None,               None,          "drop_tag_index"),
    Call("transact",      _written("the block just runs, with nothing to lock")),
    Call("memoize",       _written("the decorated function runs on every call (its "
                                   "``__cache_key__`` gives the keys `Cache.memoize` would use)")),
    Call("get_or_compute", Miss("_computed(fn, args, kwargs, outcome, pass_claim)",
                                "calls ``fn`` every time (``claim=None`` with ``pass_claim``; "
                                "``Outcome.COMPUTED`` with ``outcome``): nothing is stored and "
                                "no claim is taken"),
                                          None,               ROUTED),
    Call("__len__",       ZERO,           ZERO,               None,          "length", "len"),
    Call("__iter__",      NO_ITEMS),
    Call("__reversed__",  NO_ITEMS),
    Call("iterkeys",      NO_ITEMS),
    # the queue, always empty on a NullCache
    Call("push",          PUSH_DROPPED,   PUSH_FAILED,        None,          "push"),
    Call("push_many",     PUSHES_DROPPED, PUSHES_FAILED,      None,          "push_many",
         listed=("values",)),
    Call("pull",          PULL_WAITS,     DEFAULT_EMPTY),
    Call("pull_many",     PULLS_WAIT,     _returns("[]")),
    Call("peek",          PEEK,           DEFAULT_EMPTY,      None,          "peek"),
    # lifetime
    Call("close",         NOTHING,        None,               None,          "close"),
)
# fmt: on

BY_NAME: dict[str, Call] = {call.name: call for call in CALLS}


# ----- the miss values' helpers, in every generated body's namespace -------------------------


def shaped(value: Any, expires: Any, tag: Any, expire_time: Any, want_tag: Any) -> Any:
    """``value`` with its ``expires``/``tag`` as a call with these flags returns it:
    ``value``, ``(value, x)`` or ``(value, expires, tag)``, as :meth:`Cache.get` does."""
    if expire_time and want_tag:
        return (value, expires, tag)
    if expire_time:
        return (value, expires)
    if want_tag:
        return (value, tag)
    return value


def _plus(key: Any, default: Any, delta: Any) -> Any:
    if default is None:
        raise KeyError(key)
    return default + delta


def _waited(timeout: float | None, result: Any) -> Any:
    import time

    if timeout is not None and timeout > 0:
        time.sleep(timeout)
    return result


def _computed(
    fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], outcome: Any, pass_claim: Any
) -> Any:
    value = fn(*args, claim=None, **kwargs) if pass_claim else fn(*args, **kwargs)
    if outcome:
        from ._payonce import Outcome  # _payonce builds on core, which builds on this module

        return value, Outcome.COMPUTED
    return value


_HELPERS: dict[str, Any] = {
    "_shaped": shaped,
    "_plus": _plus,
    "_waited": _waited,
    "_computed": _computed,
}


# ----- generating a face's members -----------------------------------------------------------


def _parameters(signature: inspect.Signature, defaults: dict[str, Any]) -> tuple[str, str]:
    """The ``def``'s parameter list and the forwarding call's argument list (without self);
    the default values go into ``defaults`` under the names the parameter list uses."""
    defined: list[str] = []
    passed: list[str] = []
    starred = False
    params = list(signature.parameters.values())
    for index, param in enumerate(params):
        text = param.name
        if param.kind is param.VAR_POSITIONAL:
            text, starred = f"*{param.name}", True
        elif param.kind is param.VAR_KEYWORD:
            text = f"**{param.name}"
        elif param.kind is param.KEYWORD_ONLY and not starred:
            defined.append("*")
            starred = True
        if param.default is not param.empty:
            defaults[f"_default_{param.name}"] = param.default
            text += f"=_default_{param.name}"
        defined.append(text)
        following = params[index + 1].kind if index + 1 < len(params) else None
        if param.kind is param.POSITIONAL_ONLY and following is not param.POSITIONAL_ONLY:
            defined.append("/")
        if index == 0:
            continue  # self
        if param.kind is param.KEYWORD_ONLY:
            passed.append(f"{param.name}={param.name}")
        elif param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            passed.append(text.split("=")[0])
        else:
            passed.append(param.name)
    return ", ".join(defined), ", ".join(passed)


def _outcome(code: str) -> str:
    return code if code.startswith("raise ") else f"return {code}"


def _define(
    face: type,
    name: str,
    signature: inspect.Signature,
    body: Callable[[str], list[str]],
    names: dict[str, Any],
    *,
    is_async: bool = False,
    as_name: str | None = None,
) -> None:
    """Set ``face.<as_name or name>`` to a function with ``signature`` whose body is
    ``body(arguments)``; ``names`` are the body's globals."""
    namespace: dict[str, Any] = {**_HELPERS, **names}
    defined, passed = _parameters(signature, namespace)
    member = as_name or name
    lines = "".join(f"    {line}\n" for line in body(passed))
    source = f"{'async ' if is_async else ''}def {member}({defined}):\n{lines}"
    exec(compile(source, f"<diskcache_oxide._api: {face.__name__}.{member}>", "exec"), namespace)
    function = namespace[member]
    function.__qualname__ = f"{face.__qualname__}.{member}"
    function.__module__ = face.__module__
    setattr(face, member, function)


def _signature(source: type, name: str) -> inspect.Signature:
    return inspect.signature(getattr(source, name))


def _listing(call: Call) -> list[str]:
    return [f"{name} = list({name})" for name in call.listed]


def null_face(face: type, source: type) -> list[str]:
    """Give ``face`` (NullCache) every member whose NullCache miss is a value; the names."""
    made = []
    for call in CALLS:
        code = call.null.code
        if code is None:
            continue

        def body(_passed: str, code: str = code) -> list[str]:
            return [_outcome(code)]

        _define(face, call.name, _signature(source, call.name), body, {})
        made.append(call.name)
    return made


def durable_face(face: type, source: type, operational: tuple[type[BaseException], ...]) -> None:
    """Give ``face`` (the durable handle's class) each guarded call: Cache's, with an
    operational error logged by ``self._failed`` and turned into the call's miss."""
    for call in CALLS:
        if call.durable is None or call.durable.code is None:
            continue
        miss = call.durable

        def body(passed: str, call: Call = call, miss: Miss = miss) -> list[str]:
            return [
                *_listing(call),
                "try:",
                f"    return super(_face, self).{call.name}({passed})",
                "except _operational as error:",
                f"    self._failed({call.spoken!r}, error, {miss.said!r})",
                f"    {_outcome(miss.code or 'None')}",
            ]

        _define(
            face,
            call.name,
            _signature(source, call.name),
            body,
            {"_face": face, "_operational": operational},
        )


def fanout_face(face: type, source: type, timeout: type[BaseException]) -> list[str]:
    """Give ``face`` (FanoutCache) each call routed to the shard of its ``key``; the names."""
    made = []
    for call in CALLS:
        miss = call.fanout
        if miss is None:
            continue

        def body(passed: str, call: Call = call, miss: Miss = miss) -> list[str]:
            forward = f"self._shard(key).{call.name}({passed})"
            if miss is ROUTED:
                return [f"return {forward}"]
            return [
                "try:",
                f"    return {forward}",
                "except _timeout:",
                f"    {_outcome(miss.code or 'None')}",
            ]

        _define(face, call.name, _signature(source, call.name), body, {"_timeout": timeout})
        made.append(call.name)
    return made


def async_face(face: type, source: type) -> dict[str, str]:
    """Give ``face`` (AsyncCache) each awaitable that runs the call in the cache's executor;
    awaitable name -> Cache name."""
    made = {}
    for call in CALLS:
        if call.aio is None:
            continue

        def body(passed: str, call: Call = call) -> list[str]:
            arguments = f", {passed}" if passed else ""
            return [*_listing(call), f"return await self._run(self._cache.{call.name}{arguments})"]

        _define(
            face,
            call.name,
            _signature(source, call.name),
            body,
            {},
            is_async=True,
            as_name=call.aio,
        )
        made[call.aio] = call.name
    return made


def leads(face_lead: Callable[[Call], str]) -> Callable[[str], str]:
    """A ``mirror_docs`` lead for the members named in :data:`CALLS`."""
    return lambda name: face_lead(BY_NAME[name])


# ----- the faces' types, generated into _faces.pyi -------------------------------------------


def _typed_members() -> dict[str, Any]:
    """Cache's members as annotated ``def`` nodes: the compiled core's from ``_core.pyi``,
    then the Python ones from ``core.py`` (which take precedence)."""
    import ast
    import pathlib

    here = pathlib.Path(__file__).parent
    found: dict[str, Any] = {}
    for file, cls in (("_core.pyi", "CacheCore"), ("core.py", "Cache")):
        tree = ast.parse((here / file).read_text())
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == cls:
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        found[item.name] = item
    return found


def _stub(node: Any, name: str, *, is_async: bool) -> str:
    import ast
    import copy

    node = copy.deepcopy(node)
    node.name = name
    node.decorator_list = [d for d in node.decorator_list if ast.unparse(d) == "property"]
    node.body = [ast.Expr(ast.Constant(...))]
    arguments = node.args
    # A default that is not a literal (ENOVAL) reads as `...`, as in typeshed.
    arguments.defaults = [_literal(d) for d in arguments.defaults]
    arguments.kw_defaults = [None if d is None else _literal(d) for d in arguments.kw_defaults]
    if is_async:
        node = ast.copy_location(
            ast.AsyncFunctionDef(**{f: getattr(node, f) for f in node._fields}), node
        )
    text = ast.unparse(node)
    return "\n".join(f"    {line}" for line in text.splitlines())


def _literal(node: Any) -> Any:
    import ast

    try:
        ast.literal_eval(node)
    except ValueError:
        return ast.Constant(...)
    return node


def faces_stub() -> str:
    """The text of ``_faces.pyi``: the generated members' types, one class per face."""
    members = _typed_members()
    names: Iterable[str]
    out = [
        '"""The types of the members diskcache_oxide._api generates for each face.',
        "",
        "Generated by `make api` (diskcache_oxide._api.write_faces_stub) from _core.pyi and",
        'core.py; do not edit: `make lint` checks it is current."""',
        "",
        "import warnings",
        "from collections.abc import Callable, Iterable, Iterator, Mapping",
        "from typing import Any, Literal, TypeVar",
        "",
        "from ._payonce import Outcome",
        "from .core import Constant",
        "",
        "R = TypeVar('R')",
        "_Tag = str | int | float | bytes | None",
        "_Side = Literal['front', 'back']",
    ]
    faces = (
        ("NullCacheCalls", [c.name for c in CALLS if c.null.code is not None], False, None),
        ("FanoutCacheCalls", [c.name for c in CALLS if c.fanout is not None], False, None),
        ("AsyncCacheCalls", [c.name for c in CALLS if c.aio is not None], True, "aio"),
    )
    for class_name, names, is_async, rename in faces:
        out += ["", "", f"class {class_name}:"]
        for name in names:
            shown = BY_NAME[name].aio if rename else name
            out.append(_stub(members[name], shown or name, is_async=is_async))
    return "\n".join(out) + "\n"


def write_faces_stub(check: bool = False) -> int:
    """Write ``_faces.pyi`` (``make api``); with ``check``, only say whether it is current
    (``make lint``): 0 if it is, 1 if it is not."""
    import pathlib

    target = pathlib.Path(__file__).with_name("_faces.pyi")
    text = faces_stub()
    if check:
        if not target.exists() or target.read_text() != text:
            print(f"{target} does not match the API table: run `make api`")
            return 1
        return 0
    target.write_text(text)
    return 0
