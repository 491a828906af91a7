"""What a Redis server's reply must look like (issue 29, D-061): a :class:`Shape` for each
request, the shapes the scripts' and commands' shapes are built of, and :func:`excerpt`, which
shows what came instead.

Every reply passes through a link (``_io``), which tests it against its request's shape before
the operation sees it: a server or proxy that does not answer as Redis does raises
:class:`~diskcache_oxide.errors.UnexpectedReplyError` naming the call, instead of a wrong
result or a ``TypeError`` deep in the decoding. Each script's shape is declared beside the
script (``_scripts.REPLIES`` and ``CLAIM_REPLIES``, ``_job_scripts.JOB_REPLIES``) and
registered by its source text with :func:`expect`; each command names its own
(``Command.reply``).

Its own module, at the bottom of ``remote``'s imports: the scripts' declarations, the requests
(``_requests``) and the error messages (``_errors``, which show an :func:`excerpt` of a reply or
a key) all need it, and it needs none of them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "BULK",
    "COUNT",
    "DIGITS",
    "FLAG",
    "INT",
    "MS",
    "NUMBER",
    "Shape",
    "array",
    "array_of",
    "excerpt",
    "expect",
    "nil_or",
    "rows",
]


class Shape:
    """What the reply to one request must look like: ``test(reply, args)`` (``args`` the
    request's arguments, for a length that depends on them); ``text`` says it in words for the
    error. Declared beside each script (``_scripts.REPLIES``) and command (``_ops``)."""

    __slots__ = ("test", "text")

    def __init__(self, test: Callable[[Any, tuple[Any, ...]], bool], text: str) -> None:
        self.test = test
        self.text = text

    def __repr__(self) -> str:
        return f"Shape({self.text})"


def _matches(pattern: bytes) -> Callable[[Any, tuple[Any, ...]], bool]:
    compiled = re.compile(pattern)
    return lambda reply, args: type(reply) is bytes and compiled.fullmatch(reply) is not None


def _array(reply: Any) -> bool:
    return type(reply) is list or type(reply) is tuple


#: An integer reply; one that is 0 or more; 0 or 1.
INT = Shape(lambda reply, args: type(reply) is int, "an integer")
COUNT = Shape(lambda reply, args: type(reply) is int and reply >= 0, "an integer >= 0")
FLAG = Shape(lambda reply, args: type(reply) is int and reply in (0, 1), "0 or 1")
#: A bulk string; one of decimal digits; '' or digits (an expiry in ms); a queue item number.
BULK = Shape(lambda reply, args: type(reply) is bytes, "a string")
DIGITS = Shape(_matches(rb"-?[0-9]+"), "a decimal number")
MS = Shape(_matches(rb"(-?[0-9]+)?"), "'' or a decimal number")
NUMBER = Shape(_matches(rb"[0-9]{15}"), "a 15-digit number")


def nil_or(shape: Shape) -> Shape:
    """``shape``, or nil (None)."""
    return Shape(
        lambda reply, args: reply is None or shape.test(reply, args), f"nil or {shape.text}"
    )


def array(*shapes: Shape) -> Shape:
    """An array of exactly ``len(shapes)`` elements, each of its shape."""

    def test(reply: Any, args: tuple[Any, ...]) -> bool:
        return (
            _array(reply)
            and len(reply) == len(shapes)
            and all(shape.test(item, args) for shape, item in zip(shapes, reply, strict=True))
        )

    return Shape(test, f"an array of {len(shapes)} ({', '.join(shape.text for shape in shapes)})")


def array_of(
    shape: Shape, length: Callable[[tuple[Any, ...]], int] | None = None, multiple: int = 1
) -> Shape:
    """An array whose elements are each ``shape``: ``length(args)`` of them if given, else a
    multiple of ``multiple``."""

    def test(reply: Any, args: tuple[Any, ...]) -> bool:
        if not _array(reply):
            return False
        if length is not None and len(reply) != length(args):
            return False
        return len(reply) % multiple == 0 and all(shape.test(item, args) for item in reply)

    many = "as many as asked for" if length is not None else "any number"
    if multiple > 1:
        many = f"a multiple of {multiple}"
    return Shape(test, f"an array of {many} of {shape.text}")


def rows(head: tuple[Shape, ...], row: tuple[Shape, ...]) -> Shape:
    """An array of ``head``'s elements, then any number of rows of ``row``'s (a reply that
    lists records after a few fixed fields, as the jobs' take, info and list do)."""

    def test(reply: Any, args: tuple[Any, ...]) -> bool:
        if not _array(reply) or len(reply) < len(head):
            return False
        if (len(reply) - len(head)) % len(row):
            return False
        if not all(shape.test(item, args) for shape, item in zip(head, reply, strict=False)):
            return False
        rest = reply[len(head) :]
        return all(row[i % len(row)].test(item, args) for i, item in enumerate(rest))

    return Shape(
        test,
        f"an array of {len(head)} ({', '.join(shape.text for shape in head)}) then rows of "
        f"{len(row)} ({', '.join(shape.text for shape in row)})",
    )


def excerpt(value: Any, room: int = 160) -> str:
    """A short, escaped rendering of what a server sent, for an error message or a log: strings
    cut to 48 characters (their repr, so control characters and terminal escapes show as
    ``\\x1b``), arrays to 6 elements and 3 levels, the whole to ``room`` characters."""

    def shown(item: Any, depth: int) -> str:
        if isinstance(item, (bytes, bytearray, str)):
            head = item[:48]
            text = repr(bytes(head) if isinstance(head, bytearray) else head)
            return text + (f"...({len(item)} long)" if len(item) > 48 else "")
        if _array(item):
            if depth >= 3:
                return "[...]"
            inner = ", ".join(shown(part, depth + 1) for part in item[:6])
            more = f", ...({len(item)} items)" if len(item) > 6 else ""
            return f"[{inner}{more}]"
        if isinstance(item, BaseException):
            return f"{type(item).__name__}({shown(str(item), depth)})"
        return repr(item)[:48]

    text = shown(value, 0)
    return text if len(text) <= room else text[: room - 3] + "..."


#: The shape of each script's reply, by the script's source text (so the same script linked
#: under another name, as ``remote.claims`` links the claims' scripts, is checked the same).
_REPLIES: dict[str, Shape] = {}


def expect(sources: Mapping[str, str], replies: Mapping[str, Shape]) -> None:
    """Declare the shape of the reply of each script of ``sources`` named in ``replies``: every
    link checks those replies before an operation sees them."""
    for name, shape in replies.items():
        _REPLIES[sources[name]] = shape
