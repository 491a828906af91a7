"""Periodic tasks (``@tasks.periodic``): the ticks of ``every=`` and ``cron=``, each settled by
one scheduler whatever the number of workers, missed ticks skipped or caught up.

The scheduler's passes are run here at given instants (``Scheduler.run_pass(now=...)``, as a
worker runs them with the clock) against real stores; then real workers started through the
command keep a schedule of a fraction of a second: three of them over ten ticks, and one that
comes back after missing some. On a directory, a Redis server and (the quick ones) a cluster.
"""

from __future__ import annotations

import datetime
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import diskcache_oxide as dc
import pytest
from diskcache_oxide.tasks import PeriodicTask
from diskcache_oxide.tasks._schedules import Cron, Every, Scheduler
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from tasks_support import wait_for

pytestmark = [pytest.mark.oxide, pytest.mark.backends]

UTC = datetime.timezone.utc


def at(*fields: int) -> float:
    return datetime.datetime(*fields, tzinfo=UTC).timestamp()  # type: ignore[misc]


def drain(jobs: dc.JobQueue) -> list[tuple[str, float]]:
    """The (task, tick) of every job queued, taking them."""
    found = []
    while (job := jobs.take(timeout=0)) is not None:
        found.append((job.value["task"], job.value["kwargs"]["tick"]))
        jobs.finish(job)
    return found


def test_every_and_cron_ticks() -> None:
    every = Every(0.25)
    assert every.latest(10.3) == 10.25
    assert every.next_after(10.25) == 10.5
    assert every.between(10.0, 11.0, 2) == (3, [10.5, 10.75])
    cron = Cron("*/5 * * * *")
    assert cron.latest(at(2026, 1, 1, 0, 5)) == at(2026, 1, 1, 0, 5)  # a tick is due at its time
    assert cron.latest(at(2026, 1, 1, 0, 9, 59)) == at(2026, 1, 1, 0, 5)
    assert cron.next_after(at(2026, 1, 1, 0, 5)) == at(2026, 1, 1, 0, 10)
    assert cron.between(at(2026, 1, 1, 0, 0), at(2026, 1, 1, 1, 0), 2) == (
        11,
        [at(2026, 1, 1, 0, 50), at(2026, 1, 1, 0, 55)],
    )
    paris = Cron("30 9 * * *", tz="Europe/Paris")  # 08:30 UTC in winter
    assert paris.latest(at(2026, 1, 2, 12, 0)) == at(2026, 1, 2, 8, 30)


def test_bad_schedules_say_what_to_do(make_cache: Callable[..., Any]) -> None:
    tasks = dc.Tasks(make_cache())
    with pytest.raises(TypeError, match="one of every= .* and cron="):
        tasks.periodic()(lambda: None)
    with pytest.raises(ValueError, match="is not a cron expression"):
        tasks.periodic(cron="every day")
    with pytest.raises(ValueError, match="names no time within 50 years"):
        tasks.periodic(cron="0 0 */20 * 1L")  # the 1st or 21st, and the last Monday
    with pytest.raises(ValueError, match="missed= must be one of"):
        tasks.periodic(every=1, missed="later", name="t.bad")(lambda: None)
    with pytest.raises(TypeError, match=r"requires \['x'\]: give them defaults"):
        tasks.periodic(every=1, name="t.args")(lambda x: x)
    with pytest.raises(TypeError, match="no unique="):
        tasks.periodic(every=1, unique=True)


def test_cron_ticks_fire_once_across_schedulers_and_missed_ones_are_skipped(
    make_cache: Callable[..., Any],
) -> None:
    tasks = dc.Tasks(make_cache(), queue="cron")

    @tasks.periodic(cron="*/5 * * * *", name="t.cron_skip")
    def report(tick: float) -> float:
        return tick

    assert isinstance(report, PeriodicTask) and report.takes_tick
    jobs = dc.JobQueue(tasks.cache, "cron")
    workers = [Scheduler(jobs, [report]) for _ in range(3)]
    for worker in workers:  # first seen at 00:03: the schedule starts after 00:00
        worker.run_pass(now=at(2026, 1, 1, 0, 3))
    assert report.last_tick == at(2026, 1, 1, 0, 0)
    assert drain(jobs) == []
    for worker in workers:
        worker.run_pass(now=at(2026, 1, 1, 0, 6))
        worker.run_pass(now=at(2026, 1, 1, 0, 7))
    assert drain(jobs) == [("t.cron_skip", at(2026, 1, 1, 0, 5))]  # once, for three workers
    for worker in reversed(workers):  # no worker ran at 00:10 and 00:15
        worker.run_pass(now=at(2026, 1, 1, 0, 21))
    assert drain(jobs) == [("t.cron_skip", at(2026, 1, 1, 0, 20))]
    assert (report.missed_count, report.last_tick) == (2, at(2026, 1, 1, 0, 20))


