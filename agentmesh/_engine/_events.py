"""A task's events: the run's `EventSink` as one task's engine emits to it.

A task's failed attempts, model usage, policy rulings and recorded progress become the
run's events here, with the task and its subagent filled in; the sink numbers them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentmesh._engine._partials import PartialRecorder
from agentmesh.envelope import ErrorEnvelope, Ruling, Success
from agentmesh.events import (
    AttemptFailed,
    EventSink,
    PartialRecorded,
    PolicyRuling,
    ToolCalled,
    UsageUpdated,
)
from agentmesh.usage import ModelUsage, UsageSummary

__all__ = ["TaskEvents"]


class TaskEvents:
    """The run's sink as one task's engine emits to it: the task and subagent filled in.

    `task_id` is None for the run's own model calls (the synthesizer's).
    """

    __slots__ = ("sink", "subagent", "task_id")

    def __init__(self, sink: EventSink, task_id: str | None, subagent: str) -> None:
        self.sink = sink
        self.task_id = task_id
        self.subagent = subagent

    def attempt_failed(
        self, source: str, envelope: ErrorEnvelope, attempt: int, retry_in: float | None
    ) -> None:
        self.sink.emit(
            AttemptFailed,
            self.task_id,
            source=source,
            attempt=attempt,
            envelope=envelope,
            retry_in=retry_in,
        )

    def tool_called(self, call: dict[str, Any], outcome: Success[Any] | ErrorEnvelope) -> None:
        """A call was settled: `call` is its attempted query (tool, masked arguments)."""
        failed = isinstance(outcome, ErrorEnvelope)
        self.sink.emit(
            ToolCalled,
            self.task_id,
            subagent=self.subagent,
            tool=call["tool"],
            arguments=call["arguments"],
            result=outcome.data if isinstance(outcome, Success) else None,
            envelope=outcome if failed else None,
            attempts=outcome.attempts,
        )

    def usage_updated(self, line: ModelUsage, total: UsageSummary) -> None:
        self.sink.emit(
            UsageUpdated,
            self.task_id,
            subagent=self.subagent,
            model=line.model,
            usage=line,
            total=total,
        )

    def ruling(self, ruling: Ruling) -> None:
        self.sink.emit(PolicyRuling, self.task_id, subagent=self.subagent, ruling=ruling)

    def record(
        self,
        recorder: PartialRecorder,
        findings: Iterable[Any] | Any,
        completed: str | Iterable[str] | None,
        pending: str | Iterable[str] | None,
    ) -> None:
        """`recorder.record(...)` (for `ctx.record_partial`), then its event.

        Read once, here: a generator given to `record_partial` is not iterated twice.
        """
        # As `PartialRecorder` reads them: a dict or a string is one finding.
        if isinstance(findings, dict | str | bytes) or not isinstance(findings, Iterable):
            findings = (findings,)
        items, done, todo = tuple(findings), _names(completed), _names(pending)
        recorder.record(items, completed=done, pending=todo)
        self.sink.emit(
            PartialRecorded,
            self.task_id,
            subagent=self.subagent,
            findings=items,
            completed=done,
            pending=todo,
        )

    def restored(self, recorder: PartialRecorder) -> None:
        """The progress a previous run saved, now in `recorder`, read back."""
        self.sink.emit(
            PartialRecorded,
            self.task_id,
            subagent=self.subagent,
            findings=recorder.findings,
            completed=recorder.completed,
            pending=recorder.pending,
            restored=True,
        )

    def room(self) -> Any:
        return self.sink.room()


def _names(value: str | Iterable[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)
