"""A streamed run on `RayExecutor` delivers the remote tasks' events, as the local one does."""

from __future__ import annotations

import contextlib

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
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use

RETRY = RetryPolicy(max_attempts=2, initial_delay=0, jitter="none")


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
