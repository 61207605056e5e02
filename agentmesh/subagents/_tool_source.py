"""`ToolSource`: tools that are known only at run time, such as an MCP server's.

`LLMSubagent(tools=[...])` takes `@tool`s and sources alike; a source is asked for its
tools when a task starts (an MCP server connects then, at the latest). A source that
cannot list them (an `AgentError`) fails the task only when it has `required = True` or
when the model would be left without any tool; otherwise the task goes on without its
tools and its outcome says so (`tools_left_out`, a note in the report).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from agentmesh.tools import Tool

__all__ = ["ToolSource"]


@runtime_checkable
class ToolSource(Protocol):
    """Offers tools that can only be listed asynchronously (`agentmesh.mcp.MCPServer`).

    An optional attribute `required: bool` (False when absent) says whether a task may go
    on without the source's tools.
    """

    name: str

    async def list_tools(self) -> list[Tool[..., Any]]:
        """The tools to offer now; raises (an `AgentError`) when they cannot be listed."""
        ...
