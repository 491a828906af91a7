"""What a Redis server's ``maxmemory-policy`` may evict, and what opening jobs, claims or tasks
on it does about that (issue 29, D-058 and D-060).

A server that reaches ``maxmemory`` under a policy that may evict a key deletes it without a
word to anyone: a job queue filled beside a cache in one namespace read ``(0, 0, 0, 0)``
after ``allkeys-lru`` evicted its 100 jobs. Redis cannot be asked to spare some keys, so the
one safe place for work that must not vanish is a server whose policy cannot evict it:

* ``noeviction``: nothing is evicted; a write past ``maxmemory`` fails with an OOM error,
  which the caller sees.
* ``volatile-*`` (``-lru``, ``-lfu``, ``-random``, ``-ttl``): only keys that carry a TTL are
  evicted. No job record carries one (only the wake-up lists of blocked takes do, and losing
  a token costs a take one wait slice), so jobs are safe, as long as no other program sets a
  TTL on them. A claim carries its lease as a TTL, and a task's result and a schedule's tick
  their expiry, so those may be evicted early: a claim evicted before its lease ends lets a
  second caller compute the same value, a tick's claim evicted lets a tick fire twice.
* ``allkeys-*`` and any policy not known here: any key, jobs included.

Opening jobs (``JobQueue``), claims (``Claims``) or tasks (``Tasks``) on a RedisCache reads the
policy (``CONFIG GET maxmemory*``, of each master of a cluster, as the namespace's slot may
move) once per server and process for :data:`FRESH` seconds, and, where it may evict what is
opened, warns once per server, namespace and verdict (:class:`EvictionWarning`), or with
``strict=True`` raises :class:`~diskcache_oxide.remote.UnsupportedError`. A server that does
not let a client read its configuration (a managed service may refuse ``CONFIG``) has an
unknown policy: nothing is said, nothing fails, and ``diskcache-oxide info`` shows it unknown.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import UnsupportedError

__all__ = [
    "ADVICE",
    "FRESH",
    "EvictionWarning",
    "ServerPolicy",
    "check_eviction",
    "describe",
    "read_policy",
    "verdict",
]

#: What jobs, claims or tasks are opened as (the warning names them).
What = Literal["jobs", "claims", "tasks"]

#: How long (seconds) a server's policy, once read, is taken as still true: claims are opened
#: per call of ``get_or_compute``, and one ``CONFIG GET`` per call would double its cost.
FRESH = 60.0

#: The advice for a directory's ``size_limit`` and culling on Redis (``UnsupportedError``).
ADVICE = (
    "on Redis set the server's maxmemory and maxmemory-policy instead; jobs, claims, queues "
    "and schedules need maxmemory-policy noeviction (or a volatile-* policy, which evicts only "
    "keys that carry a TTL: job records carry none, but claims carry their lease), because a "
    "policy that may evict them (allkeys-lru, say) deletes them without an error; keep a cache "
    "that should be evicted by size on a server of its own with allkeys-lru (D-058)"
)


class EvictionWarning(UserWarning):
    """Jobs, claims or tasks were opened on a Redis server whose ``maxmemory-policy`` may
    evict them, losing them without an error (issue 29). Said once per server, namespace and
    verdict in a process; ``strict=True`` on the opener refuses such a server instead."""


@dataclass(frozen=True)
class ServerPolicy:
    """One master's eviction settings: its address, ``maxmemory-policy`` (None: unknown,
    ``why`` says why) and ``maxmemory`` in bytes (0: no limit; None: unknown)."""

    address: str
    policy: str | None
    maxmemory: int | None
    why: str = ""


def _plain(text: str, width: int = 120) -> str:
    """Text from the server, for a message: every character that is not printable escaped,
    and at most ``width`` characters."""
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return out if len(out) <= width else out[: width - 1] + "…"


def _address(client: Any) -> str:
    """Where a single server's client connects (never its password)."""
    kwargs = client.connection_pool.connection_kwargs
    if kwargs.get("path"):
        return str(kwargs["path"])
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"


