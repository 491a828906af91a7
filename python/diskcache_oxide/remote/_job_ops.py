"""Leased jobs on Redis, the operations (issue 21, D-060): how a job's fields are encoded, and
every call of :class:`~diskcache_oxide.remote.jobs.RedisJobs` written once as a generator of
requests (``_io``'s sans-IO shape) that performs no I/O. ``jobs.py`` runs them on a blocking
:class:`~diskcache_oxide.remote._io.Link` and awaits the very same ones on an
:class:`~diskcache_oxide.remote._io.AsyncLink`; each is a Lua script of ``_job_scripts``.
Split from ``jobs.py`` (issue 31: one idea a file, none over 900 lines).
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any, Literal

import redis

from .. import _core
from .._store import pass_delay
from ..errors import CorruptValueError, DecodeError
from . import _ops
from ._requests import Command, Op, Script

_State = Literal["ready", "leased", "dead"]
_STATES: dict[bytes, _State] = {b"0": "ready", b"1": "leased", b"2": "dead"}
_FATE: dict[bytes, Literal["ready", "dead"]] = {b"ready": "ready", b"dead": "dead"}

#: The longest delay or lease the scripts store, in microseconds (about 142 years): now plus
#: this stays below 2**53, where a double (a script's number) still holds every integer.
_FURTHEST_US = 2**52
#: put_many writes at most this many jobs per script, so a large batch never blocks the
#: server for long (each batch is all or nothing; D-060).
_PUT_BATCH = 1000
#: take_many leases at most this many jobs per script, and takes again while more are due,
#: so a large batch never blocks the server for long (each job still goes to one worker).
_TAKE_BATCH = 1000
#: purge_dead deletes at most this many jobs per script call, repeated until done.
_PURGE_BATCH = 500
#: A blocked take never sends BLPOP a wait shorter than this: 0 would mean forever.
_SHORTEST = 0.001
#: Jobs listed by an operator's page, at most (the scripts read a count as a double).
_LIMIT = 2**31 - 1
#: A forgotten job's log line names at most this many of its queue's ids.
_NAMED = 10

_log = logging.getLogger("diskcache_oxide")


# ---- encoding -------------------------------------------------------------------------------


def _us(seconds: float) -> int:
    """Seconds as the scripts take them: whole microseconds, at most :data:`_FURTHEST_US`."""
    return min(round(seconds * 1_000_000), _FURTHEST_US)


def _seconds_of(us: bytes | int) -> float:
    return int(us) / 1_000_000


def _member(job_id: int) -> bytes:
    """A job's id as the scripts name it: 16 digits, so that ids sort as their text does."""
    return b"%016d" % job_id


def _b(text: str) -> bytes:
    # A str the user gave (queue, unique key, error) may hold lone surrogates, which the
    # client's own encoding would refuse: the bytes round-trip through surrogatepass.
    return text.encode("utf-8", "surrogatepass")


def _s(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


def _opt(data: bytes | None) -> str | None:
    return None if data is None else _s(data)


def _quoted(name: str) -> str:
    """A queue's name in a log message, double-quoted as the binding's messages quote it,
    with every character that is not printable escaped (the name comes from the store, and a
    log line must not carry a newline or an escape sequence that someone wrote there)."""
    text = json.dumps(name, ensure_ascii=False)
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text)


def _lost(reply: bytes | str) -> dict[str, list[int]]:
    """The ids a script forgot because their record was gone, by queue, from the scripts'
    ``lost`` field: per id, its queue's byte length, ``:``, the queue, and the 16-digit id."""
    data = reply if isinstance(reply, bytes) else reply.encode("utf-8", "surrogatepass")
    found: dict[str, list[int]] = {}
    at = 0
    while at < len(data):
        colon = data.index(b":", at)
        end = colon + 1 + int(data[at:colon])
        found.setdefault(_s(data[colon + 1 : end]), []).append(int(data[end : end + 16]))
        at = end + 16
    return found


