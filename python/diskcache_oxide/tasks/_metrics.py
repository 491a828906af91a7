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

The store's counting needs nothing installed; the exposition needs ``prometheus-client``, the
``metrics`` extra, and raises an ImportError naming it when asked for without it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BUCKETS",
    "COUNTERS",
    "FLUSH",
    "HISTOGRAMS",
    "PREFIX",
    "Recorder",
    "StoreCollector",
    "TaskTotals",
    "queue_depths",
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


class Recorder:
    """A worker's counts: its own Prometheus metrics, and the deltas it adds to the store."""

    def __init__(self, cache: Any, *, prometheus: bool) -> None:
        self.cache = cache
        self.lock = threading.Lock()
        self.pending = _Pending()
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

    def count(self, metric: str, task: str) -> None:
        """One more of ``metric`` (:data:`COUNTERS`) for ``task``."""
        with self.lock:
            self._add(f"{metric}:{task}")
        if self.metrics:
            self.metrics[metric].labels(task).inc()

    def observe(self, metric: str, task: str, seconds: float) -> None:
        """One observation of ``metric`` (:data:`HISTOGRAMS`) for ``task``."""
        seconds = max(0.0, seconds)
        with self.lock:
            self._add(f"{metric}.bucket.{_bucket(seconds)}:{task}")
            self._add(f"{metric}.sum_us:{task}", round(seconds * 1e6))
            self._add(f"{metric}.count:{task}")
        if self.metrics:
            self.metrics[metric].labels(task).observe(seconds)

    def failure(self, task: str, job_id: int, attempt: int, error: str, final: bool) -> None:
        """Remember ``task``'s latest failure, for the dashboard."""
        record = {"time": time.time(), "id": job_id, "attempt": attempt, "error": error}
        with self.lock:
            self.pending.failures[task] = {**record, "final": final}

    def flush(self) -> None:
        """Add the deltas since the last flush to the store. On a failing store the deltas
        not yet written are kept for the next flush (each incr is one key, so those written
        are not added again; one whose answer was lost, on Redis, may be)."""
        with self.lock:
            pending, self.pending = self.pending, _Pending()
        done: set[str] = set()
        try:
            for key, delta in pending.counts.items():
                self.cache.incr(PREFIX + key, delta)
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


def _store_keys(cache: Any) -> Iterator[str]:
    from .. import admin

    for key in admin.keys(cache, prefix=PREFIX, limit=None):
        if isinstance(key, str):
            yield key


def read_totals(cache: Any, *, buckets: bool = True) -> dict[str, TaskTotals]:
    """The totals of every task name in the store (directory or Redis), by name.

    :param buckets: read the histograms' buckets too (False: counts, sums and failures only,
        a sixth of the reads, what the dashboard's section needs)
    """
    totals: dict[str, TaskTotals] = {}
    for key in _store_keys(cache):
        metric, sep, task = key[len(PREFIX) :].partition(":")
        if not sep or (not buckets and ".bucket." in metric):
            continue
        value = cache.get(key)
        if value is None:
            continue
        entry = totals.setdefault(task, TaskTotals())
        if metric == LAST_FAILURE:
            entry.last_failure = value if isinstance(value, dict) else None
            continue
        if not isinstance(value, int):
            continue
        if metric in COUNTERS:
            entry.counts[metric] = value
            continue
        base, _, part = metric.partition(".")
        if base not in HISTOGRAMS:
            continue
        if part == "sum_us":
            entry.sums[base] = value / 1e6
        elif part == "count":
            entry.observed[base] = value
        elif part.startswith("bucket."):
            index = int(part.removeprefix("bucket."))
            if 0 <= index <= len(BUCKETS):
                entry.buckets[base][index] = value
    return totals


def queue_depths(cache: Any, queues: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
    """Jobs by state (ready, scheduled, leased, dead) of ``queues`` (default: every job
    queue in the store)."""
    from .. import admin

    names = admin.job_queues(cache) if queues is None else list(queues)
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
    made) and of the job queues' depths, read at each scrape: what the dashboard serves."""

    def __init__(self, cache: Any, queues: Sequence[str] | None = None, totals: bool = True):
        self.client = require_prometheus()
        self.cache = cache
        self.queues = queues
        self.totals = totals

    def collect(self) -> Iterator[Any]:
        """The metric families (called by the registry at each scrape)."""
        core = self.client.core
        if self.totals:
            totals = read_totals(self.cache)
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
        yield _depth_family(self.client, queue_depths(self.cache, self.queues))


def _bound_text(bound: float) -> str:
    return "+Inf" if bound == math.inf else repr(bound)


class DepthCollector(StoreCollector):
    """The depths of a worker's queues alone (its counts are its own registry's)."""

    def __init__(self, cache: Any, queues: Sequence[str]):
        super().__init__(cache, queues, totals=False)


def serve_worker_metrics(recorder: Recorder, queues: Sequence[str], host: str, port: int) -> int:
    """Serve the worker's ``/metrics`` on ``host:port`` (a daemon thread); returns the port
    bound (``port`` 0: a free one)."""
    client = require_prometheus()
    recorder.registry.register(DepthCollector(recorder.cache, queues))
    server, _thread = client.start_http_server(port, addr=host, registry=recorder.registry)
    return int(server.server_port)


def exposition(cache: Any) -> tuple[bytes, str]:
    """The store's metrics in Prometheus's text format, and its content type (the
    dashboard's ``/metrics``)."""
    client = require_prometheus()
    registry = client.CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(cache))
    return client.generate_latest(registry), client.CONTENT_TYPE_LATEST
