"""What a dashboard poll costs (issue 19, point 4): bounded by its limits, not by the directory.

Each case measures behaviour, never wall-clock time: the rows that cross from the engine, the
calls a poll makes, the rows an answer holds, and the resident memory a poll of large values
adds (measured in a fresh process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from diskcache_oxide import Cache, JobQueue, admin
from diskcache_oxide.claims import Claims
from diskcache_oxide.dashboard import create_app, snapshot

pytest.importorskip("httpx", reason="Starlette's TestClient needs httpx: requirements-dev.txt")

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Using `httpx` with `starlette.testclient`")
    from starlette.testclient import TestClient  # noqa: E402

HOST = {"base_url": "http://127.0.0.1:8000"}


class Spy:
    """Counts the calls of one of the binding's job calls (``Cache._jobs.<name>``), and the
    rows its answers held."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
        self.calls = 0
        self.rows = 0
        handle: Any = Cache._jobs
        spy = self

        class Jobs:
            """The cache's ``JobsCore``, with ``name`` counted."""

            def __init__(self, jobs: Any) -> None:
                self._jobs = jobs

            def __getattr__(self, attr: str) -> Any:
                found = getattr(self._jobs, attr)
                if attr != name:
                    return found

                def spied(*args: Any, **kwargs: Any) -> Any:
                    answer = found(*args, **kwargs)
                    spy.calls += 1
                    if isinstance(answer, list):
                        spy.rows += len(answer)
                    return answer

                return spied

        monkeypatch.setattr(Cache, "_jobs", property(lambda cache: Jobs(handle.__get__(cache))))


@pytest.fixture
def many_ready(tmp_path: Path) -> Iterator[tuple[Path, dict[str, int]]]:
    """One job queue of 100,000 ready jobs, and one job in each other state."""
    directory = tmp_path / "many"
    with Cache(str(directory)) as cache:
        jobs = JobQueue(cache, "bulk", lease=600, max_attempts=1)
        dead = jobs.put("dead")
        job = jobs.take()
        assert job is not None and job.id == dead
        jobs.fail(job, "no")
        leased = jobs.put("leased")
        assert jobs.take() is not None
        for start in range(0, 100_000, 20_000):
            jobs.put_many([{"n": n} for n in range(start, start + 20_000)])
        scheduled = jobs.put("later", delay=3600)
    yield directory, {"dead": dead, "leased": leased, "scheduled": scheduled}