def _report_lost(reply: bytes | str, namespace: str) -> int:
    """Log, once per script call, the ids it forgot (their record was gone); how many."""
    found = _lost(reply)
    for queue, ids in found.items():
        named = ", ".join(str(i) for i in ids[:_NAMED])
        more = f" and {len(ids) - _NAMED} more" if len(ids) > _NAMED else ""
        _log.warning(
            "%d job(s) of queue %s in namespace %s had no record left on the server (evicted "
            "by its maxmemory-policy, or deleted or overwritten by another program): ids %s%s "
            "were forgotten and the jobs behind them served; RedisJobs.forgotten() counts "
            "them. Jobs need maxmemory-policy noeviction (D-060)",
            len(ids),
            _quoted(queue),
            _quoted(namespace),
            named,
            more,
        )
    return sum(len(ids) for ids in found.values())


def _describe(error: BaseException) -> str:
    """``Type: message`` of an exception, at most 300 characters (stored with the job, as the
    binding stores it)."""
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 300 else text[:299] + "…"


# ---- the operations (sans-IO) ---------------------------------------------------------------


def _call(name: str, *args: bytes | str | int) -> Op[Any]:
    return (yield Script(name, args))


def put_op(
    queue: str, frame: bytes, delay: float, unique: str | None, max_attempts: int
) -> Op[int]:
    """Add one job (``frame`` is its value's frame); its id, or for a unique key that a ready
    or leased job of ``queue`` holds, that job's id."""
    args: list[bytes | str | int] = [_b(queue), frame, _us(delay), max_attempts]
    if unique is not None:
        args.append(_b(unique))
    found = yield from _call("put", *args)
    return int(found[0])


def put_many_op(queue: str, frames: list[bytes], delay: float, max_attempts: int) -> Op[list[int]]:
    """Add jobs in order, :data:`_PUT_BATCH` per script; their ids."""
    ids: list[int] = []
    for start in range(0, len(frames), _PUT_BATCH):
        batch = frames[start : start + _PUT_BATCH]
        found = yield from _call("put_many", _b(queue), _us(delay), max_attempts, *batch)
        ids += [int(m) for m in found]
    return ids


#: A job a take leased and decoded: id, queue, value, attempts, lease number, max_attempts,
#: lease deadline, created, error.
Taken = tuple[int, str, Any, int, int, int, float, float, str | None]


def _refusal(job_id: int, queue: str, problem: BaseException, dead: bool, delay: float) -> str:
    """What a take logs about a job it passed over (the binding's wording, D-047)."""
    if dead:
        return (
            f"job {job_id} of queue {_quoted(queue)} cannot be decoded by this process "
            f"({_describe(problem)}); it has used its attempts and went to the dead-letter "
            "list: run a worker that can read it (the right pickle= setting, its type "
            "registered) and requeue it with retry()"
        )
    return (
        f"job {job_id} of queue {_quoted(queue)} cannot be decoded by this process "
        f"({_describe(problem)}); it was passed over and is offered again in {delay:.0f} s, "
        "to a worker that can read it"
    )


#: What a take noted about a job it refused: id, queue, the decode error, ``'b'`` (buried) or
#: ``'p'`` (passed over), whether it went to the dead letters, and its pass delay.
_Note = tuple[int, str, BaseException, str, bool, float]


def _decide(
    rows: list[Any], lease: float, pickle: bool, pid: int, good: list[Taken]
) -> tuple[list[bytes | str | int], list[_Note]]:
    """Decode each job a take script leased (``rows``, 9 fields each): those this process can
    read are added to ``good``; for the others, the ``refuse`` script's arguments (pass over,
    or bury a damaged one, D-047) and what to log."""
    refuse: list[bytes | str | int] = []
    notes: list[_Note] = []
    for at in range(0, len(rows), 9):
        m, q, a, lease_no, most, ends, created, error, frame = rows[at : at + 9]
        job_id, queue, attempts, most = int(m), _s(q), int(a), int(most)
        try:
            value = _core.decode_value(frame, pickle=pickle)
        except CorruptValueError as problem:
            # No build could read it: to the dead letters at once.
            text = f"damaged value: {_describe(problem)}"
            refuse += [m, lease_no, "b", _b(text), 0]
            notes.append((job_id, queue, problem, "b", True, 0.0))
            continue
        except Exception as problem:
            # Another worker may read it: pass it over, saying who could not and why.
            text = (
                f"passed over by a worker that cannot decode it (pid {pid}): {_describe(problem)}"
            )
            delay = pass_delay(attempts, lease)
            refuse += [m, lease_no, "p", _b(text), _us(delay)]
            notes.append((job_id, queue, problem, "p", most > 0 and attempts >= most, delay))
            continue
        good.append(
            (
                job_id,
                queue,
                value,
                attempts,
                int(lease_no),
                most,
                _seconds_of(ends),
                _seconds_of(created),
                _opt(error),
            )
        )
    return refuse, notes