def _masters(client: Any) -> list[tuple[str, Any]]:
    """``(address, target)`` of each master: a cluster's primaries, or the one server (target
    None)."""
    primaries = getattr(client, "get_primaries", None)
    if primaries is None:
        return [(_address(client), None)]
    return [(str(node.name), node) for node in primaries()]


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _read_one(client: Any, address: str, node: Any) -> ServerPolicy:
    try:
        if node is None:
            found = client.config_get("maxmemory*")
        else:
            found = client.config_get("maxmemory*", target_nodes=node)
    except Exception as error:  # refused (a managed server, an ACL), or no answer
        why = f"CONFIG GET was refused or failed: {type(error).__name__}: {_plain(str(error))}"
        return ServerPolicy(address, None, None, why)
    values = {_text(name): _text(value) for name, value in dict(found).items()}
    policy = values.get("maxmemory-policy")
    memory = values.get("maxmemory", "")
    if policy is None:
        return ServerPolicy(address, None, None, "CONFIG GET did not name maxmemory-policy")
    return ServerPolicy(address, policy, int(memory) if memory.isdigit() else None)


def read_policy(client: Any) -> list[ServerPolicy]:
    """The eviction settings of each master the client reaches (one for a single server):
    never raises; a master whose configuration cannot be read has ``policy`` None."""
    try:
        masters = _masters(client)
    except Exception as error:
        return [ServerPolicy("?", None, None, f"{type(error).__name__}: {_plain(str(error))}")]
    return [_read_one(client, address, node) for address, node in masters]


def verdict(policy: str | None, what: What) -> Literal["safe", "ttl", "any", "unknown"]:
    """What ``policy`` may evict of ``what``: ``'safe'`` nothing; ``'ttl'`` its keys that
    carry a TTL (a ``volatile-*`` policy: none of a job's, but a claim's lease and a task's
    result and tick carry one); ``'any'`` any key; ``'unknown'`` the policy is not known."""
    if policy is None:
        return "unknown"
    if policy == "noeviction":
        return "safe"
    if policy.startswith("volatile-"):
        return "safe" if what == "jobs" else "ttl"
    # allkeys-* and any policy this code does not know: assume it may evict anything.
    return "any"


def _message(server: ServerPolicy, what: What, kind: str, namespace: str, opener: str) -> str:
    memory = "no limit" if not server.maxmemory else f"{server.maxmemory} bytes"
    policy = _plain(server.policy or "")
    where = f"the Redis server {_plain(server.address)} (maxmemory-policy {policy}, maxmemory "
    where += f"{memory})"
    if kind == "any":
        return (
            f"{where} may evict any key when it reaches maxmemory: the {what} of namespace "
            f"{namespace!r} would be deleted without an error (a job queue then reads empty). "
            "Jobs, claims, queues and schedules need maxmemory-policy noeviction (a write past "
            "maxmemory then fails with an OOM error you see), or a volatile-* policy, which "
            "evicts only keys that carry a TTL (no job record carries one); keep a cache that "
            f"should be evicted on a server of its own. {opener}(..., strict=True) refuses "
            "such a server (D-060)"
        )
    lost = (
        "each claim carries its lease as a TTL: a claim evicted before its lease ends lets a "
        "second caller take it, and the value is computed twice"
        if what == "claims"
        else "a task's result and a schedule's tick claim carry their expiry as a TTL: a "
        "result may vanish before result_expire, and a tick fire twice"
    )
    return (
        f"{where} evicts keys that carry a TTL when it reaches maxmemory, and {lost} "
        f"(namespace {namespace!r}). Use maxmemory-policy noeviction for them; jobs themselves "
        f"carry no TTL and are safe. {opener}(..., strict=True) refuses such a server (D-060)"
    )


