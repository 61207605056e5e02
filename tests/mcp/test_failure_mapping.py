"""Every row of the failure-mapping table (docs/how-to/mcp.md), against our own MCP server.

The stateless rows share one server process (a module-scoped event loop); the rows about
starting, dying and reconnecting start their own.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agentmesh import (
    BreakerState,
    CircuitBreaker,
    Context,
    ErrorCategory,
    ErrorEnvelope,
    RetryPolicy,
    Success,
    Task,
    subagent,
)
from agentmesh.mcp import MCPServer, MCPTool
from agentmesh.testing import RecordingSleep
from tests.mcp.conftest import alive, children, flaky_server, starts

pytestmark = pytest.mark.asyncio(loop_scope="module")


def retries(attempts: int) -> RetryPolicy:
    return RetryPolicy(max_attempts=attempts, initial_delay=0.01, sleep=RecordingSleep())


async def run(tool: MCPTool, arguments: dict[str, Any], *, attempts: int = 1) -> Any:
    """One task whose body calls `tool` once through `ctx.call`; its outcome."""

    @subagent(name="caller", retry=retries(attempts))
    async def caller(task: Task, ctx: Context) -> Any:
        return await ctx.call(tool, **arguments)

    return await caller.run(Task(query=json.dumps(arguments)))


def calls(tmp: Path) -> list[str]:
    path = tmp / "calls"
    return path.read_text().split() if path.exists() else []


@pytest.fixture(scope="module")
def shared_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("flaky")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def flaky(shared_tmp: Path) -> AsyncIterator[MCPServer]:
    """One fixture server for the stateless rows (with a tool whose schema is broken)."""
    async with flaky_server(shared_tmp, "--bad-schema", breaker=None) as server:
        yield server


class TestResults:
    async def test_a_result_is_a_success_and_no_content_an_empty_one(
        self, flaky: MCPServer
    ) -> None:
        """Structured content is the data; a result without content is "nothing found"."""
        found = await run(flaky.tool("echo"), {"text": "ab", "times": 2})
        assert isinstance(found, Success)
        assert found.data == {"result": "abab"}
        nothing = await run(flaky.tool("nothing"), {})
        assert isinstance(nothing, Success)
        assert nothing.is_empty


class TestIsError:
    async def test_an_is_error_result_is_an_envelope_with_the_servers_text(
        self, flaky: MCPServer
    ) -> None:
        """isError: true is never a Success: the server's text is the message."""
        outcome = await run(flaky.tool("fail"), {"reason": "disk full"})
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.OTHER
        assert outcome.error_type == "tool_error"
        assert "cannot do it: disk full" in outcome.message
        assert not outcome.is_retryable

    async def test_structured_content_of_an_error_is_kept_in_details(
        self, flaky: MCPServer
    ) -> None:
        """The server's structuredContent travels in the envelope's details."""
        outcome = await run(flaky.tool("fail_structured"), {"reason": "quota"})
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.message == "refused: quota"
        assert outcome.details is not None
        assert '{"code":"E42","reason":"quota"}' in outcome.details


class TestInvalidParams:
    async def test_input_against_the_schema_is_refused_before_the_call(
        self, flaky: MCPServer, shared_tmp: Path
    ) -> None:
        """A wrong type is a validation envelope naming the field; the server never runs it."""
        outcome = await run(flaky.tool("record"), {"note": 5})
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.VALIDATION
        assert outcome.error_type == "invalid_input"
        assert "note" in outcome.message
        assert outcome.attempts == 0
        assert calls(shared_tmp) == []

    async def test_a_missing_field_is_named(self, flaky: MCPServer) -> None:
        """A `required` failure names the missing field itself, not its parent object."""
        missing = await run(flaky.tool("record"), {})
        assert isinstance(missing, ErrorEnvelope)
        assert missing.error_category is ErrorCategory.VALIDATION
        assert "note: Field required" in missing.message

    async def test_invalid_params_from_the_server_are_a_validation_envelope(
        self, flaky: MCPServer
    ) -> None:
        """JSON-RPC -32602 from the server: validation, not retried."""
        outcome = await run(flaky.tool("reject_params"), {"value": "x"}, attempts=3)
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.VALIDATION
        assert outcome.error_type == "invalid_params"
        assert outcome.attempts == 1
        assert "-32602" in (outcome.details or "")


class TestUnknownTool:
    async def test_a_tool_the_server_does_not_list_is_validation_unknown_tool(
        self, flaky: MCPServer
    ) -> None:
        """The name is checked against the server's listing; the envelope lists the tools."""
        outcome = await run(flaky.tool("no_such_tool"), {}, attempts=3)
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.VALIDATION
        assert outcome.error_type == "unknown_tool"
        assert outcome.attempts == 1
        assert "echo" in (outcome.details or "")


class TestTimeout:
    async def test_a_request_timeout_is_transient_timeout_and_retried(
        self, flaky: MCPServer
    ) -> None:
        """JSON-RPC -32001 (the SDK's request timeout): transient, retried locally."""
        outcome = await run(flaky.tool("hang", timeout=0.2), {}, attempts=2)
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.TRANSIENT
        assert outcome.error_type == "timeout"
        assert outcome.attempts == 2
        assert flaky.connected  # a slow answer does not cost the connection


