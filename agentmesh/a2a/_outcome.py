"""A finished A2A task -> what the subagent returns or raises:

    completed        its artifacts' parts as data (text as text, data as data);
                     no artifacts -> an empty Success
    failed           an agentmesh envelope in a data part of the status message, whole;
                     else other `remote_failed` with the remote message
    rejected         an agentmesh envelope, whole, as for failed; else business `rejected`
    canceled         transient `cancelled` (not retried here: the remote task ended)
    auth-required    permission `auth_required`

`input-required` is a question for a person (`_asked`), not an end of this table.
`findings` are the artifacts a task handed back before it failed: its partial results.
"""

from __future__ import annotations

from typing import Any, Final

import pydantic
from a2a.helpers.proto_helpers import get_data_parts
from a2a.types.a2a_pb2 import Message, Part, Task, TaskState

from agentmesh._redaction import redact_text
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, ErrorType
from agentmesh.errors import (
    AgentError,
    BusinessError,
    CallFailed,
    PermissionDenied,
    TransientError,
)

__all__ = ["FINAL_STATES", "findings", "result_of", "status_text", "task_size"]

# The states a remote task does not leave by itself (input-required: only with an answer).
FINAL_STATES: Final = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_AUTH_REQUIRED,
        TaskState.TASK_STATE_INPUT_REQUIRED,
    }
)

# A remote message can be a whole traceback; the envelope keeps its start.
_MAX_TEXT: Final = 2000


def result_of(task: Task, agent: str) -> Any:
    """The completed task's data; raises the failure of any other end."""
    state = task.status.state
    if state == TaskState.TASK_STATE_COMPLETED:
        return _data(task)
    said = status_text(task)
    where = f"the A2A agent {agent}"
    if state in (TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_REJECTED):
        # An agentmesh server's envelope (a business one ends `rejected`) is taken whole.
        envelope = _envelope(task.status.message)
        if envelope is not None:
            note = f"from {envelope.source} over A2A"
            details = "; ".join(filter(None, [note, envelope.details]))
            raise CallFailed(envelope.model_copy(update={"details": details}))
    if state == TaskState.TASK_STATE_FAILED:
        raise AgentError(
            said or f"{where} failed the task without a message",
            category=ErrorCategory.OTHER,
            error_type="remote_failed",
            details=f"A2A task {task.id} failed",
        )
    if state == TaskState.TASK_STATE_REJECTED:
        raise BusinessError(said or f"{where} rejected the task", error_type="rejected")
    if state == TaskState.TASK_STATE_CANCELED:
        # The remote ended the task: sending it again would be a new task, so not here.
        raise TransientError(
            said or f"{where} cancelled the task",
            error_type=ErrorType.CANCELLED,
            retryable=False,
            details=f"A2A task {task.id} was cancelled by the remote agent",
        )
    if state == TaskState.TASK_STATE_AUTH_REQUIRED:
        raise PermissionDenied(
            said or f"{where} requires authentication", error_type="auth_required"
        )
    raise TransientError(
        f"{where} left the task {TaskState.Name(state)}",
        error_type="unavailable",
        retryable=False,
    )


def status_text(task: Task) -> str:
    """The text of the task's status message, secrets masked and cut to a readable size."""
    return _text(task.status.message) if task.status.HasField("message") else ""


def findings(task: Task) -> list[Any]:
    """Every part of the task's artifacts as data, in order (what it found so far)."""
    return [_value(part) for artifact in task.artifacts for part in artifact.parts]


def task_size(task: Task) -> int:
    """Bytes of the task's artifacts as sent (the bound is on what the remote hands back)."""
    return sum(artifact.ByteSize() for artifact in task.artifacts)


def _data(task: Task) -> Any:
    values = findings(task)
    if not values:
        return []
    return values[0] if len(values) == 1 else values


def _value(part: Part) -> Any:
    kind = part.WhichOneof("content")
    if kind == "text":
        return part.text
    if kind == "data":
        return _whole_numbers(get_data_parts([part])[0])
    if kind == "url":
        return {"url": part.url, "mediaType": part.media_type or None}
    # Raw bytes: described, not decoded (an agentmesh result is JSON data).
    return {"filename": part.filename or None, "mediaType": part.media_type, "bytes": len(part.raw)}


def _whole_numbers(value: Any) -> Any:
    """Protobuf's Value keeps every number as a double: 3.0 is read back as 3."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    if isinstance(value, dict):
        return {key: _whole_numbers(item) for key, item in value.items()}
    return value


def _text(message: Message) -> str:
    text = "\n".join(part.text for part in message.parts if part.WhichOneof("content") == "text")
    return redact_text(text)[:_MAX_TEXT]


def _envelope(message: Message) -> ErrorEnvelope | None:
    for part in message.parts:
        if part.WhichOneof("content") != "data":
            continue
        value = _whole_numbers(get_data_parts([part])[0])
        if not isinstance(value, dict) or value.get("isError") is not True:
            continue
        try:
            return ErrorEnvelope.model_validate(value)
        except pydantic.ValidationError:
            continue
    return None
