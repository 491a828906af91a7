# ruff: noqa: E501  (the examples are kept exactly as the page prints them)
"""Every code example of the "Work queues" page, run as written.

The page (``../shared/seeds/002_e0f442efbd76c4fc.txt``, the contract for the queue calls)
shows its examples as one session: each block builds on the cache and functions the blocks
before it made. Each test here runs the blocks up to and including one example in a fresh
namespace, exactly as the page prints them, and compares what that example printed with
what the page shows under it. The only text allowed to differ is the random job id
(``uuid.uuid4().hex``) in the crash example, matched by a regular expression.

The page's ``tempfile.mkdtemp()`` is pointed at pytest's temporary directory, so the
examples leave nothing behind; the code itself is not changed.

The page is part of the conformance suite (tests/helpers/backends.py): on a Redis server or a
cluster the session runs the same blocks with one change, the one the page promises a user
who outgrows a machine: the intro's ``Cache(tempfile.mkdtemp(), ...)`` becomes
``diskcache_oxide.open(<redis URL with a fresh namespace>, ...)``. A block that needs what the
backend lacks (the crash example's ``transact()``) is that example's strict xfail, and the
session passes over it on that backend (no later block uses what it defines).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from backends import Backend, address

#: The conformance suite: the session runs on a directory, a Redis server and a cluster.
pytestmark = [pytest.mark.oxide, pytest.mark.backends]

#: What the intro opens, and what opens a Redis cache in its place.
DIRECTORY_OPEN = "Cache(tempfile.mkdtemp(), "

SEED = Path(__file__).resolve().parents[3] / "shared" / "seeds" / "002_e0f442efbd76c4fc.txt"
UUID_HEX = "bab9c28aecb34357871469a217322b1a"  # the id the page happened to print


class Example(NamedTuple):
    name: str
    code: str
    output: str
    #: capabilities (backends.CAPABILITIES) the block uses beyond the cache calls
    needs: tuple[str, ...] = ()


INTRO = Example(
    "intro",
    """\
import tempfile

from diskcache_oxide import Cache

jobs = Cache(tempfile.mkdtemp(), eviction_policy='none')

for episode in (510, 511, 512):
    jobs.push({'episode': episode, 'step': 'transcode'}, prefix='transcode')

key, job = jobs.pull(prefix='transcode')
print(key, job)
""",
    """\
transcode-500000000000000 {'episode': 510, 'step': 'transcode'}
""",
)

PEEK = Example(
    "peek",
    """\
print(jobs.peek(prefix='transcode'))                # the next item, left in place
print(jobs.peek(prefix='transcode', side='back'))   # the newest
print(len(jobs))                                    # every entry in the cache
""",
    """\
('transcode-500000000000001', {'episode': 511, 'step': 'transcode'})
('transcode-500000000000002', {'episode': 512, 'step': 'transcode'})
2
""",
)

WORKER_LOOP = Example(
    "worker_loop",
    """\
import time

def work(job: dict) -> None:
    print('transcoding', job['episode'])

def drain(cache: Cache, idle_sleep: float = 0.5, stop_after_idle: int = 1) -> None:
    idle = 0
    while idle < stop_after_idle:
        key, job = cache.pull(prefix='transcode')
        if key is None:
            idle += 1
            time.sleep(idle_sleep)
            continue
        idle = 0
        work(job)

drain(jobs, idle_sleep=0.01)
""",
    """\