def test_missed_ticks_caught_up_within_the_bound(make_cache: Callable[..., Any]) -> None:
    tasks = dc.Tasks(make_cache())

    @tasks.periodic(
        every=datetime.timedelta(seconds=10), missed="catch_up", max_catch_up=2, name="t.beat"
    )
    def beat(tick: float = 0.0) -> float:
        return tick

    jobs = tasks.jobs
    first, second = Scheduler(jobs, [beat]), Scheduler(jobs, [beat])
    first.run_pass(now=100.0)
    second.run_pass(now=165.0)  # 110 to 150 missed: 140 and 150 run, three counted
    first.run_pass(now=165.0)
    assert drain(jobs) == [(beat.name, 140.0), (beat.name, 150.0), (beat.name, 160.0)]
    assert beat.missed_count == 3
    first.run_pass(now=171.0)
    assert drain(jobs) == [(beat.name, 170.0)]
    assert beat.missed_count == 3
    # Still a task: an extra run can be queued by hand, now or later.
    assert beat.schedule(delay=60).status == "queued"
    assert "every 10 s" in repr(beat)


def _ticks(markers: Path, name: str) -> Counter[float]:
    return Counter(
        float(path.name.split(".", 1)[1].rsplit(".", 2)[0]) for path in markers.glob(f"{name}.*")
    )


@pytest.mark.slow
@pytest.mark.backends("directory", "redis")
def test_a_periodic_task_with_three_workers_fires_each_tick_once(
    periodic: Callable[[float], ModuleType], store: str, markers: Path, start_worker: Any
) -> None:
    period = 0.3
    app = periodic(period)
    workers = [
        start_worker(store, "--pool", "thread", modules=("periodic_tasks",)) for _ in range(3)
    ]
    wait_for(lambda: len(_ticks(markers, "skipping")) >= 10, what="ten ticks")
    for worker in workers:
        worker.signal(signal.SIGTERM)
    assert [worker.wait() for worker in workers] == [0, 0, 0]
    ran = _ticks(markers, "skipping")
    queued = Counter(tick for name, tick in drain(app.tasks.jobs) if name == app.skipping.name)
    fired = ran + queued
    assert set(fired.values()) == {1}, f"ticks fired more than once: {fired}"
    assert len(ran) >= 10
    # Every tick from the first fired to the last is either fired or counted as missed.
    span = round((max(fired) - min(fired)) / period) + 1
    assert span - len(fired) <= app.skipping.missed_count
    started = "periodic_tasks.skipping: scheduled every 0.3 s; first tick at"
    assert sum(started in worker.log for worker in workers) == 1


@pytest.mark.slow
@pytest.mark.backends("directory", "redis")
def test_missed_ticks_are_skipped_or_caught_up_when_a_worker_comes_back(
    periodic: Callable[[float], ModuleType], store: str, markers: Path, start_worker: Any
) -> None:
    period = 0.4
    app = periodic(period)
    first = start_worker(store, "--pool", "thread", modules=("periodic_tasks",))
    wait_for(lambda: len(_ticks(markers, "catching_up")) >= 2, what="two ticks")
    first.signal(signal.SIGTERM)
    assert first.wait() == 0
    last = {task: task.last_tick for task in (app.skipping, app.catching_up)}
    missed = {task: task.missed_count for task in last}
    latest = max(tick for tick in last.values() if tick is not None)
    wait_for(lambda: time.time() > latest + 6 * period, what="ticks to go by")  # 5 or more missed
    again = start_worker(store, "--pool", "thread", "--burst", modules=("periodic_tasks",))
    assert again.wait() == 0
    for task, caught_up in ((app.skipping, 0), (app.catching_up, 2)):
        before = last[task]
        assert before is not None
        now = task.last_tick
        assert now is not None
        gone = round((now - before) / period) - 1  # the ticks between the two runs
        assert gone >= 5
        after = sorted(t for t in _ticks(markers, task.__name__) if t > before + period / 2)
        expected = [now - period * i for i in range(caught_up, -1, -1)]
        assert after == pytest.approx(expected), task.name
        assert task.missed_count - missed[task] == gone - caught_up
    assert "tick(s) missed since" in again.log


