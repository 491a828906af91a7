""":class:`Tasks`, the app that declares tasks on a store, and :class:`Task`, a function
declared with ``@tasks.task``.

Every task declared in a process is also kept in a process-wide registry by name
(:func:`registered`): that is how a worker, which imports the app's modules, finds the
function a job names.
"""

from __future__ import annotations

import datetime
import functools
import inspect
import math
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast, overload
from urllib.parse import urlsplit

from .._seconds import NONNEGATIVE, seconds
from .._store import has_store, store_of
from ..errors import UnsupportedTypeError
from ..jobs import JobQueue
from . import _registry
from ._metrics import TaskTotals, read_totals
from ._naming import task_name
from ._payload import make_call
from ._results import TaskResult
from ._schedules import MISSED, STATE_PREFIX, Cron, Every

__all__ = ["DEFAULTS", "PERIODIC_DEFAULTS", "PeriodicTask", "Task", "Tasks", "registered"]

R = TypeVar("R")

#: The defaults of ``@tasks.task``'s options (see :meth:`Tasks.task`).
DEFAULTS: dict[str, Any] = {
    "retries": 2,
    "backoff": 1.0,
    "lease": 60.0,
    "timeout": None,
    "unique": False,
    "result_expire": 86400.0,
}

#: The defaults of ``@tasks.periodic``'s own options, and of the task options it sets
#: differently (see :meth:`Tasks.periodic`).
PERIODIC_DEFAULTS: dict[str, Any] = {
    "missed": "skip",
    "max_catch_up": 10,
    "result_expire": 3600.0,
}

#: The longest wait between two attempts, whatever the backoff.
MAX_BACKOFF = 600.0

_REDIS_SCHEMES = ("redis", "rediss", "unix")


def registered() -> dict[str, Task[Any]]:
    """The tasks declared in this process, by name (a copy). A name declared twice is the
    later declaration's."""
    return cast("dict[str, Task[Any]]", _registry.declared())


def _seconds_or_none(name: str, value: object) -> float | None:
    return None if value is None else float(seconds(value, name, NONNEGATIVE))  # type: ignore[arg-type]


