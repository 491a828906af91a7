"""A Redis operation written once and run on either client (issue 21, D-058, after D-052).

An *operation* is a generator that performs no I/O: it yields each request it needs, a
:class:`Script` of the namespace or one plain :class:`Command`, and is sent the reply (or has
the error thrown into it, so it can handle one where it means something). What it returns is
the call's result. :class:`Link` runs operations on a blocking redis-py client (``Redis`` or
``RedisCluster``); :class:`AsyncLink` runs the same operations on redis-py's asyncio client.
So the encoding, the decoding, the retries after a lost race and every error message live
once, in the operation, and the two faces differ only in ``link.run(op)`` and
``await alink.run(op)``.

A script is registered once per link (redis-py sends it by its SHA and loads it again on a
``NOSCRIPT`` reply). Every script of a namespace gets the namespace's index as its only key,
so that a cluster routes it to the namespace's slot (every key the script touches carries the
same hash tag), and the namespace's prefix as its first argument.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["AsyncLink", "Command", "Link", "Op", "Request", "Script"]

R = TypeVar("R")

Arg = bytes | str | int | float


@dataclass(frozen=True, slots=True)
class Script:
    """Run the Lua script registered as ``name`` on the namespace: ``KEYS`` is the namespace's
    index, ``ARGV`` its prefix and then ``args``."""

    name: str
    args: tuple[Arg, ...] = ()


@dataclass(frozen=True, slots=True)
class Command:
    """Run one plain command, as ``client.execute_command(*args)``; every key it names must
    carry the namespace's hash tag. The reply is redis-py's raw reply for it (for ``BLPOP``,
    ``[key, value]`` or None)."""

    args: tuple[Arg, ...]


Request = Script | Command

#: An operation returning ``R``: yields requests, is sent their replies.
Op = Generator[Request, Any, R]


def _base_keys(base: bytes) -> list[bytes]:
    return [base + b"i"]


class Link:
    """A namespace on a blocking redis-py client: runs operations, one request at a time."""

    __slots__ = ("base", "client", "keys", "_scripts")

    def __init__(self, client: Any, base: bytes, sources: Mapping[str, str]) -> None:
        self.client = client
        self.base = base
        self.keys = _base_keys(base)
        self._scripts = {name: client.register_script(text) for name, text in sources.items()}

    def send(self, request: Request) -> Any:
        """One request's reply."""
        if isinstance(request, Script):
            return self._scripts[request.name](keys=self.keys, args=[self.base, *request.args])
        return self.client.execute_command(*request.args)

    def run(self, op: Op[R]) -> R:
        """Drive ``op`` to its end and return its result. An error of a request is thrown
        into the operation; one it does not catch propagates from here."""
        reply: Any = None
        error: BaseException | None = None
        while True:
            try:
                request = op.send(reply) if error is None else op.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            error = None
            try:
                reply = self.send(request)
            except Exception as exc:
                reply, error = None, exc


class AsyncLink:
    """A namespace on redis-py's asyncio client: runs the same operations as :class:`Link`,
    awaiting each request."""

    __slots__ = ("base", "client", "keys", "_scripts")

    def __init__(self, client: Any, base: bytes, sources: Mapping[str, str]) -> None:
        self.client = client
        self.base = base
        self.keys = _base_keys(base)
        self._scripts = {name: client.register_script(text) for name, text in sources.items()}

    async def send(self, request: Request) -> Any:
        """One request's reply."""
        if isinstance(request, Script):
            return await self._scripts[request.name](
                keys=self.keys, args=[self.base, *request.args]
            )
        return await self.client.execute_command(*request.args)

    async def run(self, op: Op[R]) -> R:
        """Drive ``op`` to its end and return its result (see :meth:`Link.run`)."""
        reply: Any = None
        error: BaseException | None = None
        while True:
            try:
                request = op.send(reply) if error is None else op.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            error = None
            try:
                reply = await self.send(request)
            except Exception as exc:
                reply, error = None, exc
