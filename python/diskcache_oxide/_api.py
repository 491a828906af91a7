"""The Cache API, declared once (docs/decisions/D-043-the-api-table.md, D-051).

A public call of :class:`~diskcache_oxide.Cache` is declared in two parts, each in one place:

* **Its parameters, defaults, types and docstring** are Cache's own: the
  ``#[pyo3(signature)]`` and doc comment of the compiled core for the hot calls (their types
  in ``_core.pyi``, checked by stubtest), the ``def`` in ``core.py`` for the Python ones.
* **What every other face does with it** is its row in :data:`CALLS` below: what a
  :class:`~diskcache_oxide.NullCache` returns, what a durable handle returns on an
  operational error, what a :class:`~diskcache_oxide.FanoutCache` returns when a shard stays
  locked, what :class:`~diskcache_oxide.AsyncCache` calls the awaitable, and which operation
  of ``remote/_ops.py`` the Redis faces run (or that Redis cannot hold the call: D-059). A
  miss is a value, or one of the functions below called with the call's own arguments.

:data:`FACES` says how each face turns a row into a method. ``make api`` (``python -m
diskcache_oxide._generate``) writes each face's methods out as plain Python source, in
``python/diskcache_oxide/_faces/<module>.py``: every method with Cache's signature, types
and docstring, and a body that returns the miss, forwards to the shard or runs the call in a
thread. The hand-written classes inherit them (``class NullCache(NullCacheCalls)``).
``make lint`` and ``tests/api/test_api_table.py`` fail while a generated module is stale.
Nothing is compiled at import (D-051).

So adding a parameter to a call is one edit to Cache (and its stub line), then ``make api``.

**Adding a face** (a second backend's cache, for instance): give :class:`Call` a column for
it if its calls differ from one another (a :class:`Miss` per row, as ``durable`` has), and
add a :class:`Face` to :data:`FACES` naming its module and mixin class, which calls it
carries, the body of each (a function of the call, its entry and a :class:`Body`) and the
first line of each docstring. ``make api`` then writes ``_faces/<module>.py``; the face's
class inherits the mixin and defines what the bodies use (``declares``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ._misses import (
    computed,
    decremented,
    defaults,
    empty,
    incremented,
    missed,
    missing,
    nothing,
    nothing_kept,
    waited_missed,
    waited_none,
)

__all__ = ["CALLS", "FACES", "Body", "Call", "Face", "Miss", "Remote"]


# The misses (``make=``) are the functions of ``_misses``.


class Miss(NamedTuple):
    """What a face's call gives back instead of the cache's answer.

    :param said: the result in words, for the docstring's first line and the log
    :param value: the result, a literal (written into the generated source as it is)
    :param make: else a function of some of the call's parameters, called by their names
        with the call's arguments; its result is returned, or raised with ``raises``
    :param raises: ``make`` gives the exception to raise
    :param given: else the name of the call's parameter whose argument is returned as it is
    :param written: the face writes this member out by hand (nothing is generated)
    """

    said: str
    value: Any = None
    make: Callable[..., Any] | None = None
    raises: bool = False
    given: str | None = None
    written: bool = False


#: A FanoutCache call forwarded to the shard of ``key`` without catching anything.
ROUTED = Miss("routed to the shard of ``key``")

#: The FanoutCache calls the binding's ``FanoutCore`` routes in Rust (D-069), with the misses
#: their ``fanout`` entries declare (tests/api/test_fanout_core.py holds it to them); the other
#: calls with a ``fanout`` entry are generated into ``_faces/fanout.py``.
FANOUT_CORE = frozenset(
    {
        "set",
        "__setitem__",
        "add",
        "touch",
        "incr",
        "decr",
        "get",
        "__getitem__",
        "__contains__",
        "pop",
        "__delitem__",
        "delete",
    }
)


class Remote(NamedTuple):
    """How the Redis faces (``RedisCache`` and ``AsyncRedisCache``, D-059) carry a call.

    :param op: the operation in ``remote/_ops.py`` that performs it, called with the face and
        the call's arguments: ``self._link.run(_ops.<op>(self, ...))`` on the blocking client,
        ``await self._alink.run(...)`` on the asyncio client
    :param unsupported: else the call cannot hold on Redis: both faces raise
        ``UnsupportedError`` with this message, which names what to use instead (D-058)
    :param written: else each face writes the member out by hand (an iterator, a decorator,
        a blocked pull an asyncio caller can cancel); nothing is generated
    """

    op: str | None = None
    unsupported: str | None = None
    written: bool = False


def _op(name: str) -> Remote:
    return Remote(op=name)


#: A Redis face writes the member out by hand.
HAND = Remote(written=True)


class Call(NamedTuple):
    """One public member of Cache and how each face carries it.

    :param name: the member's name on Cache
    :param null: what a NullCache does
    :param durable: what a durable handle returns after logging an operational error (None:
        the call is not guarded: it raises as on any handle)
    :param fanout: a FanoutCache call forwarded to the shard of ``key``: what it returns when
        the shard stays locked (:data:`ROUTED`: nothing is caught); routed in Rust by the
        binding's ``FanoutCore`` for the calls in :data:`FANOUT_CORE`, generated otherwise;
        None: FanoutCache writes the member out itself, or has none
    :param aio: AsyncCache's name for the awaitable, which runs the call in the cache's
        executor; None: AsyncCache writes the member out itself, or has none
    :param spelled: how a log line names the call (``[]`` for ``__getitem__``)
    :param listed: parameters turned into a list before the call, so an iterator is read
        once, in the caller's thread (the miss may need its length)
    :param redis: how the Redis faces carry it (None: they have no such member)
    """

    name: str
    null: Miss
    durable: Miss | None = None
    fanout: Miss | None = None
    aio: str | None = None
    spelled: str = ""
    listed: tuple[str, ...] = ()
    redis: Remote | None = None

    @property
    def spoken(self) -> str:
        return self.spelled or self.name


def _written(said: str) -> Miss:
    return Miss(said, written=True)


def _returns(value: Any, said: str | None = None) -> Miss:
    return Miss(said or f"returns {value!r}", value)


# fmt: off
# The misses, named so that the table below reads as a table.
FALSE, NONE, ZERO = _returns(False), _returns(None), _returns(0)
NOTHING = Miss("does nothing")
DEFAULT = Miss("returns ``default`` (with ``expire_time``/``tag``, in a tuple with None for "
               "each)", make=missed)
DEFAULT_MISS = Miss("returns the default, shaped as a miss", make=missed)
DEFAULT_EMPTY = Miss("returns the default, as for an empty queue", make=missed)
BARE_DEFAULT = Miss("returns the bare ``default``, as python-diskcache does", given="default")
KEY_ERROR = Miss("raises KeyError", make=missing, raises=True)
KEY_MISSING = Miss("raises KeyError, as for a missing key", make=missing, raises=True)
EMPTY = Miss("raises KeyError, as on an empty cache", make=empty, raises=True)
DEFAULTS = Miss("returns ``default`` for every key", make=defaults)
NO_ITEMS = Miss("yields nothing", make=nothing)
INCR = Miss("returns ``default + delta``, as for an absent key, and keeps nothing (KeyError "
            "if ``default`` is None)", make=incremented)
DECR = Miss("returns ``default - delta``, as for an absent key, and keeps nothing (KeyError "
            "if ``default`` is None)", make=decremented)
DROPPED = Miss("the value is dropped")
PUSH_DROPPED = Miss("returns None, and the item is dropped")
PUSH_FAILED = Miss("returns None (the item was NOT queued)")
PUSHES_DROPPED = Miss("returns one None per value, and every item is dropped",
                      make=nothing_kept)
PUSHES_FAILED = _returns([], "returns [] (no item was queued)")
PULL_WAITS = Miss("returns ``default`` (shaped by ``expire_time``/``tag``) after waiting "
                  "``timeout`` seconds for an item that never comes, so a worker loop does "
                  "not spin", make=waited_missed)
PULLS_WAIT = Miss("returns ``[]`` after waiting ``timeout`` seconds", make=waited_none)
PEEK = Miss("returns ``default`` (shaped by ``expire_time``/``tag``)", make=missed)
SET_MANY = Miss("returns None, and no pair is kept")
# What Redis cannot hold (D-058), each with what to use instead.
NO_TRANSACT = Remote(unsupported=(
    "transact() around arbitrary reads and writes cannot hold on Redis: each call is already "
    "atomic on the server; for read-modify-write use incr/decr, add or pop, for work that must "
    "survive a crash use JobQueue, and for one writer at a time use Claims (D-058)"))
NO_CULL = Remote(unsupported=(
    "cull() is a directory's size limit; on Redis set maxmemory and maxmemory-policy (D-058)"))

#: Every public member of Cache: what NullCache does, what a durable handle returns after an
#: operational error, what FanoutCache returns when the key's shard stays locked,
#: AsyncCache's awaitable, and (``redis=``) the Redis faces' operation.
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
    Call("set",           FALSE,          FALSE,              FALSE,         "set",
         redis=_op("set")),
    Call("__setitem__",   DROPPED,        Miss("returns without storing"),
                                                              ROUTED,        "setitem", "[]=",
         redis=_op("setitem")),
    Call("add",           FALSE,          FALSE,              FALSE,         "add",
         redis=_op("add")),
    Call("touch",         FALSE,          FALSE,              FALSE,         "touch",
         redis=_op("touch")),
    Call("incr",          INCR,           NONE,               NONE,          "incr",
         redis=_op("incr")),
    Call("decr",          DECR,           NONE,               NONE,          "decr",
         redis=_op("decr")),
    Call("get",           DEFAULT,        DEFAULT_MISS,       BARE_DEFAULT,  "get",
         redis=_op("get")),
    Call("__getitem__",   KEY_ERROR,      KEY_MISSING,        ROUTED,        "getitem", "[]",
         redis=_op("getitem")),
    Call("read",          KEY_ERROR,      KEY_MISSING,        None,          "read",
         redis=_op("read")),
    Call("__contains__",  FALSE,          FALSE,              ROUTED,        "contains", "in",
         redis=_op("contains")),
    Call("pop",           DEFAULT,        DEFAULT_MISS,       BARE_DEFAULT,  "pop",
         redis=_op("pop")),
    Call("__delitem__",   KEY_ERROR,      Miss("returns without deleting"),
                                                              ROUTED,        "delitem", "del []",
         redis=_op("delitem")),
    Call("delete",        FALSE,          FALSE,              FALSE,         "delete",
         redis=_op("delete")),
    Call("peekitem",      EMPTY,          EMPTY,              None,          "peekitem",
         redis=_op("peekitem")),
    Call("get_many",      DEFAULTS,       DEFAULTS,           None,          "get_many",
         listed=("keys",),
         redis=_op("get_many")),
    Call("set_many",      SET_MANY,       FALSE,              None,          "set_many",
         redis=_op("set_many")),
    Call("delete_many",   ZERO,           ZERO,               None,          "delete_many",
         listed=("keys",),
         redis=_op("delete_many")),
    Call("expire",        ZERO,           ZERO,               None,          "expire",
         redis=_op("expire")),
    Call("evict",         ZERO,           ZERO,               None,          "evict",
         redis=_op("evict")),
    Call("clear",         ZERO,           ZERO,               None,          "clear",
         redis=_op("clear")),
    Call("cull",          ZERO,           ZERO,               None,          "cull",
         redis=NO_CULL),
    Call("check",         _returns([], "returns ``[]`` (no problems)"),
                                          None,               None,          "check"),
    Call("stats",         _returns((0, 0)), _returns((0, 0)), None,          "stats",
         redis=_op("stats")),
    Call("volume",        ZERO,           ZERO,               None,          "volume"),
    Call("reset",         _written("reads the setting (the counters read 0) or remembers the new "
                                   "value (ValueError for an unknown setting, or for setting a "
                                   "counter)"),
                                          None,               None,          "reset"),
    Call("create_tag_index", NOTHING,     None,               None,          "create_tag_index"),
    Call("drop_tag_index", NOTHING,       None,               None,          "drop_tag_index"),
    Call("transact",      _written("the block just runs, with nothing to lock"),
         redis=NO_TRANSACT),
    Call("memoize",       _written("the decorated function runs on every call (its "
                                   "``__cache_key__`` gives the keys `Cache.memoize` would use)"),
         redis=HAND),
    Call("get_or_compute", Miss("calls ``fn`` every time (``claim=None`` with ``pass_claim``; "
                                "``Outcome.COMPUTED`` with ``outcome``): nothing is stored and "
                                "no claim is taken", make=computed),
                                          None,               ROUTED),
    Call("__len__",       ZERO,           ZERO,               None,          "length", "len",
         redis=_op("length")),
    Call("__iter__",      NO_ITEMS,
         redis=HAND),
    Call("__reversed__",  NO_ITEMS,
         redis=HAND),
    Call("iterkeys",      NO_ITEMS,
         redis=HAND),
    # the queue, always empty on a NullCache
    Call("push",          PUSH_DROPPED,   PUSH_FAILED,        None,          "push",
         redis=_op("push")),
    Call("push_many",     PUSHES_DROPPED, PUSHES_FAILED,      None,          "push_many",
         listed=("values",),
         redis=_op("push_many")),
    Call("pull",          PULL_WAITS,     DEFAULT_EMPTY,
         redis=_op("pull")),
    Call("pull_many",     PULLS_WAIT,     _returns([]),
         redis=_op("pull_many")),
    Call("peek",          PEEK,           DEFAULT_EMPTY,      None,          "peek",
         redis=_op("peek")),
    # lifetime
    Call("close",         NOTHING,        None,               None,          "close",
         redis=HAND),
)
# fmt: on

BY_NAME: dict[str, Call] = {call.name: call for call in CALLS}


def leads(face_lead: Callable[[Call], str]) -> Callable[[str], str]:
    """A ``mirror_docs`` lead for the hand-written members named in :data:`CALLS`."""
    return lambda name: face_lead(BY_NAME[name])


# ----- the faces: how each turns a row into a method -----------------------------------------


class Body:
    """What a face's body is written with: the call's arguments, and its outcomes as lines of
    source (the generator gives one to each body)."""

    def __init__(
        self, call: Call, passed: str, outcome: Callable[[Miss, bool], str], returns: bool
    ) -> None:
        self.call = call
        #: The call's arguments, to forward it: ``key, default, read, expire_time, tag, retry``.
        self.passed = passed
        #: False if Cache's call is declared to return None (so its result is not returned).
        self.returns = returns
        self._outcome = outcome

    def result(self, expression: str) -> str:
        """``return <expression>``, or the bare expression for a call that returns None."""
        return f"return {expression}" if self.returns else expression

    def outcome(self, miss: Miss, *, caught: bool = False) -> str:
        """``return <miss>`` or ``raise <miss>`` (``from None`` when ``caught``, in an
        ``except`` block)."""
        return self._outcome(miss, caught)

    @staticmethod
    def quoted(text: str) -> str:
        """``text`` as a string literal in double quotes, as ruff format writes one."""
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    def listing(self) -> list[str]:
        """``keys = list(keys)`` for each of the call's :attr:`Call.listed` parameters."""
        return [f"{name} = list({name})" for name in self.call.listed]


