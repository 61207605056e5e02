"""MCP with the official SDK (the `mcp` extra, `pip install 'agentmesh-failwell[mcp]'`), both ways:
MCP servers' tools as agentmesh tools, and subagents served as the tools of an MCP server.

    from agentmesh.mcp import MCPServer

    time = MCPServer.stdio(sys.executable, "-m", "mcp_server_time", name="time")
    get_time = time.tool("get_current_time")
    await ctx.call(get_time, timezone="Europe/Amsterdam")

`import agentmesh` does not import this package nor the SDK; the SDK loads with the first
of these names used, so `python -m agentmesh.mcp serve` checks its arguments before.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentmesh.mcp._serve import serve
    from agentmesh.mcp._server import MCPServer
    from agentmesh.mcp._tool import MCPTool

__all__ = ["MCPServer", "MCPTool", "serve"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # `_serve` first: it imports the SDK, or says which extra to install when it is missing.
    from agentmesh.mcp import _serve, _server, _tool

    value = {"serve": _serve.serve, "MCPServer": _server.MCPServer, "MCPTool": _tool.MCPTool}[name]
    globals()[name] = value  # loaded once: later uses find it without this function
    return value


def __dir__() -> list[str]:
    # The lazy names are there too, though not loaded yet: `dir()` and completion see them.
    return sorted(set(globals()) | set(__all__))
