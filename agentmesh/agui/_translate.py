"""One agentmesh run's events as the events of one AG-UI run.

    RunStarted            STATE_SNAPSHOT (the coverage grid, empty)
    TaskStarted           STEP_STARTED (the task id) + STATE_DELTA (its row, "running")
    ToolCalled            TOOL_CALL_START / _ARGS / _END / _RESULT (data, or the envelope)
    ApprovalApplied       CUSTOM "agentmesh.ApprovalApplied", and for a call's approval the
                          TOOL_CALL_RESULT of the call its interrupt named: the answer
    AttemptFailed         CUSTOM "agentmesh.envelope" (the envelope, the attempt, retry_in)
    TaskFinished          STATE_DELTA (its coverage entry) + STEP_FINISHED
    the others            CUSTOM "agentmesh.<EventName>" (the event's JSON form, masked)
    RunFinished           STATE_SNAPSHOT (the report's grid), TEXT_MESSAGE_* (the report as
                          Markdown: the synthesis), then for each pending approval of a call
                          its TOOL_CALL_START / _ARGS / _END, and RUN_FINISHED: an interrupt
                          outcome (one interrupt per pending approval), or success with the
                          report as `result`

Every value that leaves is the event's masked JSON form (`to_dict()`): secrets never reach
the consumer. The AG-UI run's own RUN_STARTED comes first (`started`) and a failure ends
it with RUN_ERROR (`failed`).
"""

from __future__ import annotations

import json
from typing import Any, Final