def take_op(
    queues: list[str],
    lease: float,
    n: int,
    timeout: float | None,
    pickle: bool,
    wait_slice: float,
    wake_keys: list[bytes],
    namespace: str = "",
) -> Op[tuple[list[Taken], list[BaseException]]]:
    """Lease up to ``n`` due jobs of ``queues`` (priority order) for ``lease`` seconds; with
    ``timeout``, wait on the server while none is due. Returns the jobs taken, decoded, and
    the errors (to be logged) of those this process could not decode, which it passed over
    or buried (D-047) on its way to the jobs behind them.

    The take script leases them; the value is decoded here; a job that cannot be decoded is
    then passed over (ready again after a pass delay, the attempt counted, or dead once out
    of attempts) or, damaged, buried, by one script that checks the lease the take drew. A
    wait is a ``BLPOP`` on the queues' wake-up lists (a put, a retry or a release leaves a
    token), in slices of at most ``wait_slice`` seconds and never past the next due time or
    lease deadline the take saw, so a delayed job or a lease that runs out ends it too.

    A job whose record is gone from the server (evicted, or deleted by another program) is
    forgotten by the take script and the jobs behind it served; each such id is logged once,
    by the take that forgot it, and counted on the server (:meth:`RedisJobs.forgotten`).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    names = [_b(q) for q in queues]
    pid = os.getpid()
    good: list[Taken] = []
    errors: list[BaseException] = []
    while True:
        next_in: float | None = None
        while len(good) < n:
            need = min(n - len(good), _TAKE_BATCH)
            reply = yield from _call("take", _us(lease), need, *names)
            now_us, next_due = int(reply[0]), reply[1]
            next_in = None if not next_due else (int(next_due) - now_us) / 1_000_000
            if reply[2]:
                _report_lost(reply[2], namespace)
            rows = reply[3:]
            try:
                refuse, notes = _decide(rows, lease, pickle, pid, good)
            except BaseException:
                # Interrupted while deciding (a decoder raised KeyboardInterrupt, say): give
                # back every job this call holds, so none waits out its lease, then stop.
                held = _leases(reply) + [(_member(row[0]), row[4]) for row in good]
                for member, number in held:
                    yield from _call("release", member, number, 0)
                raise
            if refuse:
                yield from _call("refuse", *refuse)
                for job_id, queue, cause, kind, dead, delay in notes:
                    if kind == "b":
                        err: DecodeError = CorruptValueError(
                            f"job {job_id} of queue {_quoted(queue)} has a damaged value that no "
                            "build can read; it was moved to the dead-letter list, where "
                            "dead() lists it and delete() removes it"
                        )
                    else:
                        err = DecodeError(_refusal(job_id, queue, cause, dead, delay))
                    err.__cause__ = cause
                    errors.append(err)
                # Each refused job is no longer due: the jobs behind it may be; look again.
                continue
            if len(rows) < 9 * need:
                break  # every due job was taken
        if good or deadline is None:
            return good, errors
        left = deadline - time.monotonic()
        if left <= 0:
            return good, errors
        wait = min(left, wait_slice)
        if next_in is not None:
            # A delayed job falls due, or a lease runs out, with nobody writing: wake then.
            wait = min(wait, max(next_in, 0.0) + _SHORTEST)
        # Safe to send again after a dropped connection (the link then repeats it): a wake-up
        # token lost with a reply costs one slice at most, as the take looks again after each.
        yield Command(
            ("BLPOP", *wake_keys, _ops.blpop_seconds(wait)),
            idempotent=True,
            reply=_ops.POPPED,
        )


def finish_op(job_id: int, lease: int) -> Op[bool]:
    """Delete a held job; False if ``lease`` no longer holds it."""
    return bool((yield from _call("finish", _member(job_id), lease)))


def fail_op(
    job_id: int, lease: int, error: str, retry_in: float
) -> Op[Literal["ready", "dead"] | None]:
    """Fail an attempt: ``'ready'`` (retried after ``retry_in``), ``'dead'``, or None if
    ``lease`` no longer holds the job."""
    state = yield from _call("fail", _member(job_id), lease, _b(error), _us(retry_in))
    return None if state is None else _FATE[state]


def extend_op(job_id: int, lease: int, length: float) -> Op[float | None]:
    """Renew a lease to ``length`` seconds from now: the new deadline, or None if lost."""
    found = yield from _call("extend", _member(job_id), lease, _us(length))
    return None if found is None else _seconds_of(found)


def release_op(job_id: int, lease: int, delay: float) -> Op[bool]:
    """Give a held job back, ready after ``delay``, the attempt not counted."""
    return bool((yield from _call("release", _member(job_id), lease, _us(delay))))


def sweep_op(queue: str | None, namespace: str = "") -> Op[tuple[int, int]]:
    """Requeue (or bury, once out of attempts) the expired leases of ``queue`` or of every
    queue of the namespace (forgetting, and logging, those whose record is gone)."""
    requeued, dead, lost = yield from _call("sweep", b"" if queue is None else _b(queue))
    if lost:
        _report_lost(lost, namespace)
    return int(requeued), int(dead)


def counts_op(queue: str) -> Op[tuple[int, int, int, int]]:
    """Jobs of ``queue``: ready now, scheduled, leased, dead."""
    ready, scheduled, leased, dead = yield from _call("counts", _b(queue))
    return int(ready), int(scheduled), int(leased), int(dead)


def info_op(job_id: int) -> Op[list[Any] | None]:
    """A job's stored fields (see :func:`_info`), or None."""
    found = yield from _call("info", _member(job_id))
    return None if found is None else list(found[1:])


