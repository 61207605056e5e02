"""MCP with the official SDK (the `mcp` extra, `pip install 'agentmesh-failwell[mcp]'`), both ways:
MCP servers' tools as agentmesh tools, and subagents served as the tools of an MCP server.

    from agentmesh.mcp import MCPServer

    time = MCPServer.stdio(sys.executable, "-m", "mcp_server_time", name="time")
    get_time = time.tool("get_current_time")
    await ctx.call(get_time, timezone="Europe/Amsterdam")

`import agentmesh` does not import this package nor the SDK.
"""

from agentmesh.mcp._serve import serve
from agentmesh.mcp._server import MCPServer
from agentmesh.mcp._tool import MCPTool

__all__ = ["MCPServer", "MCPTool", "serve"]
