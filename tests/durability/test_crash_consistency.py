"""Crash consistency: writers SIGKILLed at random moments, and a full check after every kill.

Each round starts ``SLOTS`` writer processes (helpers/crashers.py) on one cache directory;
they do a random mix of small sets, value-file sets (32-96 KiB), deletes, multi-statement
``transact()`` blocks, pushes, pulls inside ``transact()`` with a receipt, and leased
take/finish on a ``JobQueue``. After a random few milliseconds each writer is SIGKILLed
(one kill in ten lands while the writer is still opening the cache). With every writer
dead, the parent checks the directory against a model built from the writers' logs:

- ``PRAGMA integrity_check`` is ok (Python's sqlite3, read-only, in a helper process);
- ``check()`` reports nothing but ``unknown file`` orphans, ``check(fix=True)`` removes
  them, and ``check()`` is then clean;
- every acknowledged write is readable, byte for byte, with an intact checksum: a key holds
  its last acknowledged value, or the value of the one operation that was in flight when
  its writer died (which either happened whole or not at all);
- a ``transact()`` block is all or nothing: its two keys carry the same tag and its
  counter equals the number of blocks that committed;
- no queue item has a receipt above 1, none is both received and still queued, every
  acknowledged push is queued or received, every acknowledged pull is received;
- no job is lost: every acknowledged ``put`` is still present (ready or leased) or was
  finished, no finish that returned True is undone, no job is finished twice.

The in-flight operation of a killed writer is resolved by what the directory shows, and
the model follows it, so the next round starts from an exact model.

``DCO_CRASH_KILLS`` sets the number of kills (default 800, about a minute on two cores;
``make soak`` runs 2,000). ``DCO_CRASH_SEED`` changes the random schedule;
``DCO_CRASH_REPORT=path`` writes the figures as JSON. See docs/reliability.md and
docs/decisions/D-026-crash-harness.md.
"""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import crashers as cr
import pytest
import support

KILLS = max(1, int(os.environ.get("DCO_CRASH_KILLS", "800") or 800))
SEED = os.environ.get("DCO_CRASH_SEED", "2026")
SLOTS = 2
EARLY = 0.1  # share of kills that land while the writer opens the cache
DELAY = (0.001, 0.025)  # seconds a writer runs before its kill
FIX_LIVE = 0.2  # share of rounds that run check(fix=True) while the writers write
FULL_EVERY = 16  # rounds between full scans of the receipts
MAX_PROBLEMS = 20  # stop a run that has gone wrong after this many problems
ABSENT = object()  # no in-flight write to this key
CRASHERS = str(Path(__file__).resolve().parents[1] / "helpers" / "crashers.py")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.oxide,
    pytest.mark.timeout(max(300, KILLS * 2)),
    pytest.mark.skipif(support.REFERENCE_MODE, reason="diskcache_oxide only"),
]


@dataclass
class Figures:
    kills: int = 0
    kills_while_opening: int = 0
    rounds: int = 0
    acknowledged_ops: int = 0
    in_flight_applied: int = 0
    in_flight_rolled_back: int = 0
    orphans_removed: int = 0
    fixes_while_writing: int = 0
    fix_timeouts: int = 0  # check(fix=True) stalled behind a writer's transaction (see below)
    corruptions: int = 0
    acknowledged_writes_lost: int = 0
    duplicate_deliveries: int = 0
    other_problems: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)


@dataclass
class Op:
    seq: int
    fields: list[str]
    acked: list[str] | None = None
    pulled: str | None = None  # the item of a pull's P record


@dataclass
class Model:
    """What the directory must hold, as far as acknowledged operations say."""

    keys: dict[str, str | None] = field(default_factory=dict)  # key -> tag, None: absent
    tx_count: dict[int, int] = field(default_factory=lambda: collections.defaultdict(int))
    pushed: set[str] = field(default_factory=set)  # queued or received
    delivered: set[str] = field(default_factory=set)  # acknowledged pulls
    logged_pulls: set[str] = field(default_factory=set)  # every P record ever written
    jobs: dict[int, str] = field(default_factory=dict)  # job id -> tag
    finished: set[int] = field(default_factory=set)


