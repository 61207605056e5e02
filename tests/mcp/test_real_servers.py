"""Real MCP servers from PyPI: `mcp-server-time` and `mcp-server-git` on a temporary repository."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agentmesh import Context, ErrorCategory, ErrorEnvelope, RetryPolicy, Success, Task, subagent
from agentmesh.mcp import MCPServer, MCPTool

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def run(tool: MCPTool, **arguments: Any) -> Any:
    @subagent(name="caller", retry=RetryPolicy.never())
    async def caller(task: Task, ctx: Context) -> Any:
        return await ctx.call(tool, **arguments)

    return await caller.run(Task(query=tool.name))


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def time_server() -> AsyncIterator[MCPServer]:
    async with MCPServer.stdio(sys.executable, "-m", "mcp_server_time", name="time") as server:
        yield server


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository with one commit."""
    path = tmp_path_factory.mktemp("repo")

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "test@example.com")
    git("config", "user.name", "Test")
    (path / "a.txt").write_text("first\n")
    git("add", "a.txt")
    git("commit", "-q", "-m", "first")
    return path


def subjects(repo: Path) -> list[str]:
    """The repository's commit subjects, newest first."""
    log = subprocess.run(
        ["git", "-C", str(repo), "log", "--format=%s"], capture_output=True, text=True, check=True
    )
    return log.stdout.split()


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def git_server(repo: Path) -> AsyncIterator[MCPServer]:
    server = MCPServer.stdio(sys.executable, "-m", "mcp_server_git", "-r", str(repo))
    async with server:
        yield server


class TestTimeServer:
    async def test_its_tools_come_with_schema_and_read_only_annotations(
        self, time_server: MCPServer
    ) -> None:
        """list_tools gives agentmesh Tools: the server's names, schemas and idempotency."""
        tools = {tool.name: tool for tool in await time_server.list_tools()}
        assert set(tools) == {"get_current_time", "convert_time"}
        get_time = tools["get_current_time"]
        assert get_time.idempotent  # readOnlyHint
        assert get_time.input_schema["required"] == ["timezone"]
        assert get_time.to_anthropic_tool()["input_schema"] == get_time.input_schema

    async def test_a_call_returns_the_servers_structured_result(
        self, time_server: MCPServer
    ) -> None:
        """get_current_time through ctx.call: a Success with the server's JSON."""
        outcome = await run(time_server.tool("get_current_time"), timezone="Europe/Amsterdam")
        assert isinstance(outcome, Success)
        assert outcome.data["timezone"] == "Europe/Amsterdam"

    async def test_an_unknown_timezone_is_the_servers_is_error_as_an_envelope(
        self, time_server: MCPServer
    ) -> None:
        """The server's isError result is reported as an error, never as covered."""
        outcome = await run(time_server.tool("get_current_time"), timezone="Mars/Olympus")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "tool_error"
        assert "Mars/Olympus" in outcome.message

    async def test_a_missing_argument_never_reaches_the_server(
        self, time_server: MCPServer
    ) -> None:
        """Checked against the listed schema: validation, zero attempts."""
        outcome = await run(time_server.tool("convert_time"), source_timezone="UTC")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.VALIDATION
        assert outcome.attempts == 0
        assert "time: Field required" in outcome.message


class TestGitServer:
    async def test_annotations_decide_idempotency_and_options_override_them(
        self, git_server: MCPServer
    ) -> None:
        """readOnly -> idempotent; destructive wins over idempotentHint; idempotent= overrides."""
        tools = {tool.name: tool for tool in await git_server.list_tools()}
        assert tools["git_status"].idempotent
        assert tools["git_add"].idempotent  # idempotentHint, not destructive
        assert not tools["git_reset"].idempotent  # destructiveHint despite idempotentHint
        assert not tools["git_commit"].idempotent
        assert git_server.tool("git_commit", idempotent=True).idempotent
        assert git_server.tool("git_status", impact="legal").impact == "legal"

    async def test_status_add_and_commit_act_on_the_repository(
        self, git_server: MCPServer, repo: Path
    ) -> None:
        """Calls through ctx.call change the real repository."""
        (repo / "b.txt").write_text("second\n")
        status = await run(git_server.tool("git_status"), repo_path=str(repo))
        assert isinstance(status, Success)
        assert "b.txt" in status.data
        added = await run(git_server.tool("git_add"), repo_path=str(repo), files=["b.txt"])
        assert isinstance(added, Success)
        committed = await run(git_server.tool("git_commit"), repo_path=str(repo), message="second")
        assert isinstance(committed, Success)
        assert subjects(repo) == ["second", "first"]

    async def test_a_path_outside_the_repository_is_an_envelope(
        self, git_server: MCPServer, tmp_path: Path
    ) -> None:
        """The server refuses with isError; the envelope carries its text."""
        outcome = await run(git_server.tool("git_status"), repo_path=str(tmp_path))
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "tool_error"
        assert "outside the allowed repository" in outcome.message