PERIOD = 10.0


@pytest.mark.parametrize("missed", ["skip", "catch_up"])
def test_schedulers_against_a_model(
    make_cache: Callable[..., Any], missed: str, backend: Any
) -> None:
    """Three schedulers (workers) run passes in any order as the clock moves on, now and then
    one with a clock behind the others: every tick after the first is queued once or counted
    missed once, as a model of the policy says, whichever scheduler got to it."""
    examples = 25 if backend.name == "directory" else 8

    class Schedules(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.tasks = dc.Tasks(make_cache(uuid.uuid4().hex))

            @self.tasks.periodic(
                every=PERIOD, missed=missed, max_catch_up=3, name=f"model.{missed}"
            )
            def beat(tick: float) -> float:
                return tick

            self.beat = beat
            self.jobs = dc.JobQueue(self.tasks.cache, beat.queue)
            self.schedulers = [Scheduler(self.jobs, [beat]) for _ in range(3)]
            self.now = 1_000_000.0
            self.last: float | None = None  # the model's last tick settled
            self.queued: list[float] = []
            self.missed = 0

        def expect(self, tick: float) -> None:
            """What a pass that finds ``tick`` due does, in the model."""
            if self.last is None:
                self.last = tick  # first sighting: nothing runs
                return
            if tick <= self.last:
                return
            gone = round((tick - self.last) / PERIOD) - 1
            caught = min(gone, 3) if missed == "catch_up" else 0
            self.queued += [tick - PERIOD * i for i in range(caught, 0, -1)] + [tick]
            self.missed += gone - caught
            self.last = tick

        @rule(
            which=st.integers(0, 2),
            step=st.one_of(
                st.floats(0, 2 * PERIOD), st.floats(2 * PERIOD, 300 * PERIOD), st.just(PERIOD)
            ),
        )
        def a_pass(self, which: int, step: float) -> None:
            self.now += step
            self.schedulers[which].run_pass(now=self.now)
            self.expect(Every(PERIOD).latest(self.now))

        @rule(which=st.integers(0, 2), behind=st.floats(0, 3 * PERIOD))
        def a_pass_with_a_clock_behind(self, which: int, behind: float) -> None:
            self.schedulers[which].run_pass(now=self.now - behind)
            self.expect(Every(PERIOD).latest(self.now - behind))

        @invariant()
        def queued_once_and_counted_once(self) -> None:
            found = [tick for _, tick in drain(self.jobs)]
            assert found == pytest.approx(self.queued)
            self.queued = []
            assert self.beat.missed_count == self.missed
            assert self.beat.last_tick == self.last

    run_state_machine_as_test(
        Schedules,
        settings=settings(
            max_examples=examples,
            stateful_step_count=15,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )


def test_without_cronsim_only_a_cron_schedule_needs_the_extra(tmp_path: Path) -> None:
    """The package, tasks and every= schedules import and work without cronsim (a fresh
    interpreter in which importing it fails, as where it is not installed); cron= says which
    extra to install."""
    script = (
        "import sys\n"
        "sys.modules['cronsim'] = None  # importing it now raises ImportError\n"
        "import diskcache_oxide as dc\n"
        f"tasks = dc.Tasks({str(tmp_path)!r})\n"
        "@tasks.periodic(every=60, name='t.fine')\n"
        "def fine(): pass\n"
        "assert fine.delay().status == 'queued'\n"
        "try:\n"
        "    tasks.periodic(cron='* * * * *')\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert "pip install 'diskcache-oxide[cron]'" in done.stdout
