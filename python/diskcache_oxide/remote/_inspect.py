"""The operator's reads of a namespace (D-062): operations that look at its keys as D-058 lays
them out and change nothing on the server.

The cache's own calls write as they read (``get`` counts a hit or a miss while statistics
are on, a write first removes expired entries, listing the claims prunes the run-out ones),
and a directory is looked at through a read-only handle, which Redis has not. So the
operator's tools (``remote/inspector.py``, behind ``admin``, the CLI and the
dashboard) read through these operations instead: each yields plain read
:class:`~._requests.Command` requests (``HMGET``, ``ZRANGEBYSCORE``, ``ZSCAN``, ``ZCARD``,
``ZCOUNT``, ``SMEMBERS``), marked idempotent, so a link repeats them after a connection
error, sends no request token and no ``WAIT``. They count no statistics and remove nothing
(an expired entry is hidden by Redis itself: its HASH has a PEXPIREAT). Every key they name
carries the namespace's hash tag, so on a cluster each goes to the namespace's one slot; the
claims namespaces are one ``SMEMBERS`` of the set the claim scripts keep (``B..'K'``), with
no ``SCAN``.

They run on the cache's own link, sync (``cache._link.run(op)``) or asyncio (``await
alink.run(op)``), like every operation of ``_ops``. This module is the one place outside the
scripts that spells the namespace's keys for the tools; what the operations return is
members, frames and numbers, which ``remote/inspector.py`` decodes.
"""

from __future__ import annotations

from typing import Any

from ._members import claims_id
from ._ops import Namespace, _qid
from ._requests import Command, Op

__all__ = [
    "PAGE",
    "claim_sets",
    "claims",
    "count_claims",
    "entry",
    "forgotten_jobs",
    "index_page",
    "queue_depth",
    "queue_numbers",
    "queues",
    "statistics",
]

#: How many members one page of a read holds.
PAGE = 500

#: A claim's fields, in the order of ``remote.claims``' record: token, host, pid, acquired
#: and expires (ms since the epoch).
_CLAIM_FIELDS = (b"t", b"h", b"p", b"a", b"e")


def _read(*args: bytes | str | int | float) -> Command:
    return Command(args, idempotent=True)


def _pairs(reply: Any) -> list[tuple[bytes, Any]]:
    # WITHSCORES's reply as pairs: flat in RESP2 (a bare command), pairs in RESP3.
    if not reply:
        return []
    if isinstance(reply[0], (list, tuple)):
        return [(pair[0], pair[1]) for pair in reply]
    return list(zip(reply[::2], reply[1::2], strict=True))


# ---- entries --------------------------------------------------------------------------------


def entry(ns: Namespace, member: bytes) -> Op[tuple[bytes, float | None, bytes] | None]:
    """The stored frame, expiry (seconds since the epoch; None: never) and tag frame (empty:
    no tag) of ``member``, or None if it is absent or expired."""
    value, expires = yield _read("HMGET", ns._base + b"e:" + member, b"v", b"e")
    if value is None:
        return None
    tag = yield _read("HGET", ns._base + b"t", member)
    return value, None if not expires else int(expires) / 1000.0, tag or b""


def index_page(
    ns: Namespace, reverse: bool = False, after: str | None = None, count: int = PAGE
) -> Op[tuple[list[bytes], str | None]]:
    """One page of the namespace's members in insertion order (newest first with
    ``reverse``), after the score bound ``after`` (None: from the start): ``(members, the
    next page's bound)``, the bound None after the last page. By score, so a write meanwhile
    makes no page skip or repeat a member."""
    index = ns._base + b"i"
    if reverse:
        command = ("ZREVRANGEBYSCORE", index, after or "+inf", "-inf")
    else:
        command = ("ZRANGEBYSCORE", index, after or "-inf", "+inf")
    pairs = _pairs((yield _read(*command, "WITHSCORES", "LIMIT", 0, count)))
    members = [member for member, _ in pairs]
    if len(pairs) < count:
        return members, None
    return members, f"({int(float(pairs[-1][1]))}"


# ---- queues ---------------------------------------------------------------------------------


def _prefix_of(qid: bytes) -> str | None:
    return None if qid == b"i" else qid[1:].decode("utf-8", "surrogatepass")


def queues(ns: Namespace) -> Op[list[tuple[str | None, int]]]:
    """Every queue on the namespace's keys as ``(prefix, depth)`` (None: the int keys'
    queue), unsorted: one ``ZSCAN`` of the index for the queue-shaped members (a directory
    scans its keys likewise)."""
    depths: dict[bytes, set[bytes]] = {}
    cursor: bytes | int = 0
    while True:
        reply = yield _read("ZSCAN", ns._base + b"i", cursor, "MATCH", b"q:*", "COUNT", 1000)
        cursor, found = reply[0], reply[1]
        for member, _ in _pairs(found):
            qid, _sep, number = member[2:].rpartition(b":")
            if len(number) == 15 and number.isdigit() and qid:
                depths.setdefault(qid, set()).add(number)
        if int(cursor) == 0:
            return [(_prefix_of(qid), len(numbers)) for qid, numbers in depths.items()]


