"""`python -m agentmesh.mcp serve package.module:subagents`: serve subagents over MCP.

Bad arguments end with one line naming what is wrong and exit code 2 (argparse's
convention), before anything is served: a module that cannot be imported, whatever it
raised, is such an argument. `--http` serves streamable HTTP on 127.0.0.1 unless given
another host, logs at WARNING (no line per request) unless `--log-level` says otherwise,
and with `--token` (or $AGENTMESH_MCP_TOKEN) answers only requests that carry it as a
bearer token.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from agentmesh._engine._serving import ASGIApp, BearerToken, load_target, seconds
from agentmesh.errors import UsageError

__all__ = ["TOKEN_VARIABLE", "main"]

TOKEN_VARIABLE: Final = "AGENTMESH_MCP_TOKEN"
"""The environment variable `serve --http` reads its bearer token from."""
_DEFAULT_HOST: Final = "127.0.0.1"
_DEFAULT_PORT: Final = 8000
_LEVELS: Final = ("debug", "info", "warning", "error", "critical")


@dataclass(frozen=True, slots=True)
class HttpAddress:
    """Where streamable HTTP is served: `HOST:PORT` (`[::1]:PORT` for IPv6), or a port."""

    host: str
    port: int


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv`, build the server and run it until it is stopped; 0 when it ends."""
    parser, serve_parser = _parsers()
    args = parser.parse_args(argv)
    address: HttpAddress | None = args.http
    token: str | None = args.token
    if token is not None and address is None:
        serve_parser.error("--token protects an HTTP server: give --http as well")
    if token is None and address is not None:
        token = os.environ.get(TOKEN_VARIABLE) or None
    subagents = load_target(serve_parser, args.target, "subagents")
    # The SDK loads only now: a bad argument is said in a fraction of its import time.
    from agentmesh.mcp._serve import serve

    # Configured before the SDK's server is made, whose own setup then leaves it as is.
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        server = serve(subagents, args.name, timeout=args.timeout)
    except UsageError as exc:
        serve_parser.error(f"{args.target} cannot be served: {exc}")
    if address is None:
        server.run()
        return 0
    import uvicorn

    app: ASGIApp = server.streamable_http_app(host=address.host)
    if token is not None:
        app = BearerToken(app, token, message="this MCP server needs a bearer token")
    config = uvicorn.Config(
        app,
        host=address.host,
        port=address.port,
        log_level=args.log_level,
        # One line per request only when asked for (`--log-level info` or `debug`).
        access_log=args.log_level in ("debug", "info"),
    )
    uvicorn.Server(config).run()
    return 0


def _parsers() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The command's parser and its `serve` subcommand's (which reports serve's errors)."""
    parser = argparse.ArgumentParser(
        prog="python -m agentmesh.mcp", description="agentmesh and the Model Context Protocol."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    command = commands.add_parser(
        "serve",
        help="serve subagents as MCP tools (stdio unless --http)",
        description="Serve subagents as the tools of an MCP server, one tool each.",
    )
    command.add_argument(
        "target",
        metavar="package.module:subagents",
        help="the module and the name in it of a subagent or a list of subagents",
    )
    command.add_argument(
        "--http",
        type=_http_address,
        nargs="?",
        const=HttpAddress(_DEFAULT_HOST, _DEFAULT_PORT),
        metavar="[HOST:]PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio "
        f"(host {_DEFAULT_HOST} unless given, port {_DEFAULT_PORT} when --http stands alone)",
    )
    command.add_argument(
        "--token",
        help=f"answer only HTTP requests with 'Authorization: Bearer TOKEN' (default: "
        f"${TOKEN_VARIABLE}, when set; prefer it: a command line is visible to other users)",
    )
    command.add_argument(
        "--log-level",
        choices=_LEVELS,
        default="warning",
        type=str.lower,
        help="what is logged to stderr (warning; info adds one line per HTTP request)",
    )
    command.add_argument("--name", default="agentmesh", help="the server's name (agentmesh)")
    command.add_argument(
        "--timeout", type=seconds, metavar="SECONDS", help="seconds for one tool call"
    )
    return parser, command


def _http_address(text: str) -> HttpAddress:
    host, colon, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]") if colon else _DEFAULT_HOST
    if not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not [HOST:]PORT (for example 127.0.0.1:8000 or 8000, a port of 1-65535)"
        )
    return HttpAddress(host, int(port))