from ag_ui.core import (
    CustomEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core.events import BaseEvent

from agentmesh.agui._answers import interrupt_for, tool_call_id
from agentmesh.agui._grid import Grid
from agentmesh.approvals import ApprovalKind
from agentmesh.events import (
    ApprovalApplied,
    AttemptFailed,
    Event,
    RunFinished,
    RunStarted,
    TaskFinished,
    TaskStarted,
    ToolCalled,
)
from agentmesh.report import Report

__all__ = ["PROTOCOL_VERSION", "RunTranslator"]

PROTOCOL_VERSION: Final = "1.0"
"""The AG-UI protocol version the endpoint speaks (`RUN_STARTED.protocolVersion`)."""


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


class RunTranslator:
    """Turns the events of one agentmesh run (or resume) into one AG-UI run's events.

    Args:
        thread_id: the AG-UI conversation (`RunAgentInput.thread_id`).
        run_id: the AG-UI run (`RunAgentInput.run_id`); a resume is an AG-UI run of its own.
        state: the state the client holds (`RunAgentInput.state`): the grid of a resume
            starts from its rows when it is this run's grid, so the first snapshot
            keeps the tasks finished before.
    """

    def __init__(self, thread_id: str, run_id: str, state: Any = None) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.grid: Grid | None = None
        # The state the client holds (`RunAgentInput.state`): a resume's grid starts from it.
        self._given_state = state
        self._open_steps: dict[str, None] = {}

    def started(self, given: RunAgentInput | None = None) -> list[BaseEvent]:
        """The AG-UI run's first event, echoing the input it was started with."""
        return [
            RunStartedEvent(
                thread_id=self.thread_id,
                run_id=self.run_id,
                protocol_version=PROTOCOL_VERSION,
                input=given,
            )
        ]

    def failed(self, message: str, code: str) -> list[BaseEvent]:
        """The AG-UI run's last event when it failed: its open steps closed, then RUN_ERROR."""
        return [*self._close_steps(None), RunErrorEvent(message=message, code=code)]

    def translate(self, event: Event) -> list[BaseEvent]:
        """The AG-UI events that say what `event` says, in order."""
        at = _ms(event.timestamp)
        match event:
            case RunStarted():
                self.grid = Grid(event.run_id, self._given_state)
                return [self.grid.snapshot(at, tasks=event.tasks, subagents=list(event.subagents))]
            case TaskStarted():
                row = {"topic": event.task.label, "source": event.subagent, "status": "running"}
                return [*self._open_step(event.task_id, at), self._row(event, row, at)]
            case TaskFinished():
                row = event.to_dict()["entry"]
                return [
                    *self._open_step(event.task_id, at),
                    self._row(event, row, at),
                    *self._close_step(event.task_id, at),
                ]
            case ToolCalled():
                return self._tool_call(event, at)
            case AttemptFailed():
                return [CustomEvent(name="agentmesh.envelope", value=event.to_dict(), timestamp=at)]
            case ApprovalApplied():
                return [
                    CustomEvent(
                        name="agentmesh.ApprovalApplied", value=event.to_dict(), timestamp=at
                    ),
                    *self._answered(event, at),
                ]
            case RunFinished():
                return self._finished(event.report, at)
            case _:
                name = f"agentmesh.{type(event).__name__}"
                return [CustomEvent(name=name, value=event.to_dict(), timestamp=at)]

    def _row(self, event: Event, row: dict[str, Any], at: int) -> BaseEvent:
        if self.grid is None:
            self.grid = Grid(event.run_id)
        assert event.task_id is not None
        return self.grid.row(event.task_id, row, at)

    def _open_step(self, task_id: str | None, at: int) -> list[BaseEvent]:
        if task_id is None or task_id in self._open_steps:
            return []
        self._open_steps[task_id] = None
        return [StepStartedEvent(step_name=task_id, timestamp=at)]

    def _close_step(self, task_id: str | None, at: int | None) -> list[BaseEvent]:
        if task_id is None or task_id not in self._open_steps:
            return []
        del self._open_steps[task_id]
        return [StepFinishedEvent(step_name=task_id, timestamp=at)]

    def _close_steps(self, at: int | None) -> list[BaseEvent]:
        return [
            step for task_id in list(self._open_steps) for step in self._close_step(task_id, at)
        ]

    def _tool_call(self, event: ToolCalled, at: int) -> list[BaseEvent]:
        data = event.to_dict()  # masked
        call_id = f"{self.run_id}:call:{event.seq}"
        failed = data["envelope"] is not None
        content = json.dumps(data["envelope"] if failed else data["result"], default=str)
        meta = {"agentmesh": {"taskId": event.task_id, "subagent": event.subagent}}
        return [
            ToolCallStartEvent(
                tool_call_id=call_id, tool_call_name=event.tool, timestamp=at, metadata=meta
            ),
            ToolCallArgsEvent(
                tool_call_id=call_id, delta=json.dumps(data["arguments"]), timestamp=at
            ),
            ToolCallEndEvent(tool_call_id=call_id, timestamp=at),
            ToolCallResultEvent(
                message_id=f"{call_id}:result",
                tool_call_id=call_id,
                content=content,
                role="tool",
                timestamp=at,
                metadata={"agentmesh": {"isError": failed, "attempts": event.attempts}},
            ),
        ]

    def _answered(self, event: ApprovalApplied, at: int) -> list[BaseEvent]:
        """The person's answer as the result of the call the interrupt was about (streamed,
        without a result, by the run that was interrupted); the call itself, when made, is
        a tool call of its own."""
        if event.approval.kind is not ApprovalKind.TOOL_CALL:
            return []
        approval = event.to_dict()["approval"]  # masked
        call_id = tool_call_id(event.run_id, event.approval.id)
        answer = {
            key: approval[key]
            for key in ("answer", "answerReason", "editedArguments")
            if approval.get(key) is not None
        }
        return [
            ToolCallResultEvent(
                message_id=f"{call_id}:answer",
                tool_call_id=call_id,
                content=json.dumps({**answer, "note": event.approval.note()}, default=str),
                role="tool",
                timestamp=at,
            )
        ]

    def _finished(self, report: Report, at: int) -> list[BaseEvent]:
        grid = self.grid or Grid(report.run_id)
        message_id = f"{self.run_id}:synthesis"
        events: list[BaseEvent] = [
            *self._close_steps(at),
            grid.final(report, at),
            TextMessageStartEvent(message_id=message_id, role="assistant", timestamp=at),
            TextMessageContentEvent(
                message_id=message_id, delta=report.to_markdown(), timestamp=at
            ),
            TextMessageEndEvent(message_id=message_id, timestamp=at),
        ]
        for pending in report.pending_approvals:
            if pending.kind is ApprovalKind.TOOL_CALL and pending.tool is not None:
                call_id = tool_call_id(report.run_id, pending.id)
                arguments = json.dumps(pending.arguments or {}, default=str)
                events += [
                    ToolCallStartEvent(
                        tool_call_id=call_id, tool_call_name=pending.tool, timestamp=at
                    ),
                    ToolCallArgsEvent(tool_call_id=call_id, delta=arguments, timestamp=at),
                    ToolCallEndEvent(tool_call_id=call_id, timestamp=at),
                ]
        if report.pending_approvals:
            outcome: dict[str, Any] = {
                "type": "interrupt",
                "interrupts": [
                    interrupt_for(report.run_id, pending).model_dump(by_alias=True)
                    for pending in report.pending_approvals
                ],
            }
            finished = RunFinishedEvent.model_validate(
                {
                    "threadId": self.thread_id,
                    "runId": self.run_id,
                    "outcome": outcome,
                    "timestamp": at,
                }
            )
        else:
            finished = RunFinishedEvent.model_validate(
                {
                    "threadId": self.thread_id,
                    "runId": self.run_id,
                    "outcome": {"type": "success"},
                    "result": report.to_dict(),
                    "timestamp": at,
                }
            )
        return [*events, finished]
