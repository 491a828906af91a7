"""The Cache API is declared once: every face's generated member has Cache's signature, and
every public member of Cache has a row in the API table saying what each face does. The
generated members are plain source, current with the table (D-051)."""

from __future__ import annotations

import ast
import inspect
import textwrap

import diskcache_oxide as dco
import pytest
from diskcache_oxide import _api, _generate
from diskcache_oxide.aio import AsyncCache

pytestmark = pytest.mark.oxide


def _public(cls: type) -> set[str]:
    names = {name for name in dir(cls) if not name.startswith("_")}
    return names | {name for name in _api.BY_NAME if name.startswith("__")}


def test_every_public_member_of_cache_has_a_row() -> None:
    # A member added to Cache without a row would be missing from NullCache (and from the
    # other faces): the table is where each face's behaviour for it is decided.
    rowless = _public(dco.Cache) - set(_api.BY_NAME)
    # Settings read as attributes, the queue's iterator type and Cache-only helpers.
    settings = set(dco.DEFAULT_SETTINGS)
    assert rowless - settings == set()


def _bare(signature: inspect.Signature) -> inspect.Signature:
    """The signature without annotations: names, kinds and defaults are what must match."""
    params = [p.replace(annotation=p.empty) for p in signature.parameters.values()]
    return signature.replace(parameters=params, return_annotation=signature.empty)


def _redis_faces() -> tuple[type, type] | None:
    """RedisCache and AsyncRedisCache, if redis-py is installed."""
    try:
        from diskcache_oxide.remote import AsyncRedisCache, RedisCache
    except ImportError:
        return None
    return RedisCache, AsyncRedisCache


def _faces() -> list[tuple[type, str, str]]:
    durable = type(dco.Cache(durable=True))
    faces: list[tuple[type, str, str]] = []
    redis_faces = _redis_faces()
    for call in _api.CALLS:
        if redis_faces is not None and call.redis is not None and not call.redis.written:
            faces.append((redis_faces[0], call.name, call.name))
            if call.aio is not None or call.redis.op is None:
                faces.append((redis_faces[1], call.aio or call.name, call.name))
        if not call.null.written:
            faces.append((dco.NullCache, call.name, call.name))
        if call.durable is not None:
            faces.append((durable, call.name, call.name))
        if call.fanout is not None and call.name not in _api.FANOUT_CORE:
            faces.append((dco.FanoutCache, call.name, call.name))
        if call.aio is not None:
            faces.append((AsyncCache, call.aio, call.name))
    return faces


@pytest.mark.parametrize(
    ("face", "name", "source"),
    _faces(),
    ids=lambda v: v if isinstance(v, str) else getattr(v, "__name__", str(v)),
)
def test_a_generated_member_has_caches_signature(face: type, name: str, source: str) -> None:
    member = getattr(face, name)
    assert _bare(inspect.signature(member)) == _bare(inspect.signature(getattr(dco.Cache, source)))
    awaited = face is AsyncCache or (face.__name__ == "AsyncRedisCache" and source != "transact")
    assert inspect.iscoroutinefunction(member) == awaited
    own = inspect.getdoc(getattr(dco.Cache, source))
    assert own, f"Cache.{source} has no docstring"
    assert own in (inspect.getdoc(member) or "")


def test_the_generated_faces_are_current() -> None:
    # `make api` writes them; a call whose parameters, docstring or row changed without it
    # fails here and in `make lint`.
    assert _generate.stale() == []


@pytest.mark.parametrize(
    ("face", "name", "source"),
    _faces(),
    ids=lambda v: v if isinstance(v, str) else getattr(v, "__name__", str(v)),
)
def test_a_generated_member_is_real_source(face: type, name: str, source: str) -> None:
    # grep finds it, a traceback shows its line, and inspect reads it back.
    member = getattr(face, name)
    code = member.__code__
    # Written by `make api` into _faces/, or into its backend's folder (remote/_face*.py).
    where = code.co_filename.replace("\\", "/")
    assert "/_faces/" in where or "/remote/_face" in where, where
    assert _generated(face, name) is member
    text = inspect.getsource(member)
    assert f"def {name}(" in text
    # The source's own parameter list is Cache's (names, kinds and defaults).
    tree = ast.parse(textwrap.dedent(text))
    (node,) = tree.body
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    declared = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
    declared += [node.args.vararg.arg] if node.args.vararg else []
    declared += [a.arg for a in node.args.kwonlyargs]
    declared += [node.args.kwarg.arg] if node.args.kwarg else []
    assert declared == list(inspect.signature(getattr(dco.Cache, source)).parameters)


def _generated(face: type, name: str) -> object:
    """``face``'s member ``name`` as defined in the generated module it inherits."""
    for klass in face.__mro__:
        generated = klass.__module__.startswith("diskcache_oxide._faces.") or (
            klass.__module__.startswith("diskcache_oxide.remote._face")
        )
        if generated and name in vars(klass):
            return vars(klass)[name]
    raise AssertionError(f"{face.__name__}.{name} is not generated")


def test_a_traceback_shows_the_generated_line() -> None:
    import traceback

    null = dco.NullCache()
    try:
        null["absent"]
    except KeyError as error:
        frames = traceback.extract_tb(error.__traceback__)
    last = frames[-1]  # NullCacheCalls.__getitem__, where the miss is raised
    assert last.filename.endswith("null.py") and "_faces" in last.filename
    assert last.line == "raise missing(key)"


def test_nothing_is_compiled_at_import() -> None:
    import pathlib
    import re

    builtin = re.compile(r"(?<![.\w])(exec|compile)\(")  # not re.compile(...)
    package = pathlib.Path(dco.__file__).parent
    found = [path.name for path in package.rglob("*.py") if builtin.search(path.read_text())]
    assert found == []


def test_a_null_miss_is_evaluated_against_the_arguments() -> None:
    null = dco.NullCache()
    assert null.get("k", 7, expire_time=True, tag=True) == (7, None, None)
    assert null.incr("k", 5, default=10) == 15
    assert null.decr("k", 5, default=10) == 5
    assert null.push_many(iter([1, 2, 3])) == [None, None, None]
    with pytest.raises(KeyError):
        null.incr("k", default=None)
    with pytest.raises(KeyError, match="dictionary is empty"):
        null.peekitem()
    calls: list[int] = []
    for _ in range(2):  # nothing is stored: fn runs every time, with its own arguments
        assert null.get_or_compute("k", lambda a, b=0: calls.append(a) or a + b, 2, b=5) == 7
    assert calls == [2, 2]


def test_a_new_face_is_one_description() -> None:
    # A second backend's face (the Redis issue) is a Face in _api.FACES: here, one that
    # forwards every guarded call to a backend object, generated without being written out.
    face = _api.Face(
        module="example",
        mixin="ExampleCalls",
        summary="An example backend's calls.",
        entry=lambda call: call.durable,
        body=lambda call, _miss, body: [body.result(f"self._backend.{call.name}({body.passed})")],
        lead=lambda call, _miss: f"`Cache.{call.name}` on the example backend.",
        declares=("_backend: Cache",),
    )
    text = _generate.face_source(face)
    tree = ast.parse(text)
    (mixin,) = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    assert mixin.name == "ExampleCalls"
    methods = {node.name for node in mixin.body if isinstance(node, ast.FunctionDef)}
    assert methods == {call.name for call in _api.CALLS if call.durable is not None}
    assert "return self._backend.get(key, default, read, expire_time, tag, retry)" in text
    assert "        self._backend.__setitem__(key, value)\n" in text  # returns None
    assert "Do not edit it by hand" in text
