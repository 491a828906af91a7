"""mkdocs hooks for the docs site (mkdocs.yml; `make docs`). Not a page: excluded from the site.

- The repository's README.md is the site's home page (``index.md``), its links to ``docs/...``
  made relative to the docs.
- ``nav``'s entry ``decisions/`` becomes an index of the decision records followed by every
  record, in order, so a new record is on the site without editing mkdocs.yml.
- ``api.md``, the API reference, is written from ``diskcache_oxide.__all__``: one mkdocstrings
  entry per public class, function and constant, grouped by the module that defines it, then
  ``DjangoCache`` and ``diskcache_oxide.aio``. A name added to ``__all__`` is documented with
  no change here; a module not in ``SECTIONS`` gets a section under its own name.
- ``SiteDocstrings``, a griffe extension (mkdocs.yml names it for mkdocstrings), gives the
  API page the docstrings that exist only once the package is imported. griffe reads the
  source: the methods of the compiled core have signatures in ``_core.pyi`` but their
  docstrings in Rust. (The faces' generated members, in ``_faces/``, are plain source with
  their own docstrings: griffe reads them as inherited members.)
  It also shows the docstrings' Sphinx roles (``:class:`~diskcache_oxide.Timeout```) as
  code (``Timeout``), since the page is Markdown.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from typing import Any

import griffe
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[1]
DECISIONS = "decisions/"

#: The section of the API page for each module of the package, in page order.
SECTIONS = {
    "diskcache_oxide.core": "Cache",
    "diskcache_oxide.fanout": "FanoutCache",
    "diskcache_oxide.null": "NullCache",
    "diskcache_oxide.caches": "The Caches registry",
    "diskcache_oxide.jobs": "Leased jobs",
    "diskcache_oxide.claims": "Claims and compute-once",
    "diskcache_oxide.persistent": "Deque and Index",
    "diskcache_oxide.recipes": "Recipes",
    "diskcache_oxide.migrate": "Migrating from python-diskcache",
    "diskcache_oxide.registry": "Custom types",
    "diskcache_oxide.errors": "Errors and warnings",
}

_LINK = re.compile(r"(\]\()(?P<target>[^)\s]+)(\))")


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    records = sorted(
        path.relative_to(ROOT / "docs").as_posix()
        for path in (ROOT / "docs" / "decisions").glob("D-*.md")
    )
    config.nav = _expand(config.nav, ["decisions/index.md", *records])
    return config


def _expand(nav: Any, records: list[str]) -> Any:
    if isinstance(nav, list):
        return [_expand(item, records) for item in nav]
    if isinstance(nav, dict):
        return {title: _expand(item, records) for title, item in nav.items()}
    return records if nav == DECISIONS else nav


def on_files(files: Files, config: MkDocsConfig) -> Files:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    files.append(File.generated(config, "index.md", content=readme))
    files.append(File.generated(config, "decisions/index.md", content=_decisions_index()))
    files.append(File.generated(config, "api.md", content=_api_page()))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if page.file.src_uri != "index.md":
        return markdown

    def relink(match: re.Match[str]) -> str:
        target = match["target"]
        if target.startswith("docs/"):
            target = target[len("docs/") :]
            if target == DECISIONS:
                target = "decisions/index.md"
        return f"{match[1]}{target}{match[3]}"

    return _LINK.sub(relink, markdown)


def _decisions_index() -> str:
    lines = [
        "# Decision records",
        "",
        "Each record states a decision, the reasons for it and what it rules out, as it stood "
        "when it was taken. Later records may build on or replace earlier ones.",
        "",
    ]
    for path in sorted((ROOT / "docs" / "decisions").glob("D-*.md")):
        first = path.read_text(encoding="utf-8").splitlines()[0]
        title = first.lstrip("#").strip() if first.startswith("#") else path.stem
        lines.append(f"- [{title}]({path.name})")
    return "\n".join(lines) + "\n"


def _api_page() -> str:
    package = importlib.import_module("diskcache_oxide")
    compiled = importlib.import_module("diskcache_oxide._core")
    sections: dict[str, list[str]] = {module: [] for module in SECTIONS}
    kinds: dict[str, int] = {}  # classes first, then functions, then constants
    paths: dict[str, str | None] = {}
    for name in package.__all__:
        if name.startswith("__"):
            continue
        value = getattr(package, name)
        kinds[name] = 0 if isinstance(value, type) else 1 if callable(value) else 2
        module = value.__module__ if kinds[name] < 2 else None
        # A class of the compiled core is documented where griffe finds it, in _core.pyi (a
        # module's `Job = _core.Job` reads to griffe as an attribute, not as the class).
        in_core = getattr(compiled, name, None) is value and kinds[name] < 2
        paths[name] = f"diskcache_oxide._core.{name}" if in_core else None
        # A name defined in a private module of a package section (diskcache_oxide.migrate's
        # _report, say) is documented in that section.
        module = next((s for s in SECTIONS if module and module.startswith(s + ".")), module)
        if module not in SECTIONS:  # a constant, or a class of the compiled core
            module = _defining_module(name)
        sections.setdefault(module, []).append(name)
    lines = [
        "# API reference",
        "",
        "Generated from the docstrings: every name in `diskcache_oxide.__all__`, grouped by the "
        "module that defines it, then `DjangoCache` and `diskcache_oxide.aio`. Import them all "
        "from `diskcache_oxide` itself.",
        "",
    ]
    for module, names in sections.items():
        if not names:
            continue
        lines += [f"## {SECTIONS.get(module, module)}", ""]
        for name in sorted(names, key=kinds.__getitem__):
            lines += [f"::: {paths[name] or f'diskcache_oxide.{name}'}", ""]
    lines += [
        "## DjangoCache",
        "",
        "::: diskcache_oxide.djangocache.DjangoCache",
        "",
        "## asyncio: `diskcache_oxide.aio`",
        "",
        "::: diskcache_oxide.aio",
        "",
    ]
    return "\n".join(lines)


def _defining_module(name: str) -> str:
    """The first module of ``SECTIONS`` whose source defines or assigns ``name`` at the top."""
    defines = re.compile(rf"^((class|def) {re.escape(name)}\b|{re.escape(name)}\b.*=)", re.M)
    for module in SECTIONS:
        path = ROOT / "python" / Path(*module.split("."))
        # A module, or a package and every module in it.
        sources = sorted(path.glob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
        if any(defines.search(source.read_text(encoding="utf-8")) for source in sources):
            return module
    return "diskcache_oxide"


class SiteDocstrings(griffe.Extension):
    """Docstrings from the imported objects, and Sphinx roles as code (see the top)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.name != "diskcache_oxide":
            return
        modules = _modules(pkg)
        for module in modules:
            try:
                runtime = importlib.import_module(module.path)
            except ImportError:  # a module that needs an optional dependency
                continue
            for cls in _classes(module):
                _fill(cls, runtime)
        for module in modules:
            for obj in _objects(module):
                if obj.docstring is not None:
                    text = _ROLE.sub(_as_code, obj.docstring.value)
                    obj.docstring.value = _fields_last(text)


