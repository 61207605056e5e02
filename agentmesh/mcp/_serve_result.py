"""Outcomes as MCP tool results, and the envelopes of calls that never reach a subagent.

The outcome crosses whole, in `structuredContent`: a `Success` as its camelCase JSON
(with `isEmpty`, so "searched, nothing found" stays distinguishable from a failure),
an `ErrorEnvelope` with `isError: true` as its camelCase JSON. The text block is short,
for clients that read only text.
"""

from __future__ import annotations

import functools
from typing import Any, Final

from mcp.types import CallToolResult
from pydantic import ValidationError as PydanticValidationError

from agentmesh.envelope import ErrorCategory, ErrorEnvelope, ErrorType, Outcome, Success

__all__ = [
    "OUTCOME_MARK",
    "RUN_ID_META",
    "invalid_arguments",
    "outcome_result",
    "output_schema",
    "unknown_tool",
]

RUN_ID_META: Final = "agentmesh/runId"
"""The `_meta` key of a result naming the server-side run (to find its log events)."""
OUTCOME_MARK: Final = "x-agentmesh-outcome"
"""Marks a served tool's `outputSchema`: its structured content is an agentmesh outcome."""
UNKNOWN_TOOL: Final = "unknown_tool"


@functools.cache
def output_schema() -> dict[str, Any]:
    """The `outputSchema` of a subagent tool: a `Success`'s JSON (an isError result carries an
    `ErrorEnvelope` instead, which MCP does not check against the output schema)."""
    schema = Success[Any].model_json_schema(by_alias=True, mode="serialization")
    schema[OUTCOME_MARK] = "Success"
    return schema


def outcome_result(outcome: Outcome, *, run_id: str | None = None) -> CallToolResult:
    """An outcome as the SDK's tool result: `Outcome.to_mcp_result()`, with the run's id."""
    result = CallToolResult.model_validate(outcome.to_mcp_result())
    if run_id is not None:
        result.meta = {RUN_ID_META: run_id}
    return result


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
