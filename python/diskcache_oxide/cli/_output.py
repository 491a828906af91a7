"""How the commands print: rich tables for a person, JSON with ``--json`` for a program, and
one line on stderr for an error. rich is imported when something is printed, not here."""

from __future__ import annotations

import ast
import datetime as dt
import json
import math
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["Failure", "Out", "age", "describe", "jsonable", "parse_key", "size"]


class Failure(Exception):
    """A command that did not do what was asked: its message is printed as one line on
    stderr and the command exits with ``code`` (1: failed or not found; 2: bad usage)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def parse_key(text: str, *, as_int: bool = False, literal: bool = False) -> Any:
    """A KEY typed on the command line: a str unless ``--int`` or ``--literal`` says it is
    an int or a Python literal (``('user', 1)``, ``b'raw'``, ``1.5``: the form ``keys``
    prints), read with :func:`ast.literal_eval`, which evaluates no code."""
    if as_int and literal:
        raise Failure("give at most one of --int and --literal", code=2)
    if as_int:
        try:
            return int(text)
        except ValueError:
            raise Failure(f"--int: KEY {text!r} is not an int", code=2) from None
    if literal:
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise Failure(
                f"--literal: KEY {text!r} is not a Python literal (a str needs quotes: \"'a'\")",
                code=2,
            ) from None
    return text


def jsonable(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON can hold it: JSON's own types as they are, lists and tuples as
    arrays, dicts with str keys as objects, dates as ISO text, anything else as its repr."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if depth < 50 and isinstance(value, (list, tuple)):
        return [jsonable(item, depth + 1) for item in value]
    if depth < 50 and isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    return repr(value)


def describe(value: Any) -> dict[str, Any]:
    """A key or value for ``--json``: its JSON form, its type and its repr (exact; what
    ``--literal`` reads back)."""
    return {"json": jsonable(value), "type": type(value).__name__, "repr": repr(value)}


def age(seconds: float | None) -> str:
    """A duration for a person: ``0.4 s``, ``12 s``, ``5 min 3 s``, ``2 h 5 min``,
    ``3 d 4 h``; an empty string for None."""
    if seconds is None:
        return ""
    sign = "-" if seconds < 0 else ""
    s = abs(seconds)
    if s < 10:
        return f"{sign}{s:.1f} s"
    whole = int(round(s))
    if whole < 60:
        return f"{sign}{whole} s"
    if whole < 3600:
        return f"{sign}{whole // 60} min {whole % 60} s"
    if whole < 86400:
        return f"{sign}{whole // 3600} h {whole % 3600 // 60} min"
    return f"{sign}{whole // 86400} d {whole % 86400 // 3600} h"


def size(n: int) -> str:
    """A byte count for a person: ``512 B``, ``48.0 KiB``, ``1.5 MiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


class Out:
    """Where a command's results go: JSON on stdout with ``--json``, tables otherwise."""

    def __init__(self, as_json: bool = False) -> None:
        self.as_json = as_json
        self._console: Console | None = None

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console

            # A pipe gets wide lines instead of 80 columns, so that nothing is cut.
            self._console = Console(
                highlight=False,
                markup=False,
                emoji=False,
                width=None if sys.stdout.isatty() else 200,
            )
        return self._console

    def json(self, data: Any) -> None:
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=repr) + "\n")

    def line(self, text: str = "") -> None:
        self.console.print(text, soft_wrap=True)

    def table(
        self,
        title: str | None,
        columns: Sequence[str],
        rows: Iterable[Sequence[Any]],
        *,
        numeric: Sequence[str] = (),
        empty: str = "(none)",
    ) -> None:
        from rich.table import Table
        from rich.text import Text

        table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
        for name in columns:
            table.add_column(name, justify="right" if name in numeric else "left", overflow="fold")
        count = 0
        for row in rows:
            table.add_row(*(Text("" if cell is None else str(cell)) for cell in row))
            count += 1
        if count == 0:
            if title:
                self.line(f"{title}: {empty}")
            else:
                self.line(empty)
            return
        self.console.print(table)