def list_op(queue: str, state: str | None, after: int, limit: int) -> Op[list[Any]]:
    """The stored fields of up to ``limit`` jobs of ``queue`` in ``state`` (None: all), by id
    after ``after``, 11 per job."""
    found = yield from _call("list", _b(queue), state or "", after, min(limit, _LIMIT))
    return list(found[1:])


def queues_op() -> Op[list[str]]:
    """The queues holding jobs, sorted by their bytes (as a directory's SQL sorts them)."""
    return [_s(q) for q in (yield from _call("queues"))]


def bury_any_op(job_id: int, error: str) -> Op[bool]:
    """Send a ready or leased job to the dead letters, whoever holds it."""
    return bool((yield from _call("bury_any", _member(job_id), _b(error))))


def purge_dead_op(queue: str, namespace: str = "") -> Op[int]:
    """Delete the dead jobs of ``queue``, in batches; how many (ids whose record was gone are
    forgotten and logged, not counted here)."""
    total = 0
    while True:
        gone, read, lost = yield from _call("purge_dead", _b(queue), _PURGE_BATCH)
        total += int(gone)
        if lost:
            _report_lost(lost, namespace)
        if int(read) < _PURGE_BATCH:
            return total


def requeue_op(job_id: int, delay: float) -> Op[bool]:
    """Put a dead job back, its attempts reset; False if it is not dead.

    :raises ValueError: if another ready or leased job of its queue holds its unique key
    """
    try:
        return bool((yield from _call("requeue", _member(job_id), _us(delay))))
    except redis.ResponseError as error:
        if "DCO_UNIQUE" not in str(error):
            raise
        raise ValueError(
            f"job {job_id}: another ready or leased job has the same unique key; finish or "
            "delete it first"
        ) from None


def delete_op(job_id: int) -> Op[bool]:
    """Delete a job in any state; False if there was none."""
    return bool((yield from _call("delete", _member(job_id))))


def _leases(reply: list[Any]) -> list[tuple[bytes, int]]:
    """The (id, lease number) of each job a ``take`` script's reply leased."""
    rows = reply[3:]
    return [(rows[at], int(rows[at + 3])) for at in range(0, len(rows), 9)]