_OPENERS: dict[str, str] = {"jobs": "JobQueue", "claims": "Claims", "tasks": "Tasks"}

_lock = threading.Lock()
#: server -> (when read, by time.monotonic(), what was read)
_read: dict[tuple[str, ...], tuple[float, list[ServerPolicy]]] = {}
#: (server, namespace, verdict, what it was said of) already warned of in this process
_warned: set[tuple[Any, ...]] = set()
_pid = os.getpid()


def _server_key(client: Any) -> tuple[str, ...]:
    try:
        return tuple(sorted(address for address, _node in _masters(client)))
    except Exception:
        return (str(id(client)),)


def policies_of(client: Any) -> list[ServerPolicy]:
    """:func:`read_policy`, remembered per server for :data:`FRESH` seconds in this process
    (a fork starts afresh)."""
    global _pid
    key = _server_key(client)
    now = time.monotonic()
    with _lock:
        if _pid != os.getpid():
            _read.clear()
            _warned.clear()
            _pid = os.getpid()
        kept = _read.get(key)
    if kept is not None and now - kept[0] < FRESH:
        return kept[1]
    found = read_policy(client)
    with _lock:
        _read[key] = (now, found)
    return found


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside this package: the user's line that
    opened the queue, the claims or the tasks."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame = sys._getframe(1)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def check_eviction(cache: Any, what: What, *, strict: bool = False) -> None:
    """Warn once (:class:`EvictionWarning`), or with ``strict`` raise
    :class:`~diskcache_oxide.remote.UnsupportedError`, if a master of ``cache``'s server has
    a ``maxmemory-policy`` that may evict ``what``; an unknown policy says and refuses
    nothing (see the module's docstring)."""
    opener = _OPENERS[what]
    for server in policies_of(cache.client):
        kind = verdict(server.policy, what)
        if kind in ("safe", "unknown"):
            continue
        message = _message(server, what, kind, cache.namespace, opener)
        if strict:
            raise UnsupportedError(f"{opener}(strict=True) refuses this server: {message}")
        # Once per server, namespace and verdict: under allkeys-* one warning covers jobs,
        # claims and tasks alike; under volatile-* claims and tasks are each said once.
        said = (_server_key(cache.client), cache.namespace, kind, what if kind == "ttl" else "")
        with _lock:
            if said in _warned:
                return
            _warned.add(said)
        warnings.warn(message, EvictionWarning, stacklevel=_caller_level())
        return


def describe(client: Any) -> dict[str, Any]:
    """The eviction settings for an operator (``diskcache-oxide info``): ``maxmemory`` and
    ``maxmemory_policy`` (each master's, joined by ``, `` where a cluster's masters differ;
    ``unknown (why)`` where they cannot be read) and ``jobs_and_claims``: whether that policy
    keeps jobs and claims. Read afresh, not from the process's memory."""
    found = read_policy(client)
    policies = sorted({_plain(s.policy) if s.policy else f"unknown ({s.why})" for s in found})
    memories = sorted({"unknown" if s.maxmemory is None else str(s.maxmemory) for s in found})
    kinds = {verdict(s.policy, "claims") for s in found}
    if "any" in kinds:
        safety = "may be evicted and lost: set maxmemory-policy noeviction"
    elif "ttl" in kinds:
        safety = (
            "jobs kept (they carry no TTL); claims, task results and tick claims may be "
            "evicted before they expire: noeviction keeps them"
        )
    elif "unknown" in kinds:
        safety = "unknown: the policy could not be read; jobs need noeviction"
    else:
        safety = "kept (noeviction)"
    memory: Any = memories[0] if len(memories) == 1 else ", ".join(memories)
    if isinstance(memory, str) and memory.isdigit():
        memory = int(memory)
    return {
        "maxmemory": memory,
        "maxmemory_policy": ", ".join(policies),
        "jobs_and_claims": safety,
    }
