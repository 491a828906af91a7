"""A Redis operation written once and run on either client (issue 21, D-058, after D-052),
with the faults of a real server handled in one place (D-061).

An *operation* is a generator that performs no I/O: it yields each request it needs, a
:class:`~._requests.Script` of the namespace or one plain :class:`~._requests.Command`
(``_requests``), and is sent the reply (or has the error thrown into it, so it can handle one
where it means something). What it returns is the call's result. :class:`Link` runs operations
on a blocking redis-py client (``Redis`` or ``RedisCluster``); :class:`AsyncLink` runs the same
operations on redis-py's asyncio client. So the encoding, the decoding, the retries after a lost
race and every error message live once, in the operation, and the two faces differ only in
``link.run(op)`` and ``await alink.run(op)``.

A script is registered once per link (redis-py sends it by its SHA and loads it again on a
``NOSCRIPT`` reply). Every script of a namespace gets the namespace's index as its only key,
so that a cluster routes it to the namespace's slot (every key the script touches carries the
same hash tag), and the namespace's prefix as its first argument.

**Faults (D-061).** A request whose reply is lost may or may not have run on the server, and
repeating a script that pushes, takes, replaces or acquires would do it twice. So:

- A *write* script (every script not in :data:`READ_SCRIPTS`, or those named in ``writes``)
  carries a request token, ``<session>:<sequence>``, as its last argument. The link wraps the
  script's source (``_tokens.once``) so that, atomically with the write, it keeps its reply
  under ``<prefix>o:<session>`` (one key per concurrent caller, the last reply only, for
  :data:`~._tokens.REPLAY_MS`); the same token sent again returns the kept reply and writes
  nothing. So a write is safe to repeat, whoever repeats it: this link, redis-py's own
  ``Retry`` on a user's client, or ``RedisCluster``'s retries while it follows a failover. The
  wrapper takes the token off ``ARGV`` before the script's own code runs, which sees what it
  always saw.
- The link repeats a request after a ``ConnectionError`` (the connection dropped, was refused or
  the server is loading its data) for up to ``reconnect_for`` seconds
  (:data:`~._retry.RECONNECT_FOR`), the pauses doubling from 50 ms to 1 s: reads and tokened
  writes always, a plain :class:`~._requests.Command` only if it says it is ``idempotent``. It
  never repeats after a timeout: a server that does not answer within the socket timeout gets
  no second wait.
- A redis-py connection error or timeout reaches the caller as
  :class:`~._errors.ServerConnectionError` or :class:`~._errors.ServerTimeout` (``_errors``):
  each a :class:`~diskcache_oxide.errors.CacheError` *and* the redis-py error it replaces (so
  ``except redis.ConnectionError`` in a worker loop still catches it), whose message says
  where, whether the call may have run and what to do.
- ``replicas=n`` sends ``WAIT n replica_timeout`` after every write script, on the connection
  that ran it (the script and the ``WAIT`` in one pipeline, on the master of the namespace's
  slot), so that a write that returns has reached ``n`` replicas; fewer raise
  :class:`~._errors.NotReplicatedError`, except for a write that hands data to the caller
  (:data:`CONSUMING_SCRIPTS`), which returns it with a warning. Reads send no ``WAIT``.

**Clear errors (issue 29, D-061).** Every reply and every error passes through here, so it is
here that they are checked and named: a reply of the wrong shape for its request (each
script's and command's :class:`~._replies.Shape`, declared beside it) raises
:class:`~diskcache_oxide.errors.UnexpectedReplyError`; an argument longer than the server's
``proto-max-bulk-len`` raises :class:`~diskcache_oxide.errors.ValueTooLargeError` before it is
sent (``_retry``); a failed TLS handshake (``_tls``) and an error reply become the errors that
``_errors`` lists. A write whose reply was large keeps only a marker once the reply has arrived
(:data:`~._tokens.KEEP_LIMIT`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

import redis.exceptions as rx

from ..errors import UnexpectedReplyError, ValueTooLargeError
from ._errors import (
    NotReplicatedError,
    ServerConnectionError,
    _handshake_failure,
    _mapped,
    _retryable,
    _what,
    _where,
)
from ._replies import _REPLIES, excerpt
from ._requests import Command, Op, Request, Script
from ._retry import _MIN_BULK_LIMIT, RECONNECT_FOR, _delay, _limit_of, _longest, _refused_as_long
from ._tokens import KEEP_LIMIT, REPLAY_MS, _reply_size, _Session, _Sessions, guard, once

__all__ = [
    "CONSUMING_SCRIPTS",
    "READ_SCRIPTS",
    "AsyncLink",
    "Link",
]

R = TypeVar("R")

log = logging.getLogger("diskcache_oxide.remote")


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


def _base_keys(base: bytes) -> list[bytes]:
    return [base + b"i"]


def _call_name(op: Any) -> str:
    """The name of the operation a generator runs (``add``, ``getitem``): errors name it."""
    return str(getattr(op, "__name__", "") or "")


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
        "_limit",
        "_scripts",
        "_sessions",
        "_shapes",
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
            name: client.register_script(guard(once(text) if name in self._writes else text))
            for name, text in sources.items()
        }
        self._shapes = {name: _REPLIES[text] for name, text in sources.items() if text in _REPLIES}
        #: The server's proto-max-bulk-len: None until a long argument asks, 0 if it won't say.
        self._limit: int | None = None

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

    def _checked(self, request: Request, reply: Any, call: str) -> Any:
        """``reply`` if it has the shape its request's replies have, else an
        :class:`UnexpectedReplyError` naming the call and showing an excerpt of it."""
        shape = request.reply if isinstance(request, Command) else self._shapes.get(request.name)
        if shape is None or shape.test(reply, request.args):
            return reply
        raise UnexpectedReplyError(
            f"{_where(self.client)} answered {_what(request, call)} with {excerpt(reply)}, "
            f"where Redis answers with {shape.text}. The server (or a proxy in front of it) "
            "does not speak to this client as Redis does; nothing was decoded from the reply, "
            "and a write may or may not have been applied. Check that the URL points at a "
            "Redis or Valkey server (redis-cli -h ... INFO server), with nothing between that "
            "rewrites replies."
        )

    def _too_large(self, request: Request, call: str, longest: int, limit: int) -> Exception:
        return ValueTooLargeError(
            f"{_what(request, call)} would send {longest:,} bytes in one argument (a value's "
            f"frame), more than {_where(self.client)} accepts in one (its proto-max-bulk-len "
            f"is {limit:,} bytes). Nothing was written and the call was not repeated. Store a "
            "smaller value (split it, or keep large blobs in a directory Cache or an object "
            "store and their names here), or raise the server's limit: CONFIG SET "
            f"proto-max-bulk-len {max(longest + 1024, 2 * limit)}."
        )

    def _limit_request(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """CONFIG GET's arguments, sent to the namespace's node of a cluster."""
        if not self._cluster:
            return ("proto-max-bulk-len",), {}
        node = self.client.get_node_from_key(self.keys[0])
        return ("proto-max-bulk-len",), {"target_nodes": node}

    def _marker(self, session: _Session) -> tuple[Any, ...]:
        """The command that replaces a delivered reply kept for ``session`` by a marker."""
        done = self.base + b"o:" + session.name.encode()
        return ("SET", done, f"d{session.seq}", "XX", "PX", REPLAY_MS)

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

    def send(self, request: Request, call: str = "") -> Any:
        """One request's reply, checked, repeated after a connection error where that is safe.
        ``call`` names the operation in errors.

        :raises ServerConnectionError: the connection failed and repeating did not help (or
            the TLS handshake failed)
        :raises ServerTimeout: the server did not answer within the socket timeout
        :raises NotReplicatedError: fewer than ``replicas`` acknowledged a write
        :raises ValueTooLargeError: an argument is longer than the server accepts
        :raises UnexpectedReplyError: the reply is not of the request's shape
        :raises ServerScriptError: the server answered with an error
        """
        longest = _longest(request.args)
        if longest > _MIN_BULK_LIMIT:
            limit = self._bulk_limit()
            if limit and longest > limit:
                raise self._too_large(request, call, longest, limit)
        if isinstance(request, Command):
            reply = self._retrying(
                lambda: self.client.execute_command(*request.args),
                request.idempotent,
                None,
                request,
                call,
            )
            return self._checked(request, reply, call)
        if request.name not in self._writes:
            script = self._scripts[request.name]
            reply = self._retrying(
                lambda: script(keys=self.keys, args=[self.base, *request.args]),
                True,
                False,
                request,
                call,
            )
            return self._checked(request, reply, call)
        session = self._sessions.take()
        token = session.token()
        try:
            if self.replicas:
                reply = self._retrying(
                    lambda: self._write_and_wait(request, token), True, True, request, call
                )
            else:
                script = self._scripts[request.name]
                args = [self.base, *request.args, token]
                reply = self._retrying(
                    lambda: script(keys=self.keys, args=args), True, True, request, call
                )
            self._checked(request, reply, call)
            if _reply_size(reply) > KEEP_LIMIT:
                self._forget(session)
            return reply
        finally:
            self._sessions.give(session)

    def _forget(self, session: _Session) -> None:
        """The reply has arrived: replace what the server keeps of it by a marker (one try;
        if it fails, the kept reply merely lasts its REPLAY_MS)."""
        try:
            self.client.execute_command(*self._marker(session))
        except rx.RedisError as error:
            log.debug("diskcache_oxide: could not drop a delivered reply: %s", error)

    def _bulk_limit(self, fresh: bool = False) -> int:
        """The server's proto-max-bulk-len (asked once, or again with ``fresh``); 0 if it does
        not say (CONFIG refused, as managed services do)."""
        if self._limit is None or fresh:
            self._limit = 0
            try:
                args, kwargs = self._limit_request()
            except Exception:  # noqa: BLE001 - no limit known: the request itself will say
                return self._limit
            # Twice: a server that refused a long argument closed that connection, and the
            # pool may hand it out once more (the failure drops it).
            for _ in range(2):
                try:
                    self._limit = _limit_of(self.client.config_get(*args, **kwargs))
                    break
                except rx.ConnectionError:
                    continue
                except (rx.RedisError, TypeError, ValueError, AttributeError):
                    break
        return self._limit

    def _retrying(
        self,
        send: Callable[[], Any],
        safe: bool,
        write: bool | None,
        request: Request | None = None,
        call: str = "",
    ) -> Any:
        tries, began = 0, time.monotonic()
        while True:
            tries += 1
            try:
                return send()
            except (rx.ConnectionError, rx.TimeoutError, rx.ResponseError) as exc:
                if _refused_as_long(exc) and request is not None:
                    # A server closes the connection on an argument longer than its
                    # proto-max-bulk-len (and the limit may have changed): say that, at once.
                    longest = _longest(request.args)
                    if longest > _MIN_BULK_LIMIT:
                        limit = self._bulk_limit(fresh=True)
                        if limit and longest > limit:
                            raise self._too_large(request, call, longest, limit) from exc
                delay = _delay(tries, began, self.reconnect_for)
                if (
                    safe
                    and _retryable(exc)
                    and not _handshake_failure(self.client, exc)
                    and delay is not None
                ):
                    time.sleep(delay)
                    continue
                raise _mapped(
                    self.client, exc, write, tries, began, request, call, self.base
                ) from exc

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
        call = _call_name(op)
        reply: Any = None
        error: BaseException | None = None
        while True:
            try:
                request = op.send(reply) if error is None else op.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            error = None
            try:
                reply = self.send(request, call)
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

    async def send(self, request: Request, call: str = "") -> Any:
        """One request's reply (see :meth:`Link.send`)."""
        longest = _longest(request.args)
        if longest > _MIN_BULK_LIMIT:
            limit = await self._bulk_limit()
            if limit and longest > limit:
                raise self._too_large(request, call, longest, limit)
        if isinstance(request, Command):
            command = request.args
            reply = await self._retrying(
                lambda: self.client.execute_command(*command),
                request.idempotent,
                None,
                request,
                call,
            )
            return self._checked(request, reply, call)
        if request.name not in self._writes:
            script = self._scripts[request.name]
            reply = await self._retrying(
                lambda: script(keys=self.keys, args=[self.base, *request.args]),
                True,
                False,
                request,
                call,
            )
            return self._checked(request, reply, call)
        session = self._sessions.take()
        token = session.token()
        try:
            if self.replicas:
                reply = await self._retrying(
                    lambda: self._write_and_wait(request, token), True, True, request, call
                )
            else:
                script = self._scripts[request.name]
                args = [self.base, *request.args, token]
                reply = await self._retrying(
                    lambda: script(keys=self.keys, args=args), True, True, request, call
                )
            self._checked(request, reply, call)
            if _reply_size(reply) > KEEP_LIMIT:
                await self._forget(session)
            return reply
        finally:
            self._sessions.give(session)

    async def _forget(self, session: _Session) -> None:
        """See :meth:`Link._forget`."""
        try:
            await self.client.execute_command(*self._marker(session))
        except rx.RedisError as error:
            log.debug("diskcache_oxide: could not drop a delivered reply: %s", error)

    async def _bulk_limit(self, fresh: bool = False) -> int:
        """See :meth:`Link._bulk_limit`."""
        if self._limit is None or fresh:
            self._limit = 0
            try:
                if self._cluster:  # an asyncio cluster learns its nodes on its first command
                    await self.client.initialize()
                args, kwargs = self._limit_request()
            except Exception:  # noqa: BLE001 - no limit known: the request itself will say
                return self._limit
            for _ in range(2):
                try:
                    self._limit = _limit_of(await self.client.config_get(*args, **kwargs))
                    break
                except rx.ConnectionError:
                    continue
                except (rx.RedisError, TypeError, ValueError, AttributeError):
                    break
        return self._limit

    async def _retrying(
        self,
        send: Callable[[], Any],
        safe: bool,
        write: bool | None,
        request: Request | None = None,
        call: str = "",
    ) -> Any:
        tries, began = 0, time.monotonic()
        while True:
            tries += 1
            try:
                return await send()
            except (rx.ConnectionError, rx.TimeoutError, rx.ResponseError) as exc:
                if _refused_as_long(exc) and request is not None:
                    longest = _longest(request.args)
                    if longest > _MIN_BULK_LIMIT:
                        limit = await self._bulk_limit(fresh=True)
                        if limit and longest > limit:
                            raise self._too_large(request, call, longest, limit) from exc
                delay = _delay(tries, began, self.reconnect_for)
                if (
                    safe
                    and _retryable(exc)
                    and not _handshake_failure(self.client, exc)
                    and delay is not None
                ):
                    await asyncio.sleep(delay)
                    continue
                raise _mapped(
                    self.client, exc, write, tries, began, request, call, self.base
                ) from exc

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
        call = _call_name(op)
        reply: Any = None
        error: BaseException | None = None
        while True:
            try:
                request = op.send(reply) if error is None else op.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            error = None
            try:
                reply = await self.send(request, call)
            except Exception as exc:
                reply, error = None, exc
