"""A Redis operation written once and run on either client (issue 21, D-058, after D-052),
with the faults of a real server handled in one place (D-061).

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

**Faults (D-061).** A request whose reply is lost may or may not have run on the server, and
repeating a script that pushes, takes, replaces or acquires would do it twice. So:

- A *write* script (every script not in :data:`READ_SCRIPTS`, or those named in ``writes``)
  carries a request token, ``<session>:<sequence>``, as its last argument. The link wraps the
  script's source so that, atomically with the write, it keeps its reply under
  ``<prefix>o:<session>`` (one key per concurrent caller, the last reply only, for
  :data:`REPLAY_MS`); the same token sent again returns the kept reply and writes nothing. So
  a write is safe to repeat, whoever repeats it: this link, redis-py's own ``Retry`` on a
  user's client, or ``RedisCluster``'s retries while it follows a failover. The wrapper takes
  the token off ``ARGV`` before the script's own code runs, which sees what it always saw.
- The link repeats a request after a ``ConnectionError`` (the connection dropped, was refused or
  the server is loading its data) for up to ``reconnect_for`` seconds (:data:`RECONNECT_FOR`),
  the pauses doubling from 50 ms to 1 s: reads and tokened writes always, a plain
  :class:`Command` only if it says it is ``idempotent``. It never repeats after a timeout: a
  server that does not answer within the socket timeout gets no second wait.
- A redis-py connection error or timeout reaches the caller as :class:`ServerConnectionError`
  or :class:`ServerTimeout`: each a :class:`~diskcache_oxide.errors.CacheError` *and* the
  redis-py error it replaces (so ``except redis.ConnectionError`` in a worker loop still
  catches it), whose message says where, whether the call may have run and what to do.
- ``replicas=n`` sends ``WAIT n replica_timeout`` after every write script, on the connection
  that ran it (the script and the ``WAIT`` in one pipeline, on the master of the namespace's
  slot), so that a write that returns has reached ``n`` replicas; fewer raise
  :class:`NotReplicatedError`, except for a write that hands data to the caller
  (:data:`CONSUMING_SCRIPTS`), which returns it with a warning. Reads send no ``WAIT``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Generator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import redis.exceptions as rx

from ..errors import CacheError

__all__ = [
    "RECONNECT_FOR",
    "REPLAY_MS",
    "READ_SCRIPTS",
    "CONSUMING_SCRIPTS",
    "AsyncLink",
    "Command",
    "Link",
    "NotReplicatedError",
    "Op",
    "Request",
    "Script",
    "ServerConnectionError",
    "ServerTimeout",
]

R = TypeVar("R")

log = logging.getLogger("diskcache_oxide.remote")

Arg = bytes | str | int | float

#: How long (seconds) a link goes on repeating a request after ConnectionErrors, by default:
#: long enough for a server restarted with its AOF, or a cluster failing over with a short
#: node timeout, to answer again. The pauses double from 50 ms up to 1 s.
RECONNECT_FOR = 10.0

#: How long (ms) a write's reply is kept for a repeat of the same request token: longer than any
#: retry window (this link's, redis-py's backoff, a cluster's failover); the key is one per
#: concurrent caller and holds only its last reply.
REPLAY_MS = 120_000

#: The scripts that only read (of ``_scripts.SCRIPTS`` and ``CLAIM_SCRIPTS``): sent as they
#: are, repeated freely, never followed by ``WAIT``. Every other script is a *write*: it carries
#: a request token and, with ``replicas``, is followed by ``WAIT``, so a script added later is
#: safe to repeat unless it is named here. (``get`` counts statistics and ``peekitem``/``list``
#: remove expired entries: repeating those is harmless, and they need no replica.)
READ_SCRIPTS = frozenset(
    {
        # the cache's (remote._scripts.SCRIPTS)
        *("get", "get_many", "get_revision", "peek", "peekitem"),
        # the claims' (remote.claims.LINKED)
        *("claim_holder", "claim_list"),
        # the jobs' (remote._job_scripts.JOB_SCRIPTS)
        *("counts", "info", "list", "queues"),
    }
)


#: The writes that remove data and hand it to the caller (a pull, a pull's take, a pop). When fewer
#: replicas than asked acknowledge one, the link returns its reply with a warning instead of
#: raising: the removal has happened on the master, and raising would lose the item for the
#: caller; if a failover undoes the removal, the item is delivered again (twice, never lost).
CONSUMING_SCRIPTS = frozenset({"pull", "take", "pop"})


class ServerConnectionError(CacheError, rx.ConnectionError):
    """The connection to the Redis server failed and repeating the request did not help (or
    was not safe). Also a ``redis.ConnectionError``."""


class ServerTimeout(CacheError, rx.TimeoutError):
    """The Redis server did not answer within the client's socket timeout. Also a
    ``redis.TimeoutError``."""


class NotReplicatedError(CacheError):
    """A write ran on the master, but fewer replicas than ``replicas`` acknowledged it within
    ``replica_timeout``: it may not survive a failover. ``acknowledged`` is how many did,
    ``reply`` the write's own reply."""

    def __init__(self, message: str, acknowledged: int, reply: Any) -> None:
        super().__init__(message)
        self.acknowledged = acknowledged
        self.reply = reply


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
    so the link repeats it after a connection error."""

    args: tuple[Arg, ...]
    idempotent: bool = False


Request = Script | Command

#: An operation returning ``R``: yields requests, is sent their replies.
Op = Generator[Request, Any, R]


def _base_keys(base: bytes) -> list[bytes]:
    return [base + b"i"]


# ---- request tokens ------------------------------------------------------------------------

_ONCE_HEAD = """\
local __token = table.remove(ARGV)
local __session, __seq = string.match(__token, '^(.+):(%d+)$')
local __done = ARGV[1] .. 'o:' .. __session
local __kept = redis.call('GET', __done)
if __kept then
  local __was, __reply = cmsgpack.unpack(__kept)
  if __was == __seq then
    -- a repeat: the reply it already had, and one write, so that a WAIT on this connection
    -- covers the first run's writes too (they precede it in the replication stream)
    redis.call('PEXPIRE', __done, {ttl})
    return __reply
  end
