"""`A2AAgent`: a remote A2A agent as a subagent.

One run of a task: read the agent card, send the task as a message (or, when a person
answered the remote task's question, the answer to that task: `_asked`), follow the
remote task to its end (its stream when the card offers streaming, else the blocking
send and then polling by task id), and turn that end into the outcome (`_outcome`).
Every failure of the exchange is an `AgentError` (`_errors`), so the envelope is
routable; the artifacts handed back before a failure are its partial results.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Final, Unpack
from urllib.parse import urlsplit

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from a2a.types.a2a_pb2 import Task as A2ATask
from a2a.utils.errors import A2AError

from agentmesh._logging import get_logger
from agentmesh._numbers import number
from agentmesh._redaction import redact_text
from agentmesh._signatures import spell_out
from agentmesh.a2a._asked import Due, claim_sending, due, escalation, forget, remember
from agentmesh.a2a._errors import exchange_error, timed_out
from agentmesh.a2a._outcome import FINAL_STATES, findings, result_of, status_text, task_size
from agentmesh.context import Context
from agentmesh.envelope import ErrorCategory
from agentmesh.errors import AgentError, CallFailed, PermissionDenied, UsageError
from agentmesh.subagents import Subagent, SubagentKwargs, SubagentOptions
from agentmesh.task import Task

__all__ = ["A2AAgent"]

_MAX_UPDATES: Final = 10_000
TOO_LARGE: Final = "response_too_large"
# Asking a remote agent to stop a task we gave up on: a short courtesy, not a wait.
_CANCEL_SECONDS: Final = 2.0


class A2AAgent(Subagent):
    """A remote agent spoken to over A2A, as a subagent whose every end is an outcome.

    Args:
        url: the agent's base URL; its card is read from `/.well-known/agent-card.json`.
        name: the subagent's name (default: `a2a`).
        headers: sent with every request (e.g. `Authorization`); never logged nor put
            in an envelope.
        timeout: seconds for one attempt, card to end of the remote task.
        max_artifact_bytes: the most artifact data accepted from the remote agent; a
            task that hands back more fails (`other`, `response_too_large`).
        streaming: follow the task's stream when the card offers one (default), or
            never (`False`: a blocking send, then polling).
        poll_interval: seconds between polls of a task that is not finished yet.
        allowed_hosts: hosts other than the URL's that the card may send us to; an
            interface on any other host is ignored.
        retry, alternatives, ...: the options of any subagent (`SubagentKwargs`).

    A message that may have reached the remote agent is never sent twice by a local
    retry: such failures are transient but not retryable (see the how-to). A remote
    agent's question (`input-required`) is escalated to a person; their
    `Edit(query=answer)` is sent to the same remote task when the run is resumed.
    """

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 60.0,  # the attempt's bound, not a parameter of a call
        max_artifact_bytes: int = 1_000_000,
        streaming: bool = True,
        poll_interval: float = 0.5,
        allowed_hosts: Iterable[str] = (),
        **options: Unpack[SubagentKwargs],
    ) -> None:
        super().__init__(name or "a2a", **options)
        if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
            raise UsageError(f"A2AAgent(url=) takes an http(s) URL, got {url!r}")
        self.url = url.rstrip("/")
        self._headers = dict(headers or {})
        self.timeout = number("A2AAgent(timeout=)", timeout, unit="seconds")
        self.max_artifact_bytes = int(number("A2AAgent(max_artifact_bytes=)", max_artifact_bytes))
        self.streaming = streaming
        self.poll_interval = number("A2AAgent(poll_interval=)", poll_interval, unit="seconds")
        self._hosts = frozenset({urlsplit(self.url).netloc, *allowed_hosts})

    async def handle(self, task: Task, ctx: Context) -> Any:
        """Send `task` to the remote agent and return its completed task's data.

        A task that ends otherwise after handing back some artifacts keeps them as its
        partial results; one whose remote agent asks for input is escalated (`_asked`).
        """
        follow = _Follow(self)
        try:
            return await self._attempt(task, ctx, follow)
        except Exception as exc:
            too_large = isinstance(exc, AgentError) and exc.error_type == TOO_LARGE
            found = [] if follow.task is None or too_large else findings(follow.task)
            if found:
                ctx.record_partial(found)
            raise

    async def _attempt(self, task: Task, ctx: Context, follow: _Follow) -> Any:
        try:
            return await self._exchange(task, ctx, follow)
        except TimeoutError:
            raise timed_out(self.timeout, sent=follow.sent, agent=self.name) from None
        except (A2AError, httpx.HTTPError) as exc:
            known = follow.task is not None  # the remote has the task: never send it again
            raise exchange_error(
                exc, sent=follow.sent, delivered=known, classifier=self.classifier
            ) from None

    async def _exchange(self, task: Task, ctx: Context, follow: _Follow) -> Any:
        answer = await due(ctx)
        at = asyncio.get_running_loop().time() + self.timeout
        async with httpx.AsyncClient(headers=self._headers, timeout=self.timeout) as http:
            async with asyncio.timeout_at(at):
                card = await A2ACardResolver(http, self.url).get_agent_card()
            config = ClientConfig(streaming=self.streaming, httpx_client=http)
            client = ClientFactory(config).create(self._on_our_hosts(card))
            streams = card.capabilities.streaming and self.streaming
            try:
                async with asyncio.timeout_at(at):
                    if answer is not None and not await claim_sending(ctx, answer):
                        # Sent already (another resume, an earlier attempt): follow the
                        # remote task past the question answered, never send it again.
                        follow.sent, follow.task = True, A2ATask(id=answer.task_id)
                        finished = await self._finished(client, follow, past=answer.question)
                    else:
                        finished = await self._follow(client, task, follow, streams, answer)
            except TimeoutError:
                await self._cancel_remote(client, follow)
                raise
        return await self._ended(ctx, finished, answer is not None)

    async def _follow(
        self, client: Client, task: Task, follow: _Follow, streams: bool, answer: Due | None
    ) -> A2ATask:
        """Send the message (the task, or a person's answer to its remote task) and
        follow the remote task to its end."""
        request = SendMessageRequest(message=_message(task, answer))
        if answer is not None:  # its updates are of the task that asked
            follow.task = A2ATask(id=answer.task_id, context_id=answer.context_id)
        follow.sent = True  # from here the remote may have the message
        try:
            async for event in client.send_message(request):
                follow.take(event)
        except A2AError:
            if follow.task is None or not streams:
                raise
            # The stream dropped, the task goes on: follow it by id, never resend.
        return await self._finished(client, follow, whole=answer is not None)

    async def _ended(self, ctx: Context, finished: A2ATask, answered: bool) -> Any:
        """The subagent's result of the remote task's end; a question is escalated."""
        if finished.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await remember(ctx, finished.id, finished.context_id, _mark(finished))
            question = status_text(finished)
            raise CallFailed(escalation(ctx, question, self.name, finished.id))
        if answered:
            await forget(ctx)  # it waits no more
        return result_of(finished, self.name)

    async def _cancel_remote(self, client: Client, follow: _Follow) -> None:
        """Ask the remote agent to stop a task we gave up on, if we know its id."""
        known = follow.task
        if known is None or known.status.state in FINAL_STATES:
            return  # a blocking send that timed out never told us the task's id
        try:
            async with asyncio.timeout(_CANCEL_SECONDS):
                await client.cancel_task(CancelTaskRequest(id=known.id))
        except (A2AError, httpx.HTTPError, TimeoutError) as exc:
            get_logger(subagent=self.name).warning(
                "a2a_cancel_failed", task=known.id, error=redact_text(str(exc))
            )

    async def _finished(
        self, client: Client, follow: _Follow, *, whole: bool = False, past: str | None = None
    ) -> A2ATask:
        """The remote task at its end, polled by id while it is still under way.

        `whole`: read the task once first (after an answer, the stream's updates lack
        what came before). `past`: the mark (`_mark`) of a question answered by someone
        else: polled while the task still asks it, as the answer may not be heard yet.
        """
        current = follow.task
        if current is None:
            raise AgentError(
                f"the A2A agent {self.name} answered without a task",
                category=ErrorCategory.OTHER,
                error_type="a2a_error",
            )
        if whole or past is not None:
            current = follow.task = await client.get_task(GetTaskRequest(id=current.id))
            self._check_size(current)
        while current.status.state not in FINAL_STATES or _asks(current, past):
            await asyncio.sleep(self.poll_interval)
            current = await client.get_task(GetTaskRequest(id=current.id))
            follow.task = current
            self._check_size(current)
        return current

    def _on_our_hosts(self, card: AgentCard) -> AgentCard:
        """The card with only the interfaces on hosts the user allowed."""
        kept = [i for i in card.supported_interfaces if urlsplit(i.url).netloc in self._hosts]
        if not kept:
            raise PermissionDenied(
                f"the card of the A2A agent {self.name} points to other hosts only",
                error_type="card_host_not_allowed",
                details="allow a host with A2AAgent(allowed_hosts=...)",
            )
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(kept)
        return card

    def _check_size(self, task: A2ATask) -> None:
        size = task_size(task)
        if size > self.max_artifact_bytes:
            raise AgentError(
                f"the A2A agent {self.name} handed back {size} bytes of artifacts, "
                f"over max_artifact_bytes={self.max_artifact_bytes}",
                category=ErrorCategory.OTHER,
                error_type=TOO_LARGE,
                retryable=False,
            )

    def __repr__(self) -> str:
        return f"<A2AAgent {self.name} {self.url}>"  # never the headers


class _Follow:
    """What is known of the remote task so far, from its stream or its one answer."""

    __slots__ = ("agent", "sent", "task", "updates")

    def __init__(self, agent: A2AAgent) -> None:
        self.agent = agent
        self.sent = False
        self.task: A2ATask | None = None
        self.updates = 0

    def take(self, event: StreamResponse) -> None:
        self.updates += 1
        if self.updates > _MAX_UPDATES:
            raise AgentError(
                f"the A2A agent {self.agent.name} sent over {_MAX_UPDATES} updates",
                category=ErrorCategory.OTHER,
                error_type=TOO_LARGE,
                retryable=False,
            )
        kind = event.WhichOneof("payload")
        if kind == "task":
            self.task = A2ATask()
            self.task.CopyFrom(event.task)
        elif kind == "message":  # a direct reply: a task completed at once
            self.task = A2ATask(id=event.message.task_id)
            self.task.status.state = TaskState.TASK_STATE_COMPLETED
            self.task.artifacts.add(parts=event.message.parts)
        elif self.task is None:
            return  # an update before its task: the SDK sends the task first
        elif kind == "status_update":
            self.task.status.CopyFrom(event.status_update.status)
        elif kind == "artifact_update":
            _merge(self.task, event.artifact_update.artifact, event.artifact_update.append)
        if self.task is not None:
            self.agent._check_size(self.task)


def _mark(task: A2ATask) -> str:
    """What tells one question of a task from the next: the id of the message that asks
    and the time of its status (a question need not carry a message)."""
    status = task.status
    return f"{status.message.message_id}@{status.timestamp.ToJsonString()}"


def _asks(task: A2ATask, question: str | None) -> bool:
    """Whether the task still asks `question` (a `_mark`: answered, not heard yet)."""
    return (
        question is not None
        and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        and _mark(task) == question
    )


def _merge(task: A2ATask, artifact: Any, append: bool) -> None:
    for known in task.artifacts:
        if known.artifact_id == artifact.artifact_id:
            if append:
                known.parts.extend(artifact.parts)
            else:
                known.CopyFrom(artifact)
            return
    task.artifacts.add().CopyFrom(artifact)


def _message(task: Task, answer: Due | None) -> Message:
    message = Message(
        message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=task.query)]
    )
    if answer is not None:  # a follow-up of the remote task that asked: the answer alone
        message.task_id, message.context_id = answer.task_id, answer.context_id
        return message
    metadata: dict[str, Any] = dict(task.metadata)
    if task.topic is not None:
        metadata["topic"] = task.topic
    if metadata:
        # JSON values only cross the wire; anything else as its text.
        message.metadata.update(json.loads(json.dumps(metadata, default=str)))
    return message


spell_out(A2AAgent.__init__, SubagentKwargs, SubagentOptions)
