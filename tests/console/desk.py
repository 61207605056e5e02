"""A support desk whose big refunds wait for a person, and the console served for real.

`served(app)` runs uvicorn on a free port of 127.0.0.1 in a thread, as
`python -m agentmesh.console` does, and `post()` / `get()` speak to it as a browser's
form would (urllib: no redirects followed, so a 303 is seen as one).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import uvicorn

from agentmesh import Context, Coordinator, RetryPolicy, Task, subagent, tool
from agentmesh.checkpoints import CheckpointStore
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use

LIMIT = 250
TOKEN = "console-test-token-0123456789"
TICKETS = [
    Task(query="refund order A-1", topic="A-1", metadata={"order": "A-1", "amount": 40}),
    Task(query="refund order B-2", topic="B-2", metadata={"order": "B-2", "amount": 900}),
    Task(query="refund order C-3", topic="C-3", metadata={"order": "C-3", "amount": 600}),
]


@pre_tool_use(tool="refund", asks=True)
def refund_limit(event: ToolCallEvent) -> Ruling | None:
    amount = event.arguments["amount"]
    if amount > LIMIT:
        return Ruling.ask(f"refund of {amount} is over the limit of {LIMIT}")
    return None


class Desk:
    """The desk's subagent, with the refunds it made counted across runs and resumes."""

    def __init__(self, note: str = "") -> None:
        self.refunds: list[tuple[str, int]] = []

        @tool(idempotent=True)
        async def lookup(order: str) -> dict[str, str]:
            return {"order": order, "note": note}

        @tool(impact="financial")
        async def refund(order: str, amount: int) -> str:
            self.refunds.append((order, amount))
            return f"refunded {amount} on {order}"

        @subagent(name="desk", checkpoint=True, retry=RetryPolicy.never())
        async def desk(task: Task, ctx: Context) -> list[Any]:
            order = task.metadata["order"]
            found = await ctx.call(lookup, order=order)
            ctx.record_partial([found], completed="lookup")
            return [found, await ctx.call(refund, order=order, amount=task.metadata["amount"])]

        self.subagent = desk

    def coordinator(self, store: CheckpointStore) -> Coordinator:
        return Coordinator([self.subagent], policies=[refund_limit], store=store)


@contextlib.contextmanager
def served(app: Any) -> Iterator[str]:
    """`app` on a free port of 127.0.0.1 until the block ends; yields its base URL."""
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the console did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        listening.close()


@dataclass(frozen=True)
class Answer:
    status: int
    body: str
    headers: dict[str, str]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def request(
    url: str, form: dict[str, str] | None = None, *, token: str | None = None, cookie: str = ""
) -> Answer:
    """GET `url`, or POST `form` to it; the status, body and headers, errors included."""
    data = None if form is None else urllib.parse.urlencode(form).encode()
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    if cookie:
        headers["Cookie"] = cookie
    sent = urllib.request.Request(url, data=data, headers=headers)
    try:
        with _OPENER.open(sent, timeout=30) as response:
            return Answer(response.status, response.read().decode(), dict(response.headers))
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, exc.read().decode(), dict(exc.headers))
