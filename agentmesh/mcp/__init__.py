"""MCP with the official SDK (the `mcp` extra): subagents served as the tools of an MCP server."""

from agentmesh.mcp._serve import serve

__all__ = ["serve"]