end
local function __op()
"""

_ONCE_TAIL = """
end
local __reply = __op()
redis.call('SET', __done, cmsgpack.pack(__seq, __reply), 'PX', {ttl})
return __reply
"""


def once(source: str) -> str:
    """``source`` made safe to repeat: its last ``ARGV`` is a request token
    ``<session>:<sequence>``, and a token seen before returns the reply it had (D-061)."""
    ttl = str(REPLAY_MS)
    return _ONCE_HEAD.replace("{ttl}", ttl) + source + _ONCE_TAIL.replace("{ttl}", ttl)


class _Session:
    __slots__ = ("name", "seq")

    def __init__(self) -> None:
        self.name = os.urandom(9).hex()
        self.seq = 0

    def token(self) -> str:
        self.seq += 1
        return f"{self.name}:{self.seq}"


class _Sessions:
    """Request-token sessions, one per concurrent caller: a call takes a free one and gives it
    back, so each session's calls are sequential and its kept reply is only ever the last."""

    __slots__ = ("_free", "_lock")

    def __init__(self) -> None:
        self._free: list[_Session] = []
        self._lock = threading.Lock()

    def take(self) -> _Session:
        with self._lock:
            return self._free.pop() if self._free else _Session()

    def give(self, session: _Session) -> None:
        with self._lock:
            self._free.append(session)


# ---- errors --------------------------------------------------------------------------------


def _settings_of(client: Any) -> dict[str, Any]:
    getter = getattr(client, "get_connection_kwargs", None)
    if getter is not None:
        return dict(getter())
    manager = getattr(client, "nodes_manager", None)
    return dict(getattr(manager, "connection_kwargs", {}) or {})


def _where(client: Any) -> str:
    settings = _settings_of(client)
    if settings.get("path"):
        return f"the Redis server at unix://{settings['path']}"
    if getattr(client, "nodes_manager", None) is not None:
        return "a node of the Redis Cluster"
    return f"the Redis server at {settings.get('host', '?')}:{settings.get('port', '?')}"


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, rx.ConnectionError) and not isinstance(
        exc,
        (
            rx.AuthenticationError,
            rx.AuthorizationError,
            rx.MaxConnectionsError,
            ServerConnectionError,
        ),
    )


