"""A coordinator as an AG-UI endpoint: POST a `RunAgentInput`, read the run as SSE.

A new input runs the tasks it asks for (`coordinator.stream`); an input that carries
`resume` entries answers the interrupts of an interrupted run, claims the answers in the
store, and goes on with it (`coordinator.resume_stream`, which takes the answers the store
holds). Either way the response is the AG-UI run's events, one `data:` line each, encoded
by the protocol package's own `EventEncoder`.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Final, TypeAlias

import pydantic
from ag_ui.core import RunAgentInput, UserMessage
from ag_ui.core.events import BaseEvent
from ag_ui.encoder import EventEncoder
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agentmesh._logging import get_logger
from agentmesh.agui._answers import ResumeRefused, claim_answers
from agentmesh.agui._translate import RunTranslator
from agentmesh.coordinator import Coordinator
from agentmesh.errors import UsageError
from agentmesh.events import RunStream
from agentmesh.task import Task

__all__ = ["TasksFrom", "create_app", "last_user_message"]

TasksFrom: TypeAlias = Callable[[RunAgentInput], Task | str | Iterable[Task | str]]
"""What a new AG-UI run asks the coordinator to do, read from its input."""

# A request body larger than this is refused before it is parsed.
MAX_BODY: Final = 1_000_000


def last_user_message(given: RunAgentInput) -> str:
    """The text of the input's last user message: one task with that query (the default)."""
    for message in reversed(given.messages):
        if isinstance(message, UserMessage):
            content = message.content
            if isinstance(content, str):
                text = content
            else:
                text = " ".join(getattr(part, "text", "") for part in content)
            if text.strip():
                return text.strip()
    raise UsageError("the input has no user message with text: nothing to ask the coordinator")


def create_app(
    coordinator: Coordinator,
    *,
    token: str | None,
    tasks: TasksFrom = last_user_message,
    path: str = "/",
) -> Starlette:
    """`coordinator` as an AG-UI endpoint (an ASGI application) at `path`.

    Args:
        coordinator: runs the tasks; answering interrupts needs its `store=`.
        token: the bearer token every request must carry (`Authorization: Bearer ...`):
            a request runs the coordinator and may answer a person's approvals. Pass None
            only behind authentication of your own.
        tasks: what a new run does, read from its `RunAgentInput` (by default one task,
            the last user message's text).
        path: where the endpoint listens.
    """
    if token is not None and (not isinstance(token, str) or len(token) < 16):
        raise UsageError("create_app(token=) takes a string of at least 16 characters, or None")
    endpoint = _Endpoint(coordinator, token, tasks)
    return Starlette(routes=[Route(path, endpoint.run, methods=["POST"])])


class _Endpoint:
    def __init__(self, coordinator: Coordinator, token: str | None, tasks: TasksFrom) -> None:
        self.coordinator = coordinator
        self.token = token
        self.tasks = tasks
        self.log = get_logger(component="agui")

    def allows(self, request: Request) -> bool:
        if self.token is None:
            return True
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and secrets.compare_digest(
            given.strip().encode(), self.token.encode()
        )

    async def run(self, request: Request) -> Response:
        if not self.allows(request):
            return JSONResponse({"error": "send the bearer token"}, status_code=401)
        # JSON only: a form another site posts (text/plain, no preflight) is not an input.
        if request.headers.get("content-type", "").partition(";")[0].strip() != "application/json":
            return JSONResponse({"error": "send the input as application/json"}, 415)
        body = bytearray()
        async for chunk in request.stream():  # the cap holds before the body is all read
            body += chunk
            if len(body) > MAX_BODY:
                return JSONResponse({"error": "the input is too large"}, status_code=413)
        try:
            given = RunAgentInput.model_validate_json(body)
        except pydantic.ValidationError as exc:
            problems = exc.errors(include_url=False, include_input=False)
            return JSONResponse({"error": "not a RunAgentInput", "problems": problems}, 422)
        encoder = EventEncoder(accept=request.headers.get("accept", ""))
        events = self.events(given)
        return StreamingResponse(
            (encoder.encode(event) async for event in events),
            media_type=encoder.get_content_type(),
            headers={"cache-control": "no-store"},
        )

    async def events(self, given: RunAgentInput) -> AsyncIterator[BaseEvent]:
        """The AG-UI run for `given`: RUN_STARTED, the run's events, its end."""
        translator = RunTranslator(given.thread_id, given.run_id, given.state)
        for event in translator.started(given):
            yield event
        try:
            stream = await self.open(given)
        except Exception as exc:
            for event in translator.failed(*self.why(exc)):
                yield event
            return
        # Leaving early (the client went away) closes the stream: the run stops there.
        async with stream:
            try:
                async for happened in stream:
                    for event in translator.translate(happened):
                        yield event
            except Exception as exc:
                for event in translator.failed(*self.why(exc)):
                    yield event

    def why(self, exc: Exception) -> tuple[str, str]:
        """What RUN_ERROR says of `exc`: its message and code (a failure's text stays in
        the log: it may hold what the consumer must not see)."""
        if isinstance(exc, ResumeRefused):
            return str(exc), exc.code
        if isinstance(exc, UsageError):
            return str(exc), "usage_error"
        self.log.error("agui_run_failed", exc_info=exc)
        return f"the run failed: {type(exc).__name__}", "run_failed"

    async def open(self, given: RunAgentInput) -> RunStream:
        """The coordinator's stream for `given`: a new run, or a resume with its answers."""
        if not given.resume:
            return self.coordinator.stream(self.tasks(given))
        store = self.coordinator.store
        if store is None:
            raise ResumeRefused("the coordinator has no store: nothing to resume", "no_store")
        claimed = await claim_answers(store, given.resume)
        self.log.info("agui_answers_claimed", run_id=claimed.run_id, answers=len(claimed.answers))
        return self.coordinator.resume_stream(claimed.run_id)
