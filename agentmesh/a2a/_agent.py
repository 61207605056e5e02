"""`A2AAgent`: a remote A2A agent as a subagent.

One run of a task: read the agent card, send the task as a message, follow the remote
task to its end (its stream when the card offers streaming, else the blocking send and
then polling by task id), and turn that end into the outcome (`_outcome`). Every failure
of the exchange is an `AgentError` (`_errors`), so the envelope is routable.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Final
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
from agentmesh.a2a._errors import exchange_error, timed_out
from agentmesh.a2a._outcome import FINAL_STATES, result_of, task_size
from agentmesh.context import Context
from agentmesh.envelope import ErrorCategory
from agentmesh.errors import AgentError, PermissionDenied, UsageError
from agentmesh.subagents import Subagent
from agentmesh.task import Task

__all__ = ["A2AAgent"]

_MAX_UPDATES: Final = 10_000
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
        **options: the options of any subagent (`retry`, `alternatives`, ...).

    A message that may have reached the remote agent is never sent twice by a local
    retry: such failures are transient but not retryable (see the how-to).
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
        **options: Any,  # checked by `Subagent` (its keywords, nothing else)
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
        """Send `task` to the remote agent and return its completed task's data."""
        follow = _Follow(self)
        try:
            return await self._exchange(task, follow)
        except TimeoutError:
            raise timed_out(self.timeout, sent=follow.sent, agent=self.name) from None
        except (A2AError, httpx.HTTPError) as exc:
            raise exchange_error(exc, sent=follow.sent, classifier=self.classifier) from None

    async def _exchange(self, task: Task, follow: _Follow) -> Any:
        at = asyncio.get_running_loop().time() + self.timeout
        async with httpx.AsyncClient(headers=self._headers, timeout=self.timeout) as http:
            async with asyncio.timeout_at(at):
                card = await A2ACardResolver(http, self.url).get_agent_card()
            config = ClientConfig(streaming=self.streaming, httpx_client=http)
            client = ClientFactory(config).create(self._on_our_hosts(card))
            try:
                async with asyncio.timeout_at(at):
                    return await self._follow(client, task, follow, card.capabilities.streaming)
            except TimeoutError:
                await self._cancel_remote(client, follow)
                raise

    async def _follow(self, client: Client, task: Task, follow: _Follow, streams: bool) -> Any:
        """Send the message and follow its task to the end: the completed task's data."""
        request = SendMessageRequest(message=_message(task))
        follow.sent = True  # from here the remote may have the message
        try:
            async for event in client.send_message(request):
                follow.take(event)
        except A2AError:
            if follow.task is None or not (streams and self.streaming):
                raise
            # The stream dropped, the task goes on: follow it by id, never resend.
        return result_of(await self._finished(client, follow), self.name)

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

    async def _finished(self, client: Client, follow: _Follow) -> A2ATask:
        """The remote task at its end, polled by id while it is still under way."""
        current = follow.task
        if current is None:
            raise AgentError(
                f"the A2A agent {self.name} answered without a task",
                category=ErrorCategory.OTHER,
                error_type="a2a_error",
            )
        while current.status.state not in FINAL_STATES:
            await asyncio.sleep(self.poll_interval)
            current = await client.get_task(GetTaskRequest(id=current.id))
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
                error_type="response_too_large",
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
                error_type="response_too_large",
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


def _merge(task: A2ATask, artifact: Any, append: bool) -> None:
    for known in task.artifacts:
        if known.artifact_id == artifact.artifact_id:
            if append:
                known.parts.extend(artifact.parts)
            else:
                known.CopyFrom(artifact)
            return
    task.artifacts.add().CopyFrom(artifact)


def _message(task: Task) -> Message:
    message = Message(
        message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[Part(text=task.query)]
    )
    metadata: dict[str, Any] = dict(task.metadata)
    if task.topic is not None:
        metadata["topic"] = task.topic
    if metadata:
        # JSON values only cross the wire; anything else as its text.
        message.metadata.update(json.loads(json.dumps(metadata, default=str)))
    return message