def _delay(tries: int, began: float, budget: float) -> float | None:
    """The pause before repeat number ``tries``, or None when the budget is spent."""
    delay = min(1.0, 0.05 * 2 ** (tries - 1))
    return None if time.monotonic() - began + delay > budget else delay


def _mapped(
    client: Any, exc: BaseException, write: bool | None, tries: int, began: float
) -> BaseException:
    """Our error for a redis-py connection or timeout error (``exc`` itself for any other)."""
    if isinstance(exc, (ServerTimeout, ServerConnectionError)):
        return exc
    where = _where(client)
    if write is None:
        effect = "The command may or may not have run on the server."
    elif write:
        effect = (
            "The write may or may not have been applied; calling again is a new write (a push "
            "would be pushed twice), so check before repeating one that must not be doubled."
        )
    else:
        effect = "It only read, so it is safe to call again."
    if isinstance(exc, rx.TimeoutError):
        timeout = _settings_of(client).get("socket_timeout")
        return ServerTimeout(
            f"{where} did not answer within the client's socket timeout ({timeout} s: "
            "RedisCache(timeout=...) or the client's socket_timeout) and the call was not "
            "repeated. The server may be stopped (SIGSTOP), overloaded, running a long script "
            f"or cut off by the network. {effect} A write sent before the timeout can still be "
            "applied when the server resumes. Check the server (redis-cli -h ... PING, its "
            f"log), or raise the timeout if it is merely slow. ({exc})"
        )
    if _retryable(exc):
        took = time.monotonic() - began
        repeated = (
            f"after {tries} tries in {took:.1f} s (reconnect_for) "
            if tries > 1
            else "(not repeated) "
        )
        return ServerConnectionError(
            f"lost the connection to {where} {repeated}({exc}). {effect} Check that the server "
            "is running and reachable; a worker loop should catch redis.ConnectionError, wait "
            "and go on."
        )
    return exc


# ---- the links -----------------------------------------------------------------------------


class _Base:
    __slots__ = (
        "base",
        "client",
        "keys",
        "reconnect_for",
        "replica_timeout",
        "replicas",
        "_cluster",
        "_consumes",
        "_scripts",
        "_sessions",
        "_writes",
    )

    def __init__(
        self,
        client: Any,
        base: bytes,
        sources: Mapping[str, str],
        *,
        writes: Collection[str] | None = None,
        replicas: int = 0,
        replica_timeout: float = 1.0,
        reconnect_for: float = RECONNECT_FOR,
    ) -> None:
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
            raise ValueError(f"replicas must be an int >= 0, not {replicas!r}")
        if not isinstance(replica_timeout, (int, float)) or not replica_timeout > 0:
            raise ValueError(
                f"replica_timeout must be a number of seconds > 0, not {replica_timeout!r}"
            )
        self.client = client
        self.base = base
        self.keys = _base_keys(base)
        self.replicas = replicas
        self.replica_timeout = float(replica_timeout)
        self.reconnect_for = float(reconnect_for)
        self._cluster = getattr(client, "nodes_manager", None) is not None or hasattr(
            client, "get_node_from_key"
        )
        self._writes = frozenset(sources) - READ_SCRIPTS if writes is None else frozenset(writes)
        self._consumes = CONSUMING_SCRIPTS & self._writes
        self._sessions = _Sessions()
        self._scripts = {
            name: client.register_script(once(text) if name in self._writes else text)
            for name, text in sources.items()
        }

    def settings(self) -> dict[str, Any]:
        """The promises this link keeps (``replicas``, ``replica_timeout``,
        ``reconnect_for``), as keyword arguments: every other link of the same namespace, for
        other scripts or on the other client, is made with them, so the cache's settings hold
        for its claims and jobs too."""
        return {
            "replicas": self.replicas,
            "replica_timeout": self.replica_timeout,
            "reconnect_for": self.reconnect_for,
        }

    def _replicated(self, acknowledged: Any, reply: Any, name: str) -> Any:
        """``reply`` if ``acknowledged`` replicas are enough (or the write hands its data to the
        caller: then a warning), else a :class:`NotReplicatedError`."""
        if isinstance(acknowledged, BaseException):
            raise acknowledged
        if int(acknowledged) >= self.replicas:
            return reply
        if name in self._consumes:
            log.warning(
                "diskcache_oxide: the %r ran on the master but only %d of %d replicas "
                "acknowledged it within %s s; returning its result anyway (raising would lose "
                "it): if that master fails over now, the item may be delivered again",
                name,
                int(acknowledged),
                self.replicas,
                self.replica_timeout,
            )
            return reply
        raise NotReplicatedError(
            f"the {name!r} write ran on the master but only {acknowledged} of the {self.replicas} "
            f"replicas asked for (replicas={self.replicas}) acknowledged it within "
            f"replica_timeout={self.replica_timeout} s: it may not survive a failover of that "
            "master. Calling again writes it again (a push would be pushed twice); check the "
            "replicas (INFO replication), or lower replicas= or raise replica_timeout=.",
            int(acknowledged),
            reply,
        )

    def _pipeline_parts(self, request: Script, token: str) -> tuple[Any, list[Any]]:
        script = self._scripts[request.name]
        args = [self.base, *request.args, token]
        evalsha = ["EVALSHA", script.sha, len(self.keys), *self.keys, *args]
        wait = ["WAIT", self.replicas, max(1, int(self.replica_timeout * 1000))]
        return script, [evalsha, wait]


