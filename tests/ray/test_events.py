"""A streamed run on `RayExecutor` delivers the remote tasks' events, as the local one does."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

from agentmesh import (
    Context,
    Coordinator,
    RetryPolicy,
    Task,
    ToolCallFailed,
    TransientError,
    subagent,
    tool,
)
from agentmesh.events import (
    AttemptFailed,
    Event,
    PartialRecorded,
    PolicyRuling,
    RunFinished,
    TaskFinished,
)
from agentmesh.executors import Executor, LocalExecutor, RayExecutor
from agentmesh.executors._ray_actor import Mailbox
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use

RETRY = RetryPolicy(max_attempts=2, initial_delay=0, jitter="none")
# Bounds a remote task's wait for the driver: a regression fails instead of hanging.
GUARD = 20.0


@tool
async def refund(amount: int) -> str:
    return "refunded"


@pre_tool_use
def no_refunds(event: ToolCallEvent) -> Ruling | None:
    return Ruling.deny("refunds need a person") if event.tool == "refund" else None


@subagent(name="remote", retry=RETRY, policies=[no_refunds])
async def remote(task: Task, ctx: Context) -> list[str]:
    """Records progress, fails its first attempt, and has one tool call denied."""
    ctx.record_partial([f"read {task.query}"], completed="first")
    if ctx.attempt == 1:
        raise TransientError("a blip")
    with contextlib.suppress(ToolCallFailed):  # denied: the ruling is what this test wants
        await ctx.call(refund, amount=10)
    return [f"found {task.query}"]


async def stream_on(executor: Executor) -> list[Event]:
    coordinator = Coordinator([remote], executor=executor)
    tasks = [Task(id=f"t{i}", query=f"q{i}") for i in range(3)]
    return [event async for event in coordinator.stream(tasks, run_id="ray-events")]


def story(events: list[Event], task_id: str) -> list[str]:
    return [type(e).__name__ for e in events if e.task_id == task_id]


class TestRayEvents:
    async def test_remote_tasks_deliver_the_same_events_as_local_ones(
        self, ray_executor: RayExecutor
    ) -> None:
        """Partial results, the failed attempt and the ruling of each remote task arrive."""
        local = await stream_on(LocalExecutor())
        remote_events = await stream_on(ray_executor)
        for task_id in ("t0", "t1", "t2"):
            assert story(remote_events, task_id) == story(local, task_id)
        assert story(remote_events, "t0") == [
            "TaskStarted",
            "PartialRecorded",
            "AttemptFailed",
            "PartialRecorded",
            "PolicyRuling",
            "Routed",
            "TaskFinished",
        ]
        assert [e.seq for e in remote_events] == list(range(1, len(remote_events) + 1))
        failed = next(e for e in remote_events if isinstance(e, AttemptFailed))
        assert (failed.source, failed.attempt, failed.retry_in) == ("remote", 1, 0.0)
        ruled = next(e for e in remote_events if isinstance(e, PolicyRuling))
        assert (ruled.ruling.policy, ruled.ruling.tool) == ("no_refunds", "refund")
        partial = next(e for e in remote_events if isinstance(e, PartialRecorded))
        assert partial.run_id == "ray-events"
        assert sum(isinstance(e, TaskFinished) for e in remote_events) == 3
        final = remote_events[-1]
        assert isinstance(final, RunFinished)
        assert final.report.coverage_ratio == 1.0


@subagent(name="long", retry=RetryPolicy.never())
async def long_task(task: Task, ctx: Context) -> list[str]:
    """Records progress, then runs on until the driver has seen it (a file says so)."""
    ctx.record_partial(["early"], completed="first half")
    seen = task.query
    async with asyncio.timeout(GUARD):
        # The driver writes the file: there is no event to wait on across processes.
        while not os.path.exists(seen):  # noqa: ASYNC110, ASYNC240  # see above; a stat is instant
            await asyncio.sleep(0.02)
    return ["late"]


class TestLiveEvents:
    async def test_a_running_task_s_events_reach_the_stream_before_it_returns(
        self, ray_executor: RayExecutor, tmp_path: Path
    ) -> None:
        """The task ends only once the driver has read its partial result: events are live."""
        seen = tmp_path / "seen"
        coordinator = Coordinator([long_task], executor=ray_executor)
        events: list[Event] = []
        async with coordinator.stream([Task(id="t", query=str(seen))]) as stream:
            async for event in stream:
                events.append(event)
                if isinstance(event, PartialRecorded):
                    seen.write_text("read")
        assert story(events, "t") == ["TaskStarted", "PartialRecorded", "Routed", "TaskFinished"]
        final = events[-1]
        assert isinstance(final, RunFinished)
        assert final.report.coverage_ratio == 1.0
        assert [f.content for f in final.report.findings] == ["late"]


class TestWorkerMailbox:
    async def test_a_full_mailbox_holds_the_tasks_until_the_driver_takes_it(self) -> None:
        """Past `bound` events untaken, a task waits at `room()`; a take lets it go on."""
        mailbox = Mailbox(bound=2)
        event = PartialRecorded(
            run_id="r",
            task_id="t",
            seq=1,
            timestamp=0.0,
            subagent="s",
            findings=("x",),
            completed=(),
            pending=(),
        )
        mailbox.event("call", event)
        await asyncio.wait_for(mailbox.room(), 1)  # below the bound: room at once
        mailbox.event("call", event)
        waiting = asyncio.create_task(mailbox.room())
        await asyncio.sleep(0)
        assert not waiting.done()
        await mailbox.news()
        assert [item[0] for item in mailbox.take()] == ["event", "event"]
        await asyncio.wait_for(waiting, 1)
