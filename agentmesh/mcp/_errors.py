"""The failures the tool path of `agentmesh.mcp` raises itself, where they enter.

    ServerConnectionLost (a ConnectionError)  transient unavailable; may have acted
    a result with isError: true         other  tool_error (an agentmesh server's
                                        envelope is kept whole: `remote_outcome`)

The SDK's own `MCPError` is mapped by `agentmesh.classify`, with the other SDKs' errors.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

import mcp.types
import pydantic

from agentmesh.envelope import ErrorCategory, ErrorEnvelope, Success
from agentmesh.errors import AgentError

__all__ = ["CONNECTION_CLOSED", "ServerConnectionLost", "remote_outcome", "tool_error"]

# The connection-closed code, as the SDK names it (a lost connection is retried).
CONNECTION_CLOSED: Final = mcp.types.CONNECTION_CLOSED

# An isError text can be a whole traceback; the envelope keeps its start.
_MAX_TEXT: Final = 2000


class ServerConnectionLost(ConnectionError):
    """The connection to an MCP server closed while a call was in flight.

    A `ConnectionError`, so the classifier treats it as transient `unavailable` that may
    have taken effect: a non-idempotent tool is not re-invoked after it.
    """


def remote_outcome(
    result: mcp.types.CallToolResult, *, agentmesh: bool
) -> Success[Any] | ErrorEnvelope | None:
    """The outcome an agentmesh server (`agentmesh.mcp.serve`) sent, or None for any other.

    Its outcome crosses whole in `structuredContent`: a success keeps its data (and so its
    emptiness), an envelope its category, partial results and alternatives, as a direct
    call of the subagent would. A success is read only when the server is known to be
    an agentmesh one (`agentmesh`: its tool declares the outcome's output schema, or the
    result names its run), so another server's look-alike data stays data.
    """
    structured = result.structured_content
    if not isinstance(structured, dict):
        return None
    if result.is_error:
        envelope = _envelope(structured)
        if envelope is None:
            return None
        note = f"from {envelope.source} over MCP"
        return envelope.model_copy(
            update={"details": "; ".join(filter(None, [note, envelope.details]))}
        )
    if not agentmesh or structured.get("isError") is not False:
        return None
    try:
        return Success[Any].model_validate(structured)
    except pydantic.ValidationError:
        return None


def tool_error(tool: str, result: mcp.types.CallToolResult) -> AgentError:
    """The failure a result with `isError: true` from a server other than agentmesh reports:
    its text is the message and its structured content the details."""
    text = _text(result.content) or f"{tool} reported an error without a message"
    structured = result.structured_content
    return AgentError(
        text[:_MAX_TEXT],
        category=ErrorCategory.OTHER,
        error_type="tool_error",
        details=None if structured is None else f"structuredContent: {_compact(structured)}",
    )


def _envelope(structured: Any) -> ErrorEnvelope | None:
    if not isinstance(structured, dict) or structured.get("isError") is not True:
        return None
    try:
        return ErrorEnvelope.model_validate(structured)
    except pydantic.ValidationError:
        return None


def _text(content: Sequence[Any]) -> str:
    return "\n".join(block.text for block in content if getattr(block, "type", None) == "text")


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=repr)[:_MAX_TEXT]