_REROUTE = (rx.MovedError, rx.ClusterDownError, rx.TryAgainError)


class Link(_Base):
    """A namespace on a blocking redis-py client: runs operations, one request at a time.

    :param writes: the names of the scripts that write (default: every one not in
        :data:`READ_SCRIPTS`): they carry a request token and, with ``replicas``, are followed
        by ``WAIT``
    :param replicas: after each write, wait until this many replicas acknowledged it
    :param replica_timeout: the longest that wait, in seconds
    :param reconnect_for: how long to go on repeating a request after connection errors
    """

    __slots__ = ()

    def send(self, request: Request) -> Any:
        """One request's reply, repeated after a connection error where that is safe.

        :raises ServerConnectionError: the connection failed and repeating did not help
        :raises ServerTimeout: the server did not answer within the socket timeout
        :raises NotReplicatedError: fewer than ``replicas`` acknowledged a write
        """
        if isinstance(request, Command):
            return self._retrying(
                lambda: self.client.execute_command(*request.args),
                request.idempotent,
                None,
            )
        if request.name not in self._writes:
            script = self._scripts[request.name]
            return self._retrying(
                lambda: script(keys=self.keys, args=[self.base, *request.args]), True, False
            )
        session = self._sessions.take()
        token = session.token()
        try:
            if self.replicas:
                return self._retrying(lambda: self._write_and_wait(request, token), True, True)
            script = self._scripts[request.name]
            args = [self.base, *request.args, token]
            return self._retrying(lambda: script(keys=self.keys, args=args), True, True)
        finally:
            self._sessions.give(session)

    def _retrying(self, call: Callable[[], Any], safe: bool, write: bool | None) -> Any:
        tries, began = 0, time.monotonic()
        while True:
            tries += 1
            try:
                return call()
            except (rx.ConnectionError, rx.TimeoutError) as exc:
                delay = _delay(tries, began, self.reconnect_for)
                if safe and _retryable(exc) and delay is not None:
                    time.sleep(delay)
                    continue
                raise _mapped(self.client, exc, write, tries, began) from exc

    def _node_client(self) -> Any:
        if not self._cluster:
            return self.client
        node = self.client.get_node_from_key(self.keys[0])
        return self.client.get_redis_connection(node)

    def _refresh(self) -> None:
        if self._cluster:
            try:
                self.client.nodes_manager.initialize()
            except Exception:  # noqa: BLE001 - the next try reports what is wrong
                pass

    def _write_and_wait(self, request: Script, token: str) -> Any:
        """The write script and ``WAIT`` in one pipeline, on one connection to the master of
        the namespace's slot (``WAIT`` counts that connection's writes only)."""
        script, (evalsha, wait) = self._pipeline_parts(request, token)
        for attempt in range(8):
            try:
                node = self._node_client()
            except rx.SlotNotCoveredError:  # the slot's master failed and none took over yet
                time.sleep(0.05 * attempt)
                self._refresh()
                continue
            pipe = node.pipeline(transaction=False)
            pipe.execute_command(*evalsha)
            pipe.execute_command(*wait)
            try:
                reply, acknowledged = pipe.execute(raise_on_error=False)
            except rx.ConnectionError:
                self._refresh()
                raise
            if isinstance(reply, rx.NoScriptError):
                node.script_load(script.script)
                continue
            if self._cluster and isinstance(reply, _REROUTE):
                time.sleep(0.05 * attempt)
                self._refresh()
                continue
            if isinstance(reply, BaseException):
                raise reply
            return self._replicated(acknowledged, reply, request.name)
        raise ServerConnectionError(
            f"the {request.name!r} write could not reach the master of its slot (redirected or "
            "told the cluster is down 8 times); the cluster may be failing over: try again later"
        )

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


