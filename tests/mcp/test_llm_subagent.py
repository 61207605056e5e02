"""An LLMSubagent offered an MCP server's tools, driven by the real anthropic SDK.

The model is `AnthropicModel` against `FakeMessagesAPI` on loopback; the tools are a real
MCP server's; a policy denies one of them, and the server's own record shows it never ran.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agentmesh import Coordinator, Success, Task, tool
from agentmesh.coordinator import CoverageEntry, CoverageStatus
from agentmesh.mcp import MCPServer
from agentmesh.models import AnthropicModel, ModelResponse, ScriptedModel
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeMessagesAPI
from tests.mcp.conftest import flaky_server

F = FakeMessagesAPI


@tool(idempotent=True)
async def local_note(text: str) -> str:
    """A plain @tool next to the server's."""
    return f"noted: {text}"


def tool_results(api: FakeMessagesAPI, index: int) -> list[dict[str, object]]:
    content = api.requests[index].messages[-1]["content"]
    return [block for block in content if block["type"] == "tool_result"]


class TestToolLoopWithAnMCPServer:
    async def test_the_servers_tools_are_offered_and_a_denied_one_never_runs(
        self, fake_messages_api: FakeMessagesAPI, tmp_path: Path
    ) -> None:
        """All server tools reach the model; the denied `record` is refused, never called."""

        @pre_tool_use(tool="record")
        def no_records(event: ToolCallEvent) -> Ruling:
            return Ruling.deny("records are read-only in this run")

        fake_messages_api.enqueue(
            F.tool_use("record", {"note": "secret"}, id="toolu_1"),
            F.tool_use("echo", {"text": "hi", "times": 2}, id="toolu_2"),
            F.tool_use("local_note", {"text": "done"}, id="toolu_3"),
            F.tool_use("record", {"note": "again"}, id="toolu_4"),
            F.text("The echo said hihi."),
        )
        server = flaky_server(tmp_path)
        async with AnthropicModel(
            "claude-test", api_key="sk-ant-test-0123456789", base_url=fake_messages_api.base_url
        ) as model:
            agent = LLMSubagent(
                "mcp_user", model, tools=[server, local_note], policies=[no_records]
            )
            outcome = await agent.run("echo hi twice")
        await server.aclose()

        assert isinstance(outcome, Success)
        assert outcome.data == "The echo said hihi."
        offered = [t["name"] for t in fake_messages_api.requests[0].body["tools"]]
        assert {"echo", "record", "whoami", "hang"} <= set(offered)
        assert offered[0] == "local_note"
        echo = next(t for t in fake_messages_api.requests[0].body["tools"] if t["name"] == "echo")
        assert echo["input_schema"]["required"] == ["text"]

        [denied] = tool_results(fake_messages_api, 1)
        assert denied["is_error"] is True
        assert json.loads(denied["content"])["errorType"] == "policy_blocked"
        [echoed] = tool_results(fake_messages_api, 2)
        assert "is_error" not in echoed
        assert "hihi" in echoed["content"]
        [noted] = tool_results(fake_messages_api, 3)
        assert "noted: done" in noted["content"]
        [denied_again] = tool_results(fake_messages_api, 4)
        assert denied_again["is_error"] is True
        assert not (tmp_path / "calls").exists()  # the server never ran `record`

    async def test_a_servers_text_result_reaches_the_model_as_text(
        self, fake_messages_api: FakeMessagesAPI, tmp_path: Path
    ) -> None:
        """A text-only MCP result is sent as its text, not as a JSON-escaped string."""
        text = 'line 1\nline 2 "q"'
        fake_messages_api.enqueue(F.tool_use("say", {"text": text}), F.text("done"))
        server = flaky_server(tmp_path)
        async with AnthropicModel(
            "claude-test", api_key="sk-ant-test-0123456789", base_url=fake_messages_api.base_url
        ) as model:
            outcome = await LLMSubagent("mcp_user", model, tools=[server]).run("say it")
        await server.aclose()

        assert isinstance(outcome, Success)
        [said] = tool_results(fake_messages_api, 1)
        assert said["content"] == text
        assert "is_error" not in said


def dead_git(tmp: Path, **options: bool) -> MCPServer:
    """A git server whose command is not installed."""
    return MCPServer.stdio(str(tmp / "mcp-server-git-missing"), name="git", **options)


def time_server() -> MCPServer:
    return MCPServer.stdio(sys.executable, "-m", "mcp_server_time", name="time")


async def report_of(agent: LLMSubagent) -> CoverageEntry:
    report = await Coordinator([agent]).run([Task(query="what time is it?", topic="time")])
    [entry] = report.coverage
    return entry


class TestOptionalSources:
    async def test_a_dead_server_leaves_its_tools_out_and_the_model_runs_with_the_rest(
        self, tmp_path: Path
    ) -> None:
        """The time server answers; git cannot start: the task is answered, the report says so."""
        model = ScriptedModel(
            [
                ModelResponse.of_tool_calls(("get_current_time", {"timezone": "UTC"})),
                ModelResponse.of_text("It is noon in UTC."),
            ]
        )
        git, time = dead_git(tmp_path), time_server()
        try:
            entry = await report_of(LLMSubagent("clock", model, tools=[git, time]))
        finally:
            await time.aclose()
        assert entry.status is CoverageStatus.COVERED
        assert entry.reason is not None
        assert "went on without the tools of git: MCP server git cannot be started: " in (
            entry.reason
        )
        assert "command not found" in entry.reason
        offered = {tool["name"] for tool in model.requests[0].tools}
        assert "get_current_time" in offered
        assert not offered & {"git_status", "git_log"}

    async def test_the_outcome_names_the_source_left_out(self, tmp_path: Path) -> None:
        """`tools_left_out` on the outcome: the source, its error type and the human reason."""
        model = ScriptedModel([ModelResponse.of_text("I could not look.")])
        git, time = dead_git(tmp_path), time_server()
        try:
            outcome = await LLMSubagent("clock", model, tools=[git, time]).run("time?")
        finally:
            await time.aclose()
        assert isinstance(outcome, Success)
        assert outcome.tools_left_out is not None
        [left_out] = outcome.tools_left_out
        assert (left_out.source, left_out.error_type) == ("git", "command_not_found")
        assert left_out.reason.startswith("MCP server git cannot be started: command not found")

    async def test_a_required_server_that_cannot_start_fails_the_task_before_the_model(
        self, tmp_path: Path
    ) -> None:
        """`required=True` keeps the old rule, with a reason a person can read."""
        model = ScriptedModel([ModelResponse.of_text("never asked")])
        git, time = dead_git(tmp_path, required=True), time_server()
        try:
            entry = await report_of(LLMSubagent("clock", model, tools=[git, time]))
        finally:
            await time.aclose()
        assert entry.status is CoverageStatus.GAP
        assert entry.reason == (
            f"MCP server git cannot be started: command not found: {tmp_path}/"
            "mcp-server-git-missing"
        )
        assert model.requests == []

    async def test_with_no_tool_left_the_task_fails_with_the_servers_reason(
        self, tmp_path: Path
    ) -> None:
        """A model left without any tool is not asked: the one server's failure ends the task."""
        model = ScriptedModel([ModelResponse.of_text("never asked")])
        entry = await report_of(LLMSubagent("clock", model, tools=[dead_git(tmp_path)]))
        assert entry.status is CoverageStatus.GAP
        assert entry.reason is not None
        assert entry.reason.startswith("MCP server git cannot be started: command not found")
        assert "FileNotFoundError" not in entry.reason
        assert model.requests == []
