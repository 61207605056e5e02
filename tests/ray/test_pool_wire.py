"""What a batch of small tasks costs on the wire: the run's shared parts travel once per
batch, and a worker answers in batches without holding back a long task's end."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pytest

from agentmesh import Context, Task, subagent
from agentmesh.executors import _ray_actor
from agentmesh.executors._local import Dispatch
from agentmesh.executors._ray_actor import Mailbox, TaskWorker, pack
from agentmesh.executors._ray_spec import Shipment, SpecMaker
from agentmesh.scope import RunScope


@subagent(name="echo")
async def echo(task: Task, ctx: Context) -> list[str]:
    return [task.query]


def ship(obj: object, what: str, check: Any = None) -> Shipment:
    return Shipment(f"key-{id(obj)}", None)


def maker() -> SpecMaker:
    return SpecMaker(ship, ("state-actor", "agentmesh"), budget_batch=4, state_refresh=0.1)


class TestRunTerms:
    async def test_a_batch_carries_the_runs_state_once(self) -> None:
        """A hundred dispatches of one run in one turn share one snapshot of its state:
        their batch is about one state's size plus a little per task, not a hundred."""
        scope = RunScope("run", state={f"key {i}": i for i in range(1_000)})
        specs = maker()
        batch = [
            specs.spec(echo, Task(query=f"q{i}"), Dispatch(scope, f"t{i}"), None)
            for i in range(100)
        ]
        one = len(pack(batch[:1]))
        assert len(pack(batch)) < one + 100 * 300  # a state's copy alone is over 5,000 bytes
        sent = pickle.loads(pack(batch))
        assert len({id(spec.terms) for spec in sent}) == 1
        assert [spec.task.query for spec in sent] == [f"q{i}" for i in range(100)]
        assert len({spec.call for spec in sent}) == 100  # each dispatch its own

    async def test_a_dispatch_sees_the_writes_merged_before_it(self) -> None:
        """A task's writes, once merged on the driver, reach the next dispatch at once;
        without any, the next turn of the loop takes a new snapshot."""
        scope = RunScope("run", state={"seen": 1})
        specs = maker()
        first = specs.spec(echo, Task(query="a"), Dispatch(scope, "a"), None)
        scope.state["seen"] = 2
        specs.changed(scope)  # as the executor does when it merges a task's writes
        second = specs.spec(echo, Task(query="b"), Dispatch(scope, "b"), None)
        scope.state["seen"] = 3
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        third = specs.spec(echo, Task(query="c"), Dispatch(scope, "c"), None)
        assert [s.terms.state["seen"] for s in (first, second, third)] == [1, 2, 3]


class TestPollBatches:
    @pytest.fixture(autouse=True)
    def _long_linger(self, monkeypatch: pytest.MonkeyPatch) -> None:
        # A linger no test outlives: what answers a poll here is the rule, not a timer.
        monkeypatch.setattr(_ray_actor, "_LINGER", 60.0)

    async def test_short_tasks_ends_wait_until_every_task_sent_has_ended(self) -> None:
        mailbox = Mailbox()
        mailbox.running = 2  # two dispatches sent
        poll = asyncio.create_task(mailbox.news())
        mailbox.started("a")
        mailbox.ended("a", "ok", {}, 0.0001)
        for _ in range(3):
            await asyncio.sleep(0)
        assert not poll.done()  # "b" is still to come: one message for both
        mailbox.started("b")
        mailbox.ended("b", "ok", {}, 0.0001)
        await asyncio.wait_for(poll, 5)
        assert [item[:2] for item in mailbox.take()] == [
            ("started", "a"),
            ("ended", "a"),
            ("started", "b"),
            ("ended", "b"),
        ]

    async def test_a_long_tasks_end_is_answered_at_once(self) -> None:
        """Batching a long task's end gains nothing: the driver sends the next one sooner."""
        mailbox = Mailbox()
        mailbox.running = 2
        poll = asyncio.create_task(mailbox.news())
        mailbox.started("a")
        await asyncio.sleep(0)
        mailbox.ended("a", "ok", {}, 61.0)  # longer than a poll lingers
        await asyncio.wait_for(poll, 5)
        assert [item[:2] for item in mailbox.take()] == [("started", "a"), ("ended", "a")]


class TestANewEventLoop:
    async def test_an_older_loops_poll_leaves_the_new_loops_news_to_it(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A closed event loop's poll may still wait on a worker, and Ray does not order
        an async actor's calls: the new loop's dispatch can run before the new loop's
        poll. The old poll then answers None, and the task's end goes to the new loop
        (taken by the old poll, it was lost and the new loop waited for ever)."""

        async def run_spec(spec: Any, events: Any) -> dict[str, Any]:
            return {"outcome": spec.task.query}

        monkeypatch.setattr(_ray_actor, "run_spec", run_spec)
        monkeypatch.setenv("RAY_WARN_BLOCKING_GET_INSIDE_ASYNC", "0")  # the worker sets it
        worker = TaskWorker(1)
        assert pickle.loads(await worker.poll(1, None, {})) == []  # the first loop's
        old = asyncio.create_task(worker.poll(1, None, {}))  # its next: the loop closes
        await asyncio.sleep(0)
        spec = maker().spec(echo, Task(query="a"), Dispatch(RunScope("run"), "a"), None)
        await worker.submit(2, pack([spec]), {})  # the new loop's dispatch, before its poll
        assert await asyncio.wait_for(old, 5) is None
        news: list[tuple[Any, ...]] = []
        while not any(item[0] == "ended" for item in news):
            news += pickle.loads(await asyncio.wait_for(worker.poll(2, None, {}), 5))
        assert [item[:3] for item in news if item[0] == "ended"] == [
            ("ended", spec.call, ("ok", {"outcome": "a"}))
        ]