class AsyncLink(_Base):
    """A namespace on redis-py's asyncio client: runs the same operations as :class:`Link`,
    awaiting each request, with the same tokens, repeats, errors and ``WAIT`` (``replicas``
    on an asyncio ``RedisCluster`` is not done yet: a ``NotImplementedError`` says so)."""

    __slots__ = ()

    def __init__(
        self,
        client: Any,
        base: bytes,
        sources: Mapping[str, str],
        *,
        writes: Collection[str] | None = None,
        replicas: int = 0,
        replica_timeout: float = 1.0,
        reconnect_for: float = RECONNECT_FOR,
    ) -> None:
        super().__init__(
            client,
            base,
            sources,
            writes=writes,
            replicas=replicas,
            replica_timeout=replica_timeout,
            reconnect_for=reconnect_for,
        )
        if self.replicas and self._cluster:
            raise NotImplementedError(
                "replicas= on redis-py's asyncio RedisCluster is not done yet (D-061): use the "
                "blocking RedisCluster client, or replicas=0"
            )

    async def send(self, request: Request) -> Any:
        """One request's reply (see :meth:`Link.send`)."""
        if isinstance(request, Command):
            command = request.args
            return await self._retrying(
                lambda: self.client.execute_command(*command), request.idempotent, None
            )
        if request.name not in self._writes:
            script = self._scripts[request.name]
            return await self._retrying(
                lambda: script(keys=self.keys, args=[self.base, *request.args]), True, False
            )
        session = self._sessions.take()
        token = session.token()
        try:
            if self.replicas:
                return await self._retrying(
                    lambda: self._write_and_wait(request, token), True, True
                )
            script = self._scripts[request.name]
            args = [self.base, *request.args, token]
            return await self._retrying(lambda: script(keys=self.keys, args=args), True, True)
        finally:
            self._sessions.give(session)

    async def _retrying(self, call: Callable[[], Any], safe: bool, write: bool | None) -> Any:
        tries, began = 0, time.monotonic()
        while True:
            tries += 1
            try:
                return await call()
            except (rx.ConnectionError, rx.TimeoutError) as exc:
                delay = _delay(tries, began, self.reconnect_for)
                if safe and _retryable(exc) and delay is not None:
                    await asyncio.sleep(delay)
                    continue
                raise _mapped(self.client, exc, write, tries, began) from exc

    async def _write_and_wait(self, request: Script, token: str) -> Any:
        script, (evalsha, wait) = self._pipeline_parts(request, token)
        for _ in range(2):
            pipe = self.client.pipeline(transaction=False)
            pipe.execute_command(*evalsha)
            pipe.execute_command(*wait)
            reply, acknowledged = await pipe.execute(raise_on_error=False)
            if isinstance(reply, rx.NoScriptError):
                await self.client.script_load(script.script)
                continue
            if isinstance(reply, BaseException):
                raise reply
            return self._replicated(acknowledged, reply, request.name)
        raise rx.NoScriptError(f"the {request.name!r} script could not be loaded")

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
