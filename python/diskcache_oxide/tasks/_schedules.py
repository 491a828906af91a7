"""Schedules of periodic tasks (``@tasks.periodic``) and the scheduler every worker runs
(D-063).

A schedule is a sequence of *ticks*, instants every process computes alike from the schedule
and the clock alone: ``every=P`` ticks at the multiples of P seconds since the epoch, ``cron=``
at the times its expression names (in ``tz``, UTC by default). A tick is named by its time,
``name@<epoch seconds, 6 decimals>``.

Every worker runs :class:`Scheduler` in a thread of its own. When a worker first sees a new
tick it *claims* it: ``cache.add`` of ``diskcache_oxide.tasks.tick.<name>@<time>`` (add is
atomic on a directory and on Redis, and only one caller of it stores the key). The worker that
claims a tick, and only that one, settles it: queues its job (``JobQueue.put`` with the tick's
name as the unique key too), or counts it as missed. So a tick is one job however many workers
run. The claims expire once no worker can consider their tick again: after the catch-up window
of ticks, and never sooner than ten minutes (room for clocks that disagree).

The state of a schedule, ``diskcache_oxide.tasks.schedule.<name>``, holds the last tick it
settled (``{"last": time}``); ``...<name>.missed`` counts the missed ticks (``incr``). The ticks
strictly between the last one and the one now due were missed (no worker ran then): each is
claimed too, and under ``missed="skip"`` counted, under ``missed="catch_up"`` queued (the most
recent ``max_catch_up`` of them; the older ones are counted). The tick now due always runs.

Whoever can write the store can write junk into a schedule's state (issue 29): a ``last`` that
is not a finite number, or one further ahead of the clock than clocks disagree
(:data:`CLAIM_FLOOR`), is logged once, escaped, and replaced by the tick now due, which runs;
the schedule goes on from it. Counting the missed ticks never walks more than the window of
ticks it may claim: ``every=`` counts them arithmetically, ``cron=`` walks back from the tick
now due at most the window and one more, and estimates the older ones from their spacing.
"""

from __future__ import annotations

import datetime
import logging
import math
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .._shown import shown
from ..errors import DecodeError
from ._payload import make_call

if TYPE_CHECKING:
    from ..jobs import JobQueue

__all__ = [
    "CLAIM_PREFIX",
    "CLAIM_WINDOW",
    "MISSED",
    "STATE_PREFIX",
    "Cron",
    "Every",
    "Scheduler",
    "tick_name",
]


class Periodic(Protocol):
    """What the scheduler reads of a periodic task (``tasks._app.PeriodicTask``): a protocol,
    so that this module need not import the one that imports it (tests/api/test_layers.py)."""

    name: str
    queue: str
    cadence: Every | Cron
    missed: str
    max_catch_up: int
    takes_tick: bool

    @property
    def max_attempts(self) -> int: ...


#: Key prefixes of the claims of ticks and of the schedules' states.
CLAIM_PREFIX = "diskcache_oxide.tasks.tick."
STATE_PREFIX = "diskcache_oxide.tasks.schedule."

#: What to do with ticks missed while no worker ran.
MISSED = ("skip", "catch_up")

#: How many of the most recent missed ticks are claimed one by one (so that two workers never
#: both count or queue one); older ones, if any, are counted by the claimer of the tick now due.
CLAIM_WINDOW = 100

#: The least time a claim is kept: a worker whose clock is this much behind another's still
#: finds the tick claimed.
CLAIM_FLOOR = 600.0

#: How often the scheduler looks at the clock (seconds).
PASS_EVERY = 0.1

_log = logging.getLogger("diskcache_oxide.tasks")


def tick_name(task: str, tick: float) -> str:
    """A tick's name: the task's and the tick's time (epoch seconds), the same in every
    process."""
    return f"{task}@{tick:.6f}"


class Every:
    """Ticks every ``period`` seconds, at its multiples since the epoch (so every process
    computes the same ones, whenever it started)."""

    def __init__(self, period: float) -> None:
        if not math.isfinite(period) or period <= 0:
            raise ValueError(f"every= must be a positive number of seconds, not {period!r}")
        self.period = float(period)

    def __repr__(self) -> str:
        return f"every {self.period:g} s"

    def latest(self, now: float) -> float:
        """The last tick at or before ``now``."""
        return math.floor(now / self.period) * self.period

    def next_after(self, tick: float) -> float:
        """The tick that follows ``tick``."""
        return (round(tick / self.period) + 1) * self.period

    def between(self, after: float, before: float, keep: int) -> tuple[int, list[float]]:
        """How many ticks lie strictly between two ticks, and the last ``keep`` of them."""
        first, last = round(after / self.period), round(before / self.period)
        count = max(0, last - first - 1)
        kept = range(max(first + 1, last - keep), last) if keep > 0 else range(0)
        return count, [n * self.period for n in kept]