class Tasks:
    """Tasks on a store: declare them with :meth:`task`, queue them with ``f.delay()``, run
    them with ``diskcache-oxide worker``.

    :param cache_or_url: a :class:`~diskcache_oxide.Cache` (or a RedisCache), or anything
        :func:`diskcache_oxide.open` takes: a directory path, a ``file://`` or ``redis://`` URL.
        A path is opened with ``eviction_policy='none'`` (a store that evicts would lose
        results), on first use, in each process
    :param queue: the queue tasks go to unless they name another
    :param pickle: read and write pickles for values the safe format cannot express (off by
        default, as for the cache; only where every writer is trusted). Applies to a store
        this opens; a Cache given keeps its own setting
    :param strict: on Redis, refuse (``remote.UnsupportedError``) a server whose
        ``maxmemory-policy`` may evict the jobs, results or schedules, instead of one
        ``remote.EvictionWarning`` (issue 29, D-060)

    Arguments and results are stored in the safe format: ``delay()`` refuses what the store
    cannot hold, before anything is queued.
    """

    def __init__(
        self,
        cache_or_url: Any,
        queue: str = "default",
        *,
        pickle: bool = False,
        strict: bool = False,
    ) -> None:
        if not isinstance(queue, str) or not queue or "\0" in queue:
            raise ValueError(f"queue must be a non-empty str without NUL characters, not {queue!r}")
        self._spec = cache_or_url
        self._queue = queue
        self._pickle = bool(pickle)
        self._strict = bool(strict)
        self._lock = threading.Lock()
        self._cache: Any = None
        self._pid = 0
        self._jobs: JobQueue[Any] | None = None
        if not isinstance(cache_or_url, (str, os.PathLike)):
            self._cache = cache_or_url
            self._pickle = bool(getattr(cache_or_url, "pickle", pickle))

    # ---- the store ------------------------------------------------------------------------

    @property
    def queue(self) -> str:
        """The default queue of this app's tasks."""
        return self._queue

    @property
    def pickle(self) -> bool:
        """Whether this app's store reads and writes pickles."""
        return self._pickle

    @property
    def where(self) -> str:
        """The store, as a path or a URL (for messages)."""
        if isinstance(self._spec, (str, os.PathLike)):
            return os.fspath(self._spec)
        return str(getattr(self._spec, "directory", None) or self._spec)

    @property
    def cache(self) -> Any:
        """The store (opened on first use in each process)."""
        with self._lock:
            if self._cache is None or (
                isinstance(self._spec, (str, os.PathLike)) and self._pid != os.getpid()
            ):
                self._cache = open_store(self._spec, pickle=self._pickle)
                self._pid = os.getpid()
                self._jobs = None
            return self._cache

    @property
    def jobs(self) -> JobQueue[Any]:
        """The JobQueue tasks are queued on (the default queue first)."""
        cache = self.cache
        with self._lock:
            if self._jobs is None:
                # Results and tick claims carry a TTL, jobs none: a store that may evict
                # them says so (a Redis server, by its maxmemory-policy: remote._policy).
                if has_store(cache):  # else JobQueue says what it takes
                    store_of(cache).check_eviction("tasks", self._strict)
                self._jobs = JobQueue(cache, self._queue, strict=self._strict)
            return self._jobs

    @property
    def default_result_expire(self) -> float | None:
        """How long results are kept unless a task says otherwise (seconds)."""
        return DEFAULTS["result_expire"]  # type: ignore[no-any-return]

    def totals(self) -> dict[str, TaskTotals]:
        """Every worker's counts by task name, kept in this store (each worker adds its own
        every second and when it stops): runs started, succeeded, failed (on their last
        attempt), retried, and the wait and run time histograms (D-063, point 5). At most
        200 names, this app's own tasks first; entries that hold junk are skipped."""
        own = [task.name for task in registered().values() if task.app is self]
        return read_totals(self.cache, first=own)

    def result(self, task_id: int) -> TaskResult:
        """The :class:`TaskResult` of a task id kept elsewhere (a web request's session).
        An id that is no task's here (one past 64 bits included) gives a result whose
        status is ``unknown`` and whose ``get()`` raises :class:`TaskError`, on every store."""
        if isinstance(task_id, bool) or not isinstance(task_id, int):
            raise TypeError(f"task_id must be an int, not {type(task_id).__name__}")
        return TaskResult(self, task_id)

    def __repr__(self) -> str:
        return f"Tasks({self.where!r}, queue={self._queue!r})"

    # ---- declaring ------------------------------------------------------------------------

    @overload
    def task(self, func: Callable[..., R], /) -> Task[R]: ...

    @overload
    def task(
        self,
        *,
        name: str | None = None,
        retries: int = ...,
        backoff: float | Callable[[int], float] = ...,
        lease: float = ...,
        timeout: float | None = ...,
        unique: bool | Callable[..., str] = ...,
        queue: str | None = None,
        result_expire: float | None = ...,
    ) -> Callable[[Callable[..., R]], Task[R]]: ...

    def task(self, func: Any = None, /, **options: Any) -> Any:  # type: ignore[misc]
        """Declare a task (a plain or an ``async def`` function), as ``@tasks.task`` or
        ``@tasks.task(...)``.

        :param name: its name (default: ``module.qualname``; required for a function of a
            script run by its path)
        :param retries: attempts after the first (default 2, so 3 attempts as a JobQueue's
            jobs); a worker that died, or a task past its timeout, spends one too
        :param backoff: seconds before the first retry, doubled for each further one (at most
            10 minutes), or a function of the attempt number (1, 2, ...) giving the seconds
        :param lease: seconds a worker holds the task without a heartbeat (default 60); the
            worker extends it while the task runs, so it matters only when the worker dies:
            the task comes back after it
        :param timeout: seconds the task may run before the worker ends it (a failed attempt);
            None (default): no limit
        :param unique: True: a call whose task and arguments equal those of a queued or
            running one is not queued again, and ``delay()`` returns the first's result; or a
            function of the call's arguments giving the key
        :param queue: the queue it goes to (default: the app's)
        :param result_expire: seconds its result is kept (default one day; None: until deleted)
        """
        if func is not None:
            if options:
                raise TypeError("use @tasks.task or @tasks.task(option=...), not both")
            return self._declare(func, {})

        def decorate(f: Callable[..., R]) -> Task[R]:
            return self._declare(f, options)

        return decorate

    def periodic(
        self,
        *,
        every: float | datetime.timedelta | None = None,
        cron: str | None = None,
        tz: datetime.tzinfo | str | None = None,
        missed: str = PERIODIC_DEFAULTS["missed"],
        max_catch_up: int = PERIODIC_DEFAULTS["max_catch_up"],
        **options: Any,
    ) -> Callable[[Callable[..., R]], PeriodicTask[R]]:
        """Declare a task that runs on a schedule, as ``@tasks.periodic(every=60)`` or
        ``@tasks.periodic(cron="*/5 * * * *")``; the workers of the store run it.

        Each tick runs once however many workers run: the first worker to see it claims it
        (D-063). A schedule starts with the first tick after a worker first sees it. The
        function takes no arguments, or a ``tick`` keyword that receives the tick's time
        (epoch seconds).

        :param every: seconds (or a timedelta) between ticks; they fall on the multiples of
            the period since the epoch (``every=3600`` ticks on the hour, in UTC)
        :param cron: a five-field cron expression, as ``"0 9 * * mon-fri"``; needs the
            ``cron`` extra (``pip install 'diskcache-oxide[cron]'``, for cronsim)
        :param tz: the time zone of ``cron`` (a tzinfo or a name as ``"Europe/Paris"``;
            default UTC)
        :param missed: ticks missed while no worker ran: ``"skip"`` (default: counted in
            :attr:`PeriodicTask.missed_count`, not run) or ``"catch_up"`` (run, the most
            recent ``max_catch_up`` of them; older ones are counted). The tick due when a
            worker comes back runs either way
        :param max_catch_up: the most missed ticks ``"catch_up"`` runs (default 10)
        :param options: those of :meth:`task` (``result_expire`` defaults to an hour here)
        """
        options.setdefault("result_expire", PERIODIC_DEFAULTS["result_expire"])
        if "unique" in options:
            raise TypeError("@tasks.periodic takes no unique=: each tick is unique already")

        schedule = make_schedule(every, cron, tz)  # a bad one fails where it is written

        def decorate(f: Callable[..., R]) -> PeriodicTask[R]:
            made = self._declare(
                f,
                options,
                PeriodicTask,
                schedule=schedule,
                missed=missed,
                max_catch_up=max_catch_up,
            )
            return made  # type: ignore[return-value]

        return decorate

    def _declare(
        self,
        func: Callable[..., Any],
        options: dict[str, Any],
        kind: type[Task[Any]] | None = None,
        **extra: Any,
    ) -> Task[Any]:
        if not callable(func):
            raise TypeError(f"@tasks.task needs a function, not {type(func).__name__}")
        known = {"name", "queue", *DEFAULTS}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"@tasks.task got unknown options {unknown}; it takes {sorted(known)}")
        made = (kind or Task)(self, func, **options, **extra)
        _registry.declare(made.name, made)
        return made


