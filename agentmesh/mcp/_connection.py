"""One live session with an MCP server, owned by a task of its own.

The SDK's `Client` is an anyio context (task groups, cancel scopes): it must be entered
and left by the same task. A tool call is made from whatever task a subagent runs in, and
`aclose()` from yet another, so a holder task enters the client, hands it out, and waits;
closing cancels the holder's scope, and the SDK's shielded shutdown stops the server
process (close stdin, then terminate, then kill) before the holder ends.

    starting ──handshake and tools/list done──► ready ──close() or loop ends──► closed
    starting ──spawn failed / handshake failed / connect_timeout──► failed
    ready ──a call found the connection closed──► lost (the next use starts a new one)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from agentmesh.errors import TransientError

if TYPE_CHECKING:
    import mcp
    import mcp.types

__all__ = ["Connection", "Opener", "Session"]

# A server that pages its tools/list forever must not hang the connection.
_MAX_PAGES = 100


class Session:
    """A connected client and the tools the server listed when it connected."""

    __slots__ = ("client", "tools")

    def __init__(self, client: mcp.Client, tools: dict[str, mcp.types.Tool]) -> None:
        self.client = client
        self.tools = tools


Opener = Callable[[contextlib.AsyncExitStack], Awaitable["mcp.Client"]]
"""Enters the transport and the SDK client on the stack; returns the connected client."""


class Connection:
    """One attempt at a session: started once, closed once; `lost` when it broke."""

    def __init__(
        self,
        opener: Opener,
        *,
        connect_timeout: float,
        describe_failure: Callable[[BaseException], Exception],
        log: Any,
    ) -> None:
        self._opener = opener
        self._connect_timeout = connect_timeout
        self._describe_failure = describe_failure
        self._log = log
        self.loop = asyncio.get_running_loop()
        self.lost = False
        self._closing = False
        self._ready: asyncio.Future[Session] = self.loop.create_future()
        # Retrieved here so a failure nobody awaited (the caller was cancelled) is not
        # logged by asyncio as "never retrieved".
        self._ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._scope: Any = None  # the holder's anyio.CancelScope, once it runs
        self._holder = self.loop.create_task(self._hold(), name="agentmesh-mcp-connection")

    async def session(self) -> Session:
        """The connected session; raises the start failure as an agentmesh error."""
        # Shielded: a caller's deadline must not cancel the connection others wait for.
        return await asyncio.shield(self._ready)

    async def close(self) -> None:
        """Leave the client (stopping the server process) and wait until that is done."""
        self._closing = True
        if self._scope is not None:
            self._scope.cancel()
        else:
            self._holder.cancel()  # not started yet: nothing to shut down
        await asyncio.wait({self._holder})

    async def _hold(self) -> None:
        import anyio

        failure: BaseException | None = None
        with anyio.CancelScope() as scope:
            self._scope = scope
            watchdog = self.loop.call_later(self._connect_timeout, self._give_up)
            try:
                async with contextlib.AsyncExitStack() as stack:
                    client = await self._opener(stack)
                    tools = await _listed_tools(client)
                    watchdog.cancel()
                    self._ready.set_result(Session(client, tools))
                    self._log.info("mcp_connected", tools=len(tools))
                    await anyio.sleep_forever()
            except Exception as exc:  # the failure becomes the waiters' error, below
                failure = exc
            finally:
                watchdog.cancel()
        self.lost = True
        if self._ready.done():
            if failure is not None:
                self._log.warning("mcp_close_failed", error=repr(failure))
            self._log.info("mcp_closed")
            return
        if failure is None and self._closing:
            self._ready.set_exception(
                TransientError("the MCP connection was closed before its handshake completed")
            )
            return
        if failure is None:
            failure = TransientError(
                f"no MCP handshake within connect_timeout={self._connect_timeout}s",
                error_type="timeout",
            )
            self._log.warning("mcp_connect_timeout", seconds=self._connect_timeout)
            self._ready.set_exception(failure)
            return
        error = self._describe_failure(failure)
        self._log.warning("mcp_connect_failed", error=str(error))
        self._ready.set_exception(error)

    def _give_up(self) -> None:
        if not self._ready.done() and self._scope is not None:
            self._scope.cancel()


async def _listed_tools(client: mcp.Client) -> dict[str, mcp.types.Tool]:
    tools: dict[str, mcp.types.Tool] = {}
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.update((tool.name, tool) for tool in page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools
