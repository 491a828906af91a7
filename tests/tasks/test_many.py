"""1,000 tasks over 4 worker processes: each runs once and every result is delivered."""

from __future__ import annotations

import re
import signal
from types import ModuleType
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.oxide, pytest.mark.backends]

COUNT = 1000


def test_a_thousand_tasks_over_four_workers(app: ModuleType, store: str, start_worker: Any) -> None:
    results = [app.counted.delay(i) for i in range(COUNT)]
    workers = [start_worker(store, "--pool", "process") for _ in range(4)]
    assert [r.get(timeout=300) for r in results] == [2 * i for i in range(COUNT)]
    cache = app.tasks.cache
    assert [cache.get(("runs", i)) for i in range(COUNT)] == [1] * COUNT
    for worker in workers:
        worker.signal(signal.SIGTERM)
    assert [worker.wait() for worker in workers] == [0] * 4
    ran = [
        int(match)
        for worker in workers
        for match in re.findall(
            r"sample_tasks\.counted id=(\d+) attempt=1/3 \S+ succeeded", worker.log
        )
    ]
    assert sorted(ran) == sorted(r.id for r in results)
    assert len(app.tasks.jobs) == 0
