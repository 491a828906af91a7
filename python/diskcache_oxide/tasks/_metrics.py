"""The tasks' metrics (D-063, point 5): counts by task name kept in the store, and their
Prometheus exposition.

Every outcome of a task is seen by the worker's supervising process (``Worker.begin`` and
``Worker.settle``; a process pool's children only run bodies), so a worker counts in its own
memory, with no multiprocess mode. A :class:`Recorder` keeps two things:

- the worker's own Prometheus counters and histograms (a registry of its own), which
  ``--metrics-port`` serves: what this worker did since it started, as Prometheus expects of
  one target among several;
- the deltas since its last flush, which a thread adds to the store every :data:`FLUSH`
  seconds (and once more when the worker stops) with ``cache.incr``: atomic on a directory
  and on Redis, so any number of workers add to the same totals, which outlive them and which
  the dashboard reads from any process (:func:`read_totals`, :class:`StoreCollector`).

The totals of a task name are read from keys built from its name, never found by listing the
store: the names live in a registry, one key (:data:`NAMES_KEY`, at most :data:`NAME_LIMIT`
names, the worker's own tasks first), which each worker checks at each flush. A read reports
at most :data:`NAME_LIMIT` names and counts the rest; an entry it cannot read (junk written
by hand, a value of the wrong type) is skipped and counted, never an error (issue 29).

The store's counting needs nothing installed; the exposition needs ``prometheus-client``, the
``metrics`` extra, and raises an ImportError naming it when asked for without it.
"""

from __future__ import annotations

import logging
import math
import socket
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import DecodeError
from ._registry import declared

__all__ = [
    "BUCKETS",
    "COUNTERS",
    "FLUSH",
    "HISTOGRAMS",
    "PREFIX",
    "Recorder",
    "NAMES_KEY",
    "NAME_LIMIT",
    "Report",
    "StoreCollector",
    "TaskTotals",
    "queue_depths",
    "read_report",
    "read_totals",
    "require_prometheus",
]

_log = logging.getLogger("diskcache_oxide.tasks")

#: Where the totals live in the store: ``PREFIX + "<metric>:<task name>"`` (an int), and for
#: the histograms ``PREFIX + "<metric>.bucket.<i>:<task name>"`` (the observations in bucket
#: i, not cumulative), ``PREFIX + "<metric>.sum_us:<task name>"`` (microseconds) and
#: ``PREFIX + "<metric>.count:<task name>"`` (observations, so that a mean needs no bucket).
PREFIX = "diskcache_oxide.tasks.metrics."
#: The counters, by task name: runs begun; succeeded; failed on their last attempt (dead);
#: failed with attempts left (to run again after the backoff).
COUNTERS = ("started", "succeeded", "failed", "retried")
#: The histograms, by task name: from ``delay()`` to the first start; one run, start to end.
HISTOGRAMS = ("wait", "run")
#: Upper bounds of the histograms' buckets, in seconds (then +Inf).
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
#: Seconds between a worker's flushes of its counts to the store.
FLUSH = 1.0
#: The last failure of each task name: ``PREFIX + "last_failure:<task name>"``.
LAST_FAILURE = "last_failure"
#: The registry of the task names whose totals the store keeps: ``{"names": [str, ...]}``,
#: written by the workers (each puts its own tasks first). Reading the totals reads it and
#: the keys of its names, never a listing of the store (which, on Redis, read every key of
#: the namespace).
NAMES_KEY = PREFIX + "names"
#: How many names were turned out of the registry to keep it within :data:`NAME_LIMIT` (an
#: int, ``incr``).
DROPPED_KEY = PREFIX + "names.dropped"
#: The most task names the registry keeps and a read reports: a store written by someone
#: else with 10,000 names would otherwise make each scrape megabytes (issue 29). The names
#: past it are counted (:attr:`Report.unreported`).
NAME_LIMIT = 200
#: The longest task name the registry keeps (a longer one is junk, counted as bad).
NAME_LENGTH = 1000
#: How many keys one ``get_many`` asks for.
READ_BATCH = 1000
#: The most job queues ``/metrics`` reports depths for; the rest are counted.
QUEUE_LIMIT = 200

