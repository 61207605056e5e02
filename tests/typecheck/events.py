"""Type-checked, never run: a streamed run's events as a user sees them."""

from __future__ import annotations

from agentmesh import Coordinator, Report, Task, subagent
from agentmesh.context import Context
from agentmesh.coordinator import CoverageEntry
from agentmesh.events import (
    AttemptFailed,
    Event,
    Routed,
    RunFinished,
    RunStream,
    TaskFinished,
    UsageUpdated,
    parse_event,
)


@subagent(name="docs")
async def docs(task: Task, ctx: Context) -> list[str]:
    return [task.query]


async def follow(tasks: list[Task]) -> Report | None:
    entries: list[CoverageEntry] = []
    lines: list[str] = []
    stream: RunStream = Coordinator([docs]).stream(tasks, run_id="r1", buffer=64)
    async with stream as events:
        async for event in events:
            lines.append(event.to_json())
            match event:
                case AttemptFailed(retry_in=delay) if delay is not None:
                    assert delay >= 0
                case Routed(decision=decision):
                    assert decision is not None
                case UsageUpdated(usage=call, total=total):
                    assert total.model_calls >= call.model_calls
                case TaskFinished(entry=entry):
                    entries.append(entry)
                case RunFinished(report=report):
                    assert report.run_id == event.run_id
    again: Event = parse_event(lines[0])
    assert again.seq == 1
    return events.report
