"""Docstrings declared once: a class that mirrors another class's API takes them from it.

:func:`mirror_docs` runs at import time, right after the mirroring class (the *face*) is
defined. Each mirrored member's docstring becomes a first paragraph saying how the face
differs, followed by the docstring of the member it mirrors on the *source*. The source's
docstrings may come from the compiled core, so a missing one is not an error: the member
keeps its own docstring, or gets just the first paragraph.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["mirror_docs"]

#: The width a lead paragraph is wrapped to.
_WIDTH = 90

#: The dunders a face mirrors when it is not given the names.
_MIRRORED_DUNDERS = frozenset(
    {"__getitem__", "__setitem__", "__delitem__", "__contains__", "__len__"}
)


def mirror_docs(
    face: type,
    source: type,
    names: Iterable[str] | None = None,
    *,
    lead: Callable[[str], str] | None = None,
    renamed: Mapping[str, str] | None = None,
) -> None:
    """Give ``face``'s members the docstrings of the ``source`` members they mirror.

    :param names: the members of ``face`` to document (each must be defined in ``face``
        itself); default: every public member and item dunder
        defined in ``face`` that ``source`` has too, plus those in ``renamed``
    :param lead: the first paragraph (wrapped to 90 columns), given the name of the
        source's member; the face's own docstring, if it has one, takes its place
    :param renamed: face name -> source name, for members named differently on the face

    A member's docstring becomes the first paragraph, a blank line, then the source's
    docstring; without a source docstring the first paragraph alone (or the member's own
    docstring, left as it is).
    """
    renames = dict(renamed or {})
    own = vars(face)
    if names is None:
        wanted = [
            name
            for name in own
            if (not name.startswith("_") or name in _MIRRORED_DUNDERS)
            and _documentable(own[name])
            and hasattr(source, name)
        ]
        wanted += [name for name in renames if name not in wanted]
    else:
        wanted = list(names)
    for name in wanted:
        if name not in own:
            raise AttributeError(f"{face.__qualname__} does not define {name!r} itself")
        source_name = renames.get(name, name)
        # A member the source lacks (a compiled core older than this code) reads as undocumented.
        mirrored = getattr(source, source_name, None)
        source_doc = None if mirrored is None else _doc(mirrored)
        member = own[name]
        first = _cleaned(_doc_of(member))
        if first is not None and first == source_doc:
            first = None  # a copy of the source's docstring (functools.wraps), not the face's
        if first is None and lead is not None:
            first = _fill(lead(source_name), _WIDTH)
        parts = [part for part in (first, source_doc) if part]
        if parts:
            _set_doc(face, name, member, "\n\n".join(parts))


def _documentable(member: Any) -> bool:
    return isinstance(member, (property, staticmethod, classmethod, types.FunctionType))


def _doc_of(member: Any) -> str | None:
    if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
    doc = getattr(member, "__doc__", None)
    return doc if isinstance(doc, str) else None


def _cleaned(doc: str | None) -> str | None:
    if doc is None or not doc.strip():
        return None
    return _dedented(doc)


# The package imports this module, and calls mirror_docs, when it is imported; inspect and
# textwrap (inspect brings ast, dis and tokenize) cost more to import than the rest of the
# ground floor, so the little of them used here is written out (issue 33).


def _doc(member: Any) -> str | None:
    """``member``'s docstring, cleaned as :func:`inspect.getdoc` cleans it."""
    doc = getattr(member, "__doc__", None)
    if isinstance(doc, str):
        return _dedented(doc)
    if isinstance(member, types.GetSetDescriptorType):
        return None  # the compiled core's undocumented attributes: nothing to inherit
    # Inherited from a base class, or a slot's (``__slots__`` as a dict): inspect knows where
    # to look. NullCache, mirrored at import, never comes here.
    import inspect

    return inspect.getdoc(member)


def _dedented(doc: str) -> str:
    """What :func:`inspect.cleandoc` makes of ``doc``: tabs expanded, the first line's
    leading blanks and the other lines' common indent removed, empty lines cut at both ends."""
    lines = doc.expandtabs().split("\n")
    indents = [len(line) - len(line.lstrip()) for line in lines[1:] if line.strip()]
    margin = min(indents, default=0)
    lines = [lines[0].lstrip()] + [line[margin:] for line in lines[1:]]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines)


def _fill(text: str, width: int) -> str:
    """``text`` wrapped at spaces into lines of at most ``width`` (a longer word has a line
    of its own), as :func:`textwrap.fill` wraps plain prose."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return "\n".join(lines)


def _set_doc(face: type, name: str, member: Any, doc: str) -> None:
    if isinstance(member, property):
        # A property's docstring is its own attribute; a fresh one keeps the getter's intact.
        setattr(face, name, type(member)(member.fget, member.fset, member.fdel, doc))
    elif isinstance(member, (staticmethod, classmethod)):
        member.__func__.__doc__ = doc
        member.__doc__ = doc
    else:
        member.__doc__ = doc
