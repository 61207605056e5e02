"""`serve`: agentmesh subagents as the tools of an MCP server of the official SDK.

Each subagent is one tool taking `query` and an optional `topic`. One tool call is one
run: the subagent runs as it would in a coordinator run (its own retry, breaker, limits
and policies, plus the server's), in a `RunScope` of its own, so what one call learned
(forbidden calls, policy memory, the in-run ledger) never leaks into another client's
call. The retry budget is fresh per call unless the server is given one to share, which
then bounds retries across every call it serves, as a coordinator's does across runs.

The outcome crosses whole (`agentmesh.mcp._serve_result`); arguments that fail the
tool's schema and unknown tool names get validation envelopes, never a bare error text.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Final

from pydantic import BaseModel, Field
from pydantic import ValidationError as PydanticValidationError

from agentmesh._engine._human import refuse_asks_without_store
from agentmesh._logging import get_logger
from agentmesh.errors import UsageError
from agentmesh.policies import ToolPolicy
from agentmesh.retry import RetryBudget
from agentmesh.scope import RunScope
from agentmesh.subagents import Subagent
from agentmesh.task import Task

try:
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver import MCPServer as SDKServer
    from mcp.types import CallToolResult, InputRequiredResult
    from mcp.types import Tool as ListedTool
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "agentmesh.mcp needs the official MCP SDK: pip install 'agentmesh-failwell[mcp]'"
    ) from exc

from agentmesh.mcp._serve_result import (
    invalid_arguments,
    outcome_result,
    output_schema,
    unknown_tool,
)

__all__ = ["serve"]

# The MCP tool-name rule (SEP-986); checked here so a bad name fails at `serve`, not
# as a warning in the server's log.
_TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,128}")
INSTRUCTIONS: Final = (
    "Each tool is an agentmesh subagent: give it a `query` (and the `topic` it covers). "
    "A result is a Success: `data`, and `isEmpty` when it searched and found nothing. "
    "An `isError` result is an ErrorEnvelope: `errorCategory`, `isRetryable`, `message`, "
    "and when known `partialResults`, `alternativeApproaches` and `retryAfter`."
)


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
    # An MCP call has no store to keep a question in: refused here, not in a client's call.
    refuse_asks_without_store(
        [*policies, *(p for agent in agents for p in agent.policies)],
        "serve() keeps no checkpoint store",
    )
    served = {
        agent.name: _ServedSubagent(agent, timeout, retry_budget, tuple(policies))
        for agent in agents
    }
    return _SubagentServer(name, served)


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


class _SubagentServer(SDKServer[Any]):
    """The SDK's server, whose subagent tools answer every call with an outcome.

    The SDK would answer arguments that fail its validation, and an unknown tool, with
    a bare error text; here they are validation envelopes too, so a client can decide
    on `structuredContent` alone for every `isError` result of a subagent tool.
    """

    def __init__(self, name: str, served: dict[str, _ServedSubagent]) -> None:
        super().__init__(name, instructions=INSTRUCTIONS)
        self._served = served
        for tool_name, one in served.items():
            self.add_tool(one.call, name=tool_name, description=_description(one.agent))

    async def list_tools(self) -> list[ListedTool]:
        """The tools, a subagent's declaring its outcome's shape as its `outputSchema`."""
        listed = await super().list_tools()
        return [
            tool.model_copy(update={"output_schema": output_schema()})
            if tool.name in self._served
            else tool
            for tool in listed
        ]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        served = self._served.get(name)
        if served is not None:
            return await served.answer(arguments)
        if name not in {tool.name for tool in await self.list_tools()}:
            get_logger(tool=name).info("mcp_unknown_tool")
            return outcome_result(unknown_tool(name, arguments, sorted(self._served)))
        return await super().call_tool(name, arguments, context)  # a tool the user added


class _Arguments(BaseModel):
    """A subagent tool's arguments, as its listed input schema says."""

    query: str
    topic: str | None = None


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

    async def answer(self, arguments: dict[str, Any]) -> CallToolResult:
        """The outcome of one call, or a validation envelope naming the bad arguments."""
        try:
            valid = _Arguments.model_validate(arguments)
        except PydanticValidationError as exc:
            get_logger(subagent=self.agent.name).info("mcp_invalid_arguments")
            return outcome_result(invalid_arguments(self.agent.name, arguments, exc))
        return await self.call(valid.query, valid.topic)

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