class Face(NamedTuple):
    """A face whose methods ``make api`` writes, from :data:`CALLS`, into
    ``_faces/<module>.py`` as the mixin class ``mixin``.

    :param module: the generated module's name under ``diskcache_oxide/_faces``
    :param mixin: the generated class, which the face's own class inherits
    :param summary: the mixin's docstring
    :param entry: the call's entry for this face (a :class:`Miss`, a name, ...); None or a
        ``written`` Miss: the face carries no generated member for the call
    :param body: the member's body, as lines, from the call, its entry and a :class:`Body`
    :param lead: the docstring's first paragraph (Cache's docstring follows)
    :param renamed: the member's name on the face (default: Cache's)
    :param is_async: members are ``async def``
    :param imports: import lines the bodies need at run time
    :param declares: what the bodies use of ``self`` that the face's class defines, as
        annotated lines for the type checker (``_cache: Cache``)
    :param base: the mixin's base class for the type checker (the members call ``super()``)
    :param typing: lines for the type checker at the module's top (a ``TypeVar``)
    :param awaited: on an async face, whether the member is ``async def`` (default: every
        one); a member that gives a context manager (``transact``) is a plain ``def``
    :param folder: the package folder the module is written into: ``_faces`` for the faces
        of the directory and of no backend, the backend's own folder for a backend's faces
        (``remote``)
    :param refuses: whether the member only raises (a call the backend cannot hold): it is
        declared ``-> NoReturn``, so code typed for either backend's cache (``Cache |
        RedisCache``) reads as the call that does return
    """

    module: str
    mixin: str
    summary: str
    entry: Callable[[Call], Any]
    body: Callable[[Call, Any, Body], list[str]]
    lead: Callable[[Call, Any], str]
    renamed: Callable[[Call, Any], str] = lambda call, _entry: call.name
    is_async: bool = False
    imports: tuple[str, ...] = ()
    declares: tuple[str, ...] = ()
    base: str | None = None
    typing: tuple[str, ...] = ()
    awaited: Callable[[Call, Any], bool] = lambda _call, _entry: True
    refuses: Callable[[Call, Any], bool] = lambda _call, _entry: False
    folder: str = "_faces"


