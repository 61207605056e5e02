"""Real MCP servers for the tests of `agentmesh.mcp`, and the check that none outlives the suite.

Servers are child processes of the test process: `children()` lists the live ones (from
/proc, so these tests run on Linux), and the session-scoped check fails the run if any
MCP server started by a test is still running at the end.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmesh.mcp import MCPServer

REPO = Path(__file__).resolve().parents[2]
FLAKY_MODULE = "tests.mcp.fixtures.flaky_server"
# Command-line marks of the servers these tests start.
_SERVER_MARKS = (FLAKY_MODULE, "mcp_server_time", "mcp_server_git")


def children() -> set[int]:
    """Process ids of this process's live (not zombie) children that are MCP servers."""
    found: set[int] = set()
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue  # it ended while we looked
        state, parent = stat.rsplit(")", 1)[1].split()[:2]
        if int(parent) == me and state != "Z" and any(m in command for m in _SERVER_MARKS):
            found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def flaky_server(tmp: Path, *options: str, **settings: object) -> MCPServer:
    """Our fixture server; its starts are listed in `tmp / "pids"`."""
    env = {
        "FLAKY_PIDS": str(tmp / "pids"),
        "FLAKY_CRASHED": str(tmp / "crashed"),
        "FLAKY_CALLS": str(tmp / "calls"),
    }
    return MCPServer.stdio(
        sys.executable,
        "-m",
        FLAKY_MODULE,
        *options,
        name="flaky",
        env=env,
        cwd=REPO,
        **settings,  # type: ignore[arg-type]  # the keyword options of MCPServer.stdio
    )


def starts(tmp: Path) -> list[int]:
    """The process ids of the fixture server's starts so far."""
    path = tmp / "pids"
    return [int(line) for line in path.read_text().split()] if path.exists() else []


@pytest.fixture(scope="session", autouse=True)
def no_orphan_servers() -> Iterator[None]:
    """After the whole suite, no MCP server process a test started is still running."""
    before = children()
    yield
    left = children() - before
    assert not left, f"MCP server processes outlived the tests: {sorted(left)}"
