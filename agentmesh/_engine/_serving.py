"""What the servers on the command line share (`python -m agentmesh.mcp serve`,
`python -m agentmesh.a2a serve`): the `package.module:attribute` they serve, a number
of seconds, and the bearer-token gate in front of their ASGI app."""

from __future__ import annotations

import argparse
import hmac
import importlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["ASGIApp", "BearerToken", "load_target", "seconds"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds > 0")
    return value


def load_target(parser: argparse.ArgumentParser, target: str, what: str) -> Any:
    """The object `target` names (`package.module:attribute`), or exit 2 saying why not;
    `what` names the attribute in the messages ("subagents", "agents")."""
    module_name, colon, attribute = target.partition(":")
    if not colon or not module_name or not attribute:
        parser.error(f"{target!r} is not package.module:{what} (a module, a colon, a name)")
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


class BearerToken:
    """ASGI middleware: an HTTP request without `Authorization: Bearer <token>` gets 401,
    but for the paths `open_path` lets through (an A2A agent's card)."""

    def __init__(
        self,
        app: ASGIApp,
        token: str,
        *,
        message: str,
        open_path: Callable[[Scope], bool] | None = None,
    ) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()
        self._body = b'{"error":"unauthorized","message":"' + message.encode() + b'"}'
        self._open = open_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        opened = self._open is not None and self._open(scope)
        if scope["type"] != "http" or opened or self._carries_token(scope):
            await self._app(scope, receive, send)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"www-authenticate", b'Bearer realm="agentmesh"'),
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(self._body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": self._body})

    def _carries_token(self, scope: Scope) -> bool:
        given = [value for name, value in scope.get("headers", ()) if name == b"authorization"]
        # Compared in constant time: the answer must not tell how much of a guess was right.
        return len(given) == 1 and hmac.compare_digest(given[0], self._expected)