def _null_body(call: Call, miss: Miss, body: Body) -> list[str]:
    return [body.outcome(miss)]


def _durable_body(call: Call, miss: Miss, body: Body) -> list[str]:
    return [
        *body.listing(),
        "try:",
        f"    {body.result(f'super().{call.name}({body.passed})')}",
        "except OPERATIONAL as error:",
        f"    self._failed({body.quoted(call.spoken)}, error, {body.quoted(miss.said)})",
        f"    {body.outcome(miss, caught=True)}",
    ]


def _fanout_body(call: Call, miss: Miss, body: Body) -> list[str]:
    forward = f"self._shard(key).{call.name}({body.passed})"
    if miss is ROUTED:
        return [body.result(forward)]
    return ["try:", f"    {body.result(forward)}", "except Timeout:", f"    {body.outcome(miss)}"]


def _fanout_lead(call: Call, miss: Miss) -> str:
    routed = f"`Cache.{call.name}` on the shard that holds ``key``"
    if miss is ROUTED:
        return f"{routed}."
    return f"{routed}; if that shard stays locked (without ``retry``), {miss.said}."


def _aio_body(call: Call, _name: str, body: Body) -> list[str]:
    arguments = f", {body.passed}" if body.passed else ""
    return [*body.listing(), f"return await self._run(self._cache.{call.name}{arguments})"]