def read_log(path: str) -> list[Op]:
    """The log's operations in order (a torn last line is dropped)."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    ops: dict[int, Op] = {}
    for line in text.split("\n")[:-1]:
        kind, seq_text, *rest = line.split(" ")
        seq = int(seq_text)
        if kind == "I":
            ops[seq] = Op(seq, rest)
        elif kind == "P":
            ops[seq].pulled = rest[0]
        else:
            ops[seq].acked = rest
    return [ops[s] for s in sorted(ops)]


class Writer:
    """One incarnation of one writer slot: imported and waiting for its go."""

    def __init__(self, tmp: Path, directory: str, slot: int, number: int, seed: str) -> None:
        self.slot = slot
        self.log = str(tmp / f"w{slot}-{number}.log")
        self.err_path = tmp / f"w{slot}-{number}.err"
        self.err = open(self.err_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, CRASHERS, directory, str(slot), str(number), self.log, seed],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
        )

    def go(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(b"go\n")
        self.process.stdin.flush()

    def wait_ready(self) -> None:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line != b"ready\n":
            self.process.wait(10)
            raise AssertionError(f"writer did not start: {self.stderr()}")

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)

    def reap(self) -> None:
        code = self.process.wait(30)
        self.err.close()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()
        assert code == -signal.SIGKILL, f"writer {self.slot} exited with {code}: {self.stderr()}"

    def stderr(self) -> str:
        self.err.flush()
        return self.err_path.read_text(errors="replace")[-3000:]


class Inspector:
    """Python's sqlite3, in a process of its own (see crashers.inspect for why)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, CRASHERS, "inspect"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, what: str, directory: str) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{what} {os.path.join(directory, 'cache.db')}\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, "the inspector died"
        return json.loads(line)

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(30)
        self.process.stdout.close()


