"""What the MCP SDK's failures mean, and the exceptions raised where they enter.

    mcp.MCPError by its JSON-RPC code:
      -32000 connection closed          transient   unavailable
      -32001 request timeout            transient   timeout
      -32602 invalid params             validation  invalid_params
      any other code                    other       mcp_error (the code in details)
    ServerConnectionLost (a ConnectionError)  transient unavailable; may have acted
    a result with isError: true         other  tool_error (an agentmesh server's
                                        envelope is kept whole: `remote_outcome`)

`MCPError` is mapped by `agentmesh.classify` once the SDK has been imported (see
`agentmesh.classify._sdk`); the tool path of `agentmesh.mcp` raises the rest itself.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import pydantic

from agentmesh.classify._mappers import Mapper
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, Success
from agentmesh.errors import AgentError, InvalidInput, TransientError

if TYPE_CHECKING:
    import mcp
    import mcp.types

__all__ = [
    "CONNECTION_CLOSED",
    "INVALID_PARAMS",
    "REQUEST_TIMEOUT",
    "ServerConnectionLost",
    "mappers",
    "remote_outcome",
    "tool_error",
]

# The SDK's own codes (mcp_types): fixed by the protocol, repeated here so that mapping
# an error needs no import of the SDK's internals.
CONNECTION_CLOSED: Final = -32000
REQUEST_TIMEOUT: Final = -32001
INVALID_PARAMS: Final = -32602

# An isError text can be a whole traceback; the envelope keeps its start.
_MAX_TEXT: Final = 2000


class ServerConnectionLost(ConnectionError):
    """The connection to an MCP server closed while a call was in flight.

    A `ConnectionError`, so the classifier treats it as transient `unavailable` that may
    have taken effect: a non-idempotent tool is not re-invoked after it.
    """


def _mcp_error(exc: mcp.MCPError) -> AgentError:
    details = f"JSON-RPC error {exc.code}"
    if exc.data is not None:
        details += f"; data: {_compact(exc.data)}"
    message = exc.message or f"JSON-RPC error {exc.code}"
    if exc.code == CONNECTION_CLOSED:
        return TransientError(message, error_type="unavailable", details=details)
    if exc.code == REQUEST_TIMEOUT:
        return TransientError(message, error_type="timeout", details=details)
    if exc.code == INVALID_PARAMS:
        return InvalidInput(message, error_type="invalid_params", details=details)
    return AgentError(
        message, category=ErrorCategory.OTHER, error_type="mcp_error", details=details
    )


def mappers() -> dict[type[BaseException], Mapper]:
    """The classifier's mappings for the SDK's exceptions (the SDK is imported by then)."""
    import mcp

    return {mcp.MCPError: _mcp_error}


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