#: How the awaitable forms of Python's protocols read (``await acache.getitem(key)`` is
#: ``cache[key]``).
_PROTOCOLS = {
    "__getitem__": "``cache[key]``",
    "__setitem__": "``cache[key] = value``",
    "__delitem__": "``del cache[key]``",
    "__contains__": "``key in cache``",
    "__len__": "``len(cache)``",
}


def _aio_lead(call: Call, _name: str) -> str:
    spelled = f" ({_PROTOCOLS[call.name]})" if call.name in _PROTOCOLS else ""
    return f"Awaitable `Cache.{call.name}`{spelled}: runs it in the cache's executor."


def _redis_entry(call: Call) -> Remote | None:
    """The Redis faces generate a member for a call they carry and do not write by hand."""
    return None if call.redis is None or call.redis.written else call.redis


def _redis_aio_entry(call: Call) -> Remote | None:
    """The async Redis face has AsyncCache's awaitables (AsyncCache's names), less those
    AsyncCache writes by hand (``pull``, ``pull_many``); and what Redis cannot hold."""
    remote = _redis_entry(call)
    if remote is None or (remote.op is not None and call.aio is None):
        return None
    return remote


def _refusal(remote: Remote, body: Body) -> list[str]:
    """``raise _ops.UnsupportedError("...")`` with the table's message, split into string
    pieces as ruff format leaves an implicitly joined string."""
    import textwrap  # the generator's, not the package's import

    message = remote.unsupported or ""
    pieces = textwrap.wrap(message, 80, break_on_hyphens=False)
    quoted = [body.quoted(piece + " ") for piece in pieces[:-1]] + [body.quoted(pieces[-1])]
    return ["raise _ops.UnsupportedError(", *(f"    {piece}" for piece in quoted), ")"]


