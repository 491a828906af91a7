"""Tasks benchmark: diskcache_oxide's tasks (``Tasks`` + ``diskcache-oxide worker``) on a
directory and on Redis, beside huey's SqliteHuey on the same disk and rq and arq on the same
redis-server, in one run.

Every library runs no-op tasks through its own worker command, started as subprocesses before
the clock starts, as a deployment runs them:

- ours: ``diskcache-oxide worker TARGET bench_tasks --pool thread`` (the task runs in the
  worker's process, one at a time), on a temporary directory and on the redis-server;
- huey: ``huey_consumer bench_tasks.HUEY -k process -w N -d 0.01 -m 0.01`` on a SqliteHuey
  file in a temporary directory of the same disk (its default polling, 0.1 s growing to 10 s
  while idle, would put seconds into the latency);
- rq: ``rq worker -w rq.SimpleWorker`` (the job runs in the worker's process: no fork per job);
- arq: ``arq bench_tasks.ArqSettings`` (``poll_delay=0.01``, as in bench_redis.py).

Measured:

1. end to end, in tasks/s: one producer queues N no-op tasks, then fetches every result (each
   library's own wait for a result), with 1 and 4 worker processes; the clock runs from the
   first enqueue to the last result fetched;
2. enqueue-to-start latency: with the workers idle, one task at a time, the time from just
   before the enqueue call to the start of the task's body (the task returns ``time.time()``;
   one machine, one clock), then its result is fetched before the next is queued; median and
   p99 over M tasks, with 1 worker.

The redis-server is started for the run (tests/helpers/redis_servers.py: 127.0.0.1, a random
port, no persistence; stopped by pid at the end), or the scratch database of ``--url``, and
FLUSHed before each row. huey, rq and arq
are optional: a missing one's rows are skipped, saying why.

    .venv/bin/pip install -r benches/requirements.txt
    .venv/bin/python benches/bench_tasks.py            # full run (a few minutes)
    .venv/bin/python benches/bench_tasks.py --quick    # a short smoke run
    .venv/bin/python benches/bench_tasks.py --only directory,huey   # some rows only

Results are written as JSON to benches/results/tasks.json (or --json PATH).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from shared import run_facts, summarize, write_json

try:
    from diskcache_oxide.tasks import Task, Tasks
except ImportError as error:  # pragma: no cover - explained to the user
    sys.exit(f"{error}: run `make bench` (it builds diskcache_oxide and installs the peers)")

ROOT = Path(__file__).resolve().parent
HELPERS = ROOT.parent / "tests" / "helpers"
BIN = Path(sys.executable).parent
PEERS = ("huey", "rq", "arq")
OURS_DIR = "Tasks, directory"
OURS_REDIS = "Tasks, Redis"
RQ_QUEUE = "bench-tasks"

# ----------------------------------------------------------------------------- the tasks
# Declared here for the workers, which import this module by name (the benches folder is
# their working directory): each library's no-op task returns the time its body started.
# The store of ours and huey's file come from the environment the bench gives each worker.

_TARGET = os.environ.get("BENCH_TASKS_TARGET")
_HUEY_DB = os.environ.get("BENCH_TASKS_HUEY")


def declare(app: Tasks) -> Task[float]:
    """The no-op task on ``app``."""

    @app.task(name="bench_tasks.noop", retries=0)
    def noop(i: int) -> float:
        return time.time()

    return noop


def _huey_noop(i: int) -> float:
    return time.time()


if _TARGET:
    NOOP = declare(Tasks(_TARGET))

if _HUEY_DB and importlib.util.find_spec("huey") is not None:
    HUEY = importlib.import_module("huey").SqliteHuey("bench", filename=_HUEY_DB)
    huey_noop = HUEY.task()(_huey_noop)


def rq_noop(i: int) -> float:
    return time.time()


async def arq_noop(ctx: Any, i: int) -> float:
    return time.time()


class ArqSettings:
    """arq's worker settings (``arq bench_tasks.ArqSettings``), on the URL in the environment."""

    functions = [arq_noop]
    poll_delay = 0.01
    max_jobs = 10

    @staticmethod
    def _redis() -> Any:
        connections = importlib.import_module("arq.connections")
        return connections.RedisSettings.from_dsn(
            os.environ.get("BENCH_TASKS_REDIS", "redis://127.0.0.1")
        )

    redis_settings = _redis() if os.environ.get("BENCH_TASKS_REDIS") else None


