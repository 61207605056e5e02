"""A subagent whose tools come from a real MCP server: mcp-server-time, over stdio.

Save it as `mcp_tools.py` and run `python mcp_tools.py` (in a clone of the repository:
`python -m examples.howto.mcp_tools`; it needs `pip install
'agentmesh-failwell[mcp]' mcp-server-time`). Offline: the server is a child process and
the model is a `ScriptedModel`, so no key and no network.

The model is offered every tool the server lists, with the server's own schemas. In one
turn it asks for the time in two places, one of them a timezone that does not exist: the
good call is answered, the bad one comes back as an envelope (the server's `isError`
result) that the model reads, and a policy keeps `convert_time` from running at all.
(`examples/mcp_tools.py` shows the same server's failure modes call by call.)
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from agentmesh import Coordinator, Task
from agentmesh.mcp import MCPServer
from agentmesh.models import ModelRequest, ModelResponse, ScriptedModel
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use
from agentmesh.subagents import LLMSubagent

# The server would log each refused call on stderr at INFO; this keeps the output short.
quiet = {"FASTMCP_LOG_LEVEL": "WARNING"}
time_server = MCPServer.stdio(sys.executable, "-m", "mcp_server_time", name="time", env=quiet)


@pre_tool_use(tool="convert_time")
def no_conversions(event: ToolCallEvent) -> Ruling:
    """Policies hold for MCP tools as for any other: this one never reaches the server."""
    return Ruling.deny("conversions are not allowed here")


def answer(request: ModelRequest) -> ModelResponse:
    """The scripted model's last turn: it reads what the tools sent back."""
    lines = []
    for block in request.messages[-1]["content"]:
        result = json.loads(block["content"]) if isinstance(block["content"], str) else {}
        if block.get("is_error"):
            lines.append(f"could not: {result.get('errorType')} ({result.get('message')})")
        else:
            lines.append(f"{result.get('timezone')}: {result.get('datetime', '?')[11:16]}")
    return ModelResponse.of_text("; ".join(lines))


model = ScriptedModel(
    [
        ModelResponse.of_tool_calls(
            ("get_current_time", {"timezone": "Asia/Tokyo"}),
            ("get_current_time", {"timezone": "Mars/Olympus_Mons"}),
            (
                "convert_time",
                {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
            ),
        ),
        answer,
    ]
)
clock = LLMSubagent("clock", model, tools=[time_server], policies=[no_conversions])


async def main() -> None:
    async with time_server:  # starts the server's process, stops it at the end
        report = await Coordinator([clock]).run([Task(query="What time is it?", topic="time")])
    offered = [tool["name"] for tool in model.requests[0].tools]
    print(f"tools offered to the model: {offered}")
    for block in model.requests[1].messages[-1]["content"]:
        content: Any = block["content"]
        flag = "is_error" if block.get("is_error") else "ok"
        print(f"  tool_result ({flag}): {str(content)[:100]}")
    print(f"\nthe model's answer: {report.findings[0].content}")
    for entry in report.coverage:
        print(f"coverage: {entry.topic} {entry.status.value}: {entry.reason}")


if __name__ == "__main__":
    asyncio.run(main())
