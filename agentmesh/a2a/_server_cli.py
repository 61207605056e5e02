"""`python -m agentmesh.a2a serve package.module:agents`: serve subagents or a coordinator
as an A2A agent, with uvicorn.

Binds 127.0.0.1:9999 unless told (`--host`, `--port`); the card names `--url`, else the
address bound. With `--token` (or $AGENTMESH_A2A_TOKEN) every request but the card's
needs it as a bearer token. Bad arguments end with one line naming what is wrong and
exit code 2 (argparse's convention), before anything is served.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence
from typing import Final

from agentmesh._engine._serving import ASGIApp, load_target, seconds
from agentmesh.errors import UsageError

__all__ = ["TOKEN_VARIABLE", "app_of", "main", "parser"]

TOKEN_VARIABLE: Final = "AGENTMESH_A2A_TOKEN"
"""The environment variable `serve` reads its bearer token from."""
_LEVELS: Final = ("debug", "info", "warning", "error", "critical")
_LOOPBACK: Final = frozenset({"127.0.0.1", "::1", "localhost"})


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv`, build the app and serve it until stopped; 0 when it ends."""
    args = parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    app = app_of(args)
    import uvicorn  # after the arguments are checked: a typo is said at once

    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        # One line per request only when asked for (`--log-level info` or `debug`).
        access_log=args.log_level in ("debug", "info"),
    )
    uvicorn.Server(config).run()
    return 0


def app_of(args: argparse.Namespace) -> ASGIApp:
    """The app `args` describe (exit 2, saying why, for a target that cannot be served)."""
    command = parser()
    target = load_target(command, args.target, "agents")
    token = args.token or os.environ.get(TOKEN_VARIABLE) or None
    if token is None and not args.no_auth and args.host not in _LOOPBACK:
        # Anyone who reaches the address could answer the approvals the runs ask for.
        command.error(
            f"--host {args.host} without a token: give --token (or ${TOKEN_VARIABLE}), "
            "or --no-auth if something in front of this server checks who calls"
        )
    host = f"[{args.host}]" if ":" in args.host else args.host
    url = args.url or f"http://{host}:{args.port}"
    # The SDK loads only now: a bad argument is said in a fraction of its import time.
    from agentmesh.a2a._server import serve

    try:
        return serve(target, name=args.name, url=url, token=token, timeout=args.timeout)
    except UsageError as exc:
        command.error(f"{args.target} cannot be served: {exc}")


def parser() -> argparse.ArgumentParser:
    found = argparse.ArgumentParser(
        prog="python -m agentmesh.a2a", description="agentmesh over A2A (the Agent2Agent protocol)."
    )
    commands = found.add_subparsers(dest="command", required=True, metavar="COMMAND")
    command = commands.add_parser(
        "serve",
        help="serve subagents or a coordinator as an A2A agent",
        description="Serve subagents (one skill each) or a coordinator (one skill) over A2A.",
    )
    command.add_argument(
        "target",
        metavar="package.module:agents",
        help="the module and the name in it of a subagent, a list of them, or a Coordinator",
    )
    command.add_argument("--host", default="127.0.0.1", help="the address to bind (127.0.0.1)")
    command.add_argument("--port", type=_port, default=9999, help="the port (9999)")
    command.add_argument(
        "--no-auth",
        action="store_true",
        help="serve another address than loopback without a token (your own auth in front)",
    )
    command.add_argument(
        "--url", help="where clients reach the agent, as its card says (default: the address bound)"
    )
    command.add_argument(
        "--token",
        help="answer only requests with 'Authorization: Bearer TOKEN' (default: "
        f"${TOKEN_VARIABLE}, when set; prefer it: a command line is visible to other users)",
    )
    command.add_argument("--name", default="agentmesh", help="the agent's name (agentmesh)")
    command.add_argument("--timeout", type=seconds, help="seconds for one subagent task")
    command.add_argument(
        "--log-level",
        choices=_LEVELS,
        default="warning",
        type=str.lower,
        help="what is logged to stderr (warning; info adds one line per request)",
    )
    return found


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1-65535)")
    return int(text)
