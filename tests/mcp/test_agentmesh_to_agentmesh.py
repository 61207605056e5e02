"""An agentmesh client of an agentmesh server: envelopes cross MCP whole, both ways."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from agentmesh import Context, ErrorCategory, ErrorEnvelope, RetryPolicy, Success, Task, subagent
from agentmesh.mcp import MCPServer, MCPTool
from tests.mcp.conftest import REPO

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def run(tool: MCPTool, **arguments: Any) -> Any:
    @subagent(name="lead", retry=RetryPolicy(max_attempts=3, initial_delay=0.01))
    async def lead(task: Task, ctx: Context) -> Any:
        return await ctx.call(tool, **arguments)

    return await lead.run(Task(query=tool.name))


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def served() -> AsyncIterator[MCPServer]:
    """`python -m agentmesh.mcp serve` of the serve tests' subagents, as a client sees it."""
    target = "tests.mcp.fixtures.served:subagents"
    server = MCPServer.stdio(
        sys.executable, "-m", "agentmesh.mcp", "serve", target, name="mesh", cwd=REPO
    )
    async with server:
        yield server


class TestEnvelopesOverMCP:
    async def test_a_remote_success_is_a_success(self, served: MCPServer) -> None:
        """The served subagent's JSON comes back as the data."""
        outcome = await run(served.tool("nothing"), query="anything")
        assert isinstance(outcome, Success)

    async def test_a_remote_envelope_keeps_its_category_type_and_user_message(
        self, served: MCPServer
    ) -> None:
        """A business envelope stays business, with its errorType; not retried here again."""
        outcome = await run(served.tool("billing"), query="refund order 1234")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.BUSINESS
        assert outcome.error_type == "refund_window_closed"
        assert outcome.user_message == "This order can no longer be refunded."
        assert outcome.attempts == 1
        assert "from billing over MCP" in (outcome.details or "")