class Cron:
    """Ticks at the times a cron expression names, in the time zone ``tz`` (UTC by default),
    computed by `cronsim <https://pypi.org/project/cronsim/>`_ (the ``cron`` extra)."""

    def __init__(self, expr: str, tz: datetime.tzinfo | str | None = None) -> None:
        try:
            import cronsim
        except ImportError:
            raise ImportError(
                "a cron schedule needs cronsim: pip install 'diskcache-oxide[cron]' (or use every=)"
            ) from None
        if not isinstance(expr, str):
            raise TypeError(f"cron= must be a str, not {type(expr).__name__}")
        if isinstance(tz, str):
            from zoneinfo import ZoneInfo

            tz = ZoneInfo(tz)
        self.expr = expr
        self.tz: datetime.tzinfo = tz if tz is not None else datetime.timezone.utc
        self._cronsim = cronsim
        try:
            cronsim.CronSim(expr, datetime.datetime.now(self.tz))
        except cronsim.CronSimError as error:
            raise ValueError(
                f"cron={expr!r} is not a cron expression ({error}): five fields, "
                "minute hour day-of-month month day-of-week, as '*/5 * * * *'"
            ) from None
        try:  # both ways: a pass looks back for the tick due, and forward for the next
            self.latest(time.time())
            self.next_after(time.time())
        except StopIteration:
            raise ValueError(
                f"cron={expr!r} names no time within 50 years of now (as '0 0 */20 * 1L', "
                "the 1st or 21st that is a month's last Monday): no tick would ever run"
            ) from None

    def __repr__(self) -> str:
        return f"cron {self.expr!r} ({self.tz})"

    def _at(self, when: float) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(when, self.tz)

    def _from(self, when: float, reverse: bool = False) -> Iterator[datetime.datetime]:
        return iter(self._cronsim.CronSim(self.expr, self._at(when), reverse=reverse))

    def latest(self, now: float) -> float:
        """The last tick at or before ``now`` (cronsim's reverse walk is strict, hence the
        microsecond)."""
        return next(self._from(now + 1e-6, reverse=True)).timestamp()

    def next_after(self, tick: float) -> float:
        """The tick that follows ``tick``."""
        return next(self._from(tick)).timestamp()

    def between(self, after: float, before: float, keep: int) -> tuple[int, list[float]]:
        """How many ticks lie strictly between two ticks, and the last ``keep`` of them.

        Walks back from ``before``, at most ``keep + 1`` ticks: a ``last`` of years ago (or
        of 0) costs what a recent one does. When more ticks lie between, those older than the
        walk are estimated from the walked ticks' mean spacing (exact for a cron whose ticks
        are evenly spaced, as ``*/5 * * * *``; a count of missed ticks either way)."""
        walked: list[float] = []
        reached = False
        try:
            for at in self._from(before, reverse=True):  # strictly before `before`
                when = at.timestamp()
                if when <= after:
                    reached = True
                    break
                if len(walked) > keep:
                    break
                walked.append(when)
        except StopIteration:  # no earlier time within cronsim's reach
            reached = True
        walked.reverse()
        kept = walked[-keep:] if keep > 0 else []
        if reached or not walked:
            return len(walked), kept
        oldest = walked[0]
        spacing = (before - oldest) / len(walked)
        older = max(0, math.ceil((oldest - after) / spacing) - 1) if spacing > 0 else 0
        return len(walked) + older, kept


