"""`python -m agentmesh.mcp serve` as a user starts it: bad targets, and HTTP served safely.

Each HTTP test starts the command as a process, talks to it with the real SDK client
(through `MCPServer.http`) or a bare HTTP request, and stops it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from agentmesh import (
    Context,
    ErrorCategory,
    ErrorEnvelope,
    RetryPolicy,
    Success,
    Task,
    subagent,
)
from agentmesh.mcp import MCPServer
from tests.mcp.test_serve import ROOT, TARGET, _free_port, _stop, _wait_until_listening

TOKEN_VARIABLE = "AGENTMESH_MCP_TOKEN"  # documented in docs/how-to/mcp.md


def serve_command(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentmesh.mcp", "serve", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


class TestBadTargets:
    def test_a_module_that_raises_on_import_is_one_line_and_exit_2(self) -> None:
        """The module's own error, in one line, no traceback; nothing is served."""
        result = serve_command("tests.mcp.fixtures.raising:agents")
        assert result.returncode == 2
        assert "Traceback" not in result.stderr
        last = result.stderr.strip().splitlines()[-1]
        assert last == (
            "python -m agentmesh.mcp serve: error: cannot import 'tests.mcp.fixtures.raising': "
            "importing it raised RuntimeError: DATABASE_URL is not set"
        )

    @pytest.mark.parametrize("target", [".served:subagents", "tests/mcp/fixtures/served.py:x"])
    def test_a_relative_module_or_a_file_path_is_one_line_and_exit_2(self, target: str) -> None:
        """A path where a dotted module name belongs is named, not a TypeError's traceback."""
        result = serve_command(target)
        assert result.returncode == 2
        assert "Traceback" not in result.stderr
        assert f"{target.partition(':')[0]!r} is" in result.stderr.strip().splitlines()[-1]


class _Served:
    """One `serve --http` process; its output (stdout and stderr) is read after it stops."""

    def __init__(self, *argv: str, token: str | None = None) -> None:
        self.port = _free_port()
        argv = ("--http", str(self.port), *argv)
        self._tmp = tempfile.TemporaryDirectory()
        self.log = Path(self._tmp.name, "server.log")
        env = {k: v for k, v in os.environ.items() if k != TOKEN_VARIABLE}
        if token is not None:
            env[TOKEN_VARIABLE] = token
        with self.log.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "agentmesh.mcp", "serve", TARGET, *argv],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=err,  # uvicorn's access log goes to stdout
                stderr=subprocess.STDOUT,
            )
        try:
            _wait_until_listening(self.process, self.port, self.log)
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def listening_addresses(self) -> set[str]:
        """The local addresses the process listens on (IPv4, from /proc)."""
        found = set()
        for line in Path(f"/proc/{self.process.pid}/net/tcp").read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port = local.split(":")
            if state == "0A" and int(port, 16) == self.port:
                found.add(".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0)))
        return found

    def stop(self) -> str:
        _stop(self.process)
        text = self.log.read_text()
        self._tmp.cleanup()
        return text


@pytest.fixture(scope="module")
def served_with_token() -> Iterator[_Served]:
    """One server for the token tests: each is a client of its own, as a user's would be."""
    served = _Served(token="s3cret-token")
    yield served
    served.stop()


async def call_docs(url: str, headers: dict[str, str] | None = None) -> object:
    server = MCPServer.http(url, headers=headers, name="mesh", breaker=None)
    try:
        async with server:
            return await server.call_tool("nothing", {"query": "q"})
    finally:
        await server.aclose()


async def ask_without_token(url: str) -> object:
    server = MCPServer.http(url, name="mesh")

    @subagent(name="lead", retry=RetryPolicy(max_attempts=3, initial_delay=0.01))
    async def lead(task: Task, ctx: Context) -> object:
        return await ctx.call(server.tool("nothing"), query=task.query)

    try:
        return await lead.run(Task(query="q"))
    finally:
        await server.aclose()


class TestHttp:
    def test_it_binds_loopback_unless_told_otherwise(self) -> None:
        """`--http PORT` listens on 127.0.0.1 only, never on every interface."""
        served = _Served()
        try:
            assert served.listening_addresses() == {"127.0.0.1"}
        finally:
            served.stop()

    def test_a_request_without_the_token_is_refused_with_401(
        self, served_with_token: _Served
    ) -> None:
        """No bearer token, or a wrong one: 401 with a Bearer challenge; nothing is served."""
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            response = httpx2.post(served_with_token.url, json={}, headers=headers)
            assert response.status_code == 401
            assert response.headers["www-authenticate"].startswith("Bearer")

    def test_the_sdk_client_with_the_token_is_served(self, served_with_token: _Served) -> None:
        """The real SDK client sending `Authorization: Bearer <token>` lists and calls tools."""
        result = asyncio.run(
            call_docs(served_with_token.url, {"Authorization": "Bearer s3cret-token"})
        )
        outcome = Success.model_validate(getattr(result, "structured_content", None))
        assert outcome.is_empty

    def test_the_sdk_client_without_the_token_is_refused_for_good(
        self, served_with_token: _Served
    ) -> None:
        """No header: the handshake is refused, a permission envelope not retried in vain."""
        outcome = asyncio.run(ask_without_token(served_with_token.url))
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.PERMISSION
        assert outcome.error_type == "unauthorized"
        assert "refused the connection: HTTP 401" in outcome.message
        assert outcome.attempts == 1

    @pytest.mark.parametrize(("argv", "logged"), [((), False), (("--log-level", "info"), True)])
    def test_no_access_log_line_per_request_unless_asked_for(
        self, argv: tuple[str, ...], logged: bool
    ) -> None:
        """By default the output stays quiet per request; `--log-level info` logs each one."""
        served = _Served(*argv)
        try:
            for _ in range(3):
                httpx2.post(served.url, json={}, headers={"Accept": "application/json"})
        finally:
            log = served.stop()
        assert ('"POST /mcp HTTP/1.1"' in log) is logged, log

    def test_a_token_without_http_is_refused(self) -> None:
        """`--token` protects HTTP only: with stdio it is a mistake, said with exit 2."""
        result = serve_command(TARGET, "--token", "x")
        assert result.returncode == 2
        assert "--token protects an HTTP server" in result.stderr