_HELP = {
    "started": "Task runs begun (each attempt).",
    "succeeded": "Task runs that returned.",
    "failed": "Task runs that failed on their last attempt (the job is dead).",
    "retried": "Task runs that failed with attempts left (the job runs again).",
    "wait": "Seconds from delay() to a task's first start (a schedule's delay included).",
    "run": "Seconds a task run took, start to end.",
}
EXTRA = "pip install 'diskcache_oxide[metrics]'"


def require_prometheus() -> Any:
    """The ``prometheus_client`` module, or an ImportError that says which extra brings it."""
    try:
        import prometheus_client
        import prometheus_client.core  # the metric families of collectors
    except ImportError:
        raise ImportError(
            f"the tasks' metrics need prometheus-client, the metrics extra: {EXTRA}"
        ) from None
    return prometheus_client


def _name(metric: str) -> str:
    if metric in HISTOGRAMS:
        return f"diskcache_oxide_task_{metric}_seconds"
    return f"diskcache_oxide_tasks_{metric}"  # the client adds _total to counters


def _bucket(seconds: float) -> int:
    for i, bound in enumerate(BUCKETS):
        if seconds <= bound:
            return i
    return len(BUCKETS)


@dataclass
class _Pending:
    counts: dict[str, int] = field(default_factory=dict)
    failures: dict[str, dict[str, Any]] = field(default_factory=dict)


def valid_name(name: object) -> bool:
    """Whether ``name`` can be a task name in the registry (a str of at most
    :data:`NAME_LENGTH` characters, without NUL)."""
    return isinstance(name, str) and 0 < len(name) <= NAME_LENGTH and "\0" not in name


def registry_names(value: object) -> tuple[list[str], int]:
    """The names a stored registry holds, in its order without repeats, and how many of its
    entries are junk (a registry that is not ``{"names": [...]}`` is one)."""
    if value is None:
        return [], 0
    names = value.get("names") if isinstance(value, dict) else None
    if not isinstance(names, list):
        return [], 1
    good = [name for name in names if valid_name(name)]
    return list(dict.fromkeys(good)), len(names) - len(good)