def _redis_body(call: Call, remote: Remote, body: Body, run: str) -> list[str]:
    if remote.op is None:
        return _refusal(remote, body)
    arguments = f"self, {body.passed}" if body.passed else "self"
    return [body.result(f"{run}(_ops.{remote.op}({arguments}))")]


def _redis_lead(call: Call, remote: Remote, awaitable: bool) -> str:
    if remote.op is None:
        return f"Not on Redis: raises ``UnsupportedError``. {remote.unsupported}"
    if awaitable:
        spelled = f" ({_PROTOCOLS[call.name]})" if call.name in _PROTOCOLS else ""
        return (
            f"Awaitable `Cache.{call.name}`{spelled} on Redis: the operation "
            f"``_ops.{remote.op}`` on redis-py's asyncio client."
        )
    return f"`Cache.{call.name}` on Redis: the operation ``_ops.{remote.op}`` on the client."


#: The generated faces, each written by ``make api`` into ``_faces/<module>.py``.
FACES: tuple[Face, ...] = (
    Face(
        module="null",
        mixin="NullCacheCalls",
        summary="NullCache's members that return a miss: Cache's calls, storing nothing.",
        entry=lambda call: call.null,
        body=_null_body,
        lead=lambda call, miss: f"Like `Cache.{call.name}`, but nothing is stored: {miss.said}.",
    ),
    Face(
        module="durable",
        mixin="DurableCacheCalls",
        summary=(
            "A durable handle's guarded calls: Cache's own, with an operational error logged "
            "and turned into the call's miss (D-020)."
        ),
        entry=lambda call: call.durable,
        body=_durable_body,
        lead=lambda call, miss: (
            f"`Cache.{call.name}` on a durable handle: an operational error is logged, and "
            f"then the call {miss.said} (D-020)."
        ),
        imports=("from ..errors import OPERATIONAL",),
        declares=("def _failed(self, call: str, error: BaseException, result: str) -> None: ...",),
        # The binding's class, not Cache: every guarded call is the binding's, and core.py,
        # which imports this face, is not imported back (tests/api/test_layers.py).
        base="CacheCore",
    ),
    Face(
        module="fanout",
        mixin="FanoutCacheCalls",
        summary=(
            "FanoutCache's calls routed to the shard of their ``key`` in Python: Cache's call "
            "on that shard. The calls on one key that need speed are routed in Rust, by the "
            "binding's ``FanoutCore`` (D-069)."
        ),
        # The calls the binding's FanoutCore routes (D-069) are its own, not generated.
        entry=lambda call: None if call.name in FANOUT_CORE else call.fanout,
        body=_fanout_body,
        lead=_fanout_lead,
        # Every generated fanout call is ROUTED (catches nothing): a call with another miss
        # belongs in FANOUT_CORE, or needs ``from ..errors import Timeout`` here.
        declares=("def _shard(self, key: Any) -> Cache: ...",),
    ),
    Face(
        module="aio",
        mixin="AsyncCacheCalls",
        summary="AsyncCache's awaitables: each runs Cache's call in the cache's executor.",
        entry=lambda call: call.aio,
        body=_aio_body,
        lead=_aio_lead,
        renamed=lambda _call, name: name,
        is_async=True,
        declares=(
            "_cache: Cache",
            "async def _run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T: ...",
        ),
        typing=('T = TypeVar("T")',),
    ),
    Face(
        module="_face",
        folder="remote",
        mixin="RedisCacheCalls",
        summary=(
            "RedisCache's calls: each runs its operation (remote/_ops.py) on the blocking "
            "redis-py client; what Redis cannot hold raises UnsupportedError (D-058, D-059)."
        ),
        entry=_redis_entry,
        body=lambda call, remote, body: _redis_body(call, remote, body, "self._link.run"),
        lead=lambda call, remote: _redis_lead(call, remote, awaitable=False),
        imports=("from . import _ops",),
        declares=("_link: Link",),
        base="Namespace",
        refuses=lambda _call, remote: remote.op is None,
    ),
    Face(
        module="_face_aio",
        folder="remote",
        mixin="AsyncRedisCacheCalls",
        summary=(
            "AsyncRedisCache's awaitables: each runs the operation RedisCache runs "
            "(remote/_ops.py) on redis-py's asyncio client; what Redis cannot hold raises "
            "UnsupportedError (D-058, D-059)."
        ),
        entry=_redis_aio_entry,
        body=lambda call, remote, body: _redis_body(call, remote, body, "await self._alink.run"),
        lead=lambda call, remote: _redis_lead(call, remote, awaitable=True),
        renamed=lambda call, _remote: call.aio or call.name,
        is_async=True,
        imports=("from . import _ops",),
        declares=("_alink: AsyncLink",),
        base="Namespace",
        # AsyncCache's awaitables are awaited; transact() gives a context manager on AsyncCache,
        # so here it stays a plain def that raises when it is called.
        awaited=lambda call, _remote: call.aio is not None,
        refuses=lambda _call, remote: remote.op is None,
    ),
)