# ----------------------------------------------------------------------------- the bench


def installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def dist_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


class Workers:
    """Worker processes of one row, started before the clock and stopped by pid."""

    def __init__(self, commands: list[list[str]], env: dict[str, str], log: Path) -> None:
        self.log = log
        self.procs: list[subprocess.Popen[bytes]] = []
        with open(log, "ab") as out:
            for command in commands:
                self.procs.append(
                    subprocess.Popen(
                        command,
                        cwd=ROOT,
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )

    def check(self) -> None:
        for proc in self.procs:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"a worker exited ({proc.returncode}): {self.log.read_text()[-2000:]}"
                )

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


class Row:
    """One library at one worker count: its workers, and how to queue a task and fetch its
    result (``submit(i)`` returns a handle, ``fetch(handle)`` the task's return value)."""

    submit: Callable[[int], Any]
    fetch: Callable[[Any], float]

    def __init__(self, kind: str, workers: int, url: str, scratch: Path) -> None:
        self.kind = kind
        env = {k: v for k, v in os.environ.items() if not k.startswith("BENCH_TASKS_")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        python = sys.executable
        log = scratch / f"{kind.replace(' ', '_').replace(',', '')}-{workers}.log"
        self.closers: list[Callable[[], None]] = []
        if kind in (OURS_DIR, OURS_REDIS):
            target = str(scratch / "store") if kind == OURS_DIR else url
            env["BENCH_TASKS_TARGET"] = target
            command = [python, "-m", "diskcache_oxide", "worker", target, "bench_tasks"]
            command += ["--pool", "thread"]
            self.workers = Workers([command] * workers, env, log)
            noop = declare(Tasks(target))
            self.submit = noop.delay
            self.fetch = lambda result: result.get(timeout=60)
            self.closers.append(noop.app.cache.close)
        elif kind == "huey":
            db = str(scratch / "huey.db")
            env["BENCH_TASKS_HUEY"] = db
            command = [str(BIN / "huey_consumer"), "bench_tasks.HUEY", "-k", "process"]
            command += ["-w", str(workers), "-d", "0.01", "-m", "0.01", "-b", "1"]
            self.workers = Workers([command], env, log)
            os.environ["BENCH_TASKS_HUEY"] = db  # the producer's SqliteHuey, on that file
            try:
                module = importlib.reload(importlib.import_module("bench_tasks"))
            finally:
                del os.environ["BENCH_TASKS_HUEY"]
            self.submit = module.huey_noop
            self.fetch = lambda result: result.get(blocking=True, timeout=60, max_delay=0.01)
        elif kind == "rq":
            import redis

            rq = importlib.import_module("rq")  # an optional peer (benches/requirements.txt)
            client = redis.Redis.from_url(url)
            queue = rq.Queue(RQ_QUEUE, connection=client)
            command = [str(BIN / "rq"), "worker", "-w", "rq.SimpleWorker", "--url", url]
            command += ["-q", RQ_QUEUE]
            self.workers = Workers([command] * workers, env, log)
            self.submit = lambda i: queue.enqueue("bench_tasks.rq_noop", i)

            def fetch_rq(job: Any) -> float:
                result = job.latest_result(timeout=60)
                if result is None or result.return_value is None:
                    raise RuntimeError(f"rq job {job.id} gave no result")
                return float(result.return_value)

            self.fetch = fetch_rq
            self.closers.append(client.close)
        elif kind == "arq":
            create_pool = importlib.import_module("arq").create_pool
            RedisSettings = importlib.import_module("arq.connections").RedisSettings

            env["BENCH_TASKS_REDIS"] = url
            command = [str(BIN / "arq"), "bench_tasks.ArqSettings"]
            self.workers = Workers([command] * workers, env, log)
            loop = asyncio.new_event_loop()
            pool = loop.run_until_complete(create_pool(RedisSettings.from_dsn(url)))
            self.submit = lambda i: loop.run_until_complete(pool.enqueue_job("arq_noop", i))
            ResultNotFound = importlib.import_module("arq.jobs").ResultNotFound

            def fetch_arq(job: Any) -> float:
                # arq 0.25 can report a job that has just finished as neither queued nor done
                # (its result not written yet): look again a few times before believing it.
                for _ in range(50):
                    try:
                        return float(
                            loop.run_until_complete(job.result(timeout=60, poll_delay=0.001))
                        )
                    except ResultNotFound:
                        time.sleep(0.002)
                raise RuntimeError(f"arq job {job.job_id} gave no result")

            self.fetch = fetch_arq

            def close_arq() -> None:
                loop.run_until_complete(pool.aclose())
                loop.close()

            self.closers.append(close_arq)
        else:
            raise ValueError(kind)

    def warm(self) -> None:
        """One task through, so that every worker is up (imported, connected) before the
        clock starts."""
        deadline = time.monotonic() + 120
        handle = self.submit(-1)
        while True:
            self.workers.check()
            try:
                self.fetch(handle)
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
        # (each fetch waits up to 60 s itself)

    def close(self) -> None:
        self.workers.stop()
        for close in self.closers:
            close()


def flush(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    client.flushdb()
    client.close()


def bench_row(kind: str, workers: int, url: str, count: int, samples: int) -> dict[str, Any]:
    flush(url)
    scratch = Path(tempfile.mkdtemp(prefix="bench-tasks-"))
    row: dict[str, Any] = {"library": kind, "workers": workers, "tasks": count, "errors": []}
    made: Row | None = None
    try:
        made = Row(kind, workers, url, scratch)
        made.warm()
        # 1. end to end: queue them all, then fetch every result.
        start = time.perf_counter()
        handles = [made.submit(i) for i in range(count)]
        for handle in handles:
            made.fetch(handle)
        elapsed = time.perf_counter() - start
        row["seconds"] = elapsed
        row["tasks_per_s"] = count / elapsed
        # 2. enqueue-to-start, one task at a time, the workers idle.
        if samples:
            lags: list[int] = []
            for i in range(samples):
                before = time.time()
                started = made.fetch(made.submit(i))
                lags.append(max(0, int((started - before) * 1e9)))
            row["latency"] = summarize(lags)
    except Exception as error:  # reported in the table; the run goes on
        row["errors"].append(f"{type(error).__name__}: {error}"[:500])
        logs = sorted(scratch.glob("*.log"))
        if logs:
            print(f"{kind} x{workers}: its workers' log ends:", file=sys.stderr)
            print(logs[0].read_text(errors="replace")[-1500:], file=sys.stderr)
    finally:
        if made is not None:
            made.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return row


def start_server() -> Any:
    sys.path.insert(0, str(HELPERS))
    redis_servers = importlib.import_module("redis_servers")
    missing = redis_servers.redis_missing()
    if missing:
        sys.exit(f"no redis-server to run against: {missing}")
    return redis_servers.RedisServer(name="bench-tasks")


def ratios(rows: list[dict[str, Any]]) -> None:
    """tasks/s of ours on a directory / the row's, at the same worker count: above 1, ours
    on a directory is faster."""
    for r in rows:
        base = next(
            (b for b in rows if b["library"] == OURS_DIR and b["workers"] == r["workers"]), None
        )
        ok = base is not None and base.get("tasks_per_s") and r.get("tasks_per_s")
        r["ratio"] = base["tasks_per_s"] / r["tasks_per_s"] if ok and base else None


def print_table(rows: list[dict[str, Any]], workers: tuple[int, ...]) -> None:
    libraries = list(dict.fromkeys(r["library"] for r in rows))
    by = {(r["library"], r["workers"]): r for r in rows}
    head = "| library | " + " | ".join(f"tasks/s, {w} worker{'s' * (w > 1)}" for w in workers)
    head += " | enqueue-to-start median | p99 |"
    print(head)
    print("|---" * (len(workers) + 3) + "|")
    for lib in libraries:
        cells = []
        for w in workers:
            r = by.get((lib, w))
            if r is None or "tasks_per_s" not in r:
                cells.append("error" if r is not None else "-")
            else:
                ratio = f" ({r['ratio']:.2f}x)" if r.get("ratio") and lib != OURS_DIR else ""
                cells.append(f"{r['tasks_per_s']:,.0f}{ratio}")
        first = by.get((lib, workers[0]), {})
        lat = first.get("latency")
        lat_cells = (
            [f"{lat['median_us'] / 1000:.1f} ms", f"{lat['p99_us'] / 1000:.1f} ms"]
            if lat
            else ["-", "-"]
        )
        print(f"| {lib} | " + " | ".join(cells + lat_cells) + " |")
    print(
        "\n(Nx): how many times faster ours on a directory is than the row, at that worker count."
    )
    for r in rows:
        for error in r["errors"]:
            print(f"error: {r['library']} x{r['workers']}: {error}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run")
    parser.add_argument("--json", default=str(ROOT / "results" / "tasks.json"))
    parser.add_argument(
        "--url", help="a redis:// URL of a scratch database (FLUSHed before each row)"
    )
    parser.add_argument(
        "--only", help="run only the rows whose library names contain these words (a,b,...)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        count, samples = 30, 5
        workers: tuple[int, ...] = (1,)
    else:
        count, samples = 2000, 200
        workers = (1, 4)
    import diskcache_oxide

    peers = [p for p in PEERS if installed(p)]
    skipped = {
        p: f"{p} is not installed (pip install -r benches/requirements.txt)"
        for p in PEERS
        if p not in peers
    }
    server: Any = None if args.url else start_server()
    url: str = args.url or server.url
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    try:
        versions = {
            "diskcache_oxide": diskcache_oxide.__version__,
            **{name: dist_version(name) for name in ("redis", *PEERS)},
        }
        print(
            " | ".join(f"{name} {v}" for name, v in versions.items() if v)
            + f"\nPython {platform.python_version()} | {platform.machine()} {os.cpu_count()} cpu"
            + f" | {count:,} no-op tasks per row, latency over {samples} tasks"
        )
        for reason in skipped.values():
            print(f"skipped: {reason}")
        print()
        kinds = [OURS_DIR, OURS_REDIS, *peers]
        if args.only:
            wanted = [w.strip().lower() for w in args.only.split(",") if w.strip()]
            kinds = [k for k in kinds if any(w in k.lower() for w in wanted)]
        for kind in kinds:
            for w in workers:
                row = bench_row(kind, w, url, count, samples if w == workers[0] else 0)
                rows.append(row)
                print(
                    f"  {kind} x{w}: {row.get('tasks_per_s', 0):,.0f} tasks/s"
                    + (f" ERROR {row['errors'][0]}" if row["errors"] else ""),
                    file=sys.stderr,
                )
    finally:
        if server is not None:
            server.close()
    ratios(rows)
    print_table(rows, workers)
    failed = [r for r in rows if r["errors"] and r["library"] in (OURS_DIR, OURS_REDIS)]
    print(f"({time.perf_counter() - started:.0f} s)")
    write_json(
        args.json,
        {
            **run_facts(),
            "quick": args.quick,
            "versions": versions,
            "sizes": {"tasks": count, "latency_samples": samples},
            "workers": list(workers),
            "skipped": skipped,
            "rows": rows,
        },
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
