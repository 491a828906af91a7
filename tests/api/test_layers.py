"""The Python package's imports run downwards: the twin of crates/engine/tests/layers.rs.

Read from the sources with ``ast``, every import counts: the module-level ones, the lazy ones
inside functions and the ``TYPE_CHECKING`` ones, because each is a dependency a reader of the
code has to follow (issue 31, D-068). The package is a house of floors, from the ground up:

- **the ground** (``GROUND``): sentinels, keying, seconds, the logger, host names, text
  escapes, errors, docs and the type registry; it imports only itself;
- **the seam** (``SEAM``): the contract between features and backends (``_store``), the API
  table (``_api``), the misses its faces return (``_misses``) and what every asyncio face
  shares (``_asyncio``); it imports the ground;
- **the backends** (``directory/``, ``remote/``): each imports the ground, the seam and its
  own folder, never the other backend, a feature or a face;
- **the features** (``FEATURES``: claims and compute-once, jobs, tasks, the operator's
  tools, the asyncio claims, turns and jobs): they import the ground, the seam, each other
  and ``_open`` (the one factory that names backends), never a backend or a face; they ask
  ``_store.store_of(cache)`` what they need;
- **the faces** (``FACES``): the public cache classes, each a backend's storage with the
  features' calls written once on top (as Django's ``BaseCache`` is); they import anything
  below them;
- **the front** (everything else: the package's ``__init__``, ``_open``, the CLI, the
  dashboard, migration, the generator): it imports anything.

And there is no import cycle anywhere. The binding (``diskcache_oxide._core``) is compiled code
below everything and is left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import diskcache_oxide

PACKAGE = Path(diskcache_oxide.__file__).parent
ROOT = "diskcache_oxide"
BINDING = f"{ROOT}._core"

#: The ground floor: imports only itself (and the standard library, and the binding).
GROUND = {
    f"{ROOT}._docs",
    f"{ROOT}._files",
    f"{ROOT}._hosts",
    f"{ROOT}._keying",
    f"{ROOT}._log",
    f"{ROOT}._paths",
    f"{ROOT}._seconds",
    f"{ROOT}._sentinels",
    f"{ROOT}._shown",
    f"{ROOT}.errors",
    f"{ROOT}.registry",
}

#: The seam: the contract between the features and the backends, and what both sides share.
SEAM = {f"{ROOT}._store", f"{ROOT}._api", f"{ROOT}._misses", f"{ROOT}._asyncio"}

#: The backends' folders. A module of one that is a face (below) is not a backend module.
BACKENDS = ("directory", "remote")

#: The features: they reach a backend only through the seam.
FEATURES = {
    f"{ROOT}.{name}"
    for name in (
        "_copy",
        "_payonce",
        "admin",
        "aio._threads",
        "aio.claims",
        "aio.jobs",
        "aio.turns",
        "claims",
        "jobs",
    )
}

#: The faces: the public cache classes (and what is generated for them, ``_faces/``).
FACES = {
    f"{ROOT}.{name}"
    for name in (
        "aio.cache",
        "caches",
        "core",
        "djangocache",
        "fanout",
        "null",
        "persistent",
        "recipes",
        "remote._face",
        "remote._face_aio",
        "remote.aio",
        "remote.cache",
    )
}

#: The one module a feature may import above it: the factory that opens a cache for a path
#: or URL (``JobQueue(path)``, the operator's tools), which names the backends so that
#: nothing else does.
FACTORY = f"{ROOT}._open"

#: The floors, from the ground up.
ORDER = ("ground", "seam", "backend", "feature", "face", "front")


def floor(name: str) -> str:
    """The floor module ``name`` is on."""
    if name in GROUND:
        return "ground"
    if name in SEAM:
        return "seam"
    if name in FACES or name.startswith(f"{ROOT}._faces."):
        return "face"
    if any(name.startswith(f"{ROOT}.{folder}.") for folder in BACKENDS):
        return "backend"
    if name in FEATURES or name.startswith(f"{ROOT}.tasks."):
        return "feature"
    return "front"


def allowed(low: str, high: str) -> bool:
    """Whether module ``low`` may import module ``high`` (the floors' rule)."""
    mine, theirs = floor(low), floor(high)
    if mine == "front":
        return True
    if mine == "face":
        return theirs != "front" or high == FACTORY
    if mine == "feature":
        return theirs in ("ground", "seam", "feature") or high == FACTORY
    if mine == "backend":
        folder = low.split(".")[1]
        own = theirs == "backend" and high.split(".")[1] == folder
        return theirs in ("ground", "seam") or own
    return ORDER.index(theirs) <= ORDER.index(mine)  # the ground and the seam


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
    assert f"{ROOT}.remote.jobs" in edges[f"{ROOT}.remote.store"]  # under TYPE_CHECKING
    assert f"{ROOT}.remote.aio" in edges[f"{ROOT}._open"]  # `from .remote.aio import`
    assert BINDING not in edges[f"{ROOT}.core"]  # compiled code is not a module here


def test_every_named_module_exists() -> None:
    edges = graph()
    named = GROUND | SEAM | FEATURES | FACES | {FACTORY}
    missing = sorted(short(name) for name in named - set(edges))
    assert not missing, f"tests/api/test_layers.py names modules that do not exist: {missing}"


def test_the_ground_floor_imports_only_the_ground_floor() -> None:
    edges = graph()
    wrong = {
        (short(low), short(high)) for low in GROUND for high in edges[low] if high not in GROUND
    }
    assert not wrong, (
        "a ground-floor module imports from above it (move what it needs down into the ground "
        f"floor, or the module out of it): {sorted(wrong)}"
    )


def test_every_import_runs_down_the_floors() -> None:
    edges = graph()
    wrong = sorted(
        f"{short(low)} ({floor(low)}) imports {short(high)} ({floor(high)})"
        for low, highs in edges.items()
        for high in highs
        if not allowed(low, high)
    )
    assert not wrong, (
        "an import runs back up the floors (a feature asks the seam, _store.store_of(cache), "
        "instead of importing a backend or a face; a backend imports only the ground, the seam "
        "and its own folder; see the module docstring): " + "; ".join(wrong)
    )


def test_no_import_cycle() -> None:
    found = sorted(sorted(short(member) for member in cycle) for cycle in cycles(graph()))
    assert not found, (
        "an import cycle: break it by importing downwards (the ground floor, then the seam), "
        f"asking the seam for what a backend supplies: {found}"
    )
