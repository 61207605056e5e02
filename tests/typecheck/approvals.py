"""Type-checked, never run: a policy that asks a person, and a resume that answers."""

from __future__ import annotations

from agentmesh import Coordinator, Task
from agentmesh.approvals import Approval, Approve, Edit, PendingApproval, Reject
from agentmesh.coordinator import Report
from agentmesh.events import RunStream, TaskFinished
from agentmesh.policies import PreToolUse, Ruling, ToolCallEvent, pre_tool_use


@pre_tool_use(tool="refund", asks=True)
def refund_limit(event: ToolCallEvent) -> Ruling | None:
    return Ruling.ask("over the limit") if event.arguments["amount"] > 100 else None


policy: PreToolUse = refund_limit


async def answer(coordinator: Coordinator, first: Report) -> Report:
    waiting: tuple[PendingApproval, ...] = first.pending_approvals
    answers: dict[str, Approval] = {}
    for pending in waiting:
        if pending.tool == "refund":
            answers[pending.id] = Edit(arguments={"amount": 100})
        elif pending.reason:
            answers[pending.id] = Reject("not now")
        else:
            answers[pending.id] = Approve()
    return await coordinator.resume(first.run_id, approvals=answers)


async def watch(coordinator: Coordinator, first: Report, tasks: list[Task]) -> list[str]:
    statuses: list[str] = []
    stream: RunStream = coordinator.resume_stream(
        first.run_id, approvals={p.id: Approve() for p in first.pending_approvals}, tasks=tasks
    )
    async with stream:
        async for event in stream:
            if isinstance(event, TaskFinished):
                statuses.append(event.entry.status.value)
    return statuses
