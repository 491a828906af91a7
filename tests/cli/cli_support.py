"""A cache directory with something in every place the CLI and the dashboard look: entries of
several key types, two queues on the keys, a job queue with a job in each state (ready,
scheduled, leased, dead) and a live claim. tests/dashboard uses it too."""

from __future__ import annotations

import hashlib
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diskcache_oxide import Cache, Claims, JobQueue

#: The console script installed next to this interpreter (`maturin develop` puts it there).
SCRIPT = Path(sysconfig.get_path("scripts")) / "diskcache-oxide"


#: The ``run`` fixture: ``run(*args, input=None)`` gives click's Result of the command.
Run = Callable[..., Any]


@dataclass
class Filled:
    directory: Path
    ready: int
    scheduled: int
    leased: int
    dead: int
    other: int  # a ready job in another job queue
    claim_key: str
    claim_token: str


def fill(directory: Path) -> Filled:
    """Fill ``directory`` (closing the cache afterwards: every lease and claim stays in it)."""
    cache = Cache(str(directory), eviction_policy="none")
    try:
        cache["greeting"] = "hello"
        cache[7] = {"seven": 7}
        cache[("user", 1)] = ["Ada", 1815]
        cache[b"raw"] = b"\x00\x01"
        cache.set("tagged", 1.5, tag="t")
        for n in range(3):
            cache.push({"to": f"user{n}@example.org"}, prefix="emails")
        cache.push("first int item")
        cache.push("second int item")
        jobs = JobQueue(cache, "mail", lease=600, max_attempts=1)
        # Ids in order: the dead job first, since it is taken before the others are put.
        jobs.put({"send": "doomed"})
        doomed = jobs.take()
        assert doomed is not None
        jobs.fail(doomed, RuntimeError("smtp said no"))
        jobs.put({"send": "taken"})
        taken = jobs.take()
        assert taken is not None
        ready = jobs.put({"send": "waiting", "body": "x" * 200})
        scheduled = jobs.put({"send": "later"}, delay=3600)
        other = JobQueue(cache, "reports").put("monthly")
        claim = Claims(cache).acquire("report:2025", lease=600)
        assert claim is not None
        return Filled(
            directory=directory,
            ready=ready,
            scheduled=scheduled,
            leased=taken.id,
            dead=doomed.id,
            other=other,
            claim_key="report:2025",
            claim_token=claim.token,
        )
    finally:
        cache.close()


def digest(directory: Path) -> dict[str, str]:
    """Every file under ``directory`` with the hash of its bytes (to show nothing changed)."""
    found = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            found[str(path.relative_to(directory))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found
