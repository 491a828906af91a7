"""The reader's code, read rather than run: only the tap handler puts jobs in the queue, and
every pay-once call lives in reader/pay.py (but the app's lifespan, which finishes the turns
at shutdown). Also: the shipped pages match their source."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from reader_harness import READER_ROOT

PACKAGE = READER_ROOT / "reader"

#: The calls that add work to a queue: JobQueue.put/put_many (and the async face's), the
#: cache's push, and the binding's calls under them (``Cache._jobs.put``/``put_many``).
ADDING = {"put", "put_many", "push"}

#: diskcache_oxide's pay-once names.
PAY_ONCE = {
    "get_or_compute",
    "aget_or_compute",
    "compute_once",
    "acompute_once",
    "Claims",
    "AsyncClaims",
    "claims",
    "drain_turns",
    "pending_turns",
    "keep_turns",
    "turns_lifespan",
    "COMPUTING",
}


def _modules() -> dict[str, ast.Module]:
    return {
        path.stem: ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for path in sorted(PACKAGE.glob("*.py"))
    }


def _calls(tree: ast.Module) -> list[tuple[str, str]]:
    """(enclosing function, called attribute or name) for every call in ``tree``."""
    found: list[tuple[str, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, child.name if function == "<module>" else function)
                continue
            if isinstance(child, ast.Call):
                func = child.func
                if isinstance(func, ast.Attribute):
                    found.append((function, func.attr))
                elif isinstance(func, ast.Name):
                    found.append((function, func.id))
            visit(child, function)

    visit(tree, "<module>")
    return found


def test_only_the_tap_handler_adds_jobs() -> None:
    adding = [
        (module, function, name)
        for module, tree in _modules().items()
        for function, name in _calls(tree)
        if name in ADDING
    ]
    assert adding == [("app", "tap", "put")]


def _route_methods(handler: str) -> list[dict[str, object]]:
    """The keywords of every ``Route(..., handler, ...)`` in app.py."""
    return [
        {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
        for node in ast.walk(_modules()["app"])
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "Route"
        and any(isinstance(a, ast.Name) and a.id == handler for a in node.args)
    ]


@pytest.mark.parametrize("handler", ["tap", "api_article"])
def test_what_taps_or_pays_is_only_reached_by_a_post(handler: str) -> None:
    """No link, ``<img>`` or prefetch (a GET) can tap or pay, and a POST goes by the guard's
    same-origin check (test_reader_security.py)."""
    assert _route_methods(handler) == [{"methods": ["POST"]}]
    # Nothing else calls the handler.
    uses = [n for tree in _modules().values() for n in ast.walk(tree) if isinstance(n, ast.Name)]
    assert sum(n.id == handler for n in uses) == 1


def test_every_pay_once_call_is_in_pay_py() -> None:
    outside: list[tuple[str, str]] = []
    for module, tree in _modules().items():
        if module == "pay":
            continue
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "diskcache_oxide"
            ):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.Attribute):
                names = [node.attr]
            outside += [(module, name) for name in names if name in PAY_ONCE]
    # The one exception: the app's lifespan finishes the running turns at shutdown.
    assert outside == [("app", "turns_lifespan")]
    assert ("create_app", "turns_lifespan") in _calls(_modules()["app"])
    pay = [name for _, name in _calls(_modules()["pay"]) if name in PAY_ONCE | {"get_or_compute"}]
    assert pay.count("get_or_compute") == 2 and "Claims" in pay


def test_the_shipped_pages_are_generated_from_their_source() -> None:
    result = subprocess.run(
        [sys.executable, str(READER_ROOT / "make_articles.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    pages = sorted(Path(READER_ROOT / "articles").glob("*.html"))
    assert len(pages) == 30
