"""MCP with the official SDK (the `mcp` extra, `pip install 'agentmesh-failwell[mcp]'`), both ways:
MCP servers' tools as agentmesh tools, and subagents served as the tools of an MCP server.

    from agentmesh.mcp import MCPServer

    time = MCPServer.stdio(sys.executable, "-m", "mcp_server_time", name="time")
    get_time = time.tool("get_current_time")
    await ctx.call(get_time, timezone="Europe/Amsterdam")

`import agentmesh` does not import this package nor the SDK; the SDK loads with the first
of these names used, so `python -m agentmesh.mcp serve` checks its arguments before.
"""

from typing import TYPE_CHECKING

from agentmesh._signatures import loaded_at_first_use

if TYPE_CHECKING:
    from agentmesh.mcp._serve import serve
    from agentmesh.mcp._server import MCPServer
    from agentmesh.mcp._tool import MCPTool

__all__ = ["MCPServer", "MCPTool", "serve"]

# `_serve` first: it imports the SDK, or says which extra to install when it is missing.
__getattr__, __dir__ = loaded_at_first_use(
    __name__,
    {
        "serve": "agentmesh.mcp._serve",
        "MCPServer": "agentmesh.mcp._server",
        "MCPTool": "agentmesh.mcp._tool",
    },
    first="agentmesh.mcp._serve",
)