def queue_depth(ns: Namespace, prefix: str | None) -> Op[int]:
    """How many items the queue of ``prefix`` holds (``ZCARD`` of its numbers)."""
    return int((yield _read("ZCARD", ns._base + b"Q:" + _qid(prefix))))


def queue_numbers(
    ns: Namespace, prefix: str | None, after: int | None = None, count: int = PAGE
) -> Op[list[int]]:
    """Up to ``count`` item numbers of the queue of ``prefix``, front first, after the number
    ``after`` (None: from the front)."""
    low = "-inf" if after is None else f"({after}"
    queue = ns._base + b"Q:" + _qid(prefix)
    numbers = yield _read("ZRANGEBYSCORE", queue, low, "+inf", "LIMIT", 0, count)
    return [int(number) for number in numbers]


# ---- statistics -----------------------------------------------------------------------------


def statistics(ns: Namespace) -> Op[tuple[int, int, bool]]:
    """``(hits, misses, counting)`` as stored (``stats()`` would switch counting)."""
    hits, misses, on = yield _read("HMGET", ns._base + b"s", b"hits", b"misses", b"on")
    return int(hits or 0), int(misses or 0), on == b"1"


# ---- jobs -----------------------------------------------------------------------------------


def forgotten_jobs(base: bytes) -> Op[dict[str, int]]:
    """How many ids of each job queue the job scripts forgot because the job's record was
    gone from the server (evicted, or deleted or overwritten by another program: issue 29),
    by queue name, in the namespace of key prefix ``base``: one ``HGETALL`` of the count they
    keep (``B..'jf'``)."""
    reply = yield _read("HGETALL", base + b"jf")
    pairs = reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2], strict=True)
    found = {}
    for queue, count in pairs:
        if isinstance(count, bytes) and count.isdigit():
            found[queue.decode("utf-8", "surrogatepass")] = int(count)
    return found


# ---- claims ---------------------------------------------------------------------------------


def claim_sets(ns: Namespace) -> Op[list[tuple[str, bytes]]]:
    """Every claims namespace the claim scripts have a claim set of, as ``(name, cid)``,
    sorted: one ``SMEMBERS`` of the set they keep (a name may have no live claim left: its
    set is dropped by the next listing of its claims)."""
    found = []
    for cid in (yield _read("SMEMBERS", ns._base + b"K")) or ():
        length, _sep, name = cid.partition(b":")
        if length.isdigit() and int(length) == len(name):
            found.append((name.decode("utf-8", "surrogatepass"), cid))
    return sorted(found)


def _sets(ns: Namespace, namespace: str | None) -> Op[list[tuple[str, bytes]]]:
    if namespace is not None:
        return [(namespace, claims_id(namespace))]
    return (yield from claim_sets(ns))


def count_claims(ns: Namespace, namespace: str | None, now_ms: int) -> Op[int]:
    """How many claims (of ``namespace``, or of every claims namespace) have a lease that
    ends after ``now_ms`` (``ZCOUNT`` of each claim set)."""
    total = 0
    for _name, cid in (yield from _sets(ns, namespace)):
        total += int((yield _read("ZCOUNT", ns._base + b"C:" + cid, now_ms, "+inf")))
    return total


def claims(
    ns: Namespace,
    namespace: str | None,
    now_ms: int,
    limit: int | None = None,
    offset: int = 0,
) -> Op[list[tuple[str, bytes, list[Any]]]]:
    """The claims (of ``namespace``, or of every claims namespace) whose lease ends after
    ``now_ms``, by namespace and then by when they run out, as ``(namespace, member,
    [token, host, pid, acquired ms, expires ms])``; with ``limit``, at most that many after
    the first ``offset``, and only those are read. A run-out claim is skipped, not pruned."""
    base = ns._base
    wanted: list[tuple[str, bytes, bytes]] = []
    skip = offset
    for name, cid in (yield from _sets(ns, namespace)):
        left = None if limit is None else limit - len(wanted)
        if left is not None and left <= 0:
            break
        claimed = base + b"C:" + cid
        if skip:
            there = int((yield _read("ZCOUNT", claimed, now_ms, "+inf")))
            if skip >= there:
                skip -= there
                continue
        members = yield _read(
            "ZRANGEBYSCORE", claimed, now_ms, "+inf", "LIMIT", skip, -1 if left is None else left
        )
        skip = 0
        wanted.extend((name, cid, member) for member in members)
    rows = []
    for name, cid, member in wanted:
        # The claim's HASH, which expires with the lease, is the truth: the set may name a
        # claim released meanwhile.
        held = yield _read("HMGET", base + b"c:" + cid + b":" + member, *_CLAIM_FIELDS)
        if held[0] is not None:
            rows.append((name, member, list(held)))
    return rows