transcoding 511
transcoding 512
""",
)

SURVIVE_A_CRASH = Example(
    "survive_a_crash",
    '''\
import uuid

def enqueue(cache: Cache, episode: int) -> None:
    cache.push({'id': uuid.uuid4().hex, 'episode': episode, 'step': 'transcode'}, prefix='transcode')

def take(cache: Cache) -> dict | None:
    """The next job, recorded as running in the same transaction; None if the queue is empty."""
    with cache.transact():
        key, job = cache.pull(prefix='transcode')
        if key is None:
            return None
        cache.set(f"running:{job['id']}", (time.time(), job))   # no expire: the sweeper decides
    return job

def finish(cache: Cache, job: dict) -> None:
    cache.delete(f"running:{job['id']}")

def requeue_stale(cache: Cache, lease: float = 600) -> int:
    requeued = 0
    for record in cache.iterkeys(prefix='running:'):   # deleting while iterating is safe
        with cache.transact():
            started, job = cache.get(record, (None, None))   # read again: the worker may have finished
            if started is not None and time.time() - started > lease:
                cache.push(job, prefix='transcode', side='front')
                cache.delete(record)
                requeued += 1
    return requeued

enqueue(jobs, 513)
if (job := take(jobs)) is not None:
    work(job)
    finish(jobs, job)

enqueue(jobs, 514)
job = take(jobs)                          # this worker dies before it calls finish()
print(requeue_stale(jobs, lease=0), 'requeued:', jobs.peek(prefix='transcode'))

if (job := take(jobs)) is not None:       # another worker picks it up
    work(job)
    finish(jobs, job)
''',
    """\
transcoding 513
1 requeued: ('transcode-500000000000000', {'id': 'bab9c28aecb34357871469a217322b1a', 'episode': 514, 'step': 'transcode'})
transcoding 514
""",
    needs=("transact",),
)

PRIORITIES = Example(
    "priorities",
    """\
jobs.push({'to': 'sam@example.com', 'template': 'welcome'}, prefix='email')
jobs.push({'episode': 515, 'step': 'transcode'}, prefix='transcode')
jobs.push({'episode': 516, 'step': 'transcode'}, prefix='urgent')

def next_job(cache: Cache, queues: tuple[str, ...] = ('urgent', 'transcode', 'email')) -> tuple[str, dict] | None:
    for queue in queues:
        key, job = cache.pull(prefix=queue)
        if key is not None:
            return queue, job
    return None

while (taken := next_job(jobs)) is not None:
    print(taken)
""",
    """\
('urgent', {'episode': 516, 'step': 'transcode'})
('transcode', {'episode': 515, 'step': 'transcode'})
('email', {'to': 'sam@example.com', 'template': 'welcome'})
""",
)

CANCEL = Example(
    "cancel",
    """\
for episode in (520, 521):
    jobs.push({'episode': episode, 'step': 'transcode'}, prefix='transcode', tag='upload:batch-7')
jobs.push({'episode': 522, 'step': 'transcode'}, prefix='transcode')

print(jobs.evict('upload:batch-7'), 'cancelled; next:', jobs.pull(prefix='transcode'))
""",
    """\
2 cancelled; next: ('transcode-500000000000002', {'episode': 522, 'step': 'transcode'})
""",
)

FANOUT = Example(
    "fanout",
    """\
cache = FanoutCache('/var/lib/my-app/cache/pages', shards=8)
jobs = Cache('/var/lib/my-app/state/jobs', timeout=3.0, eviction_policy='none')
""",
    "",
)


SESSION = [INTRO, PEEK, WORKER_LOOP, SURVIVE_A_CRASH, PRIORITIES, CANCEL]


def run_session(
    upto: Example, capsys: pytest.CaptureFixture[str], backend: Backend, url: str = ""
) -> tuple[str, dict[str, Any]]:
    """Run the page's blocks in order up to ``upto``; return what ``upto`` printed. On a
    Redis backend (``url``: its URL with a fresh namespace) the intro opens that instead of
    a directory, and blocks before ``upto`` that need what the backend lacks are passed over."""
    import diskcache_oxide

    namespace: dict[str, Any] = {"__name__": "work_queues_page", "diskcache_oxide": diskcache_oxide}
    printed = ""
    for example in SESSION:
        code = example.code
        if example is not upto and not all(backend.has(need) for need in example.needs):
            continue  # its own test is the gap's strict xfail
        if backend.remote and DIRECTORY_OPEN in code:
            code = code.replace(DIRECTORY_OPEN, f"diskcache_oxide.open({url!r}, ")
        capsys.readouterr()
        exec(compile(code, f"<work queues page: {example.name}>", "exec"), namespace)
        printed = capsys.readouterr().out
        if example is upto:
            return printed, namespace
    raise AssertionError(f"{upto.name} is not part of the session")


@pytest.fixture
def where(
    backend: Backend, make_cache: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """The Redis URL (with a fresh namespace) the intro opens on a Redis backend; '' on a
    directory, where the page's own ``tempfile.mkdtemp()`` is used, pointed at tmp_path (after
    the servers started: a session's server keeps its data directory from tempfile)."""
    url = address(make_cache("page")) if backend.remote else ""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return url


