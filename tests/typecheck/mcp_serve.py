"""Type-checked, never run: serving subagents over MCP as a user sees it."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette

from agentmesh import RetryBudget, Task, subagent
from agentmesh.context import Context
from agentmesh.mcp import serve


@subagent(name="docs")
async def docs(task: Task, ctx: Context) -> list[str]:
    return [task.query]


server: MCPServer = serve([docs], name="agentmesh", timeout=30, retry_budget=RetryBudget())
app: Starlette = server.streamable_http_app()


def over_stdio() -> None:
    server.run()


def over_http() -> None:
    server.run("streamable-http", host="127.0.0.1", port=8000)