class Scheduler:
    """What each worker runs to turn ticks into jobs: :meth:`run_pass` now and then. Cheap
    when no tick is new (arithmetic only); a new tick costs one ``add`` per worker, and its
    claimer a few more calls."""

    def __init__(self, jobs: JobQueue[Any], periodic: Sequence[Periodic]) -> None:
        self.jobs = jobs
        self.cache = jobs.cache
        self.periodic = periodic
        self.seen: dict[str, float] = {}

    def run_pass(self, now: float | None = None) -> None:
        """Settle the ticks due at ``now`` (default: the clock) that this worker has not
        looked at yet."""
        now = time.time() if now is None else now
        for task in self.periodic:
            tick = task.cadence.latest(now)
            if self.seen.get(task.name, -math.inf) >= tick:
                continue
            self.seen[task.name] = tick
            try:
                self.settle(task, tick)
            except Exception:
                # The next tick tries again; a tick whose claim was stored stays unfired.
                _log.exception("%s: the scheduler could not settle the tick at %s", task.name, tick)

    def claim(self, task: Periodic, tick: float, what: str) -> bool:
        """Claim a tick; True for the one worker that stores the claim."""
        gap = max(task.cadence.next_after(tick) - tick, 0.0)
        keep = max(CLAIM_FLOOR, gap * (CLAIM_WINDOW + 2))
        return bool(self.cache.add(CLAIM_PREFIX + tick_name(task.name, tick), what, expire=keep))

    def settle(self, task: Periodic, tick: float) -> None:
        """Claim the tick now due; if this worker won it, count or queue the missed ticks
        before it, queue it, and record it as the schedule's last."""
        if not self.claim(task, tick, "fired"):
            return
        state_key = STATE_PREFIX + task.name
        last, bad = self.read_last(state_key, tick)
        if bad is not None:
            self.replace_state(task, tick, bad)
            return
        if last is None:
            # First sighting: a schedule starts with the tick after it is first seen, so a
            # daily cron first seen at 15:00 does not run its 09:00 tick then. `add`, so that
            # of two workers that each claimed a tick before either stored the state, one
            # starts the schedule and the other goes on from it.
            if self.cache.add(state_key, {"last": tick}):
                _log.info(
                    "%s: scheduled %r; first tick at %s",
                    task.name,
                    task.cadence,
                    _when(task.cadence.next_after(tick)),
                )
                return
            last, _ = self.read_last(state_key, tick)
            if last is None or tick <= last:
                return  # the other's first tick is this one's or later: it starts there
        if tick <= last:
            # Only a worker whose clock is behind the one that settled `last` gets here.
            _log.warning(
                "%s: the tick at %s is older than the last one settled (%s): is this "
                "machine's clock behind? not run",
                task.name,
                _when(tick),
                _when(last),
            )
            return
        window = CLAIM_WINDOW if task.missed == "skip" else max(CLAIM_WINDOW, task.max_catch_up)
        count, recent = task.cadence.between(last, tick, window)
        skipped = count - len(recent)  # older than the window: this claimer counts them
        caught_up = 0
        run: list[float] = []
        if task.missed == "catch_up" and task.max_catch_up > 0:
            run = recent[max(0, len(recent) - task.max_catch_up) :]
        for earlier in recent:
            queue_it = earlier in run
            if not self.claim(task, earlier, "fired" if queue_it else "skipped"):
                continue  # another worker settled it
            if queue_it:
                self.fire(task, earlier)
                caught_up += 1
            else:
                skipped += 1
        if skipped:
            try:
                self.cache.incr(state_key + ".missed", skipped)
            except TypeError:  # junk where the count goes: counted afresh, said once
                _log.warning(
                    "%s: the count of missed ticks (%s) held junk; it is replaced",
                    shown(task.name),
                    shown(state_key + ".missed"),
                )
                self.cache.set(state_key + ".missed", skipped)
        if skipped or caught_up:
            _log.warning(
                "%s: %d tick(s) missed since %s: %d skipped, %d caught up",
                task.name,
                skipped + caught_up,
                _when(last),
                skipped,
                caught_up,
            )
        self.fire(task, tick)
        stored, bad = self.read_last(state_key, tick)
        if bad is not None or stored is None or stored < tick:
            self.cache.set(state_key, {"last": tick})

    def read_last(self, state_key: str, tick: float) -> tuple[float | None, str | None]:
        """The schedule's last settled tick (None before the first), or, for a state that
        cannot be one, None and a short escaped description of what it holds: not a dict
        with a finite number under ``last``, or a ``last`` further ahead of the clock (and of
        ``tick``) than clocks may disagree (:data:`CLAIM_FLOOR`)."""
        try:
            state = self.cache.get(state_key)
        except DecodeError as error:
            return None, f"a value this process cannot decode ({type(error).__name__})"
        if state is None:
            return None, None
        last = state.get("last") if isinstance(state, dict) else None
        if (
            isinstance(last, bool)
            or not isinstance(last, (int, float))
            or not math.isfinite(last)
            or last < 0  # before 1970: no schedule of ours settled that
        ):
            return None, shown(repr(state)[:120])
        if last > max(tick, time.time()) + CLAIM_FLOOR:
            return None, f"a last tick in the future ({_when(last)})"
        return float(last), None

    def replace_state(self, task: Periodic, tick: float, bad: str) -> None:
        """A state that is junk (written by hand, or damaged): said once, replaced by the
        tick now due, which runs (how many ticks were missed cannot be known)."""
        _log.warning(
            "%s: the schedule's state %s held %s, not the time of its last tick; replaced: "
            "the tick at %s runs and the schedule goes on from it",
            shown(task.name),
            shown(STATE_PREFIX + task.name),
            bad,
            _when(tick),
        )
        self.fire(task, tick)
        self.cache.set(STATE_PREFIX + task.name, {"last": tick})

    def fire(self, task: Periodic, tick: float) -> int:
        """Queue a tick's job; returns its id."""
        kwargs = {"tick": tick} if task.takes_tick else {}
        return self.jobs.put(
            make_call(task.name, (), kwargs),
            queue=task.queue,
            unique=tick_name(task.name, tick),
            max_attempts=task.max_attempts,
        )

    def loop(self, stop: threading.Event) -> None:
        """Run passes until ``stop`` is set (the worker's scheduler thread)."""
        while not stop.is_set():
            self.run_pass()
            stop.wait(PASS_EVERY)


def _when(tick: float) -> str:
    try:
        return datetime.datetime.fromtimestamp(tick, datetime.timezone.utc).isoformat(
            timespec="milliseconds"
        )
    except (OverflowError, ValueError, OSError):  # a time no datetime holds (junk)
        return repr(tick)
