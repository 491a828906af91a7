"""The Python package's imports run downwards: the twin of crates/engine/tests/layers.rs.

Read from the sources with ``ast``, every import counts: the module-level ones, the lazy ones
inside functions and the ``TYPE_CHECKING`` ones, because each is a dependency a reader of the
code has to follow (issue 31). Two rules:

- **The ground floor** (``GROUND``: the sentinels, keying, seconds, host names and errors)
  imports nothing of the package but the ground floor, so that every backend and feature may
  import it.
- **No new import cycle.** ``KNOWN_CYCLES`` lists the cycles the package still has, each as
  the set of modules in it. A cycle that is not one of them, or that grew, fails; so does a
  listed cycle that shrank or is gone, so that the list is brought down to what is left. It
  is to be emptied (issue 31).

The binding (``diskcache_oxide._core``) is compiled code below everything and is left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import diskcache_oxide

PACKAGE = Path(diskcache_oxide.__file__).parent
ROOT = "diskcache_oxide"
BINDING = f"{ROOT}._core"

#: The ground floor: imports only itself (and the standard library).
GROUND = {
    f"{ROOT}._hosts",
    f"{ROOT}._sentinels",
    f"{ROOT}._keying",
    f"{ROOT}._seconds",
    f"{ROOT}.errors",
}

#: The import cycles left, as of the ground floor's first cut (issue 31). Shorten this list;
#: never lengthen it.
KNOWN_CYCLES = [
    {
        "_directory_claims",
        "_faces.durable",
        "_payonce",
        "claims",
        "core",
        "remote.cache",
        "remote.claims",
    },
    {"aio.cache", "aio.claims", "aio.turns", "remote.aio"},
]


def modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its ``__init__``)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that module ``name`` imports, wherever the import statement is."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                # `from pkg import module` imports that module; `from module import name`
                # imports the module the name is defined in.
                candidate = f"{source}.{alias.name}"
                known_module = candidate in known or candidate == BINDING
                targets.add(candidate if known_module else source)
    found = set()
    for target in targets:
        if target == BINDING or target.startswith(BINDING + ".") or not target.startswith(ROOT):
            continue
        while target not in known and "." in target:
            target = target.rpartition(".")[0]
        if target in known and target != name:
            found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for other in sorted(edges.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def short(name: str) -> str:
    return name[len(ROOT) + 1 :] if name.startswith(ROOT + ".") else ""


def test_the_graph_is_read() -> None:
    # A guard for the reader itself: imports it must see, of each kind.
    edges = graph()
    assert f"{ROOT}._sentinels" in edges[f"{ROOT}.core"]  # module level, relative
    assert f"{ROOT}.claims" in edges[f"{ROOT}.core"]  # lazy, inside a method
    assert f"{ROOT}.core" in edges[f"{ROOT}._faces.durable"]  # under TYPE_CHECKING
    assert f"{ROOT}.remote.cache" in edges[f"{ROOT}.claims"]  # `from .remote.cache import`
    assert BINDING not in edges[f"{ROOT}.core"]  # compiled code is not a module here


def test_the_ground_floor_imports_only_the_ground_floor() -> None:
    edges = graph()
    missing = GROUND - set(edges)
    assert not missing, f"GROUND names modules that do not exist: {sorted(missing)}"
    wrong = {
        (short(low), short(high)) for low in GROUND for high in edges[low] if high not in GROUND
    }
    assert not wrong, (
        "a ground-floor module imports from above it (move what it needs down into the ground "
        f"floor, or the module out of it): {sorted(wrong)}"
    )


def test_no_new_import_cycle_and_the_known_ones_only_shrink() -> None:
    found = [{short(member) for member in cycle} for cycle in cycles(graph())]
    known = [set(cycle) for cycle in KNOWN_CYCLES]
    new = [sorted(cycle) for cycle in found if not any(cycle <= old for old in known)]
    assert not new, (
        "an import cycle that is not in KNOWN_CYCLES, or a known one that grew: break it by "
        "importing downwards (the ground floor, then the seam), never by listing it: "
        f"{new}"
    )
    shrunk = [sorted(old) for old in known if old not in found]
    assert not shrunk, (
        "a known import cycle shrank or is gone: good; now bring KNOWN_CYCLES in "
        f"tests/api/test_layers.py down to what is left ({sorted(map(sorted, found))}); "
        f"these are no longer cycles as listed: {shrunk}"
    )