@pytest.fixture
def session(capsys: pytest.CaptureFixture[str], backend: Backend, where: str) -> Any:
    opened: list[dict[str, Any]] = []

    def run(upto: Example) -> str:
        printed, namespace = run_session(upto, capsys, backend, where)
        opened.append(namespace)
        return printed

    yield run
    for namespace in opened:
        jobs = namespace.get("jobs")
        if jobs is not None:
            jobs.close()


def expected_pattern(output: str) -> str:
    """The page's output as a regex in which only the random job id may differ."""
    return re.escape(output).replace(UUID_HEX, "[0-9a-f]{32}")


@pytest.mark.parametrize(
    "example",
    [
        pytest.param(e, id=e.name, marks=[pytest.mark.needs(*e.needs)] if e.needs else [])
        for e in SESSION
    ],
)
def test_example_prints_what_the_page_shows(example: Example, session: Any) -> None:
    printed = session(example)
    if UUID_HEX in example.output:
        assert re.fullmatch(expected_pattern(example.output), printed), printed
    else:
        assert printed == example.output


@pytest.mark.needs("transact")
def test_crash_example_requeues_the_same_job_it_then_finishes(session: Any) -> None:
    printed = session(SURVIVE_A_CRASH)
    ids = re.findall(r"'id': '([0-9a-f]{32})'", printed)
    assert len(ids) == 1
    assert printed.splitlines()[-1] == "transcoding 514"


def test_after_the_session_every_queue_is_empty_and_no_job_is_running(
    capsys: pytest.CaptureFixture[str], backend: Backend, where: str
) -> None:
    _, namespace = run_session(CANCEL, capsys, backend, where)
    jobs = namespace["jobs"]
    try:
        for prefix in ("transcode", "urgent", "email"):
            assert jobs.peek(prefix=prefix) == (None, None)
        assert list(jobs.iterkeys(prefix="running:")) == []
        assert len(jobs) == 0
    finally:
        jobs.close()


def test_fanout_example(tmp_path: Path) -> None:
    """The FanoutCache block, with its two /var/lib paths moved under tmp_path."""
    import diskcache_oxide

    code = FANOUT.code.replace("/var/lib/my-app", str(tmp_path / "my-app"))
    namespace: dict[str, Any] = {
        "Cache": diskcache_oxide.Cache,
        "FanoutCache": diskcache_oxide.FanoutCache,
    }
    exec(compile(code, "<work queues page: fanout>", "exec"), namespace)
    namespace["jobs"].push("a job", prefix="email")
    assert namespace["jobs"].pull(prefix="email")[1] == "a job"
    # "A Cache opened on the FanoutCache's directory raises LayoutMismatchError."
    with pytest.raises(diskcache_oxide.LayoutMismatchError):
        diskcache_oxide.Cache(str(tmp_path / "my-app" / "cache" / "pages"))


@pytest.mark.skipif(
    not SEED.exists(), reason="the Work queues page is not checked out beside the repo"
)
def test_examples_are_the_pages_text() -> None:
    """Guards the copies above against drift: each block appears verbatim on the page."""
    page = SEED.read_text(encoding="utf-8")
    for example in [*SESSION, FANOUT]:
        assert example.code in page, f"{example.name}: code differs from the page"
        assert example.output in page, f"{example.name}: output differs from the page"