class Judge:
    def __init__(self, dc: Any, directory: str, figures: Figures) -> None:
        self.dc = dc
        self.directory = directory
        self.model = Model()
        self.figures = figures
        # A handle kept open across rounds: its remembered reads (D-017) must notice the
        # commits of processes that died since.
        self.long = dc.Cache(directory, timeout=60)
        self.fixer = dc.Cache(directory, timeout=0.5)
        self.inspector = Inspector()

    def close(self) -> None:
        self.long.close()
        self.fixer.close()
        self.inspector.close()

    def problem(self, kind: str, text: str) -> None:
        setattr(self.figures, kind, getattr(self.figures, kind) + 1)
        if len(self.figures.problems) < 50:
            self.figures.problems.append(f"round {self.figures.rounds}: {kind}: {text}")

    # ---- the round's logs -------------------------------------------------------------

    def apply(self, slot: int, ops: list[Op]) -> Op | None:
        """Apply the acknowledged operations to the model; return the one in flight."""
        m = self.model
        in_flight = [op for op in ops if op.acked is None]
        if in_flight and in_flight[-1] is not ops[-1] or len(in_flight) > 1:
            self.problem("other_problems", f"writer {slot}: intents without acks: {in_flight}")
        for op in ops:
            if op.pulled is not None:
                m.logged_pulls.add(op.pulled)
            if op.acked is None:
                continue
            self.figures.acknowledged_ops += 1
            kind, args = op.fields[0], op.fields[1:]
            if kind == "set":
                m.keys[args[0]] = args[1]
            elif kind == "del":
                m.keys[args[0]] = None
            elif kind == "tx":
                t1, t2, _ = cr.tx_keys(slot)
                m.keys[t1] = m.keys[t2] = args[0]
                m.tx_count[slot] += 1
            elif kind == "push":
                m.pushed.add(args[0])
            elif kind == "pull" and op.pulled is not None:
                if op.pulled in m.delivered:
                    self.problem("duplicate_deliveries", f"{op.pulled} pulled twice")
                m.delivered.add(op.pulled)
            elif kind == "put":
                m.jobs[int(op.acked[0])] = args[0]
            elif kind == "finish" and op.acked[1] == "1":
                job_id = int(op.acked[0])
                if job_id in m.finished:
                    self.problem("duplicate_deliveries", f"job {job_id} finished twice")
                m.finished.add(job_id)
        return in_flight[-1] if in_flight else None

    # ---- the directory ----------------------------------------------------------------

    def read(self, cache: Any, key: str, large: bool) -> str | None:
        """The tag a key holds (None: absent), after checking every byte of its value."""
        try:
            value = cache.get(key)
        except self.dc.DecodeError as exc:
            self.problem("corruptions", f"{key}: {type(exc).__name__}: {exc}")
            return "<corrupt>"
        if value is None:
            return None
        tag = cr.tag_of(value)
        if value != cr.payload(tag, large):
            self.problem("corruptions", f"{key}: the bytes of {tag} differ from what was written")
        return tag

    def check_directory(self, cache: Any) -> None:
        verdict = self.inspector.ask("integrity", self.directory)
        if verdict != "ok":
            self.problem("corruptions", f"integrity_check: {verdict[:500]}")
        found = [str(w.message) for w in cache.check()]
        other = [m for m in found if not m.startswith("unknown file")]
        if other:
            self.problem("corruptions", f"check(): {other[:5]}")
        self.figures.orphans_removed += len(found) - len(other)
        if found:
            cache.check(fix=True)
            again = [str(w.message) for w in cache.check()]
            if again:
                self.problem("other_problems", f"check() after check(fix=True): {again[:5]}")

    def verify(self, logs: dict[int, list[Op]], full: bool) -> None:
        flying = {slot: self.apply(slot, ops) for slot, ops in logs.items()}
        cache = self.dc.Cache(self.directory, timeout=60)
        try:
            self.check_directory(cache)
            self.verify_keys(cache, flying)
            self.verify_queue(cache, logs, flying, full)
            self.verify_jobs(cache, flying)
        finally:
            cache.close()

    def resolve(self, applied: bool) -> None:
        if applied:
            self.figures.in_flight_applied += 1
        else:
            self.figures.in_flight_rolled_back += 1

    def verify_keys(self, cache: Any, flying: dict[int, Op | None]) -> None:
        m = self.model
        for slot in range(SLOTS):
            op = flying.get(slot)
            kind = op.fields[0] if op else None
            args = op.fields[1:] if op else []
            for key, large in [(cr.small_key(slot, i), False) for i in range(cr.SMALL_KEYS)] + [
                (cr.large_key(slot, i), True) for i in range(cr.LARGE_KEYS)
            ]:
                got = self.read(cache, key, large)
                want = m.keys.get(key)
                seen = self.read(self.long, key, large)
                if seen != got:
                    self.problem("other_problems", f"a long-lived handle reads {key} as {seen}")
                target = ABSENT
                if kind in ("set", "del") and args[0] == key:
                    target = args[1] if kind == "set" else None
                if got == want:
                    if target is not ABSENT and target != want:
                        self.resolve(False)
                elif target is not ABSENT and got == target:
                    self.resolve(True)
                else:
                    self.problem(
                        "acknowledged_writes_lost", f"{key} holds {got}, acknowledged {want}"
                    )
                m.keys[key] = got
            t1, t2, tn = cr.tx_keys(slot)
            a, b = self.read(cache, t1, False), self.read(cache, t2, True)
            count = cache.get(tn, 0)
            if a != b:
                self.problem("corruptions", f"transaction torn: {t1}={a}, {t2}={b}")
            want, want_count = m.keys.get(t1), m.tx_count[slot]
            if kind == "tx" and a == args[0] and count == want_count + 1:
                self.resolve(True)
                want, want_count = a, count
            elif kind == "tx":
                self.resolve(False)
            if (a, count) != (want, want_count):
                self.problem(
                    "acknowledged_writes_lost",
                    f"transaction of slot {slot}: {a} x{count}, acknowledged {want} x{want_count}",
                )
            m.keys[t1] = m.keys[t2] = a
            m.tx_count[slot] = count

    def verify_queue(
        self, cache: Any, logs: dict[int, list[Op]], flying: dict[int, Op | None], full: bool
    ) -> None:
        m = self.model
        queued = [cache[key] for key in cache.iterkeys(prefix=f"{cr.QUEUE}-")]
        counts = collections.Counter(queued)
        for item, n in counts.items():
            if n > 1:
                self.problem("duplicate_deliveries", f"{item} is in the queue {n} times")
        in_queue = set(queued)
        if full:
            receipts = {
                key.split(":", 1)[1]: cache[key] for key in cache.iterkeys(prefix="receipt:")
            }
        else:
            # A committed pull wrote its P record first, so new receipts can only be for
            # items of this round's P records; queued items must have none.
            touched = in_queue | {op.pulled for ops in logs.values() for op in ops if op.pulled}
            names = sorted(touched)
            values = cache.get_many([f"receipt:{item}" for item in names])
            receipts = {item: n for item, n in zip(names, values, strict=True) if n is not None}
        for item, n in receipts.items():
            if n != 1:
                self.problem("duplicate_deliveries", f"receipt:{item} is {n}")
        for item in in_queue & set(receipts):
            self.problem("duplicate_deliveries", f"{item} was pulled and is still queued")
        unlogged = set(receipts) - m.logged_pulls
        if unlogged:
            self.problem("other_problems", f"committed pulls without a P record: {unlogged}")
        pushing = {op.fields[1] for op in flying.values() if op and op.fields[0] == "push"}
        for op in flying.values():
            if op and op.fields[0] == "push":
                self.resolve(op.fields[1] in in_queue or op.fields[1] in receipts)
            if op and op.fields[0] == "pull":
                self.resolve(op.pulled is not None and op.pulled in receipts)
                if op.pulled is not None and op.pulled in receipts:
                    m.delivered.add(op.pulled)
                elif op.pulled is not None and op.pulled not in in_queue:
                    self.problem("acknowledged_writes_lost", f"rolled-back pull lost {op.pulled}")
        for item in (in_queue | set(receipts)) - m.pushed:
            if item in pushing:
                m.pushed.add(item)
            else:
                self.problem("other_problems", f"{item} was never pushed")
        lost = m.pushed - in_queue - (set(receipts) if full else m.delivered | set(receipts))
        for item in sorted(lost)[:10]:
            self.problem("acknowledged_writes_lost", f"pushed {item} is neither queued nor pulled")
        for item in m.delivered & in_queue:
            self.problem("acknowledged_writes_lost", f"acknowledged pull of {item} undone")
        if full:
            for item in m.delivered - set(receipts):
                self.problem("acknowledged_writes_lost", f"receipt of {item} is gone")

    def verify_jobs(self, cache: Any, flying: dict[int, Op | None]) -> None:
        m = self.model
        jobs = self.dc.JobQueue(cache, cr.JOBS)
        rows = {job_id: state for job_id, state in self.inspector.ask("jobs", self.directory)}
        putting = {op.fields[1] for op in flying.values() if op and op.fields[0] == "put"}
        finishing = {int(op.fields[1]) for op in flying.values() if op and op.fields[0] == "finish"}
        for job_id, state in rows.items():
            if state not in (0, 1):  # ready, leased; 2 is dead (max_attempts=0: never)
                self.problem("other_problems", f"job {job_id} has state {state}")
            info = jobs.get(job_id)
            try:
                value = info.value
            except self.dc.DecodeError as exc:
                self.problem("corruptions", f"job {job_id}: {type(exc).__name__}: {exc}")
                continue
            tag, data = value["tag"], value["data"]
            if data != cr.payload(tag, len(data) > 1000):
                self.problem("corruptions", f"job {job_id}: the bytes of {tag} differ")
            if job_id in m.finished:
                self.problem("acknowledged_writes_lost", f"finished job {job_id} is back")
            elif job_id not in m.jobs:
                if tag in putting:
                    m.jobs[job_id] = tag
                    self.resolve(True)
                else:
                    self.problem("other_problems", f"job {job_id} ({tag}) was never put")
            elif m.jobs[job_id] != tag:
                self.problem("corruptions", f"job {job_id} holds {tag}, put {m.jobs[job_id]}")
        for job_id in set(m.jobs) - set(rows) - m.finished:
            if job_id in finishing:
                m.finished.add(job_id)
                self.resolve(True)
            else:
                self.problem("acknowledged_writes_lost", f"job {job_id} is gone unfinished")
        # bound the model: settled jobs need no more checks than 'not back'
        for job_id in [j for j in m.jobs if j in m.finished]:
            del m.jobs[job_id]


