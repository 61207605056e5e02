"""`python -m agentmesh.console STORE`: serve the run console for a checkpoint store."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentmesh.checkpoints import CheckpointStore, PostgresStore, SQLiteStore
from agentmesh.console._access import Access
from agentmesh.console._app import create_app

if TYPE_CHECKING:
    from agentmesh.coordinator import Coordinator

TOKEN_VARIABLE = "AGENTMESH_CONSOLE_TOKEN"


def store_of(where: str) -> CheckpointStore:
    """A PostgreSQL connection string (postgresql://...) or else a SQLite file's path."""
    if where.startswith(("postgresql://", "postgres://")) or "dbname=" in where:
        return PostgresStore(where)
    return SQLiteStore(where)


def coordinator_of(spec: str) -> Coordinator:
    """The application's coordinator named `module:attribute` (`app.desk:coordinator`)."""
    module, _, attribute = spec.partition(":")
    if not module or not attribute:
        raise SystemExit(f"--coordinator takes module:attribute, got {spec!r}")
    found: Any = getattr(importlib.import_module(module), attribute, None)
    if not inspect.iscoroutinefunction(getattr(found, "resume", None)):
        raise SystemExit(f"--coordinator {spec}: {found!r} is not a Coordinator")
    coordinator: Coordinator = found
    return coordinator


def parser() -> argparse.ArgumentParser:
    found = argparse.ArgumentParser(
        prog="python -m agentmesh.console",
        description="Serve the run console for a checkpoint store.",
    )
    found.add_argument("store", help="a PostgreSQL connection string or a SQLite file's path")
    found.add_argument("--host", default="127.0.0.1", help="the address to bind (127.0.0.1)")
    found.add_argument("--port", type=int, default=8400, help="the port (8400)")
    found.add_argument("--read-only", action="store_true", help="refuse every answer")
    found.add_argument(
        "--coordinator",
        metavar="MODULE:NAME",
        help="the application's coordinator: the console resumes a run once it is answered",
    )
    found.add_argument(
        "--stale-after",
        type=float,
        default=900.0,
        help="seconds without a save after which an unfinished run shows as stopped",
    )
    return found


# What `uvicorn.run` exits with when the server could not start (its app's startup failed).
_STARTUP_FAILURE = 3


def main(argv: Sequence[str] | None = None) -> int:
    import uvicorn

    args = parser().parse_args(argv)
    # The token from the environment, never from the command line (visible in `ps`).
    access = Access(os.environ.get(TOKEN_VARIABLE) or None)
    app = create_app(
        store_of(args.store),
        access=access,
        read_only=args.read_only,
        stale_after=args.stale_after,
        coordinator=None if args.coordinator is None else coordinator_of(args.coordinator),
    )
    host = f"[{args.host}]" if ":" in args.host else args.host
    # A live page's event stream stays open: at Ctrl+C it is closed after a few seconds.
    config = uvicorn.Config(
        app, host=args.host, port=args.port, log_level="warning", timeout_graceful_shutdown=3
    )
    # Listening before the address is printed: whoever opens it at once (a person, a
    # script reading the login link) is answered, not refused.
    listening = config.bind_socket()
    listening.listen(config.backlog)  # bound is not yet listening: a connection is refused
    if args.read_only:
        print(f"agentmesh console (read-only): http://{host}:{args.port}/", flush=True)
    else:
        print(
            f"agentmesh console: http://{host}:{args.port}/\n"
            f"  log in to answer approvals (once): http://{host}:{args.port}/login/"
            f"{access.login_code()}\n"
            f"  or send Authorization: Bearer {access.token}",
            flush=True,
        )
    server = uvicorn.Server(config)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl+C: a shutdown, not an error
        server.run(sockets=[listening])
    return 0 if server.started else _STARTUP_FAILURE


if __name__ == "__main__":
    sys.exit(main())
