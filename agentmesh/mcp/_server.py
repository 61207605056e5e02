"""`MCPServer`: an MCP server whose tools are agentmesh tools.

    time = MCPServer.stdio(sys.executable, "-m", "mcp_server_time", name="time")
    remote = MCPServer.http("http://127.0.0.1:8931/mcp", headers={...}, name="remote")

A server connects on first use (or on `async with`), keeps one connection that every
call shares (the SDK multiplexes concurrent requests over it), and closes it, stopping
a stdio server's process, on `aclose()` or at the end of `async with`. A connection
that broke (the process died, the stream closed) is replaced at the next attempt, so
the local retry loop restarts a crashed server; the server's `CircuitBreaker`, shared by
all its tools, stops restarting one that keeps dying.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Unpack
from urllib.parse import urlsplit

from agentmesh._logging import get_logger
from agentmesh._numbers import number
from agentmesh._tool_options import MCPToolKwargs
from agentmesh.breaker import CircuitBreaker
from agentmesh.classify import default_classifier
from agentmesh.envelope import ErrorCategory
from agentmesh.errors import AgentError, PermissionDenied, TransientError, UsageError
from agentmesh.mcp._connection import Connection, Session
from agentmesh.mcp._errors import CONNECTION_CLOSED, ServerConnectionLost
from agentmesh.mcp._tool import MCPTool
from agentmesh.mcp._transports import _Http, _Stdio
from agentmesh.tools import Tool

if TYPE_CHECKING:
    import mcp
    import mcp.types

__all__ = ["MCPServer"]


class _Default:
    """Marks an argument left out (a fresh default), told apart from an explicit None."""

    def __repr__(self) -> str:
        return "DEFAULT"


_DEFAULT: Final = _Default()


class MCPServer:
    """An MCP server reached over stdio or streamable HTTP; make one with `stdio` or `http`.

    Args (of both constructors):
        name: names the server in envelopes, logs and the breaker.
        timeout: seconds a request may wait for its answer (None: the SDK's default,
            no limit); the caller's deadline applies too.
        connect_timeout: seconds for starting the server and its handshake.
        breaker: a `CircuitBreaker` shared by the server's tools; by default one that
            opens after 5 consecutive transient failures and probes after 30 s; None
            for none.
        required: as a source of an `LLMSubagent`'s tools: True fails the task when the
            server cannot be listed; False (the default) leaves its tools out of that
            task, which says so in its report, while the model keeps other tools.
    """

    def __init__(
        self,
        transport: _Stdio | _Http,
        *,
        name: str,
        timeout: float | None,
        connect_timeout: float,
        breaker: CircuitBreaker | _Default | None,
        required: bool = False,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise UsageError(f"MCPServer(name=) must be a non-empty string, got {name!r}")
        if timeout is not None:
            timeout = number("MCPServer(timeout=)", timeout, above=True, unit="seconds")
        connect_timeout = number(
            "MCPServer(connect_timeout=)", connect_timeout, above=True, unit="seconds"
        )
        if not isinstance(required, bool):
            raise UsageError(f"MCPServer(required=) takes True or False, got {required!r}")
        if isinstance(breaker, _Default):
            breaker = CircuitBreaker(failure_threshold=5, reset_after=30.0)
        elif breaker is not None and not isinstance(breaker, CircuitBreaker):
            raise UsageError(f"MCPServer(breaker=) takes a CircuitBreaker or None, got {breaker!r}")
        if breaker is not None and breaker.name is None:
            breaker.name = f"mcp {name}"
        self.name = name
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.breaker = breaker
        self.required = required
        self._transport = transport
        self._log = get_logger(mcp_server=name)
        self._connection: Connection | None = None
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tools: dict[str, MCPTool] = {}  # the default tool object per name
        self._listed: dict[str, mcp.types.Tool] = {}
        self._refused: int | None = None  # the HTTP status refusing the last connection

    @classmethod
    def stdio(
        cls,
        command: str,
        *args: str,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
        connect_timeout: float = 30.0,
        breaker: CircuitBreaker | _Default | None = _DEFAULT,
        required: bool = False,
    ) -> MCPServer:
        """A server the framework starts as a child process and talks to over stdio.

        Args:
            command: the executable; `args` follow it.
            name: default: the module after `-m`, else the command's file name.
            env: variables set for the server, over a safe default set (PATH, HOME, ...):
                the rest of this process's environment is not passed on.
            cwd: the server's working directory.
        """
        if not isinstance(command, str) or not command:
            raise UsageError(
                f"MCPServer.stdio(command=) must be a non-empty string, got {command!r}"
            )
        if not all(isinstance(arg, str) for arg in args):
            raise UsageError(f"MCPServer.stdio(*args) must be strings, got {args!r}")
        if env is not None and not all(
            isinstance(k, str) and isinstance(v, str) for k, v in dict(env).items()
        ):
            raise UsageError("MCPServer.stdio(env=) maps variable names to strings")
        if name is None:
            name = args[1] if len(args) > 1 and args[0] == "-m" else Path(command).name
        transport = _Stdio(command, tuple(args), env, None if cwd is None else os.fspath(cwd))
        return cls(
            transport,
            name=name,
            timeout=timeout,
            connect_timeout=connect_timeout,
            breaker=breaker,
            required=required,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        timeout: float | None = None,
        connect_timeout: float = 30.0,
        breaker: CircuitBreaker | _Default | None = _DEFAULT,
        required: bool = False,
    ) -> MCPServer:
        """A server reached over streamable HTTP at `url` (e.g. `http://host:8000/mcp`).

        Args:
            headers: sent with every request (an `Authorization` header, say); they never
                appear in envelopes or logs.
            name: default: the URL's host and port.
        """
        if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
            raise UsageError(f"MCPServer.http(url=) must be an http(s) URL, got {url!r}")
        if headers is not None and not all(
            isinstance(k, str) and isinstance(v, str) for k, v in dict(headers).items()
        ):
            raise UsageError("MCPServer.http(headers=) maps header names to strings")
        if name is None:
            name = urlsplit(url).netloc.rpartition("@")[2]
        return cls(
            _Http(url, dict(headers or {})),
            name=name,
            timeout=timeout,
            connect_timeout=connect_timeout,
            breaker=breaker,
            required=required,
        )

    # --- lifecycle ---------------------------------------------------------------------

    async def __aenter__(self) -> MCPServer:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def connect(self) -> None:
        """Connect now rather than at first use; raises the failure as an `AgentError`."""
        await self._session()

    async def aclose(self) -> None:
        """Close the connection and stop the server's process; a later use connects again."""
        connection, self._connection = self._connection, None
        if connection is not None and connection.loop is asyncio.get_running_loop():
            await connection.close()

    @property
    def connected(self) -> bool:
        """Whether a connection is up now (one that broke reads False)."""
        connection = self._connection
        return connection is not None and not connection.lost and connection.loop.is_running()

    # --- tools -------------------------------------------------------------------------

    def tool(self, name: str, **options: Unpack[MCPToolKwargs]) -> MCPTool:
        """The server's tool `name`, usable before the server is connected.

        Without options it is the same object `list_tools()` returns for that name;
        with options a new one (make it once and reuse it: its limits live on it).

        Args:
            idempotent: None follows the server's annotations; True or False overrides.
            impact: "financial", "legal" or "safety", for policies.
            timeout: seconds one call may wait for its answer (default: the server's).
            retry, rate_limit, max_concurrency: as for `@tool`.
        """
        plain = all(value is None for value in options.values())
        if plain and name in self._tools:
            return self._tools[name]
        made = MCPTool(self, name, **options)
        if name in self._listed:
            made.learn(self._listed[name])
        if plain:
            self._tools[name] = made
        return made

    async def list_tools(self) -> list[Tool[..., Any]]:
        """The server's tools as agentmesh tools (connecting first if need be).

        A tool whose input schema cannot be used (not valid JSON Schema, a `$ref` that
        does not resolve or loops forever; see `agentmesh.mcp._schema`) is left out (and
        logged): a model could not be offered it. `tool(name)` still reaches it, and its
        calls fail with an `invalid_schema` envelope without calling the server.
        """
        session = await self._session()
        offered: list[Tool[..., Any]] = []
        for name in session.tools:
            tool = self.tool(name)
            if tool.schema_problem is not None:
                self._log.warning("mcp_tool_skipped", tool=name, reason=tool.schema_problem)
                continue
            offered.append(tool)
        return offered

    @property
    def tool_names(self) -> frozenset[str]:
        """The names the server listed at its last connection (empty before one)."""
        return frozenset(self._listed)

    async def describe(self, name: str) -> mcp.types.Tool | None:
        """The server's listing of tool `name` (connecting first), or None without one."""
        session = await self._session()
        return session.tools.get(name)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, request_timeout: float | None = None
    ) -> mcp.types.CallToolResult:
        """One raw `tools/call` (`request_timeout`: seconds, default the server's).

        Call tools through `ctx.call(server.tool(name), ...)` instead: this has no validation,
        policies nor retries."""
        import anyio
        import mcp

        connection = await self._live_connection()
        session = await connection.session()
        try:
            return await session.client.call_tool(
                name, arguments, read_timeout_seconds=request_timeout
            )
        except mcp.MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise
            failure: BaseException = exc
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            failure = exc
        connection.lost = True
        self._log.warning("mcp_connection_lost", tool=name)
        raise ServerConnectionLost(
            f"the connection to MCP server {self.name} closed during a call of {name}"
        ) from failure

    # --- connection --------------------------------------------------------------------

    async def _session(self) -> Session:
        connection = await self._live_connection()
        session = await connection.session()
        self._listed = session.tools
        for name, tool in self._tools.items():
            if name in session.tools:
                tool.learn(session.tools[name])
        return session

    async def _live_connection(self) -> Connection:
        """The current connection, or a new one when there is none or it broke."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # A connection of another (ended) event loop died with it.
            self._loop, self._lock, self._connection = loop, asyncio.Lock(), None
        connection = self._connection
        if connection is not None and not connection.lost:
            return connection
        assert self._lock is not None
        async with self._lock:
            connection = self._connection
            if connection is not None and connection.lost:
                self._log.info("mcp_reconnecting")
                self._connection = None
                await connection.close()
                connection = None
            if connection is None:
                self._log.info("mcp_connecting", to=self._transport.facts())
                connection = Connection(
                    self._open,
                    connect_timeout=self.connect_timeout,
                    describe_failure=self._start_failure,
                    log=self._log,
                )
                self._connection = connection
            return connection

    async def _open(self, stack: contextlib.AsyncExitStack) -> mcp.Client:
        self._refused = None
        return await self._transport.open(stack, self.timeout, self._note_refusal)

    def _note_refusal(self, status: int) -> None:
        self._refused = status

    def _start_failure(self, exc: BaseException) -> Exception:
        """Why the server could not be started or reached, as an agentmesh error."""
        leaf = _first_leaf(exc)
        named = f"{type(leaf).__qualname__}: {leaf}"  # as the classifier's details name one
        facts = self._transport.facts()
        # The message says it all; the exception's own line is logged, not reported.
        if isinstance(self._transport, _Stdio) and isinstance(leaf, FileNotFoundError):
            self._log.warning("mcp_cannot_start", to=facts, error=named)
            return AgentError(
                f"MCP server {self.name} cannot be started: command not found: "
                f"{self._transport.command}",
                category=ErrorCategory.OTHER,
                error_type="command_not_found",
            )
        if isinstance(self._transport, _Stdio) and isinstance(leaf, PermissionError):
            self._log.warning("mcp_cannot_start", to=facts, error=named)
            return AgentError(
                f"MCP server {self.name} cannot be started: {self._transport.command} "
                "is not executable",
                category=ErrorCategory.OTHER,
                error_type="cannot_start",
            )
        if self._refused is not None:
            # Not retried: the same credentials are refused again.
            return PermissionDenied(
                f"MCP server {self.name} refused the connection: HTTP {self._refused} "
                "(the credentials sent with headers= are missing or wrong)",
                error_type="unauthorized" if self._refused == 401 else "forbidden",
                details=facts,
            )
        error = default_classifier.to_agent_error(leaf)
        if error.category not in (ErrorCategory.OTHER, ErrorCategory.TRANSIENT):
            return error  # a refusal (HTTP 401, say) says more than "unavailable"
        return TransientError(
            f"MCP server {self.name} could not be started or reached: {error.message}",
            error_type="unavailable",
            details=f"{facts}; {named}",
        )

    def __repr__(self) -> str:
        return f"<MCPServer {self.name} ({self._transport.facts()})>"


def _first_leaf(exc: BaseException) -> BaseException:
    """The first failure inside (nested) exception groups; the SDK's anyio groups hide it."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