class Recorder:
    """A worker's counts: its own Prometheus metrics, and the deltas it adds to the store.

    :param names: the worker's own task names, put first in the store's registry (default:
        the tasks declared in this process, :func:`~diskcache_oxide.tasks.registered`); a
        name counted that is not among them joins them
    """

    def __init__(self, cache: Any, *, prometheus: bool, names: Iterable[str] | None = None) -> None:
        if names is None:
            names = sorted(declared())
        self.cache = cache
        self.lock = threading.Lock()
        self.pending = _Pending()
        #: this worker's task names, in the order the registry gets them
        self.names: dict[str, None] = dict.fromkeys(n for n in names if valid_name(n))
        #: the names the registry held at the last check (None: not checked yet)
        self.listed: frozenset[str] | None = None
        #: the keys found holding junk and replaced, logged once each
        self.replaced: set[str] = set()
        self.registry: Any = None
        self.metrics: dict[str, Any] = {}
        if prometheus:
            client = require_prometheus()
            self.registry = client.CollectorRegistry()
            for metric in COUNTERS:
                self.metrics[metric] = client.Counter(
                    _name(metric), _HELP[metric], ["task"], registry=self.registry
                )
            for metric in HISTOGRAMS:
                self.metrics[metric] = client.Histogram(
                    _name(metric), _HELP[metric], ["task"], buckets=BUCKETS, registry=self.registry
                )

    def _add(self, key: str, delta: int = 1) -> None:
        self.pending.counts[key] = self.pending.counts.get(key, 0) + delta

    def _name(self, task: str) -> None:
        if task not in self.names and valid_name(task):
            self.names[task] = None

    def count(self, metric: str, task: str) -> None:
        """One more of ``metric`` (:data:`COUNTERS`) for ``task``."""
        with self.lock:
            self._name(task)
            self._add(f"{metric}:{task}")
        if self.metrics:
            self.metrics[metric].labels(task).inc()

    def observe(self, metric: str, task: str, seconds: float) -> None:
        """One observation of ``metric`` (:data:`HISTOGRAMS`) for ``task``."""
        seconds = max(0.0, seconds)
        with self.lock:
            self._name(task)
            self._add(f"{metric}.bucket.{_bucket(seconds)}:{task}")
            self._add(f"{metric}.sum_us:{task}", round(seconds * 1e6))
            self._add(f"{metric}.count:{task}")
        if self.metrics:
            self.metrics[metric].labels(task).observe(seconds)

    def failure(self, task: str, job_id: int, attempt: int, error: str, final: bool) -> None:
        """Remember ``task``'s latest failure, for the dashboard."""
        record = {"time": time.time(), "id": job_id, "attempt": attempt, "error": error}
        with self.lock:
            self._name(task)
            self.pending.failures[task] = {**record, "final": final}

    def register(self) -> None:
        """Make sure the store's registry lists this worker's names: one ``get`` when it
        does. Otherwise the registry is written again with this worker's names first and the
        others after them, up to :data:`NAME_LIMIT` (those turned out are counted under
        :data:`DROPPED_KEY`), then read back, since two workers may write it at once (the
        cache has no compare-and-set): whichever lost finds its names missing and writes
        again, here or at its next flush."""
        with self.lock:
            own = list(self.names)[:NAME_LIMIT]
        for _ in range(3):
            try:
                stored = self.cache.get(NAMES_KEY)
            except DecodeError:
                stored = {}  # undecodable: replaced like any other junk
            names, junk = registry_names(stored)
            if junk == 0 and set(own) <= set(names):
                self.listed = frozenset(names)
                return
            if junk:
                _log.warning(
                    "the tasks' registry of names (%s) held %d entr%s that are not task "
                    "names; it is written again",
                    NAMES_KEY,
                    junk,
                    "y" if junk == 1 else "ies",
                )
            others = [name for name in names if name not in set(own)]
            kept = others[: max(0, NAME_LIMIT - len(own))]
            self.cache.set(NAMES_KEY, {"names": own + kept})
            dropped = len(others) - len(kept)
            if dropped:
                self.cache.incr(DROPPED_KEY, dropped)
                _log.warning(
                    "the tasks' registry holds at most %d names: %d other name(s) turned out "
                    "for this worker's own (their totals stay in the store, unreported)",
                    NAME_LIMIT,
                    dropped,
                )

    def _incr(self, key: str, delta: int) -> None:
        try:
            self.cache.incr(key, delta)
        except (TypeError, DecodeError):
            # Junk under a counter's key (a str, a float, a value this process cannot
            # decode): replaced, so that one bad key does not stop every later flush.
            if key not in self.replaced:
                self.replaced.add(key)
                _log.warning("the tasks' metric %s held junk; it is replaced", ascii(key))
            self.cache.set(key, delta)

    def flush(self) -> None:
        """Add the deltas since the last flush to the store. On a failing store the deltas
        not yet written are kept for the next flush (each incr is one key, so those written
        are not added again; one whose answer was lost, on Redis, may be)."""
        with self.lock:
            pending, self.pending = self.pending, _Pending()
        done: set[str] = set()
        try:
            self.register()
            for key, delta in pending.counts.items():
                self._incr(PREFIX + key, delta)
                done.add(key)
            for task, record in pending.failures.items():
                self.cache.set(f"{PREFIX}{LAST_FAILURE}:{task}", record)
        except Exception:
            _log.exception("the tasks' metrics could not be written to the store; will retry")
            with self.lock:
                for key, delta in pending.counts.items():
                    if key not in done:
                        self._add(key, delta)
                for task, record in pending.failures.items():
                    self.pending.failures.setdefault(task, record)

    def loop(self, stop: threading.Event) -> None:
        """Flush every :data:`FLUSH` seconds until ``stop`` is set (the caller flushes once
        more when it stops)."""
        while not stop.wait(FLUSH):
            self.flush()


