"""An LLMSubagent offered an MCP server's tools, driven by the real anthropic SDK.

The model is `AnthropicModel` against `FakeMessagesAPI` on loopback; the tools are a real
MCP server's; a policy denies one of them, and the server's own record shows it never ran.
"""

from __future__ import annotations

import json
from pathlib import Path

from agentmesh import Success, tool
from agentmesh.models import AnthropicModel
from agentmesh.policies import Decision, ToolCallEvent, pre_tool_use
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
        def no_records(event: ToolCallEvent) -> Decision:
            return Decision.deny("records are read-only in this run")

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