def test_a_poll_of_100k_ready_jobs_reads_a_page_per_state(
    many_ready: tuple[Path, dict[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    directory, ids = many_ready
    listing = Spy(monkeypatch, "list")
    with admin.open_cache(directory) as cache:
        state = snapshot(cache, limit=20)
    (bulk,) = state["job_queues"]
    assert bulk["counts"] == {"ready": 100_000, "scheduled": 1, "leased": 1, "dead": 1}
    assert len(bulk["jobs"]["ready"]) == 20
    assert [j["id"] for j in bulk["jobs"]["scheduled"]] == [ids["scheduled"]]
    assert [j["id"] for j in bulk["jobs"]["leased"]] == [ids["leased"]]
    assert [j["id"] for j in bulk["jobs"]["dead"]] == [ids["dead"]]
    # One engine call per state, each answering at most a page: not a walk of the ready jobs
    # in batches to find the scheduled one.
    assert listing.calls == 4
    assert listing.rows == 20 + 1 + 1 + 1


def test_admin_jobs_pages_each_state_in_sql(many_ready: tuple[Path, dict[str, int]]) -> None:
    directory, ids = many_ready
    with admin.open_cache(directory) as cache:
        first = admin.jobs(cache, "bulk", "ready", limit=5)
        second = admin.jobs(cache, "bulk", "ready", limit=5, after=first[-1].id)
        assert [r.state for r in first + second] == ["ready"] * 10
        assert [r.id for r in second] == [first[-1].id + n for n in range(1, 6)]
        assert [r.id for r in admin.jobs(cache, "bulk", "scheduled")] == [ids["scheduled"]]
        assert admin.jobs(cache, "bulk", "scheduled", after=ids["scheduled"]) == []
        assert admin.jobs(cache, "bulk", "ready", after=2**70) == []


@pytest.fixture
def many_lists(tmp_path: Path) -> Path:
    """1,000 job queues, 1,000 queue prefixes and 1,000 live claims."""
    directory = tmp_path / "lists"
    with Cache(str(directory)) as cache:
        with cache.transact():
            for n in range(1000):
                JobQueue(cache, f"jq-{n:04}").put(n)
                cache.push(n, prefix=f"pq-{n:04}")
        claims = Claims(cache)
        for n in range(1000):
            assert claims.try_acquire(f"key-{n:04}", lease=600) is not None
    return directory


def test_long_lists_are_paged(many_lists: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counting = Spy(monkeypatch, "counts")
    with TestClient(create_app(many_lists), **HOST) as client:
        answer = client.get("/api/state")
        state = answer.json()
        # A page of each list, and how many there are in all.
        assert len(state["queues"]) == 50 and state["pages"]["queues"]["total"] == 1000
        assert len(state["claims"]) == 50 and state["pages"]["claims"]["total"] == 1000
        assert len(state["job_queues"]) == 10
        assert state["pages"]["job_queues"]["total"] == 1000
        assert state["stats"]["claims"] == 1000
        assert counting.calls == 10, "only the job queues on the page are counted"
        assert len(answer.content) < 100_000
        # Following `next` visits every row once, in order.
        for name, key, size in (
            ("queues", "prefix", 300),
            ("job_queues", "name", 50),
            ("claims", "key", 300),
        ):
            seen: list[str] = []
            cursor: str | None = None
            while True:
                query = {f"{name}_limit": str(size)}
                if cursor is not None:
                    query[f"{name}_after"] = cursor
                page = client.get("/api/state", params=query).json()
                rows = page[name]
                assert len(rows) <= size
                seen.extend(row[key] for row in rows)
                cursor = page["pages"][name]["next"]
                if cursor is None:
                    break
            assert len(seen) == 1000 and seen == sorted(seen), name
        # The API refuses what it cannot page by.
        assert client.get("/api/state", params={"claims_limit": "0"}).status_code == 400
        assert client.get("/api/state", params={"claims_after": "x"}).status_code == 400
        refused = client.get("/api/state", params={"queues_limit": "100000"})
        assert refused.status_code == 400 and "queues_limit" in refused.json()["error"]


def test_a_value_is_previewed_without_decoding_it(tmp_path: Path) -> None:
    with Cache(str(tmp_path / "c"), pickle=True) as cache:
        jobs = JobQueue(cache, "mail")
        pickled = jobs.put(ValueError("boom"))  # only a pickle can hold it
        plain = jobs.put({"send": "waiting", "body": "x" * 200})
    with admin.open_cache(tmp_path / "c") as cache:
        by_id = {row.id: row.value for row in admin.jobs(cache, "mail")}
    # Before, the unpicklable-here value read as <unreadable: UnsafeValueError>: it was decoded.
    assert by_id[pickled].startswith("<pickle, ") and by_id[pickled].endswith(" bytes>")
    assert by_id[plain] == "{'send': 'waiting', 'body': '" + "x" * 28 + "…'}"
    assert len(by_id[plain]) == 60


VALUES: list[Any] = [
    None,
    True,
    -12,
    2**70,
    -(2**70),
    1.5,
    1e16,
    -0.0,
    "it's",
    'say "hi"',
    "tab\t\n\x00\x7f\u200b\u202eé😀",
    b"\x00\xff'",
    [1, [2, (3,)]],
    (),
    {"a": 1, 2: None},
    set(),
    {1},
    frozenset(),
    frozenset({"x"}),
]


def test_a_preview_reads_as_the_values_repr(tmp_path: Path) -> None:
    import datetime
    import decimal
    import pathlib
    import uuid

    values = [
        *VALUES,
        datetime.datetime(2025, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone.utc),
        datetime.datetime(2025, 1, 2, tzinfo=datetime.timezone(datetime.timedelta(hours=-5))),
        datetime.date(2025, 1, 2),
        datetime.time(3, 4),
        datetime.timedelta(days=-1, seconds=5),
        decimal.Decimal("1.10"),
        uuid.UUID(int=2**100),
        pathlib.PurePosixPath("/a/b"),
        pathlib.Path("/tmp"),
    ]
    with Cache(str(tmp_path / "c")) as cache:
        for n, value in enumerate(values):
            cache.set(n, value)
            assert cache._preview(n, 1000) == repr(value), value
        cache.set("long", "x" * 10_000_000)
        assert cache._preview("long", 10) == "'xxxxxxx…'"
        assert cache._preview("absent") is None
        with pytest.raises(ValueError, match="preview: a width of 1 to 1000"):
            cache._preview("long", 0)


def test_a_poll_of_large_values_keeps_memory_bounded(tmp_path: Path) -> None:
    """50 jobs (in every state) and 20 queue items of 5 MB each: a poll previews them all,
    and the process's resident memory rises by a few MB, not by the values' 350 MB."""
    directory = tmp_path / "big"
    big = 5 * 1000 * 1000
    with Cache(str(directory), size_limit=2**40) as cache:
        jobs = JobQueue(cache, "big", lease=600, max_attempts=1)
        for n in range(10):
            jobs.put(bytes([n]) * big)
            job = jobs.take()
            assert job is not None
            jobs.fail(job, "no")
        for n in range(10):
            jobs.put(bytes([n]) * big)
            assert jobs.take() is not None
        for n in range(20):
            jobs.put(bytes([n]) * big)
        for n in range(10):
            jobs.put(bytes([n]) * big, delay=3600)
        for n in range(20):
            cache.push("q" * big, prefix=f"big-{n:02}")
    script = textwrap.dedent(
        """
        import json, sys
        from diskcache_oxide import Cache, admin
        from diskcache_oxide.dashboard import snapshot

        def memory():
            fields = {}
            with open("/proc/self/status") as status:
                for line in status:
                    key, _, value = line.partition(":")
                    if key in ("VmRSS", "VmHWM"):
                        fields[key] = int(value.split()[0]) * 1024
            return fields

        warm, directory = sys.argv[1:]
        with Cache(warm) as cache:  # everything a poll imports and builds, on a small cache
            cache.push(b"x", prefix="warm")
            snapshot(cache)
        with admin.open_cache(directory) as cache:
            before = memory()["VmRSS"]
            state = snapshot(cache, limit=20)
            rise = memory()["VmHWM"] - before
        (big,) = state["job_queues"]
        print(json.dumps({
            "rise": rise,
            "jobs": sum(len(rows) for rows in big["jobs"].values()),
            "values": [row["value"] for rows in big["jobs"].values() for row in rows],
            "fronts": [q["front"] for q in state["queues"]],
        }))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "warm"), str(directory)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout)
    assert figures["jobs"] == 50
    assert all(v.startswith("b'") and v.endswith("…'") for v in figures["values"])
    assert figures["fronts"] == ["'" + "q" * 57 + "…'"] * 20
    # Decoding even one of these values would take 5 MB, and its repr 20 MB more.
    assert figures["rise"] < 4 * 1024 * 1024, figures["rise"]
