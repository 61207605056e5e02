"""How an `MCPServer` reaches its server: a child process over stdio, or streamable HTTP.

Each transport opens one SDK client on the connection's exit stack and says, for logs
and envelopes, where it goes (never a header nor a URL's query string).
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import mcp


# What an MCP HTTP client waits by default (the SDK's own figures): a server may hold a
# response stream open for minutes.
_HTTP_TIMEOUT: Final = 30.0
_HTTP_READ_TIMEOUT: Final = 300.0


@dataclasses.dataclass(frozen=True, slots=True)
class _Stdio:
    command: str
    args: tuple[str, ...]
    env: Mapping[str, str] | None
    cwd: str | None

    async def open(
        self,
        stack: contextlib.AsyncExitStack,
        request_timeout: float | None,
        refused: Callable[[int], None],
    ) -> mcp.Client:
        import mcp
        from mcp.client.stdio import stdio_client

        params = mcp.StdioServerParameters(
            command=self.command, args=list(self.args), env=dict(self.env or {}), cwd=self.cwd
        )
        # Looked up now, not at import: the server's stderr goes where ours goes today.
        transport = stdio_client(params, errlog=sys.stderr)
        client = mcp.Client(transport, read_timeout_seconds=request_timeout, cache=None)
        return await stack.enter_async_context(client)

    def facts(self) -> str:
        return f"command: {' '.join([self.command, *self.args])}"


@dataclasses.dataclass(frozen=True, slots=True)
class _Http:
    url: str
    headers: Mapping[str, str]

    async def open(
        self,
        stack: contextlib.AsyncExitStack,
        request_timeout: float | None,
        refused: Callable[[int], None],
    ) -> mcp.Client:
        import httpx2
        import mcp
        from mcp.client.streamable_http import streamable_http_client

        async def note_refusal(response: httpx2.Response) -> None:
            # The SDK reports any HTTP error as "Server returned an error response".
            if response.status_code in (401, 403):
                refused(response.status_code)

        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=dict(self.headers),
                timeout=httpx2.Timeout(_HTTP_TIMEOUT, read=_HTTP_READ_TIMEOUT),
                event_hooks={"response": [note_refusal]},
            )
        )
        transport = streamable_http_client(self.url, http_client=http)
        client = mcp.Client(transport, read_timeout_seconds=request_timeout, cache=None)
        return await stack.enter_async_context(client)

    def facts(self) -> str:
        # The query string may hold a token.
        return f"url: {self.url.split('?', 1)[0]}"