class TestOtherCodes:
    async def test_any_other_json_rpc_error_is_other_with_its_code(self, flaky: MCPServer) -> None:
        """-32603 is `other`, the code and the error's data in details."""
        outcome = await run(flaky.tool("internal"), {"value": "v"})
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.OTHER
        assert outcome.error_type == "mcp_error"
        assert outcome.details is not None
        assert "JSON-RPC error -32603" in outcome.details
        assert '"hint":"v"' in outcome.details


class TestBadSchema:
    async def test_a_tool_with_a_broken_schema_is_not_offered_nor_called(
        self, flaky: MCPServer
    ) -> None:
        """list_tools leaves it out; calling it anyway fails without reaching the server."""
        offered = [tool.name for tool in await flaky.list_tools()]
        assert "broken" not in offered
        assert "echo" in offered
        outcome = await run(flaky.tool("broken"), {"text": "a"})
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "invalid_schema"
        assert "not valid JSON Schema" in outcome.message


class TestConnectionLost:
    async def test_a_server_that_dies_mid_call_is_restarted_at_the_next_attempt(
        self, tmp_path: Path
    ) -> None:
        """Connection closed is transient `unavailable`; the retry starts a new process."""
        async with flaky_server(tmp_path) as server:
            outcome = await run(server.tool("crash_once"), {}, attempts=3)
            assert isinstance(outcome, Success)
            assert outcome.data == {"result": "survived"}
            assert outcome.retries is not None
            assert [(r.error_type, r.count) for r in outcome.retries] == [("unavailable", 1)]
            first, second = starts(tmp_path)
            assert not alive(first)
            assert alive(second)
        assert not alive(second)

    async def test_a_destructive_tool_is_not_called_again_after_the_server_died(
        self, tmp_path: Path
    ) -> None:
        """destructiveHint: the call may have acted, so no automatic second call."""
        async with flaky_server(tmp_path) as server:
            outcome = await run(server.tool("delete_crash"), {"path": "/tmp/x"}, attempts=3)
            assert isinstance(outcome, ErrorEnvelope)
            assert outcome.error_type == "unavailable"
            assert not outcome.is_retryable
            assert outcome.attempts == 1
            assert len(starts(tmp_path)) == 1


class TestCannotStart:
    async def test_a_server_that_exits_at_start_is_transient_unavailable(
        self, tmp_path: Path
    ) -> None:
        """Each attempt starts the server again, and each says it could not be started."""
        server = flaky_server(tmp_path, "--exit-at-start", breaker=None)
        outcome = await run(server.tool("echo"), {"text": "a"}, attempts=3)
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.TRANSIENT
        assert outcome.error_type == "unavailable"
        assert "could not be started" in outcome.message
        assert len(starts(tmp_path)) == 3
        await server.aclose()

    async def test_the_breaker_stops_restarting_a_server_that_keeps_dying(
        self, tmp_path: Path
    ) -> None:
        """After `failure_threshold` failed starts the breaker opens: no more processes."""
        breaker = CircuitBreaker(failure_threshold=2, reset_after=60)
        server = flaky_server(tmp_path, "--exit-at-start", breaker=breaker)
        outcome = await run(server.tool("echo"), {"text": "a"}, attempts=5)
        assert isinstance(outcome, ErrorEnvelope)
        assert breaker.state is BreakerState.OPEN
        assert "circuit breaker for mcp flaky is open" in outcome.message
        assert len(starts(tmp_path)) == 2
        await server.aclose()

    async def test_a_command_that_does_not_exist_gets_an_envelope_naming_it(
        self, tmp_path: Path
    ) -> None:
        """Not a traceback: `command_not_found`, the command in the message, not retried."""
        server = MCPServer.stdio(str(tmp_path / "no-such-server"), "--stdio")
        outcome = await run(server.tool("anything"), {}, attempts=3)
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "command_not_found"
        assert str(tmp_path / "no-such-server") in outcome.message
        assert not outcome.is_retryable
        assert outcome.attempts == 1

    async def test_a_server_slower_than_connect_timeout_is_stopped(self, tmp_path: Path) -> None:
        """A start that outlasts `connect_timeout` is transient `timeout`; the process ends."""
        before = children()
        server = flaky_server(tmp_path, "--slow-start", "60", connect_timeout=0.5)
        outcome = await run(server.tool("echo"), {"text": "a"})
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.TRANSIENT
        assert outcome.error_type == "timeout"
        assert "connect_timeout=0.5" in outcome.message
        [pid] = starts(tmp_path)
        assert not alive(pid)
        assert children() <= before

    async def test_an_http_server_that_is_not_there_is_transient_unavailable(self) -> None:
        """Nothing listening on the port: `unavailable`, retried, nothing left behind."""
        server = MCPServer.http("http://127.0.0.1:9/mcp", name="nowhere")
        outcome = await run(server.tool("anything"), {}, attempts=2)
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.TRANSIENT
        assert outcome.error_type == "unavailable"
        assert outcome.attempts == 2
        await server.aclose()
