"""`serve`: agentmesh subagents as the tools of an MCP server of the official SDK.

Each subagent is one tool taking `query` and an optional `topic`. One tool call is one
run: the subagent runs as it would in a coordinator run (its own retry, breaker, limits
and policies, plus the server's), in a `RunScope` of its own, so what one call learned
(forbidden calls, policy memory, the in-run ledger) never leaks into another client's
call. The retry budget is fresh per call unless the server is given one to share, which
then bounds retries across every call it serves, as a coordinator's does across runs.

The outcome crosses whole: a `Success` as `structuredContent` (its camelCase JSON, with
`isEmpty`, so "searched, nothing found" stays distinguishable from a failure), an
`ErrorEnvelope` with `isError: true` and its camelCase JSON; both with a short text for
clients that only read text.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Final

import pydantic_core
from pydantic import Field

from agentmesh._logging import get_logger
from agentmesh.envelope import ErrorEnvelope, Outcome, Success
from agentmesh.errors import UsageError
from agentmesh.policies import ToolPolicy
from agentmesh.retry import RetryBudget
from agentmesh.scope import RunScope
from agentmesh.subagents import Subagent
from agentmesh.task import Task

try:
    from mcp.server.mcpserver import MCPServer as SDKServer
    from mcp.types import CallToolResult, TextContent
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "agentmesh.mcp needs the official MCP SDK: pip install 'agentmesh[mcp]'"
    ) from exc

__all__ = ["outcome_result", "serve"]

# The MCP tool-name rule (SEP-986); checked here so a bad name fails at `serve`, not
# as a warning in the server's log.
_TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,128}")
# Longer results are cut in the text block only; `structuredContent` always has them whole.
TEXT_LIMIT: Final = 2_000
RUN_ID_META: Final = "agentmesh/runId"
"""The `_meta` key of a result naming the server-side run (to find its log events)."""


def serve(
    subagents: Subagent | Iterable[Subagent],
    name: str = "agentmesh",
    *,
    timeout: float | None = None,  # seconds per tool call, not a deadline
    retry_budget: RetryBudget | None = None,
    policies: Sequence[ToolPolicy] = (),
) -> SDKServer:
    """An MCP server (the SDK's `MCPServer`) offering each subagent as one tool.

    `server.run()` serves stdio; `server.run("streamable-http", host=..., port=...)`
    streamable HTTP at `/mcp`; `server.streamable_http_app()` is the ASGI app to mount.

    Args:
        subagents: the subagents to offer, one tool each, named after the subagent.
        name: the server's name, as clients show it.
        timeout: seconds for one tool call, retries and waits included; None for none.
        retry_budget: shared by every call the server handles; a fresh one per call if
            None.
        policies: applied to every call's tool calls, before each subagent's own.
    """
    agents = _subagents(subagents)
    if not isinstance(name, str) or not name:
        raise UsageError(f"serve(name=) must be a non-empty string, got {name!r}")
    if timeout is not None and (not isinstance(timeout, int | float) or timeout <= 0):
        raise UsageError(f"serve(timeout=) must be > 0 seconds or None, got {timeout!r}")
    if retry_budget is not None and not isinstance(retry_budget, RetryBudget):
        raise UsageError(f"serve(retry_budget=) takes a RetryBudget, got {retry_budget!r}")
    for policy in policies:
        if not isinstance(policy, ToolPolicy):
            raise UsageError(f"serve(policies=): {policy!r} is not a policy")
    server: SDKServer = SDKServer(name)
    for agent in agents:
        served = _ServedSubagent(agent, timeout, retry_budget, tuple(policies))
        server.add_tool(served.call, name=agent.name, description=_description(agent))
    return server


def _subagents(subagents: Subagent | Iterable[Subagent]) -> tuple[Subagent, ...]:
    """The subagents to serve, checked: subagents only, valid and distinct tool names."""
    if isinstance(subagents, Subagent):
        return (subagents,)
    if isinstance(subagents, str | bytes) or not isinstance(subagents, Iterable):
        raise UsageError(f"serve(subagents=) takes subagents, got {subagents!r}")
    agents = tuple(subagents)
    if not agents:
        raise UsageError("serve(subagents=) is empty: give at least one subagent")
    seen: set[str] = set()
    for agent in agents:
        if not isinstance(agent, Subagent):
            raise UsageError(f"serve(subagents=): {agent!r} is not a Subagent")
        if not _TOOL_NAME.fullmatch(agent.name):
            raise UsageError(
                f"serve(subagents=): {agent.name!r} is not a valid MCP tool name "
                "(1-128 of A-Z a-z 0-9 _ - .); give the subagent another name"
            )
        if agent.name in seen:
            raise UsageError(f"serve(subagents=): two subagents are named {agent.name!r}")
        seen.add(agent.name)
    return agents


def _description(agent: Subagent) -> str:
    """The subagent's description, else its own class docstring (not an inherited one)."""
    own = type(agent).__dict__.get("__doc__")
    return agent.description or (inspect.cleandoc(own) if own else f"The {agent.name} subagent.")


class _ServedSubagent:
    """One subagent behind one MCP tool: a call is one run of it."""

    __slots__ = ("agent", "budget", "policies", "timeout")

    def __init__(
        self,
        agent: Subagent,
        timeout: float | None,
        budget: RetryBudget | None,
        policies: tuple[ToolPolicy, ...],
    ) -> None:
        self.agent, self.timeout, self.budget, self.policies = agent, timeout, budget, policies

    # The SDK derives the tool's input schema from this signature.
    async def call(
        self,
        query: Annotated[str, Field(description="What to ask the subagent.")],
        topic: Annotated[
            str | None, Field(description="The topic this query covers, for the report.")
        ] = None,
    ) -> CallToolResult:
        """Run the subagent on one task and return its outcome as a tool result."""
        scope = RunScope(budget=self.budget if self.budget is not None else RetryBudget())
        log = get_logger(run_id=scope.run_id, subagent=self.agent.name)
        log.info("mcp_tool_call", topic=topic)
        outcome = await self.agent.run(
            Task(query=query, topic=topic),
            scope=scope,
            timeout=self.timeout,
            policies=self.policies,
        )
        result = outcome_result(outcome, run_id=scope.run_id)
        log.info("mcp_tool_result", is_error=result.is_error)
        return result


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
