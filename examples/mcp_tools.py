"""MCP tools with agentmesh: a real MCP server's tools, its failures as envelopes.

Run it with `python examples/mcp_tools.py` (needs `pip install 'agentmesh-failwell[mcp]'
mcp-server-time`). Offline: the server is a local child process, no key, no network.

1. the time server's tools, listed with their schemas and idempotency;
2. a call that works: the server's structured result is the Success's data;
3. a call the server refuses (an unknown timezone): its isError result is an envelope;
4. a call with a missing argument: refused against the schema, the server never asked;
5. a policy denies one MCP tool: it is never called.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from agentmesh import Context, Outcome, RetryPolicy, Task, subagent
from agentmesh.mcp import MCPServer
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use

time_server = MCPServer.stdio(sys.executable, "-m", "mcp_server_time", name="time")


@pre_tool_use(tool="convert_time")
def no_conversions(event: ToolCallEvent) -> Ruling:
    return Ruling.deny("conversions are not part of this demo")


@subagent(retry=RetryPolicy(max_attempts=2), policies=[no_conversions])
async def clock(task: Task, ctx: Context) -> Any:
    """Task query: `<tool> <JSON arguments>`."""
    name, _, arguments = task.query.partition(" ")
    return await ctx.call(time_server.tool(name), **json.loads(arguments or "{}"))


def show(title: str, outcome: Outcome[Any]) -> None:
    print(f"\n== {title}")
    print(json.dumps(outcome.to_dict(), indent=2, default=str))


async def main() -> None:
    async with time_server:  # starts the server; stops its process at the end
        for tool in await time_server.list_tools():
            flag = "idempotent" if tool.idempotent else "not idempotent"
            print(f"{tool.name} ({flag}): {sorted(tool.input_schema['properties'])}")
        show("works", await clock.run('get_current_time {"timezone": "Europe/Amsterdam"}'))
        show("isError", await clock.run('get_current_time {"timezone": "Mars/Olympus"}'))
        show("invalid input", await clock.run("get_current_time {}"))
        denied = '{"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}'
        show("denied by a policy", await clock.run(f"convert_time {denied}"))


if __name__ == "__main__":
    asyncio.run(main())