@dataclass
class TaskTotals:
    """A task name's totals in the store."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    buckets: dict[str, list[int]] = field(
        default_factory=lambda: {m: [0] * (len(BUCKETS) + 1) for m in HISTOGRAMS}
    )
    sums: dict[str, float] = field(default_factory=lambda: dict.fromkeys(HISTOGRAMS, 0.0))
    observed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(HISTOGRAMS, 0))
    last_failure: dict[str, Any] | None = None


@dataclass
class Report:
    """What one read of the store's totals found.

    ``totals``: by task name, at most :data:`NAME_LIMIT` of them; ``unreported``: the names
    not read (past the limit, or turned out of the registry when it was full); ``bad``: the
    entries skipped because they held something a total cannot be (junk written by hand)."""

    totals: dict[str, TaskTotals] = field(default_factory=dict)
    unreported: int = 0
    bad: int = 0


def _keys_of(task: str, buckets: bool) -> list[str]:
    keys = [f"{PREFIX}{metric}:{task}" for metric in COUNTERS]
    for metric in HISTOGRAMS:
        keys.append(f"{PREFIX}{metric}.sum_us:{task}")
        keys.append(f"{PREFIX}{metric}.count:{task}")
        if buckets:
            keys.extend(f"{PREFIX}{metric}.bucket.{i}:{task}" for i in range(len(BUCKETS) + 1))
    keys.append(f"{PREFIX}{LAST_FAILURE}:{task}")
    return keys


_BAD = object()  # an entry that could not be decoded


def _read_many(cache: Any, keys: list[str]) -> list[Any]:
    """The values of ``keys`` (None where absent, :data:`_BAD` where undecodable), in batches
    of :data:`READ_BATCH`; a batch that one undecodable value fails is read key by key."""
    out: list[Any] = []
    for start in range(0, len(keys), READ_BATCH):
        batch = keys[start : start + READ_BATCH]
        try:
            out.extend(cache.get_many(batch))
            continue
        except DecodeError:
            pass
        for key in batch:
            try:
                out.append(cache.get(key))
            except DecodeError:
                out.append(_BAD)
    return out


def _count(value: Any) -> int | None:
    # A total is a non-negative int; a bool, a float, a str... is junk.
    if type(value) is int and value >= 0:
        return value
    return None


def failure_shown(value: Any) -> dict[str, Any] | None:
    """A last failure as stored, checked field by field (None if it is not one): the time a
    finite number, the id and attempt ints, the error a str of at most 300 characters, final
    a bool; so that whatever was written there, the dashboard's JSON is made of those."""
    if not isinstance(value, dict):
        return None
    when, job_id, attempt = value.get("time"), value.get("id"), value.get("attempt")
    if isinstance(when, bool) or not isinstance(when, (int, float)) or not math.isfinite(when):
        return None
    if type(job_id) is not int or type(attempt) is not int:
        return None
    error = value.get("error", "")
    return {
        "time": float(when),
        "id": job_id,
        "attempt": attempt,
        "error": (error if isinstance(error, str) else "")[:300],
        "final": value.get("final") is True,
    }


