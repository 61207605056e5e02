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
import hmac
import importlib
import logging
import os
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agentmesh.errors import UsageError
from agentmesh.mcp._serve import serve

__all__ = ["TOKEN_VARIABLE", "main"]

TOKEN_VARIABLE: Final = "AGENTMESH_MCP_TOKEN"
"""The environment variable `serve --http` reads its bearer token from."""
_DEFAULT_HOST: Final = "127.0.0.1"
_DEFAULT_PORT: Final = 8000
_LEVELS: Final = ("debug", "info", "warning", "error", "critical")

_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_App = Callable[[_Scope, _Receive, _Send], Awaitable[None]]


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
    subagents = _load(serve_parser, args.target)
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

    app: _App = server.streamable_http_app(host=address.host)
    if token is not None:
        app = BearerToken(app, token)
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


class BearerToken:
    """ASGI middleware: an HTTP request without `Authorization: Bearer <token>` gets 401."""

    def __init__(self, app: _App, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] != "http" or self._carries_token(scope):
            await self._app(scope, receive, send)
            return
        body = b'{"error":"unauthorized","message":"this MCP server needs a bearer token"}'
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"www-authenticate", b'Bearer realm="agentmesh"'),
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def _carries_token(self, scope: _Scope) -> bool:
        given = [value for name, value in scope.get("headers", ()) if name == b"authorization"]
        # Compared in constant time: the answer must not tell how much of a guess was right.
        return len(given) == 1 and hmac.compare_digest(given[0], self._expected)


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
        "--timeout", type=_seconds, metavar="SECONDS", help="seconds for one tool call"
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
    if module_name.startswith("."):
        parser.error(
            f"{module_name!r} is a relative module path: give the module's full dotted name "
            "(package.module), importable from the current directory"
        )
    if not all(part.isidentifier() for part in module_name.split(".")):
        parser.error(
            f"{module_name!r} is not a dotted module name (package.module), not a file path"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        # The module itself missing and a failing import inside it read differently.
        missing = exc.name == module_name or module_name.startswith(f"{exc.name}.")
        why = "no such module" if missing else f"importing it failed: {_one_line(exc)}"
        parser.error(f"cannot import {module_name!r}: {why}")
    except Exception as exc:  # the user's module raised: said in one line, exit 2
        parser.error(f"cannot import {module_name!r}: importing it raised {_one_line(exc)}")
    try:
        value: Any = getattr(module, attribute)
    except AttributeError:
        parser.error(f"module {module_name!r} has no attribute {attribute!r}")
    return value


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
