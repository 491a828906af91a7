"""Writer processes for durability/test_crash_consistency.py (run as ``python crashers.py ...``).

A writer imports the package, waits for one line on stdin (the parent's "go", so the
import overlaps the parent's checks), opens the cache, prints ``ready`` and then does a
random mix of operations until it is SIGKILLed. Every operation writes two records to the
writer's own log, each with one ``os.write`` on an ``O_APPEND`` file (a SIGKILL cannot undo
a write that returned):

- ``I {seq} {op} {args...}`` before the call (the intent), and
- ``A {seq} {results...}`` after the call returned (the acknowledgement).

A pull runs inside ``transact()``: it pulls, increments ``receipt:{item}`` and writes
``P {seq} {item}`` before the transaction commits, then ``A {seq}`` after. So a killed
writer leaves at most one operation with an intent and no acknowledgement: the one in
flight, which may or may not have taken effect (atomically).

Values are derived from a tag ``{slot}.{incarnation}.{seq}`` by :func:`payload`, so the
parent can rebuild what each acknowledged write stored and compare every byte.
"""

from __future__ import annotations

import os
import random
import sys
import time

QUEUE = "cq"  # the push/pull queue's prefix
JOBS = "cj"  # the JobQueue's name
SMALL_KEYS = 24  # per slot: s{slot}:k{i}
LARGE_KEYS = 4  # per slot: s{slot}:L{i}, values of 32-96 KiB (value files)
LEASE = 0.25  # seconds; a killed writer's lease runs out quickly
LIFETIME = 60.0  # a writer whose parent forgot it exits by itself

# (operation, weight)
MIX = [
    ("set", 22),
    ("setL", 8),
    ("del", 4),
    ("tx", 8),
    ("push", 14),
    ("pull", 16),
    ("put", 8),
    ("take", 12),
]


def payload(tag: str, large: bool) -> bytes:
    """The value stored under ``tag``: ``b'{tag}|'`` and bytes derived from the tag."""
    rng = random.Random(tag)
    size = rng.randrange(32 * 1024, 96 * 1024) if large else rng.randrange(1, 200)
    return tag.encode() + b"|" + rng.randbytes(size)


def tag_of(value: bytes) -> str:
    return value.split(b"|", 1)[0].decode()


def small_key(slot: int, i: int) -> str:
    return f"s{slot}:k{i}"


def large_key(slot: int, i: int) -> str:
    return f"s{slot}:L{i}"


def tx_keys(slot: int) -> tuple[str, str, str]:
    return f"s{slot}:t1", f"s{slot}:t2", f"s{slot}:tn"


class Log:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, *fields: object) -> None:
        data = (" ".join(map(str, fields)) + "\n").encode()
        # One write per record; a short write on a regular file only happens when the disk
        # is full, and then the torn line is dropped by the reader.
        while data:
            data = data[os.write(self.fd, data) :]


def run(directory: str, slot: int, incarnation: int, log_path: str, seed: str) -> None:
    import diskcache_oxide as dco

    sys.stdin.buffer.readline()  # the parent's go
    started = time.monotonic()
    cache = dco.Cache(directory, timeout=60)
    jobs = dco.JobQueue(cache, JOBS, lease=LEASE, max_attempts=0)
    log = Log(log_path)
    rng = random.Random(seed)
    ops = [op for op, _ in MIX]
    weights = [w for _, w in MIX]
    held: list[dco.Job] = []
    print("ready", flush=True)
    seq = 0
    while time.monotonic() - started < LIFETIME:
        seq += 1
        tag = f"{slot}.{incarnation}.{seq}"
        op = rng.choices(ops, weights)[0]
        if held and rng.random() < 0.7:
            op = "finish"
        if op == "set":
            key = small_key(slot, rng.randrange(SMALL_KEYS))
            log.write("I", seq, "set", key, tag)
            cache.set(key, payload(tag, False), retry=True)
            log.write("A", seq)
        elif op == "setL":
            key = large_key(slot, rng.randrange(LARGE_KEYS))
            log.write("I", seq, "set", key, tag)
            cache.set(key, payload(tag, True), retry=True)
            log.write("A", seq)
        elif op == "del":
            key = small_key(slot, rng.randrange(SMALL_KEYS))
            log.write("I", seq, "del", key)
            cache.delete(key, retry=True)
            log.write("A", seq)
        elif op == "tx":
            t1, t2, tn = tx_keys(slot)
            log.write("I", seq, "tx", tag)
            with cache.transact(retry=True):
                cache.set(t1, payload(tag, False), retry=True)
                cache.set(t2, payload(tag, True), retry=True)
                cache.incr(tn, retry=True)
            log.write("A", seq)
        elif op == "push":
            log.write("I", seq, "push", tag)
            cache.push(tag, prefix=QUEUE, retry=True)
            log.write("A", seq)
        elif op == "pull":
            log.write("I", seq, "pull")
            with cache.transact(retry=True):
                key, item = cache.pull(prefix=QUEUE, retry=True)
                if key is not None:
                    cache.incr(f"receipt:{item}", retry=True)
                    log.write("P", seq, item)
            log.write("A", seq)
        elif op == "put":
            large = rng.random() < 0.25
            log.write("I", seq, "put", tag, int(large))
            job_id = jobs.put({"tag": tag, "data": payload(tag, large)})
            log.write("A", seq, job_id)
        elif op == "take":
            log.write("I", seq, "take")
            job = jobs.take()
            if job is None:
                log.write("A", seq, "none")
            else:
                held.append(job)
                log.write("A", seq, job.id, job.attempts)
        else:  # finish
            job = held.pop(0)
            log.write("I", seq, "finish", job.id)
            done = jobs.finish(job)
            log.write("A", seq, job.id, int(done))
    cache.close()


def inspect() -> None:
    """Answer the parent's questions about a cache.db with Python's own sqlite3.

    It runs in its own process because Python's sqlite3 is a second copy of SQLite: closing
    its connection in a process that also has the engine's (bundled) SQLite open drops that
    process's POSIX locks on the database and its -shm file, and the next process to open the
    cache then takes itself for the only user (see docs/reliability.md, "Found").
    One request per line: ``integrity {path}`` or ``jobs {path}``; one JSON answer per line.
    """
    import json
    import sqlite3

    for line in sys.stdin:
        what, path = line.rstrip("\n").split(" ", 1)
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
        try:
            if what == "integrity":
                answer: object = ", ".join(row[0] for row in db.execute("PRAGMA integrity_check"))
            elif what == "jobs":
                answer = [list(row) for row in db.execute("SELECT id, state FROM jobs")]
            else:  # "files": value file names by key
                answer = [list(row) for row in db.execute("SELECT key, filename FROM cache")]
        finally:
            db.close()
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "inspect":
        inspect()
    else:
        run(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