def read_report(
    cache: Any,
    *,
    buckets: bool = True,
    first: Iterable[str] = (),
    limit: int = NAME_LIMIT,
) -> Report:
    """The totals of the task names in the store's registry (directory or Redis): at most
    ``limit`` names, ``first`` first (a process's own tasks), then the registry's in order;
    the rest counted, and entries that are junk skipped and counted (:class:`Report`).

    Reads the registry and the keys its names make (one ``get_many`` per
    :data:`READ_BATCH`), never a listing of the store.

    :param buckets: read the histograms' buckets too (False: counts, sums and failures only,
        what the dashboard's section needs)
    """
    report = Report()
    stored, dropped = _read_many(cache, [NAMES_KEY, DROPPED_KEY])
    names, report.bad = registry_names(None if stored is _BAD else stored)
    report.bad += stored is _BAD
    if dropped is not None:
        if _count(dropped) is None:
            report.bad += 1
        else:
            report.unreported += dropped
    ordered = list(dict.fromkeys([*(n for n in first if valid_name(n)), *names]))
    chosen = ordered[:limit]
    report.unreported += len(ordered) - len(chosen)
    per_name = [_keys_of(task, buckets) for task in chosen]
    values = iter(_read_many(cache, [key for keys in per_name for key in keys]))
    for task, keys in zip(chosen, per_name, strict=True):
        entry, found = TaskTotals(), False
        for key in keys:
            value = next(values)
            if value is None:
                continue
            metric = key[len(PREFIX) :].partition(":")[0]
            if metric == LAST_FAILURE:
                entry.last_failure = failure_shown(value)
                found = True
                report.bad += entry.last_failure is None
                continue
            number = None if value is _BAD else _count(value)
            if number is None:
                report.bad += 1
                continue
            found = True
            base, _, part = metric.partition(".")
            if metric in COUNTERS:
                entry.counts[metric] = number
            elif part == "sum_us":
                entry.sums[base] = number / 1e6
            elif part == "count":
                entry.observed[base] = number
            else:
                entry.buckets[base][int(part.removeprefix("bucket."))] = number
        if found:
            report.totals[task] = entry
    return report


def read_totals(
    cache: Any, *, buckets: bool = True, first: Iterable[str] = ()
) -> dict[str, TaskTotals]:
    """The totals of the task names in the store (directory or Redis), by name: those of
    :func:`read_report`, at most :data:`NAME_LIMIT` names, ``first`` first.

    :param buckets: read the histograms' buckets too (False: counts, sums and failures only,
        a sixth of the reads, what the dashboard's section needs)
    """
    return read_report(cache, buckets=buckets, first=first).totals