_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|data|attr|exc|mod|obj|const):`(~?)([^`]+)`")


def _as_code(match: re.Match[str]) -> str:
    target = match[2]
    return f"`{target.rsplit('.', 1)[-1] if match[1] else target}`"


_FIELD = re.compile(r"^:(param|parameter|arg|type|raises?|returns?|rtype|yields?|var)\b")


def _fields_last(text: str) -> str:
    """Prose written after the ``:param ...:`` fields moved before them: griffe's Sphinx
    parser would read it as part of the last field."""
    lines = text.split("\n")
    first = next((i for i, line in enumerate(lines) if _FIELD.match(line)), None)
    if first is None:
        return text
    fields: list[str] = []
    after: list[str] = []
    blank = False
    for line in lines[first:]:
        if after or (blank and line and not line[0].isspace() and not _FIELD.match(line)):
            after.append(line)
        else:
            fields.append(line)
        blank = not line.strip()
    if not after:
        return text
    before = lines[:first]
    while fields and not fields[-1].strip():
        fields.pop()
    return "\n".join([*before, *after, "", *fields])


def _modules(module: griffe.Module) -> list[griffe.Module]:
    found = [module]
    for sub in module.modules.values():
        if not sub.is_alias:
            found += _modules(sub)
    return found


def _objects(owner: griffe.Object) -> list[griffe.Object]:
    found = [owner]
    for member in owner.members.values():
        if not member.is_alias and not member.is_module:
            found += _objects(member)
    return found


def _classes(owner: griffe.Object) -> list[griffe.Class]:
    return [obj for obj in _objects(owner) if obj.is_class]


def _fill(cls: griffe.Class, runtime_module: Any) -> None:
    """Each member of ``cls``, its own or inherited, that has no docstring gets the runtime's."""
    runtime: Any = runtime_module
    for part in cls.path.split(".")[len(runtime_module.__name__.split(".")) :]:
        runtime = getattr(runtime, part, None)
    if runtime is None:
        return
    for name, member in cls.all_members.items():
        target = member.final_target if member.is_alias else member
        if target.docstring is not None or target.is_class or target.is_module:
            continue
        value = getattr(runtime, name, None)
        # A method's or a property's own docstring; a plain value's __doc__ is its type's.
        if not (inspect.isroutine(value) or inspect.isdatadescriptor(value)):
            continue
        doc = value.__doc__
        if isinstance(doc, str) and doc.strip():
            target.docstring = griffe.Docstring(inspect.cleandoc(doc), parent=target)