def open_store(spec: Any, *, pickle: bool = False) -> Any:
    """A store for a path or URL, as :func:`diskcache_oxide.open`, with
    ``eviction_policy='none'`` for a directory."""
    from .._open import open as open_any

    text = os.fspath(spec) if isinstance(spec, os.PathLike) else spec
    settings: dict[str, Any] = {"pickle": True} if pickle else {}
    if isinstance(text, str) and urlsplit(text).scheme.lower() in _REDIS_SCHEMES:
        return open_any(text, **settings)
    if isinstance(text, str):
        return open_any(text, eviction_policy="none", **settings)
    return open_any(spec, **settings)


class Task(Generic[R]):
    """A function declared with ``@tasks.task``. Calling it runs it here and now;
    :meth:`delay` and :meth:`schedule` queue it for a worker."""

    def __init__(
        self,
        app: Tasks,
        func: Callable[..., R],
        *,
        name: str | None = None,
        retries: int = DEFAULTS["retries"],
        backoff: float | Callable[[int], float] = DEFAULTS["backoff"],
        lease: float = DEFAULTS["lease"],
        timeout: float | None = DEFAULTS["timeout"],
        unique: bool | Callable[..., str] = DEFAULTS["unique"],
        queue: str | None = None,
        result_expire: float | None = DEFAULTS["result_expire"],
    ) -> None:
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be an int >= 0, not {retries!r}")
        if not callable(backoff):
            backoff = float(seconds(backoff, "backoff", NONNEGATIVE))
        if not (isinstance(unique, bool) or callable(unique)):
            raise TypeError(f"unique must be a bool or a function, not {type(unique).__name__}")
        if queue is not None and (not isinstance(queue, str) or not queue or "\0" in queue):
            raise ValueError(f"queue must be a non-empty str without NUL characters, not {queue!r}")
        lease_s = float(seconds(lease, "lease", NONNEGATIVE))
        if lease_s <= 0:
            raise ValueError(f"lease must be > 0 seconds, not {lease!r}")
        self.app = app
        self.func = func
        self.name = task_name(func, name)
        self.retries = retries
        self.backoff = backoff
        self.lease = lease_s
        self.timeout = _seconds_or_none("timeout", timeout)
        self.unique = unique
        self.queue = queue if queue is not None else app.queue
        self.result_expire = _seconds_or_none("result_expire", result_expire)
        self.is_async = inspect.iscoroutinefunction(func)
        functools.update_wrapper(self, func)

    def __repr__(self) -> str:
        return f"<Task {self.name} queue={self.queue!r}>"

    def __call__(self, *args: Any, **kwargs: Any) -> R:
        """Run the function here and now (for an ``async def`` task: the coroutine)."""
        return self.func(*args, **kwargs)

    @property
    def max_attempts(self) -> int:
        """Attempts in all: ``retries + 1``."""
        return self.retries + 1

    def retry_in(self, attempt: int) -> float:
        """Seconds before the retry that follows failed attempt number ``attempt`` (1, 2...)."""
        if callable(self.backoff):
            return max(0.0, float(self.backoff(attempt)))
        return float(min(MAX_BACKOFF, self.backoff * 2 ** max(0, attempt - 1)))

    def unique_key(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        """The JobQueue unique key of a call (None when the task is not unique)."""
        if self.unique is False:
            return None
        if self.unique is True:
            # repr of the arguments, keywords sorted: the same call gives the same key in any
            # process (values of types whose repr varies need unique=a function).
            return f"{self.name}:{args!r}:{sorted(kwargs.items())!r}"
        key = self.unique(*args, **kwargs)
        if not isinstance(key, str):
            raise TypeError(f"unique= of {self.name} must return a str, not {type(key).__name__}")
        return f"{self.name}:{key}"

    def delay(self, *args: Any, **kwargs: Any) -> TaskResult:
        """Queue ``f(*args, **kwargs)`` for a worker; returns its :class:`TaskResult`.

        :raises UnsupportedTypeError: an argument the store cannot hold (nothing is queued)
        """
        return self._put(args, kwargs, 0.0)

    def schedule(
        self,
        args: tuple[Any, ...] | list[Any] = (),
        kwargs: dict[str, Any] | None = None,
        *,
        delay: float | datetime.timedelta | None = None,
        eta: datetime.datetime | float | None = None,
    ) -> TaskResult:
        """Queue the call to run no sooner than ``delay`` seconds from now, or than ``eta`` (a
        datetime, naive meaning local time, or epoch seconds); one of the two."""
        if (delay is None) == (eta is None):
            raise TypeError("schedule() takes one of delay= and eta=")
        if delay is not None:
            if isinstance(delay, datetime.timedelta):
                delay = delay.total_seconds()
            wait = float(seconds(delay, "delay", NONNEGATIVE))
        else:
            at = eta.timestamp() if isinstance(eta, datetime.datetime) else eta
            if isinstance(at, bool) or not isinstance(at, (int, float)):
                raise TypeError(
                    f"eta must be a datetime or epoch seconds, not {type(eta).__name__}"
                )
            wait = max(0.0, float(at) - time.time())
        if not isinstance(args, (tuple, list)):
            raise TypeError(f"args must be a tuple or a list, not {type(args).__name__}")
        return self._put(tuple(args), dict(kwargs or {}), wait)

    def _put(self, args: tuple[Any, ...], kwargs: dict[str, Any], wait: float) -> TaskResult:
        try:
            job_id = self.app.jobs.put(
                make_call(self.name, args, kwargs),
                queue=self.queue,
                delay=wait,
                unique=self.unique_key(args, kwargs),
                max_attempts=self.max_attempts,
            )
        except UnsupportedTypeError as error:
            raise UnsupportedTypeError(
                f"{self.name}: an argument cannot be stored, so the task was not queued: {error}"
            ) from error
        return TaskResult(self.app, job_id)


def make_schedule(
    every: float | datetime.timedelta | None,
    cron: str | None,
    tz: datetime.tzinfo | str | None,
) -> Every | Cron:
    """The schedule of ``@tasks.periodic``: one of ``every=`` and ``cron=``."""
    if (every is None) == (cron is None):
        raise TypeError("@tasks.periodic takes one of every= (seconds) and cron= (an expression)")
    if every is not None:
        if tz is not None:
            raise TypeError("tz= goes with cron=; every= ticks on multiples of its period")
        if isinstance(every, datetime.timedelta):
            every = every.total_seconds()
        return Every(float(seconds(every, "every", NONNEGATIVE)))
    return Cron(cron, tz)  # type: ignore[arg-type]


class PeriodicTask(Task[R]):
    """A task declared with ``@tasks.periodic``: a :class:`Task` (``delay()`` still queues an
    extra run) with a schedule the workers keep."""

    def __init__(
        self,
        app: Tasks,
        func: Callable[..., R],
        *,
        schedule: Every | Cron,
        missed: str = PERIODIC_DEFAULTS["missed"],
        max_catch_up: int = PERIODIC_DEFAULTS["max_catch_up"],
        **options: Any,
    ) -> None:
        if missed not in MISSED:
            raise ValueError(f"missed= must be one of {MISSED}, not {missed!r}")
        if isinstance(max_catch_up, bool) or not isinstance(max_catch_up, int) or max_catch_up < 0:
            raise ValueError(f"max_catch_up must be an int >= 0, not {max_catch_up!r}")
        super().__init__(app, func, **options)
        #: the ticks: an Every or a Cron (not `schedule`, which queues one call later)
        self.cadence = schedule
        self.missed = missed
        self.max_catch_up = max_catch_up
        try:
            parameters = inspect.signature(func).parameters
        except (TypeError, ValueError):
            parameters = {}  # type: ignore[assignment]
        self.takes_tick = "tick" in parameters
        required = [
            p.name
            for p in parameters.values()
            if p.default is p.empty
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            and p.name != "tick"
        ]
        if required:
            raise TypeError(
                f"a periodic task is called with no arguments (or tick=), but {self.name} "
                f"requires {required}: give them defaults"
            )

    def __repr__(self) -> str:
        return f"<PeriodicTask {self.name} {self.cadence!r} queue={self.queue!r}>"

    @property
    def last_tick(self) -> float | None:
        """The time (epoch seconds) of the last tick the workers settled, or None before a
        worker has seen the schedule."""
        state = self.app.cache.get(STATE_PREFIX + self.name)
        last = state.get("last") if isinstance(state, dict) else None
        if isinstance(last, bool) or not isinstance(last, (int, float)):
            return None
        return float(last) if math.isfinite(last) else None  # junk: the next tick replaces it

    @property
    def missed_count(self) -> int:
        """How many ticks were missed while no worker ran and not run (skipped, or beyond
        ``max_catch_up``)."""
        count = self.app.cache.get(STATE_PREFIX + self.name + ".missed", 0)
        return count if type(count) is int else 0  # junk: the next missed tick replaces it
