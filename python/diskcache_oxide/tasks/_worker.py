"""The worker: ``diskcache-oxide worker DIR_OR_URL app.module ... --concurrency N --pool
process|thread|async`` (D-063).

One supervising process takes the jobs, holds their leases, extends them while the tasks run
(the heartbeat), stores results and settles the jobs; the bodies run in a child process per
slot, in threads, or on an event loop (:mod:`._pools`). Everything it does to the store goes
through :class:`~diskcache_oxide.JobQueue`'s public calls and the cache's get/set/push.

Signals: the first SIGTERM or SIGINT stops the taking; running tasks get ``grace`` seconds to
finish; those still running then are released (ready again at once, the attempt not counted)
and their bodies stopped. A second signal skips the rest of the grace period.

Schedules: every worker runs the scheduler of the periodic tasks it imported
(:mod:`._schedules`) in a thread of its own; the claim of each tick in the store makes it one
job however many workers run.

Exit codes (:data:`EXIT_CODES`): 0 stopped by a signal after a graceful shutdown, or ``--burst``
found nothing more to do; 1 the worker could not run (the store would not open, a child
process would not start); 2 bad usage; 3 a task module failed to import, or the modules
declare no task; 4 stopped at once by a second signal.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..jobs import JobQueue
from ._app import PeriodicTask, Task, open_store, registered
from ._connect import backoff, check_url, is_fatal, reason
from ._errors import TaskTimeout
from ._execute import Outcome, _current, error_outcome, import_modules
from ._logsafe import Redactor, one_line, secrets_of, shown, shown_url
from ._metrics import Recorder, require_prometheus, serve_worker_metrics
from ._payload import ERROR_LIMIT, KEY_PREFIX, call_of
from ._pools import SLICE, ChildStartError, ProcessPool, Running, ThreadPool
from ._results import failure_record, store_record, wake
from ._schedules import Scheduler

if TYPE_CHECKING:
    import click

__all__ = ["EXIT_CODES", "POOLS", "add_command", "run_worker"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_IMPORT = 3
EXIT_FORCED = 4

#: The worker's exit codes and what each means.
EXIT_CODES = {
    EXIT_OK: "stopped by a signal after a graceful shutdown, or --burst found no more work",
    EXIT_ERROR: "could not run: the store would not open, a child process would not start",
    EXIT_USAGE: "bad usage",
    EXIT_IMPORT: "a task module failed to import, or the modules declare no task",
    EXIT_FORCED: "stopped at once by a second signal (running tasks released)",
}

POOLS = ("process", "thread", "async")

_log = logging.getLogger("diskcache_oxide.tasks")


def _setup_logging() -> None:
    root = logging.getLogger("diskcache_oxide")
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)


class Worker:
    """The supervising process's state: the store, the running tasks, the stop flags."""

    def __init__(
        self,
        jobs: JobQueue[Any],
        tasks: dict[str, Task[Any]],
        pool: Any,
        *,
        concurrency: int,
        grace: float,
        burst: bool,
        poll: float,
        recorder: Recorder | None = None,
    ) -> None:
        self.jobs = jobs
        self.metrics = recorder or Recorder(jobs.cache, prometheus=False)
        self.cache = jobs.cache
        self.tasks = tasks
        self.pool = pool
        self.concurrency = concurrency
        self.grace = grace
        self.burst = burst
        self.poll = poll
        self.running: dict[int, Running] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.now = threading.Event()
        self.failed: str | None = None
        self.forced = False
        periodic = [task for task in tasks.values() if isinstance(task, PeriodicTask)]
        self.scheduler = Scheduler(jobs, periodic) if periodic else None

    def start_scheduler(self) -> None:
        """Every worker keeps the schedules (the claims of ticks make each tick one job):
        in a thread of its own until the first signal; with ``--burst``, one pass now."""
        if self.scheduler is None:
            return
        if self.burst:
            self.scheduler.run_pass()
            return
        threading.Thread(
            target=self.scheduler.loop, args=(self.stopping,), daemon=True, name="scheduler"
        ).start()

    def start_flushing(self) -> None:
        """Add the counts to the store's totals every second, in a thread of its own, until
        the worker stops (then once more)."""
        threading.Thread(
            target=self.metrics.loop, args=(self.now,), daemon=True, name="metrics"
        ).start()

    # ---- signals --------------------------------------------------------------------------

    def on_signal(self, signum: int, frame: Any = None) -> None:
        if self.stopping.is_set():
            _log.warning("second signal (%s): stopping now", signal.Signals(signum).name)
            self.forced = True
            self.now.set()
            return
        _log.info(
            "signal %s: taking no more tasks; %d running get %.1f s to finish",
            signal.Signals(signum).name,
            len(self.running),
            self.grace,
        )
        self.stopping.set()

    # ---- one job --------------------------------------------------------------------------

    def begin(self, job: Any) -> Running | None:
        """The task a job calls, its lease set to the task's; None if there is none here
        (the job then failed an attempt: it may be for a worker with other modules)."""
        try:
            call = call_of(job.value)
        except ValueError as error:
            self.jobs.fail(job, str(error), retry_in=60.0)
            _log.error("job id=%s: %s", shown(job.id), one_line(error))
            return None
        task = self.tasks.get(call.task)
        if task is None:
            reason = (
                f"no task named {call.task!r} in this worker: import its module "
                "(diskcache-oxide worker DIR module ...)"
            )
            outcome = self.jobs.fail(job, reason, retry_in=min(60.0, 2.0**job.attempts))
            # The name is the job's, from the store: escaped, so that a name holding a
            # newline cannot write a line of its own (and ESC cannot reach the terminal).
            _log.error(
                "%s id=%s attempt=%s/%s 0.000s %s: %s",
                one_line(call.task),
                shown(job.id),
                shown(job.attempts),
                shown(job.max_attempts),
                "dead" if outcome == "dead" else "not-found",
                one_line(reason),
            )
            return None
        run = Running(job, task, call.args, call.kwargs)
        self.jobs.extend(job, task.lease)
        self.metrics.count("started", task.name)
        if job.attempts == 1:
            self.metrics.observe("wait", task.name, time.time() - job.created)
        return run

    def settle(self, run: Running, outcome: Outcome) -> None:
        """Store the result and settle the job, then log the task's line."""
        job, task = run.job, run.task
        with run.lock:
            if run.settled:
                self.log(run, "released", "")
                return
            run.settled = True
            kind = outcome[0]
            if kind == "ok":
                store_record(
                    self.cache,
                    job.id,
                    {"status": "succeeded", "value": outcome[1]},
                    task.result_expire,
                )
                done = self.jobs.finish(job)
                if done:
                    wake(self.cache, job.id)
                    self.metrics.count("succeeded", task.name)
                self.metrics.observe("run", task.name, time.monotonic() - run.started)
                self.log(run, "succeeded" if done else "lost-lease", "")
                return
            if kind == "timeout":
                type_name, message, text = (
                    TaskTimeout.__name__,
                    f"{task.name} ran past its timeout of {task.timeout} s",
                    "",
                )
            elif kind == "crashed":
                type_name, message, text = "WorkerCrashed", str(outcome[1]), ""
            elif kind == "released":
                self.jobs.release(job)
                self.log(run, "released", "")
                return
            elif kind == "requeue":  # the task raised Requeue: not an attempt spent
                done = self.jobs.release(job, delay=outcome[1])
                self.log(run, f"requeued in {outcome[1]:g}s" if done else "lost-lease", "")
                return
            else:
                _, type_name, message, text = outcome
            final = job.max_attempts > 0 and job.attempts >= job.max_attempts
            if final:
                # Before the job goes dead, so that a waiter woken by it finds the record.
                store_record(
                    self.cache,
                    job.id,
                    failure_record(type_name, message, text, job.attempts),
                    task.result_expire,
                )
            retry_in = task.retry_in(job.attempts)
            error = f"{type_name}: {message}"[:ERROR_LIMIT]
            state = self.jobs.fail(job, error, retry_in=retry_in)
            self.metrics.observe("run", task.name, time.monotonic() - run.started)
            if state in ("dead", "ready"):
                final = state == "dead"
                self.metrics.count("failed" if final else "retried", task.name)
                self.metrics.failure(task.name, job.id, job.attempts, error, final)
            if state == "dead":
                wake(self.cache, job.id)
                label = "timeout, dead" if kind == "timeout" else "failed, dead"
            elif state == "ready":
                label = f"{'timeout' if kind == 'timeout' else 'failed'}, retry in {retry_in:g}s"
            else:
                label = "lost-lease"
            self.log(run, label, f"{type_name}: {message}")

    def log(self, run: Running, outcome: str, detail: str) -> None:
        """The task's line: name, id, attempt, duration, outcome, and the error if any. What
        came from the job (its id and attempts, and the error, which may quote the
        arguments) is escaped: a newline shows as ``\\n``, not as a new line, and no control
        character reaches the log as it is."""
        job = run.job
        line = "%s id=%s attempt=%s/%s %.3fs %s"
        args: list[Any] = [
            one_line(run.task.name),
            shown(job.id),
            shown(job.attempts),
            shown(job.max_attempts or "-"),
            time.monotonic() - run.started,
            outcome,
        ]
        if detail:
            line += ": %s"
            args.append(one_line(detail))
        (_log.info if outcome == "succeeded" else _log.warning)(line, *args)

    def release_all(self) -> int:
        """Release every task still running (the grace period is over); returns how many."""
        count = 0
        for run in list(self.running.values()):
            with run.lock:
                if run.settled:
                    continue
                run.settled = True
                if self.jobs.release(run.job):
                    count += 1
            if run.future is not None:
                run.future.get_loop().call_soon_threadsafe(run.future.cancel)
        return count

    # ---- the heartbeat --------------------------------------------------------------------

    def heartbeat(self) -> None:
        """Extend the lease of every running task a third of the way through it."""
        while not self.now.is_set():
            time.sleep(0.2)
            now = time.monotonic()
            for run in list(self.running.values()):
                if now - run.extended < run.task.lease / 3:
                    continue
                with run.lock:
                    if run.settled:
                        continue
                    run.extended = now
                    try:
                        extended = self.jobs.extend(run.job, run.task.lease)
                    except Exception as error:  # the store is down: try again next round
                        _log.warning(
                            "%s id=%s: the lease could not be extended: %s",
                            one_line(run.task.name),
                            shown(run.job.id),
                            one_line(reason(error), 300),
                        )
                        continue
                    if not extended:
                        _log.warning(
                            "%s id=%s: its lease was lost (it ran out before the heartbeat)",
                            one_line(run.task.name),
                            shown(run.job.id),
                        )

    # ---- the thread and process pools -----------------------------------------------------

    def store_failed(self, index: int, error: Exception, failures: int) -> float:
        """A call to the store failed in slot ``index`` (the ``failures``-th time in a row):
        log one line and return the seconds to wait before the next try (1, 2, 4 ... 30), or
        stop the worker (exit 1) and return 0 when the store refused it (a password changed
        under it), which no retry mends. The traceback goes to the DEBUG level only: a
        server that is down would otherwise print one every second."""
        if is_fatal(error, opening=False):
            self.failed = reason(error)
            _log.error(
                "slot %d: the store refused the worker: %s; stopping",
                index,
                one_line(self.failed, 300),
            )
            self.stopping.set()
            return 0.0
        wait = backoff(failures)
        _log.warning(
            "slot %d: a call to the store failed (%s); trying again in %g s",
            index,
            one_line(reason(error), 300),
            wait,
        )
        _log.debug("slot %d: the failed call", index, exc_info=True)
        return wait

    def slot(self, index: int) -> None:
        """A slot of the thread and process pools: take, run, settle, until stopped. A
        failing store call (a server down, a locked or full disk) is logged in one line and
        tried again after a backoff (:meth:`store_failed`); a child process that cannot
        start stops the worker."""
        try:
            self.pool.prepare(index)
            failures = 0
            while not self.stopping.is_set():
                try:
                    if not self.step(index):
                        return
                    failures = 0
                except ChildStartError:
                    raise
                except Exception as error:
                    failures += 1
                    self.stopping.wait(self.store_failed(index, error, failures))
        except Exception as error:
            self.failed = f"{type(error).__name__}: {error}"
            _log.error("slot %d stopped: %s", index, one_line(self.failed, 2000))
            _log.debug("slot %d: the error", index, exc_info=True)
            self.stopping.set()

    def step(self, index: int) -> bool:
        """Take one job and see it through; False when the slot should stop."""
        job = self.jobs.take(timeout=self.poll)
        if job is None:
            return not self.burst
        if self.stopping.is_set():
            self.jobs.release(job)
            return False
        run = self.begin(job)
        if run is None:
            return True
        with self.lock:
            self.running[index] = run
        try:
            outcome = self.pool.execute(index, run)
        except ChildStartError:
            with run.lock:
                run.settled = True
                self.jobs.release(run.job)
            raise
        except Exception as error:
            outcome = ("crashed", f"{type(error).__name__}: {error}")
        finally:
            with self.lock:
                self.running.pop(index, None)
        self.settle(run, outcome)
        return True

    def run_threads(self) -> int:
        previous = {s: signal.signal(s, self.on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            threading.Thread(target=self.heartbeat, daemon=True, name="heartbeat").start()
            self.start_flushing()
            self.start_scheduler()
            slots = [
                threading.Thread(target=self.slot, args=(i,), daemon=True, name=f"slot-{i}")
                for i in range(self.concurrency)
            ]
            for thread in slots:
                thread.start()
            while any(t.is_alive() for t in slots) and not self.stopping.is_set():
                self.stopping.wait(0.2)
            return self.shutdown(lambda: any(t.is_alive() for t in slots))
        finally:
            self.pool.close()
            self.now.set()
            self.metrics.flush()
            for s, handler in previous.items():
                signal.signal(s, handler)

    def shutdown(self, alive: Any) -> int:
        if self.stopping.is_set():
            end = time.monotonic() + self.grace
            while alive() and self.running and not self.now.is_set() and time.monotonic() < end:
                time.sleep(SLICE)
            released = self.release_all()
            if released:
                _log.warning("released %d running task(s): they are ready again now", released)
            end = time.monotonic() + self.poll + 10
            while alive() and time.monotonic() < end:
                time.sleep(SLICE)
        if self.failed is not None:
            return EXIT_ERROR
        return EXIT_FORCED if self.forced else EXIT_OK

    # ---- the async pool -------------------------------------------------------------------

    async def _body(self, run: Running) -> Outcome:
        task = run.task
        token = _current.set(run.current)  # copied into the body's task or thread
        try:
            if task.is_async:
                inner: asyncio.Future[Any] = asyncio.ensure_future(
                    task.func(*run.args, **run.kwargs)
                )
            else:
                inner = _in_daemon_thread(task.func, run.args, run.kwargs)
        finally:
            _current.reset(token)
        try:
            done, _ = await asyncio.wait({inner}, timeout=task.timeout)
        except asyncio.CancelledError:  # released at shutdown: stop the body too
            inner.cancel()
            raise
        if not done:
            inner.cancel()
            await asyncio.wait({inner}, timeout=5)
            return ("timeout",)
        error = inner.exception()
        if error is not None:
            return error_outcome(error)
        return ("ok", inner.result())

    async def aslot(self, index: int) -> None:
        """A slot of the async pool (see :meth:`slot`)."""
        failures = 0
        while not self.stopping.is_set():
            try:
                if not await self.astep(index):
                    return
                failures = 0
            except Exception as error:
                failures += 1
                wait = self.store_failed(index, error, failures)
                end = time.monotonic() + wait
                while not self.stopping.is_set() and time.monotonic() < end:
                    await asyncio.sleep(min(SLICE, wait))

    async def astep(self, index: int) -> bool:
        """:meth:`step` on the event loop."""
        job = await asyncio.to_thread(self.jobs.take, timeout=self.poll)
        if job is None:
            return not self.burst
        if self.stopping.is_set():
            await asyncio.to_thread(self.jobs.release, job)
            return False
        run = await asyncio.to_thread(self.begin, job)
        if run is None:
            return True
        run.future = asyncio.ensure_future(self._body(run))
        with self.lock:
            self.running[index] = run
        await asyncio.wait({run.future})
        with self.lock:
            self.running.pop(index, None)
        if run.future.cancelled():
            outcome: Outcome = ("released",)
        else:
            outcome = run.future.result()
        await asyncio.to_thread(self.settle, run, outcome)
        return True

    async def run_async(self) -> int:
        loop = asyncio.get_running_loop()
        for s in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(s, self.on_signal, s)
        threading.Thread(target=self.heartbeat, daemon=True, name="heartbeat").start()
        self.start_flushing()
        await asyncio.to_thread(self.start_scheduler)
        slots = [asyncio.ensure_future(self.aslot(i)) for i in range(self.concurrency)]
        try:
            while not all(t.done() for t in slots) and not self.stopping.is_set():
                await asyncio.wait(slots, timeout=0.2)
            if self.stopping.is_set():
                end = time.monotonic() + self.grace
                while self.running and not self.now.is_set() and time.monotonic() < end:
                    await asyncio.sleep(SLICE)
                released = await asyncio.to_thread(self.release_all)
                if released:
                    _log.warning("released %d running task(s): they are ready again now", released)
                await asyncio.wait(slots, timeout=self.poll + 10)
            for t in slots:
                if t.done() and not t.cancelled() and t.exception() is not None:
                    self.failed = repr(t.exception())
        finally:
            self.now.set()
            await asyncio.to_thread(self.metrics.flush)
            for s in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(s)
        if self.failed is not None:
            return EXIT_ERROR
        return EXIT_FORCED if self.forced else EXIT_OK


def _in_daemon_thread(func: Any, args: Any, kwargs: Any) -> asyncio.Future[Any]:
    """Run a plain function of the async pool in a daemon thread: unlike the loop's
    executor, whose threads the interpreter waits for at exit, a task released at shutdown
    does not keep the worker alive."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(error: BaseException | None, value: Any) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def body() -> None:
        try:
            value, error = context.run(func, *args, **kwargs), None
        except BaseException as raised:
            value, error = None, raised
        try:
            loop.call_soon_threadsafe(settle, error, value)
        except RuntimeError:  # the loop is closed: the worker has stopped
            pass

    threading.Thread(target=body, daemon=True, name="task").start()
    return future


def _warn_of_other_stores(target: Any, tasks: dict[str, Task[Any]]) -> None:
    """Warn when a module's ``Tasks`` names another directory than the worker serves: its
    ``delay()`` calls would queue where this worker never looks."""
    if not isinstance(target, str) or "://" in target:
        return
    apps = {id(task.app): task.app for task in tasks.values()}
    for app in apps.values():
        where = app.where
        if "://" in where or os.path.realpath(where) == os.path.realpath(target):
            continue
        names = sorted(name for name, task in tasks.items() if task.app is app)
        _log.warning(
            "the tasks %s queue to %s, but this worker serves %s: give both the same store",
            [one_line(name) for name in names[:3]] + (["..."] if len(names) > 3 else []),
            shown_url(where),
            shown_url(target),
        )


def run_worker(
    target: Any,
    modules: Sequence[str],
    *,
    concurrency: int = 1,
    pool: str = "process",
    queues: Sequence[str] = (),
    grace: float = 30.0,
    burst: bool = False,
    max_tasks_per_child: int | None = None,
    max_memory_per_child: float | None = None,
    pickle: bool = False,
    poll: float = 1.0,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
) -> int:
    """Run tasks from ``target`` (a directory, a URL, or a store) until stopped; returns
    the exit code (:data:`EXIT_CODES`).

    :param modules: the modules that declare the tasks (imported here, and in each child)
    :param concurrency: tasks run at once
    :param pool: ``process`` (a child process per slot), ``thread`` or ``async``
    :param queues: the queues to serve, most urgent first (default: those of the tasks)
    :param grace: seconds running tasks get to finish after the first SIGTERM or SIGINT
    :param burst: exit (0) once no job is due instead of waiting for more
    :param max_tasks_per_child: recycle a process-pool child after this many tasks
    :param max_memory_per_child: recycle a process-pool child once its resident memory passes
        this many MiB after a task
    :param pickle: read and write pickles (also on if a module's ``Tasks`` has ``pickle=True``)
    :param poll: seconds a take waits before the worker looks at its stop flags again
    :param metrics_port: serve this worker's Prometheus metrics at
        ``http://METRICS_HOST:PORT/metrics`` (0: a free port, logged); needs the ``metrics``
        extra. Counts go to the store whatever this is (the dashboard reads them there).
    :param metrics_host: the address ``metrics_port`` binds (default: loopback only)
    """
    _setup_logging()
    # Every line this logger writes, the other modules' of the package too, without the
    # URL's password (the URL itself is always written by shown_url; this catches an error
    # message that quotes it).
    redactor = Redactor(secrets_of(target))
    _log.addFilter(redactor)
    try:
        return _serve(
            target,
            modules,
            concurrency=concurrency,
            pool=pool,
            queues=queues,
            grace=grace,
            burst=burst,
            max_tasks_per_child=max_tasks_per_child,
            max_memory_per_child=max_memory_per_child,
            pickle=pickle,
            poll=poll,
            metrics_port=metrics_port,
            metrics_host=metrics_host,
            redactor=redactor,
        )
    finally:
        _log.removeFilter(redactor)


def _open(target: Any, pickle: bool, served: list[str]) -> tuple[Any, JobQueue[Any]] | int:
    """The store and its JobQueue, once the store answers; or an exit code: 1 at once for a
    store that can never work as given (a URL that cannot be right, refused credentials: one
    line), 0 for a SIGTERM or SIGINT while waiting. A server that is down is tried again
    with a backoff (1, 2, 4 ... 30 s), one line per attempt (:mod:`._connect`). A directory
    that will not open is an error at once, as before."""
    stop = threading.Event()
    previous: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():  # signal() works only there
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous[signum] = signal.signal(signum, lambda number, frame: stop.set())
    remote = not isinstance(target, str) or "://" in target
    try:
        attempt = 0
        while True:
            attempt += 1
            try:
                check_url(target)
                store = open_store(target, pickle=pickle) if not hasattr(target, "get") else target
                jobs = JobQueue(store, served)
                # The first round trip: a refused password, a wrong database, a server
                # down show here, before the worker says it started.
                store.get(f"{KEY_PREFIX}.probe")
                return store, jobs
            except Exception as error:
                if not remote or is_fatal(error, opening=True):
                    _log.error(
                        "cannot open %s: %s", shown_url(target), one_line(reason(error), 500)
                    )
                    return EXIT_ERROR
                if stop.is_set():  # a signal came during the attempt
                    _log.info("stopped by a signal before the store answered")
                    return EXIT_OK
                wait = backoff(attempt)
                _log.warning(
                    "cannot reach %s (attempt %d): %s; trying again in %g s",
                    shown_url(target),
                    attempt,
                    one_line(reason(error), 300),
                    wait,
                )
                if stop.wait(wait):
                    _log.info("stopped by a signal before the store answered")
                    return EXIT_OK
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _serve(
    target: Any,
    modules: Sequence[str],
    *,
    concurrency: int,
    pool: str,
    queues: Sequence[str],
    grace: float,
    burst: bool,
    max_tasks_per_child: int | None,
    max_memory_per_child: float | None,
    pickle: bool,
    poll: float,
    metrics_port: int | None,
    metrics_host: str,
    redactor: Redactor,
) -> int:
    """:func:`run_worker` once its logging is set up."""
    if pool not in POOLS:
        _log.error("--pool must be one of %s, not %r", ", ".join(POOLS), pool)
        return EXIT_USAGE
    if concurrency < 1:
        _log.error("--concurrency must be at least 1, not %d", concurrency)
        return EXIT_USAGE
    if pool != "process" and (max_tasks_per_child or max_memory_per_child):
        _log.error("--max-tasks-per-child and --max-memory-per-child need --pool process")
        return EXIT_USAGE
    if metrics_port is not None:
        try:
            require_prometheus()
        except ImportError as error:
            _log.error("--metrics-port: %s", error)
            return EXIT_USAGE
    if not modules:
        _log.error("name at least one task module: diskcache-oxide worker DIR app.tasks")
        return EXIT_USAGE
    for name in modules:
        try:
            import_modules([name])
        except Exception as error:
            sys.stderr.write(redactor.scrub(traceback.format_exc()))
            _log.error(
                "cannot import the task module %r: %s: %s (is it on the path? the worker searches "
                "its working directory last)",
                name,
                type(error).__name__,
                one_line(error, 500),
            )
            return EXIT_IMPORT
    tasks = registered()
    if not tasks:
        _log.error("the modules %s declare no task (@tasks.task)", list(modules))
        return EXIT_IMPORT
    _warn_of_other_stores(target, tasks)
    pickle = pickle or any(task.app.pickle for task in tasks.values())
    served = list(dict.fromkeys(queues or [task.queue for task in tasks.values()]))
    opened = _open(target, pickle, served)
    if isinstance(opened, int):
        return opened
    store, jobs = opened
    runner: Any
    if pool == "process":
        memory = None if max_memory_per_child is None else int(max_memory_per_child * 2**20)
        runner = ProcessPool(list(modules), max_tasks_per_child, memory)
    else:
        runner = ThreadPool()
    recorder = Recorder(store, prometheus=metrics_port is not None)
    if metrics_port is not None:
        try:
            bound = serve_worker_metrics(recorder, served, metrics_host, metrics_port)
        except OSError as error:
            _log.error("cannot serve metrics on %s:%d: %s", metrics_host, metrics_port, error)
            return EXIT_ERROR
        _log.info("metrics at http://%s:%d/metrics", metrics_host, bound)
    worker = Worker(
        jobs,
        tasks,
        runner,
        concurrency=concurrency,
        grace=grace,
        burst=burst,
        poll=poll,
        recorder=recorder,
    )
    _log.info(
        "worker started: store=%s queues=%s pool=%s concurrency=%d tasks=%s",
        shown_url(target),
        served,
        pool,
        concurrency,
        sorted(tasks),
    )
    for task in tasks.values():
        if isinstance(task, PeriodicTask):
            _log.info("schedule: %s %r, missed ticks: %s", task.name, task.cadence, task.missed)
    if pool == "async":
        code = asyncio.run(worker.run_async())
    else:
        code = worker.run_threads()
    _log.info("worker stopped: exit code %d (%s)", code, EXIT_CODES[code])
    return code


def add_command(group: click.Group) -> None:
    """Declare ``worker`` on the ``diskcache-oxide`` group."""
    import click

    codes = "; ".join(f"{code} {text}" for code, text in EXIT_CODES.items())

    @group.command("worker", epilog=f"Exit status: {codes}.")
    @click.argument("target", metavar="DIR_OR_URL")
    @click.argument("modules", nargs=-1, required=True)
    @click.option("-c", "--concurrency", type=click.IntRange(min=1), default=1, show_default=True)
    @click.option(
        "--pool",
        type=click.Choice(POOLS),
        default="process",
        show_default=True,
        help="Where task bodies run: a child process per slot, threads, or an event loop.",
    )
    @click.option(
        "-Q",
        "--queue",
        "queues",
        multiple=True,
        help="A queue to serve (repeat, most urgent first; default: the tasks' queues).",
    )
    @click.option(
        "--grace",
        type=click.FloatRange(min=0),
        default=30.0,
        show_default=True,
        help="Seconds running tasks get to finish after SIGTERM/SIGINT; then released.",
    )
    @click.option("--burst", is_flag=True, help="Exit once no job is due.")
    @click.option("--max-tasks-per-child", type=click.IntRange(min=1), default=None)
    @click.option(
        "--max-memory-per-child",
        type=click.FloatRange(min=1),
        default=None,
        help="MiB of resident memory after which a child is recycled.",
    )
    @click.option("--pickle", is_flag=True, help="Read and write pickles (trusted writers only).")
    @click.option(
        "--metrics-port",
        type=click.IntRange(min=0, max=65535),
        default=None,
        help="Serve Prometheus metrics at http://HOST:PORT/metrics (0: a free port, logged); "
        "needs the metrics extra.",
    )
    @click.option(
        "--metrics-host",
        default="127.0.0.1",
        show_default=True,
        help="The address --metrics-port binds.",
    )
    def worker_command(
        target: str,
        modules: tuple[str, ...],
        concurrency: int,
        pool: str,
        queues: tuple[str, ...],
        grace: float,
        burst: bool,
        max_tasks_per_child: int | None,
        max_memory_per_child: float | None,
        pickle: bool,
        metrics_port: int | None,
        metrics_host: str,
    ) -> None:
        """Run the tasks declared in MODULES from DIR_OR_URL until SIGTERM or SIGINT.

        Logs a line per task (name, id, attempt, duration, outcome) on stderr.
        """
        code = run_worker(
            target,
            modules,
            concurrency=concurrency,
            pool=pool,
            queues=queues,
            grace=grace,
            burst=burst,
            max_tasks_per_child=max_tasks_per_child,
            max_memory_per_child=max_memory_per_child,
            pickle=pickle,
            metrics_port=metrics_port,
            metrics_host=metrics_host,
        )
        raise SystemExit(code)