def queue_depths(cache: Any, queues: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
    """Jobs by state (ready, scheduled, leased, dead) of ``queues`` (default: the first
    :data:`QUEUE_LIMIT` job queues in the store, by name)."""
    from .. import admin

    names = admin.job_queues(cache, limit=QUEUE_LIMIT) if queues is None else list(queues)
    return {name: admin.job_counts(cache, name)._asdict() for name in names}


def _depth_family(client: Any, depths: dict[str, dict[str, int]]) -> Any:
    family = client.core.GaugeMetricFamily(
        "diskcache_oxide_jobs",
        "Jobs of each job queue by state (ready, scheduled, leased, dead), read at the scrape.",
        labels=["queue", "state"],
    )
    for queue, counts in sorted(depths.items()):
        for state, count in counts.items():
            family.add_metric([queue, state], count)
    return family


class StoreCollector:
    """A Prometheus collector of the store's totals (every worker's, since the store was
    made) and of the job queues' depths, read at each scrape: what the dashboard serves.
    At most :data:`NAME_LIMIT` task names and :data:`QUEUE_LIMIT` job queues; the names not
    reported and the entries skipped as junk are gauges of their own."""

    def __init__(self, cache: Any, queues: Sequence[str] | None = None, totals: bool = True):
        self.client = require_prometheus()
        self.cache = cache
        self.queues = queues
        self.totals = totals

    def collect(self) -> Iterator[Any]:
        """The metric families (called by the registry at each scrape)."""
        core = self.client.core
        if self.totals:
            report = read_report(self.cache)
            totals = report.totals
            for metric in COUNTERS:
                counter = core.CounterMetricFamily(_name(metric), _HELP[metric], labels=["task"])
                for task, entry in sorted(totals.items()):
                    counter.add_metric([task], entry.counts[metric])
                yield counter
            for metric in HISTOGRAMS:
                histogram = core.HistogramMetricFamily(
                    _name(metric), _HELP[metric], labels=["task"]
                )
                for task, entry in sorted(totals.items()):
                    running, cumulative = 0, []
                    for bound, count in zip(
                        [*BUCKETS, math.inf], entry.buckets[metric], strict=True
                    ):
                        running += count
                        cumulative.append((_bound_text(bound), running))
                    histogram.add_metric([task], cumulative, entry.sums[metric])
                yield histogram
            yield core.GaugeMetricFamily(
                "diskcache_oxide_tasks_unreported_names",
                f"Task names whose totals are not reported here (past the limit of "
                f"{NAME_LIMIT}, or turned out of the store's registry).",
                value=report.unreported,
            )
            yield core.GaugeMetricFamily(
                "diskcache_oxide_tasks_bad_entries",
                "Entries of the tasks' metrics in the store that hold something a total "
                "cannot be (skipped).",
                value=report.bad,
            )
        from .. import admin

        if self.queues is None:
            every = admin.job_queues(self.cache)
            depths = queue_depths(self.cache, every[:QUEUE_LIMIT])
            yield core.GaugeMetricFamily(
                "diskcache_oxide_jobs_unreported_queues",
                f"Job queues whose depths are not reported here (past the limit of {QUEUE_LIMIT}).",
                value=max(0, len(every) - QUEUE_LIMIT),
            )
        else:
            depths = queue_depths(self.cache, self.queues)
        yield _depth_family(self.client, depths)


def _bound_text(bound: float) -> str:
    return "+Inf" if bound == math.inf else repr(bound)


class DepthCollector(StoreCollector):
    """The depths of a worker's queues alone (its counts are its own registry's)."""

    def __init__(self, cache: Any, queues: Sequence[str]):
        super().__init__(cache, queues, totals=False)


def host_of(header: str) -> str:
    """The host name of a Host header, without its port (``[::1]:9000`` gives ``[::1]``)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[: header.find("]") + 1] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def host_checked(app: Any, allowed: Sequence[str]) -> Any:
    """A WSGI app answering 400 to a request whose Host is not one of ``allowed`` (``*``:
    any), as the dashboard does: a page that a DNS rebinding points at this port reaches
    it under its own name, which is refused, so it reads no task or queue name."""
    names = {name.lower() for name in allowed}

    def checked(environ: dict[str, Any], start_response: Any) -> Any:
        if "*" not in names and host_of(environ.get("HTTP_HOST", "")) not in names:
            start_response("400 Bad Request", [("Content-Type", "text/plain; charset=utf-8")])
            return [b"Invalid host header\n"]
        return app(environ, start_response)

    return checked


def serve_worker_metrics(recorder: Recorder, queues: Sequence[str], host: str, port: int) -> int:
    """Serve the worker's ``/metrics`` on ``host:port`` (a daemon thread); returns the port
    bound (``port`` 0: a free one). It answers only to the Host names of ``host`` (as the
    dashboard: ``allowed_hosts``), and warns in the log when
    ``host`` is reachable from other machines."""
    from wsgiref.simple_server import make_server

    from prometheus_client import exposition as served

    from .._hosts import allowed_hosts, is_loopback

    client = require_prometheus()
    recorder.registry.register(DepthCollector(recorder.cache, queues))
    app = host_checked(client.make_wsgi_app(recorder.registry), allowed_hosts(host))

    class Server(served.ThreadingWSGIServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    server = make_server(host.strip("[]"), port, app, Server, handler_class=served._SilentHandler)
    threading.Thread(target=server.serve_forever, daemon=True, name="metrics-http").start()
    if not is_loopback(host):
        _log.warning(
            "--metrics-host %s is reachable from other machines, and the metrics (task and "
            "queue names) have no login",
            ascii(host),
        )
    return int(server.server_port)


def exposition(cache: Any) -> tuple[bytes, str]:
    """The store's metrics in Prometheus's text format, and its content type (the
    dashboard's ``/metrics``)."""
    client = require_prometheus()
    registry = client.CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(cache))
    return client.generate_latest(registry), client.CONTENT_TYPE_LATEST
