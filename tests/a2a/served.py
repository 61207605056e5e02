"""What the tests of `agentmesh.a2a.serve` serve: not a test module.

`desk` ends each task the way its query names (as the loopback remote of conftest does);
`refunds` calls a refund tool that a policy asks a person about over a limit, and a
`wipe` tool that a policy forbids. Every refund made is counted in `REFUNDS`, so a test
can tell a resumed task from one run twice.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import get_data_parts
from a2a.server.tasks import InMemoryTaskStore
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from a2a.types.a2a_pb2 import Task as A2ATask
from starlette.applications import Starlette
from starlette.routing import Mount

from agentmesh import BusinessError, Context, Coordinator, RetryPolicy, Task, subagent, tool
from agentmesh.a2a import serve
from agentmesh.checkpoints import MemoryStore
from agentmesh.errors import TransientError
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use
from tests.a2a.conftest import free_port

LIMIT = 100
REFUNDS: collections.Counter[str] = collections.Counter()
WIPED: list[str] = []
STOPPED: list[str] = []


@subagent(name="desk", retry=RetryPolicy.never())
async def desk(task: Task, ctx: Context) -> Any:
    """Ends each task the way its query says."""
    query = task.query
    if query == "text":
        return "hello"
    if query == "data":
        return {"n": 3, "items": [1, 2.5], "ok": True}
    if query == "empty":
        return []
    if query == "metadata":
        return {"topic": task.topic, "metadata": task.metadata}
    if query == "business":
        raise BusinessError(
            "order 42 has shipped", error_type="order_shipped", user_message="sorry"
        )
    if query == "partial":
        ctx.record_partial([{"page": 1}], completed="page 1", pending="page 2")
        raise TransientError("the archive went away", retryable=False)
    if query == "boom":
        raise RuntimeError("a bug")
    if query == "slow":
        try:
            await asyncio.sleep(30)
        finally:
            STOPPED.append(query)  # the run is cancelled with its task
    return f"unknown query {query!r}"


@tool(impact="financial")
async def refund(order: str, amount: int) -> str:
    REFUNDS[order] += 1
    return f"refunded {amount} on {order}"


@tool(idempotent=True)
async def wipe(table: str) -> str:
    WIPED.append(table)
    return f"wiped {table}"


@pre_tool_use(tool="refund", asks=True)
def refund_limit(event: ToolCallEvent) -> Ruling | None:
    if event.arguments["amount"] > LIMIT:
        return Ruling.ask(f"a refund over {LIMIT}")
    return None


@pre_tool_use(tool="wipe")
def no_wipe(event: ToolCallEvent) -> Ruling | None:
    return Ruling.deny("wiping a table is forbidden")


@subagent(name="refunds", retry=RetryPolicy.never())
async def refunds(task: Task, ctx: Context) -> str:
    """Refunds an order, or wipes a table when asked to."""
    if task.query.startswith("wipe "):
        return await ctx.call(wipe, table=task.query.removeprefix("wipe "))
    order, amount = task.metadata["order"], task.metadata["amount"]
    result: str = await ctx.call(refund, order=order, amount=amount)
    return result


def coordinator() -> Coordinator:
    """A coordinator over both, whose refund policy asks (so it keeps a store)."""
    return Coordinator([refunds], policies=[refund_limit], store=MemoryStore())


TOKEN = "a2a-test-token-0123456789abcdef"


def apps(base: str) -> Starlette:
    """`/agents`: desk and refunds (policies no_wipe and refund_limit); `/guarded`: desk
    behind the bearer token `TOKEN`; `/hub`: a coordinator over refunds; `/r1` and `/r2`:
    two servers of refunds on one checkpoint store and one task store, as two replicas."""
    store, tasks = MemoryStore(), InMemoryTaskStore()
    replicas = [
        Mount(
            f"/r{n}",
            app=serve(
                refunds, url=f"{base}/r{n}", policies=[refund_limit], store=store, task_store=tasks
            ),
        )
        for n in (1, 2)
    ]
    return Starlette(
        routes=[
            *replicas,
            Mount(
                "/agents",
                app=serve([desk, refunds], url=f"{base}/agents", policies=[no_wipe, refund_limit]),
            ),
            Mount("/guarded", app=serve(desk, url=f"{base}/guarded", token=TOKEN)),
            Mount("/hub", app=serve(coordinator(), name="hub", url=f"{base}/hub")),
        ]
    )


@contextlib.contextmanager
def running(make: Callable[[str], Any]) -> Iterator[str]:
    """Serve `make(base_url)` on a free loopback port for the block; yields the base URL."""
    port = free_port()
    app = make(f"http://127.0.0.1:{port}")
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the loopback A2A server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def message(text: str, *, task: A2ATask | None = None, **metadata: Any) -> Message:
    """A user message (on `task`, to answer it), with `metadata`."""
    said = Message(message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=text)])
    if task is not None:
        said.task_id, said.context_id = task.id, task.context_id
    if metadata:
        said.metadata.update(metadata)
    return said


@dataclass
class Exchange:
    """What the SDK's own client saw of one message: every event, and the task at its end."""

    events: list[StreamResponse]
    task: A2ATask

    @property
    def state(self) -> str:
        return TaskState.Name(self.task.status.state)

    def data(self) -> list[Any]:
        """The data parts of the task's status message."""
        return get_data_parts(list(self.task.status.message.parts))

    def updates(self) -> list[str]:
        """The texts of the status updates streamed, in order."""
        return [
            part.text
            for event in self.events
            if event.WhichOneof("payload") == "status_update"
            for part in event.status_update.status.message.parts
            if part.WhichOneof("content") == "text"
        ]


async def sdk_send(
    url: str, said: Message, *, streaming: bool = True, headers: dict[str, str] | None = None
) -> Exchange:
    """Send `said` with the SDK's own client; the task as the server keeps it afterwards."""
    async with httpx.AsyncClient(headers=headers, timeout=10) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        client = ClientFactory(ClientConfig(streaming=streaming, httpx_client=http)).create(card)
        events = [event async for event in client.send_message(SendMessageRequest(message=said))]
        first = events[0]
        kind = first.WhichOneof("payload")
        task_id = first.task.id if kind == "task" else getattr(first, kind).task_id
        return Exchange(events, await client.get_task(GetTaskRequest(id=task_id)))
