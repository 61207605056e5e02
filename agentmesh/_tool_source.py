"""`ToolSource`: tools that are known only at run time, such as an MCP server's.

`LLMSubagent(tools=[...])` takes `@tool`s and sources alike; a source is asked for its
tools when a task starts (an MCP server connects then, at the latest).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from agentmesh.tools import Tool

__all__ = ["ToolSource"]


@runtime_checkable
class ToolSource(Protocol):
    """Offers tools that can only be listed asynchronously (`agentmesh.mcp.MCPServer`)."""

    name: str

    async def list_tools(self) -> list[Tool[..., Any]]:
        """The tools to offer now; raises (an `AgentError`) when they cannot be listed."""
        ...
