"""An MCP tool's options: the limits of `@tool`, the identity of the server's tool."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from agentmesh import RetryPolicy, UsageError
from agentmesh.mcp import MCPServer
from agentmesh.tools import ToolOptions


def _server() -> MCPServer:
    # Not started: an MCP tool is made, with its options, before any connection.
    return MCPServer.stdio(sys.executable, "-m", "mcp_server_time", name="time")


class TestMCPToolOptions:
    def test_limits_pass_on_and_identity_is_the_servers(self) -> None:
        """An MCP tool keeps the limits given; its name and breaker are the server's."""
        server, retry = _server(), RetryPolicy(max_attempts=2)
        made = server.tool(
            "get_current_time",
            impact="legal",
            retry=retry,
            rate_limit=(2, 1),
            max_concurrency=1,
            timeout=3,
            idempotent=True,
        )
        assert made.options == ToolOptions(
            name="get_current_time",
            description="get_current_time",
            idempotent=True,
            impact="legal",
            retry=retry,
            rate_limit=(2, 1),
            max_concurrency=1,
            breaker=server.breaker,
        )
        assert made.timeout == 3

    def test_no_options_is_the_shared_tool(self) -> None:
        """Without options (None counts as none) `server.tool(name)` is the one shared object."""
        server = _server()
        assert server.tool("get_current_time") is server.tool("get_current_time", retry=None)
        assert server.tool("get_current_time", max_concurrency=1) is not server.tool(
            "get_current_time"
        )

    @pytest.mark.parametrize(
        ("options", "named"),
        [
            ({"description": "mine"}, "'description'"),
            ({"idempotent": "yes"}, "idempotent="),
            ({"timeout": 0}, "timeout="),
            ({"impact": "moral"}, "impact="),
        ],
    )
    def test_misuse_names_the_argument(self, options: dict[str, Any], named: str) -> None:
        """A wrong option, or one an MCP tool does not take, raises UsageError naming it."""
        with pytest.raises(UsageError, match=named):
            _server().tool("get_current_time", **options)