def run_harness(tmp: Path, dc: Any, kills: int) -> Judge:
    directory = str(tmp / "cache")
    dc.Cache(directory, eviction_policy="none").close()
    rng = random.Random(SEED)
    figures = Figures()
    judge = Judge(dc, directory, figures)
    start = time.monotonic()
    incarnation = 0

    def spawn() -> list[Writer]:
        nonlocal incarnation
        incarnation += 1
        return [
            Writer(tmp, directory, slot, incarnation, f"{SEED}.{slot}.{incarnation}")
            for slot in range(SLOTS)
        ]

    pending = spawn()
    try:
        while figures.kills < kills and len(figures.problems) < MAX_PROBLEMS:
            writers, pending = pending, []
            schedule: list[tuple[float, Writer]] = []
            for w in writers:
                w.go()
            for w in writers:
                if rng.random() < EARLY:
                    schedule.append((time.monotonic() + rng.uniform(0, 0.003), w))
                    figures.kills_while_opening += 1
                else:
                    w.wait_ready()
                    schedule.append((time.monotonic() + rng.uniform(*DELAY), w))
            if rng.random() < FIX_LIVE:
                # check(fix=True) while the writers run: its exclusive directory lock must
                # keep it from taking a value file about to be committed for an orphan (D-005)
                # (a bounded wait: a writer may hold SQLite's write lock for a while)
                figures.fixes_while_writing += 1
                try:
                    judge.fixer.check(fix=True)
                except dc.Timeout:
                    figures.fix_timeouts += 1
            for at, w in sorted(schedule, key=lambda s: s[0]):
                time.sleep(max(0.0, at - time.monotonic()))
                w.kill()
            for w in writers:
                w.reap()
            figures.kills += len(writers)
            figures.rounds += 1
            pending = spawn()  # their import overlaps the checks
            logs = {w.slot: read_log(w.log) for w in writers}
            full = figures.rounds % FULL_EVERY == 0 or figures.kills >= kills
            judge.verify(logs, full)
    finally:
        for w in pending:
            w.kill()
            w.process.wait(30)
            w.err.close()
            for pipe in (w.process.stdin, w.process.stdout):
                if pipe is not None:
                    pipe.close()
    if figures.kills >= kills:
        judge.verify({}, full=True)  # one more full pass with nothing in flight
    figures.seconds = round(time.monotonic() - start, 1)
    return judge


