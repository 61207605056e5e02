"""What a served run says over A2A: an outcome, a report, a question, an event, as parts.

Success (not empty)   one artifact: text as a text part, anything else as a data part;
                      the success's other fields (source, attempts, ...) as metadata
Success (empty)       no artifact: "searched, found nothing" is a completed task
ErrorEnvelope         a status message: one line of text and the envelope's camelCase
                      JSON whole in a data part (an agentmesh client takes it back whole)
Report                one artifact: the Markdown as text and the report's JSON as data
PendingApproval       a status message: the question in words and as JSON, with how
                      to answer it
RunEvent              a status message: one line and the event's JSON
"""

from __future__ import annotations

import json
from typing import Any, Final

import pydantic_core
from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import Part
from pydantic import TypeAdapter

from agentmesh._redaction import redact
from agentmesh.approvals import ApprovalKind, PendingApproval
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, Success
from agentmesh.events import AttemptFailed, PartialRecorded, PolicyRuling, RunEvent, TaskStarted
from agentmesh.report import Report

__all__ = [
    "ANSWER_HELP",
    "envelope_parts",
    "event_parts",
    "plain",
    "question_parts",
    "rejects",
    "report_parts",
    "success_metadata",
    "success_parts",
]

_PENDING: Final[TypeAdapter[PendingApproval]] = TypeAdapter(PendingApproval)
ANSWER_HELP: Final = (
    'Answer with a message on this task: "approve", "reject: <reason>", or a data part '
    '{"approvalId": ..., "action": "approve" | "reject" | "edit", "reason": ..., '
    '"arguments": {...} (a call), "query": ... (an escalated task)}.'
)


def success_parts(success: Success[Any]) -> list[Part]:
    """The parts of a success's one artifact; none for an empty success."""
    if success.is_empty:
        return []
    data = success.data
    if isinstance(data, str):
        return [new_text_part(data)]
    # Any data a subagent returns crosses, as over MCP: what JSON cannot hold as its text.
    return [new_data_part(pydantic_core.to_jsonable_python(data, fallback=str))]


def success_metadata(success: Success[Any]) -> dict[str, Any]:
    """The success's fields other than its data (source, attempts, rulings, usage, ...)."""
    wire = success.model_copy(update={"data": None}).to_dict()
    wire.pop("data", None)
    return {"agentmesh": wire}


def envelope_parts(envelope: ErrorEnvelope) -> list[Part]:
    """One line for readers of text, then the envelope whole for programs."""
    retry = "retryable" if envelope.is_retryable else "not retryable"
    line = (
        f"{envelope.source} failed ({envelope.error_category.value}/{envelope.error_type}, "
        f"{retry}): {envelope.message}"
    )
    return [new_text_part(line), new_data_part(envelope.to_dict())]


def rejects(envelope: ErrorEnvelope) -> bool:
    """A business refusal is A2A's `rejected`; every other failure is `failed`."""
    return envelope.error_category is ErrorCategory.BUSINESS


def report_parts(report: Report) -> list[Part]:
    return [new_text_part(report.to_markdown()), new_data_part(report.to_dict())]


def question_parts(waiting: tuple[PendingApproval, ...]) -> list[Part]:
    """The questions a person must answer before the task goes on, and how to answer."""
    lines = [_question_line(pending) for pending in waiting]
    wire = [_pending_json(pending) for pending in waiting]
    return [
        new_text_part("\n".join([*lines, ANSWER_HELP])),
        new_data_part({"pendingApprovals": wire}),
    ]


def event_parts(event: RunEvent) -> list[Part]:
    return [new_text_part(_event_line(event)), new_data_part(event.to_dict())]


def _question_line(pending: PendingApproval) -> str:
    if pending.kind is ApprovalKind.ESCALATION:
        what = f"the task {pending.query!r} of {pending.subagent} was escalated"
    else:
        shown = ", ".join(
            f"{key}={json.dumps(value, default=str)}"
            for key, value in redact(pending.arguments or {}).items()
        )
        what = f"{pending.subagent} asks to call {pending.tool}({shown})"
    return f"Approval {pending.id}: {what}: {pending.reason} (asked by {pending.policy})"


def _pending_json(pending: PendingApproval) -> dict[str, Any]:
    wire: dict[str, Any] = _PENDING.dump_python(pending, mode="json", by_alias=True)
    return {key: value for key, value in redact(wire).items() if value is not None}


def _event_line(event: RunEvent) -> str:
    """The event in a few words; its JSON is beside it."""
    name = type(event).__name__
    if isinstance(event, TaskStarted):
        return f"{name}: {event.subagent} on {event.task.label!r}"
    if isinstance(event, AttemptFailed):
        envelope = event.envelope
        again = "" if event.retry_in is None else f", again in {event.retry_in:.2g}s"
        return (
            f"{name}: {event.source} attempt {event.attempt} "
            f"({envelope.error_category.value}/{envelope.error_type}{again})"
        )
    if isinstance(event, PolicyRuling):
        return f"{name}: {event.ruling.policy} {event.ruling.action} in {event.subagent}"
    if isinstance(event, PartialRecorded):
        return f"{name}: {event.subagent} found {len(event.findings)} so far"
    subagent = getattr(event, "subagent", None)
    return name if subagent is None else f"{name}: {subagent}"


def plain(value: Any) -> Any:
    """A protobuf Struct's value as plain JSON data; whole numbers as ints (protobuf keeps
    every number as a double, so a client's 3 arrives as 3.0)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str | bool | int | float) or value is None:
        return value
    if hasattr(value, "items"):  # a Struct (or a dict)
        return {str(key): plain(item) for key, item in value.items()}
    return [plain(item) for item in value]  # a ListValue
