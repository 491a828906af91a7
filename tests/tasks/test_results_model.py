"""TaskResult against a model: queueing, cancelling and running tasks in any order, each
task's status and ``get()`` agree with what a model of the tasks says. The tasks run one at a
time through the worker's own take, run and settle (``Worker.step``, thread pool), in this
process, on a real store."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import diskcache_oxide as dc
import pytest
from diskcache_oxide.tasks._pools import ThreadPool
from diskcache_oxide.tasks._worker import Worker
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

pytestmark = pytest.mark.oxide


class TaskResults(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp()
        self.tasks = dc.Tasks(self.directory)

        @self.tasks.task(name="model.add")
        def add(a: int, b: int) -> int:
            return a + b

        @self.tasks.task(name="model.boom", retries=0)
        def boom(text: str) -> None:
            raise ValueError(text)

        self.add, self.boom = add, boom
        self.worker = Worker(
            self.tasks.jobs,
            {"model.add": add, "model.boom": boom},
            ThreadPool(),
            concurrency=1,
            grace=0,
            burst=True,
            poll=0,
        )
        self.results: list[dc.TaskResult] = []
        # id -> (status, the value or the failure's message)
        self.model: dict[int, tuple[str, Any]] = {}

    def teardown(self) -> None:
        self.tasks.cache.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    @rule(a=st.integers(-5, 5), b=st.integers(-5, 5))
    def delay_add(self, a: int, b: int) -> None:
        result = self.add.delay(a, b)
        self.results.append(result)
        self.model[result.id] = ("queued", a + b)

    @rule(text=st.sampled_from(["x", "y"]))
    def delay_boom(self, text: str) -> None:
        result = self.boom.delay(text)
        self.results.append(result)
        self.model[result.id] = ("queued", text)

    @precondition(lambda self: self.results)
    @rule(index=st.integers(0, 1000))
    def cancel(self, index: int) -> None:
        result = self.results[index % len(self.results)]
        status, payload = self.model[result.id]
        assert result.cancel() is (status == "queued")
        if status == "queued":
            self.model[result.id] = ("cancelled", payload)

    @rule()
    def run_one(self) -> None:
        queued = sorted(i for i, (status, _) in self.model.items() if status == "queued")
        assert self.worker.step(0) is bool(queued)
        if queued:
            first = queued[0]  # the oldest due job is taken first
            _, payload = self.model[first]
            self.model[first] = ("failed" if isinstance(payload, str) else "succeeded", payload)

    @invariant()
    def statuses_and_results_agree(self) -> None:
        for result in self.results:
            status, payload = self.model[result.id]
            assert result.status == status
            if status == "queued":
                with pytest.raises(dc.ResultTimeout):
                    result.get(timeout=0)
            elif status == "succeeded":
                assert result.get(timeout=0) == payload
            elif status == "failed":
                with pytest.raises(dc.TaskFailed) as caught:
                    result.get(timeout=0)
                assert (caught.value.type_name, caught.value.message) == ("ValueError", payload)
            else:
                with pytest.raises(dc.TaskCancelled):
                    result.get(timeout=0)
        dead = [info.id for info in self.tasks.jobs.dead()]
        assert dead == sorted(i for i, (status, _) in self.model.items() if status == "failed")


TaskResults.TestCase.settings = settings(max_examples=40, stateful_step_count=20, deadline=None)
test_task_results = TaskResults.TestCase
