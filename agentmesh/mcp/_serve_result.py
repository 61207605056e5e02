"""Outcomes as MCP tool results, and the envelopes of calls that never reach a subagent.

The outcome crosses whole, in `structuredContent`: a `Success` as its camelCase JSON
(with `isEmpty`, so "searched, nothing found" stays distinguishable from a failure),
an `ErrorEnvelope` with `isError: true` as its camelCase JSON. The text block is short,
for clients that read only text.
"""

from __future__ import annotations

from typing import Any, Final

import pydantic_core
from mcp.types import CallToolResult, TextContent
from pydantic import ValidationError as PydanticValidationError

from agentmesh.envelope import ErrorCategory, ErrorEnvelope, ErrorType, Outcome, Success

__all__ = ["RUN_ID_META", "invalid_arguments", "outcome_result", "unknown_tool"]

RUN_ID_META: Final = "agentmesh/runId"
"""The `_meta` key of a result naming the server-side run (to find its log events)."""
UNKNOWN_TOOL: Final = "unknown_tool"
# Longer results are cut in the text block only; `structuredContent` always has them whole.
TEXT_LIMIT: Final = 2_000


def outcome_result(outcome: Outcome, *, run_id: str | None = None) -> CallToolResult:
    """An outcome as an MCP tool result: its whole camelCase JSON in `structuredContent`."""
    meta = None if run_id is None else {RUN_ID_META: run_id}
    if isinstance(outcome, ErrorEnvelope):
        return CallToolResult(
            content=[TextContent(text=_envelope_text(outcome))],
            structured_content=outcome.to_dict(),
            is_error=True,
            _meta=meta,
        )
    # Any data a subagent returns crosses, as the model's tool results do (`str` fallback).
    data = pydantic_core.to_jsonable_python(outcome.data, fallback=str)
    return CallToolResult(
        content=[TextContent(text=_success_text(outcome))],
        structured_content=outcome.model_copy(update={"data": data}).to_dict(),
        is_error=False,
        _meta=meta,
    )


def invalid_arguments(
    tool: str, arguments: dict[str, Any], exc: PydanticValidationError
) -> ErrorEnvelope:
    # Field names and reasons only: the rejected values are the caller's data.
    problems = "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or 'arguments'}: {error['msg']}"
        for error in exc.errors()
    )
    return ErrorEnvelope(
        error_category=ErrorCategory.VALIDATION,
        error_type=ErrorType.INVALID_INPUT,
        is_retryable=False,
        message=f"invalid arguments for {tool}: {problems}",
        attempted_query={"tool": tool, "arguments": arguments},
        source=tool,
        attempts=0,
    )


def unknown_tool(name: str, arguments: dict[str, Any], known: list[str]) -> ErrorEnvelope:
    return ErrorEnvelope(
        error_category=ErrorCategory.VALIDATION,
        error_type=UNKNOWN_TOOL,
        is_retryable=False,
        message=f"no tool named {name!r}; the tools are {', '.join(known)}",
        attempted_query={"tool": name, "arguments": arguments},
        source=name,
        attempts=0,
    )


def _envelope_text(envelope: ErrorEnvelope) -> str:
    retry = "retryable" if envelope.is_retryable else "not retryable"
    return (
        f"{envelope.source} failed ({envelope.error_category.value}/{envelope.error_type}, "
        f"{retry}, {_attempts(envelope.attempts)}): {envelope.message}"
    )


def _attempts(count: int) -> str:
    return "1 attempt" if count == 1 else f"{count} attempts"


def _success_text(success: Success[Any]) -> str:
    if success.is_empty:
        return f"{success.source} searched and found nothing (an empty result, not a failure)."
    text = success.data_json()
    if len(text) <= TEXT_LIMIT:
        return text
    return text[:TEXT_LIMIT] + "… (cut here; structuredContent has the whole result)"
