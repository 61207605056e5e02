"""A real `a2a-sdk` server of our own on loopback, for the tests of `agentmesh.a2a`.

One uvicorn server in a thread serves the same executor twice: under `/stream` with a
card that offers streaming, under `/block` with one that does not. The query says how the
remote task ends (`Remote.execute`); `Remote.runs` counts the tasks started, so a test can
tell a retry from a task sent twice, and `Remote.answers` the follow-up messages each task
got (a person's answer to its question).
"""

from __future__ import annotations

import asyncio
import collections
import socket
import threading
import time
from collections.abc import Iterator
from typing import ClassVar

import pytest

pytest.importorskip("a2a")

import uvicorn
from a2a.helpers.proto_helpers import new_data_part, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from a2a.types.a2a_pb2 import Task as A2ATask
from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentmesh.envelope import ErrorCategory, ErrorEnvelope

TOKEN = "Bearer sk-remote-0123456789abcdef"

REMOTE_ENVELOPE = ErrorEnvelope(
    error_category=ErrorCategory.BUSINESS,
    error_type="order_shipped",
    is_retryable=False,
    message="order 42 has shipped",
    attempted_query="cancel order 42",
    source="orders",
    attempts=1,
    alternative_approaches=("refund",),
)


class Remote(AgentExecutor):
    """Ends each task the way its query names."""

    runs: ClassVar[collections.Counter[str]] = collections.Counter()
    cancelled: ClassVar[collections.Counter[str]] = collections.Counter()
    answers: ClassVar[dict[str, list[str]]] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        query = context.get_user_input()
        if context.current_task is not None:  # a follow-up: the answer to its question
            await self.answered(context.current_task, query, event_queue)
            return
        type(self).runs[query] += 1
        task = new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        up = TaskUpdater(event_queue, task.id, task.context_id)
        await up.start_work()

        def said(*parts: object) -> object:
            return up.new_agent_message(list(parts))  # type: ignore[arg-type]

        if query == "text":
            await up.add_artifact([new_text_part("hello")])
            await up.complete()
        elif query == "parts":
            await up.add_artifact([new_text_part("hello"), new_data_part({"n": 3, "x": [1.5]})])
            await up.complete()
        elif query == "metadata":
            echoed = {"metadata": dict(context.message.metadata)}
            await up.add_artifact([new_data_part(echoed)])
            await up.complete()
        elif query == "empty":
            await up.complete()
        elif query == "big":
            await up.add_artifact([new_text_part("x" * 10_000)])
            await up.complete()
        elif query == "fail":
            await up.failed(said(new_text_part(f"disk full ({TOKEN})")))
        elif query == "fail-silent":
            await up.failed()
        elif query == "fail-envelope":
            wire = REMOTE_ENVELOPE.model_dump(mode="json", by_alias=True, exclude_none=True)
            await up.failed(said(new_text_part("order 42 has shipped"), new_data_part(wire)))
        elif query == "reject":
            await up.reject(said(new_text_part("not my kind of task")))
        elif query == "cancel":
            await up.cancel()
        elif query == "auth":
            await up.requires_auth(said(new_text_part("sign in first")))
        elif query == "drop":  # the stream is cut after its first event (`_Dropper`)
            await asyncio.sleep(0.5)
            await up.add_artifact([new_text_part("after the drop")])
            await up.complete()
        elif query in ("input", "input-twice"):
            await up.requires_input(said(new_text_part(f"which year? ({TOKEN})")))
        elif query == "partial-fail":
            await up.add_artifact([new_text_part("first half")])
            await up.failed(said(new_text_part("the second half failed")))
        elif query == "partial-drop":  # over `/dropping`: the stream is cut, then it fails
            await asyncio.sleep(0.3)
            await up.add_artifact([new_data_part({"rows": 2})])
            await up.failed(said(new_text_part("lost the rest")))
        elif query == "slow":
            await asyncio.sleep(5)
        else:
            await up.failed(said(new_text_part(f"unknown query {query!r}")))

    async def answered(self, task: A2ATask, answer: str, event_queue: EventQueue) -> None:
        """Completes with the answers it got; `input-twice` asks a second question first."""
        given = type(self).answers.setdefault(task.id, [])
        given.append(answer)
        up = TaskUpdater(event_queue, task.id, task.context_id)
        await up.start_work()
        first = task.history[0].parts[0].text if task.history else ""
        if first == "input-twice" and len(given) == 1:
            await up.requires_input(up.new_agent_message([new_text_part("which month?")]))
            return
        await up.add_artifact([new_text_part(f"answered: {', '.join(given)}")])
        await up.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Counts the cancel (its `execute` is cancelled by the SDK) and says so."""
        task = context.current_task
        type(self).cancelled[context.get_user_input() if context.message else ""] += 1
        if task is not None:
            await TaskUpdater(event_queue, task.id, task.context_id).cancel()


def _card(url: str, *, streaming: bool) -> AgentCard:
    return AgentCard(
        name="remote",
        description="ends each task the way its query says",
        version="1.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "application/json"],
        skills=[AgentSkill(id="echo", name="echo", description="ends tasks", tags=["test"])],
    )


def _agent(url: str, *, streaming: bool) -> list[object]:
    card = _card(url, streaming=streaming)
    handler = DefaultRequestHandler(
        agent_executor=Remote(), task_store=InMemoryTaskStore(), agent_card=card
    )
    return [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")]


class _Guard(BaseHTTPMiddleware):
    """`/guarded` answers only with the right bearer token; `/status-N` sends N to a message
    (a 429 with `Retry-After: 7`)."""

    async def dispatch(self, request: Request, call_next: object) -> Response:
        if (
            request.url.path.startswith("/guarded")
            and request.headers.get("authorization") != TOKEN
        ):
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        if request.method == "POST" and request.url.path.startswith("/status-"):
            status = int(request.url.path.split("-")[1].strip("/"))
            wait = {"Retry-After": "7"} if status == 429 else None
            return JSONResponse({"error": "the test's answer"}, status_code=status, headers=wait)
        return await call_next(request)  # type: ignore[operator,no-any-return]


class _Dropper:
    """`/dropping` cuts every event stream after its first event, as a lost connection would."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/dropping"):
            await self.app(scope, receive, send)
            return
        streaming = False
        events = 0

        async def cutting(message: Message) -> None:
            nonlocal streaming, events
            if message["type"] == "http.response.start":
                streaming = any(
                    k == b"content-type" and v.startswith(b"text/event-stream")
                    for k, v in message.get("headers", [])
                )
            elif message["type"] == "http.response.body" and streaming and message.get("body"):
                events += 1
                if events > 1:
                    raise ConnectionResetError("the test cuts the stream")
            await send(message)

        await self.app(scope, receive, cutting)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def remote() -> Iterator[str]:
    """The base URL of the loopback A2A server (`/stream`, `/block`, `/guarded`, `/elsewhere`)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    app = Starlette(
        routes=[
            Mount("/stream", routes=_agent(f"{base}/stream/", streaming=True)),  # type: ignore[arg-type]
            Mount("/block", routes=_agent(f"{base}/block/", streaming=False)),  # type: ignore[arg-type]
            Mount("/guarded", routes=_agent(f"{base}/guarded/", streaming=False)),  # type: ignore[arg-type]
            Mount("/status-500", routes=_agent(f"{base}/status-500/", streaming=False)),  # type: ignore[arg-type]
            Mount("/status-429", routes=_agent(f"{base}/status-429/", streaming=False)),  # type: ignore[arg-type]
            Mount("/status-503", routes=_agent(f"{base}/status-503/", streaming=False)),  # type: ignore[arg-type]
            Mount("/dropping", routes=_agent(f"{base}/dropping/", streaming=True)),  # type: ignore[arg-type]
            Mount(
                "/elsewhere",
                routes=_agent("http://198.51.100.7:9/", streaming=False),  # type: ignore[arg-type]
            ),
        ]
    )
    app.add_middleware(_Guard)
    app.add_middleware(_Dropper)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the loopback A2A server did not start")
        time.sleep(0.01)
    yield base
    server.should_exit = True
    server.force_exit = True  # the `slow` tasks would hold the shutdown
    thread.join(timeout=10)
