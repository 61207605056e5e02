"""One connection per server, shared by concurrent calls; no server process outlives its use."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentmesh import Context, RetryPolicy, Success, Task, subagent
from agentmesh.mcp import MCPServer, MCPTool
from tests.mcp.conftest import FLAKY_MODULE, REPO, alive, children, flaky_server, starts


async def run(tool: MCPTool, **arguments: Any) -> Any:
    @subagent(name="caller", retry=RetryPolicy.never())
    async def caller(task: Task, ctx: Context) -> Any:
        return await ctx.call(tool, **arguments)

    return await caller.run(Task(query=tool.name))


class TestSharedConnection:
    async def test_concurrent_calls_share_one_connection_started_lazily(
        self, tmp_path: Path
    ) -> None:
        """Twenty concurrent calls before any connection: one process answers them all."""
        server = flaky_server(tmp_path)
        whoami = server.tool("whoami")  # made before connecting
        assert not server.connected
        outcomes = await asyncio.gather(*(run(whoami) for _ in range(20)))
        pids = {outcome.data["pid"] for outcome in outcomes}
        assert pids == set(starts(tmp_path))
        assert len(pids) == 1
        await server.aclose()
        assert not alive(pids.pop())

    async def test_after_aclose_the_next_use_starts_the_server_again(self, tmp_path: Path) -> None:
        """`async with` stops the process at its end; a later call connects anew."""
        server = flaky_server(tmp_path)
        async with server:
            assert server.connected
            [first] = starts(tmp_path)
        assert not server.connected
        assert not alive(first)
        outcome = await run(server.tool("whoami"))
        assert isinstance(outcome, Success)
        assert outcome.data["pid"] != first
        await server.aclose()
        assert not alive(outcome.data["pid"])


class TestNoOrphans:
    async def test_a_cancelled_call_leaves_the_connection_and_aclose_the_process(
        self, tmp_path: Path
    ) -> None:
        """Cancelling a run mid-call keeps the server usable; closing it ends the process."""
        server = flaky_server(tmp_path)
        await server.connect()
        [pid] = starts(tmp_path)
        hanging = asyncio.create_task(run(server.tool("hang")))
        await asyncio.sleep(0.2)
        hanging.cancel()
        with pytest.raises(asyncio.CancelledError):
            await hanging
        after = await run(server.tool("whoami"))
        assert after.data["pid"] == pid
        await server.aclose()
        assert not alive(pid)

    def test_an_event_loop_that_ends_without_aclose_stops_the_server(self, tmp_path: Path) -> None:
        """asyncio.run() cancels the connection's task; the SDK's shutdown stops the process."""
        before = children()
        server = flaky_server(tmp_path)
        outcome = asyncio.run(run(server.tool("whoami")))
        assert isinstance(outcome, Success)
        assert not alive(outcome.data["pid"])
        assert children() <= before
        # The same server object works in the next event loop, with a new process.
        again = asyncio.run(run(server.tool("whoami")))
        assert again.data["pid"] != outcome.data["pid"]
        assert not alive(again.data["pid"])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    """The fixture server over streamable HTTP on a free port; its URL."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", FLAKY_MODULE, "--http", str(port)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


class TestHttp:
    async def test_streamable_http_sends_the_headers_and_maps_errors_alike(
        self, http_server: str
    ) -> None:
        """`MCPServer.http`: the headers reach the server; an isError result is an envelope."""
        server = MCPServer.http(http_server, headers={"X-Team": "search"}, name="remote")
        async with server:
            seen = await run(server.tool("header"), name="x-team")
            assert isinstance(seen, Success)
            assert seen.data == {"result": "search"}
            failed = await run(server.tool("fail"), reason="over http")
            assert not isinstance(failed, Success)
            assert failed.error_type == "tool_error"
            assert "over http" in failed.message