def test_writers_killed_at_random_lose_and_corrupt_nothing(tmp_path: Path, dc: Any) -> None:
    judge = run_harness(tmp_path, dc, KILLS)
    judge.close()
    figures = judge.figures
    summary = {k: v for k, v in asdict(figures).items() if k != "problems"}
    print("\ncrash consistency:", json.dumps(summary))
    report = os.environ.get("DCO_CRASH_REPORT")
    if report:
        Path(report).write_text(json.dumps(asdict(figures), indent=2) + "\n")
    assert figures.problems == [], "\n".join(figures.problems)
    assert figures.kills >= KILLS
    assert figures.acknowledged_ops > figures.kills, "the writers did almost nothing"
    assert figures.in_flight_applied and figures.in_flight_rolled_back, summary


def test_the_judge_notices_what_it_is_meant_to_catch(tmp_path: Path, dc: Any) -> None:
    """A negative control: damage done behind the writers' backs is counted."""
    judge = run_harness(tmp_path, dc, 8)
    assert judge.figures.problems == [], judge.figures.problems
    m = judge.model
    cache = dc.Cache(judge.directory)
    try:
        # acknowledged by the test itself: a pull with its receipt, and a job
        cache.push("x.0.1", prefix=cr.QUEUE)
        with cache.transact():
            item = None
            while item != "x.0.1":
                item = cache.pull(prefix=cr.QUEUE)[1]
                cache.incr(f"receipt:{item}")
                m.delivered.add(item)
                m.logged_pulls.add(item)
        m.pushed.add("x.0.1")
        jobs = dc.JobQueue(cache, cr.JOBS)
        job_id = jobs.put({"tag": "x.0.2", "data": cr.payload("x.0.2", False)})
        m.jobs[job_id] = "x.0.2"
        # the damage
        key = next(k for k, tag in m.keys.items() if tag is not None and ":k" in k)
        cache.delete(key)  # an acknowledged write lost
        cache.incr("receipt:x.0.1")  # an item delivered twice
        jobs.delete(job_id)  # a job lost
        big = next(k for k, tag in m.keys.items() if tag is not None and ":L" in k)
        os.remove(value_file(judge, big))  # a value file gone
    finally:
        cache.close()
    judge.verify({}, full=True)
    judge.close()
    f = judge.figures
    assert f.acknowledged_writes_lost >= 2, f.problems
    assert f.duplicate_deliveries == 1, f.problems
    assert f.corruptions >= 1, f.problems


