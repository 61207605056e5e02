"""An agentmesh client of an agentmesh server: envelopes cross MCP whole, both ways."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from agentmesh import (
    Context,
    Coordinator,
    ErrorCategory,
    ErrorEnvelope,
    RetryPolicy,
    Success,
    Task,
    subagent,
)
from agentmesh.coordinator import CoverageStatus
from agentmesh.mcp import MCPServer, MCPTool
from tests.mcp.conftest import REPO
from tests.mcp.fixtures import served as fixtures

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


async def through_a_coordinator(tool: MCPTool, query: str) -> Any:
    """The report entry of one task whose subagent asks `tool` and returns its data."""

    @subagent(name="lead", retry=RetryPolicy.never())
    async def lead(task: Task, ctx: Context) -> Any:
        return await ctx.call(tool, query=task.query)

    report = await Coordinator([lead]).run([Task(query=query, topic="t")])
    [entry] = report.coverage
    return entry


class TestOutcomesCrossWhole:
    async def test_an_empty_answer_stays_empty(self, served: MCPServer) -> None:
        """The served subagent found nothing: the client gets `[]`, not the outcome record."""
        outcome = await run(served.tool("nothing"), query="anything")
        assert isinstance(outcome, Success)
        assert outcome.data == []
        assert outcome.is_empty

    async def test_an_empty_answer_is_reported_empty_as_a_direct_call_is(
        self, served: MCPServer
    ) -> None:
        """Through a coordinator, over MCP and directly, the same task is `empty`."""
        over_mcp = await through_a_coordinator(served.tool("nothing"), "anything")
        direct = await Coordinator([fixtures.nothing]).run([Task(query="anything", topic="t")])
        assert over_mcp.status is CoverageStatus.EMPTY
        assert direct.coverage[0].status is CoverageStatus.EMPTY

    async def test_data_is_the_subagents_data(self, served: MCPServer) -> None:
        """A found result is the served subagent's data itself, its retries carried along."""
        outcome = await run(served.tool("docs"), query="asyncio")
        assert isinstance(outcome, Success)
        assert outcome.data == [{"title": "About asyncio", "topic": None}]
        assert outcome.retries is not None
        assert [(r.source, r.error_type) for r in outcome.retries] == [("docs", "unavailable")]

    async def test_partial_results_and_alternatives_cross(self, served: MCPServer) -> None:
        """A failure keeps what the served subagent found and what else could work."""
        outcome = await run(served.tool("flaky"), query="q")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.TRANSIENT
        assert outcome.partial_results is not None
        assert outcome.partial_results.findings == ({"title": "page one"},)
        assert outcome.alternative_approaches == ("cached_index",)
        assert outcome.attempts == 3  # the served run's attempts, not retried here again

    async def test_a_served_tool_declares_its_output_schema(self, served: MCPServer) -> None:
        """Any MCP client learns the shape: the listing's outputSchema is the Success's."""
        listed = await served.describe("nothing")
        assert listed is not None
        schema = listed.output_schema
        assert schema is not None
        assert {"data", "isEmpty", "source", "attemptedQuery"} <= set(schema["required"])
