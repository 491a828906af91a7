"""What an operation yields (issue 21, D-058): a :class:`Script` of the namespace or one plain
:class:`Command`, each a :data:`Request`. An operation (:data:`Op`) is a generator of requests
that performs no I/O; a link (``_io``, whose docstring explains the whole shape) sends each
request and sends the reply back into the operation.

Its own module so that the code that writes operations (``_ops``, ``_job_ops``, ``_inspect``,
``claims``, ``jobs``) and the errors that name a request (``_errors``) need not import the
links that run them.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from ._replies import Shape

__all__ = ["Command", "Op", "Request", "Script"]

#: What an operation returns.
R = TypeVar("R")

#: An argument of a request, as redis-py sends it.
Arg = bytes | str | int | float


@dataclass(frozen=True, slots=True)
class Script:
    """Run the Lua script registered as ``name`` on the namespace: ``KEYS`` is the namespace's
    index, ``ARGV`` its prefix and then ``args`` (and, for a write, the request token)."""

    name: str
    args: tuple[Arg, ...] = ()


@dataclass(frozen=True, slots=True)
class Command:
    """Run one plain command, as ``client.execute_command(*args)``; every key it names must
    carry the namespace's hash tag. The reply is redis-py's raw reply for it (for ``BLPOP``,
    ``[key, value]`` or None). ``idempotent``: safe to send again after a lost reply (a read),
    so the link repeats it after a connection error. ``reply``: the reply's :class:`Shape`,
    checked before the operation sees it."""

    args: tuple[Arg, ...]
    idempotent: bool = False
    #: What its reply must look like (None: not checked; a command of this package names one).
    reply: Shape | None = None


Request = Script | Command

#: An operation returning ``R``: yields requests, is sent their replies.
Op = Generator[Request, Any, R]
