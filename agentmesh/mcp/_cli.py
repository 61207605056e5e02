"""`python -m agentmesh.mcp serve package.module:subagents`: serve subagents over MCP.

Bad arguments end with a message naming what is wrong and exit code 2 (argparse's
convention), before anything is served.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentmesh.errors import UsageError
from agentmesh.mcp._serve import serve

__all__ = ["main"]


@dataclass(frozen=True, slots=True)
class HttpAddress:
    """Where streamable HTTP is served: `HOST:PORT` (`[::1]:PORT` for IPv6)."""

    host: str
    port: int


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv`, build the server and run it until it is stopped; 0 when it ends."""
    parser, serve_parser = _parsers()
    args = parser.parse_args(argv)
    subagents = _load(serve_parser, args.target)
    try:
        server = serve(subagents, args.name, timeout=args.timeout)
    except UsageError as exc:
        serve_parser.error(f"{args.target} cannot be served: {exc}")
    address: HttpAddress | None = args.http
    if address is None:
        server.run()
    else:
        server.run("streamable-http", host=address.host, port=address.port)
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
        metavar="HOST:PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio",
    )
    command.add_argument("--name", default="agentmesh", help="the server's name (agentmesh)")
    command.add_argument(
        "--timeout", type=_seconds, metavar="SECONDS", help="seconds for one tool call"
    )
    return parser, command


def _http_address(text: str) -> HttpAddress:
    host, colon, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not colon or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not HOST:PORT (for example 127.0.0.1:8000, a port of 1-65535)"
        )
    return HttpAddress(host, int(port))


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds > 0")
    return seconds


def _load(parser: argparse.ArgumentParser, target: str) -> Any:
    """The object `target` names (`package.module:attribute`), or exit 2 saying why not."""
    module_name, colon, attribute = target.partition(":")
    if not colon or not module_name or not attribute:
        parser.error(f"{target!r} is not package.module:subagents (a module, a colon, a name)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        # The module itself missing and a failing import inside it read differently.
        missing = exc.name == module_name or module_name.startswith(f"{exc.name}.")
        why = "no such module" if missing else f"importing it failed: {exc}"
        parser.error(f"cannot import {module_name!r}: {why}")
    try:
        value: Any = getattr(module, attribute)
    except AttributeError:
        parser.error(f"module {module_name!r} has no attribute {attribute!r}")
    return value