def value_file(judge: Judge, key: str) -> str:
    names = dict(judge.inspector.ask("files", judge.directory))
    return os.path.join(judge.directory, "values", names[key])


def test_check_does_not_stall_a_transaction_that_writes_a_value_file(
    tmp_path: Path, dc: Any
) -> None:
    """check() (with or without fix) holds the exclusive flock on <dir>/.lock while it waits
    for SQLite's write lock; a writer inside transact() holds that lock and waits for the
    shared flock to write a value file. Each waits for the other until a timeout expires."""
    directory = str(tmp_path / "cache")
    dc.Cache(directory).close()
    marker = str(tmp_path / "in-transaction")
    writer = subprocess.Popen([sys.executable, "-c", STALLED_WRITER, directory, marker])
    try:
        cache = dc.Cache(directory, timeout=2)
        deadline = time.monotonic() + 30
        while not os.path.exists(marker):
            assert time.monotonic() < deadline and writer.poll() is None, "writer never started"
            time.sleep(0.001)
        start = time.monotonic()
        timed_out = False
        try:
            cache.check()
        except dc.Timeout:
            timed_out = True
        waited = time.monotonic() - start
        cache.close()
        assert writer.wait(30) == 0
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait(10)
    # the writer sleeps 0.5 s inside its transaction; check() should wait for that, no more
    assert not timed_out and waited < 1.5, f"check() waited {waited:.2f} s (timeout: {timed_out})"


STALLED_WRITER = """
import os, sys, time
import diskcache_oxide as dco
cache = dco.Cache(sys.argv[1], timeout=2)
with cache.transact():
    cache.set("small", 1)  # SQLite's write lock is held from here to the commit
    open(sys.argv[2], "w").close()
    time.sleep(0.5)  # check() takes the exclusive directory flock meanwhile
    try:
        cache.set("big", b"x" * 40000)  # a value file: wants the shared directory flock
    except dco.Timeout:
        pass
"""
