"""One A2A task served: the SDK's `AgentExecutor`, a run of a subagent or a coordinator.

A message that starts a task is one run (its id the A2A task's id), followed to its end:
progress as `working` status updates (the run's events), then the end (`_server_parts`):
a success `completed` with its data as an artifact, an envelope `failed` (business:
`rejected`) with the envelope whole, a pending approval `input-required`. A follow-up
message on a task that waits is a person's answer (`_server_answers`); the caller that
claims the run's next step resumes it, with the answers the store holds.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Final, Protocol

from a2a.helpers.proto_helpers import new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Message, Part, Role, TaskState
from a2a.types.a2a_pb2 import Task as A2ATask

from agentmesh._engine._human import DecisionBook
from agentmesh._logging import get_logger
from agentmesh.a2a._server_answers import Answered, take_answer
from agentmesh.a2a._server_parts import (
    envelope_parts,
    event_parts,
    plain,
    question_parts,
    rejects,
    report_parts,
    success_metadata,
    success_parts,
)
from agentmesh.approvals import PendingApproval
from agentmesh.checkpoints import CheckpointStore
from agentmesh.classify import default_classifier
from agentmesh.coordinator import Coordinator
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, Outcome
from agentmesh.errors import UsageError
from agentmesh.events import EventSink, RunEvent, RunFinished, RunStream
from agentmesh.policies import ToolPolicy
from agentmesh.report import Report
from agentmesh.retry import RetryBudget
from agentmesh.scope import RunScope
from agentmesh.subagents import Subagent
from agentmesh.task import Task

__all__ = ["Executor", "Served", "ServedCoordinator", "ServedSubagents", "task_of"]

# The one task of a served subagent's run: its id in the run's checkpoints and questions.
_TASK_ID: Final = "a2a"
# Keys of a message's metadata that say how to serve it, not what to do.
_SKILL: Final = "skill"
_TOPIC: Final = "topic"
_BY: Final = "by"


class Out:
    """What the task says over A2A: its progress, its questions and its end."""

    __slots__ = ("updater",)

    def __init__(self, updater: TaskUpdater) -> None:
        self.updater = updater

    def _said(self, parts: list[Any]) -> Message:
        return self.updater.new_agent_message(parts)

    async def progress(self, event: RunEvent) -> None:
        await self.updater.start_work(self._said(event_parts(event)))

    async def outcome(self, outcome: Outcome) -> None:
        if isinstance(outcome, ErrorEnvelope):
            said = self._said(envelope_parts(outcome))
            await (self.updater.reject(said) if rejects(outcome) else self.updater.failed(said))
            return
        parts = success_parts(outcome)
        if parts:
            await self.updater.add_artifact(
                parts, name=outcome.source, metadata=success_metadata(outcome)
            )
        await self.updater.complete()

    async def report(self, report: Report) -> None:
        await self.updater.add_artifact(report_parts(report), name="report")
        await self.updater.complete()

    async def questions(
        self, waiting: tuple[PendingApproval, ...], note: str | None = None
    ) -> None:
        parts = question_parts(waiting)
        if note:
            parts.insert(0, self._note(note))
        await self.updater.requires_input(self._said(parts))

    async def working(self, note: str) -> None:
        await self.updater.start_work(self._said([self._note(note)]))

    @staticmethod
    def _note(text: str) -> Part:
        return new_text_part(text)


class _Progress(EventSink):
    """A run's events, said as `working` updates at the run's next pause (and at its end).

    Events are emitted in plain functions; they are sent where the run awaits anyway
    (`room()`, before each tool call), so a slow client holds the run there. One sender
    at a time: concurrent tool calls of one run keep the events' order.
    """

    __slots__ = ("_out", "_sending", "_waiting")

    def __init__(self, run_id: str, out: Out) -> None:
        super().__init__(run_id)
        self._out = out
        self._waiting: deque[RunEvent] = deque()
        self._sending = asyncio.Lock()

    def _put(self, event: RunEvent) -> None:
        self._waiting.append(event)

    async def room(self) -> None:
        async with self._sending:
            while self._waiting:
                await self._out.progress(self._waiting.popleft())


class Served(Protocol):
    """What an A2A server runs: its skills, a new task, and a task a person answered."""

    store: CheckpointStore

    def skills(self) -> list[tuple[str, str]]: ...

    async def start(self, run_id: str, task: Task, skill: str | None, out: Out) -> None: ...

    async def resume(self, run_id: str, first: Message, out: Out) -> None: ...


class ServedSubagents:
    """Subagents, one skill each: a task is one run of the one its message names."""

    def __init__(
        self,
        agents: tuple[Subagent, ...],
        store: CheckpointStore,
        timeout: float | None,
        budget: RetryBudget | None,
        policies: tuple[ToolPolicy, ...],
    ) -> None:
        self.agents = {agent.name: agent for agent in agents}
        self.store, self.timeout, self.budget, self.policies = store, timeout, budget, policies

    def skills(self) -> list[tuple[str, str]]:
        return [(name, _description(agent)) for name, agent in self.agents.items()]

    async def start(self, run_id: str, task: Task, skill: str | None, out: Out) -> None:
        await self._run(self._agent(skill, task), run_id, task, out)

    async def resume(self, run_id: str, first: Message, out: Out) -> None:
        task, skill = task_of(first)
        await self._run(self._agent(skill, task), run_id, task, out)

    def _agent(self, skill: str | None, task: Task) -> Subagent:
        """The subagent the message names; the only one when it names none."""
        if skill is None and len(self.agents) == 1:
            return next(iter(self.agents.values()))
        if skill is not None and skill in self.agents:
            return self.agents[skill]
        raise _unknown_skill(skill, task, sorted(self.agents))

    async def _run(self, agent: Subagent, run_id: str, task: Task, out: Out) -> None:
        book = await DecisionBook.load(self.store, run_id)
        progress = _Progress(run_id, out)
        scope = RunScope(
            run_id,
            budget=self.budget if self.budget is not None else RetryBudget(),
            policies=self.policies,
            store=self.store,
            decisions=book,
            events=progress,
        )
        outcome = await agent.run(task, scope=scope, task_id=_TASK_ID, timeout=self.timeout)
        await progress.room()
        waiting = book.unanswered()
        if waiting and isinstance(outcome, ErrorEnvelope):
            # The task stopped at a question (`decision_pending`): a person answers it.
            await out.questions(waiting)
            return
        await book.applied(_TASK_ID)
        await out.outcome(outcome)


class ServedCoordinator:
    """A coordinator, one skill: a task is one run of it, its report the artifact."""

    def __init__(self, coordinator: Coordinator, name: str, store: CheckpointStore) -> None:
        self.coordinator, self.name, self.store = coordinator, name, store

    def skills(self) -> list[tuple[str, str]]:
        names = ", ".join(self.coordinator.subagents)
        return [(self.name, f"A coordinator's run over its subagents ({names}): a report.")]

    async def start(self, run_id: str, task: Task, skill: str | None, out: Out) -> None:
        if skill is not None and skill != self.name:
            raise _unknown_skill(skill, task, [self.name])
        await self._follow(self.coordinator.stream(task, run_id=run_id), out)

    async def resume(self, run_id: str, first: Message, out: Out) -> None:
        # The task as it was started: the store keeps it with secrets masked.
        task, _ = task_of(first)
        await self._follow(self.coordinator.resume_stream(run_id, tasks=task), out)

    async def _follow(self, stream: RunStream, out: Out) -> None:
        report: Report | None = None
        async with stream as events:
            async for event in events:
                if isinstance(event, RunFinished):
                    report = event.report
                else:
                    await out.progress(event)
        assert report is not None, "a run's stream ends with RunFinished"
        if report.pending_approvals:
            await out.questions(report.pending_approvals)
        else:
            await out.report(report)


class _Refused(Exception):
    """A message the server cannot run: it ends as this validation envelope."""

    def __init__(self, message: str, error_type: str, task: Task, source: str, *known: str):
        super().__init__(message)
        self.envelope = ErrorEnvelope(
            error_category=ErrorCategory.VALIDATION,
            error_type=error_type,
            is_retryable=False,
            message=message,
            attempted_query=task.query,
            source=source,
            attempts=0,
            alternative_approaches=known or None,
        )


def _unknown_skill(skill: str | None, task: Task, known: list[str]) -> _Refused:
    said = "names no skill" if skill is None else f"names the skill {skill[:40]!r}"
    message = f"the message {said}; give metadata {{'skill': ...}}, one of {', '.join(known)}"
    return _Refused(message, "unknown_skill", task, skill or "a2a", *known)


class Executor(AgentExecutor):
    """The SDK's executor for what the server serves (`Served`)."""

    def __init__(self, served: Served) -> None:
        self.served = served

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        current, message = context.current_task, context.message
        assert context.task_id is not None
        assert context.context_id is not None
        run_id = context.task_id
        updater = TaskUpdater(event_queue, run_id, context.context_id)
        out = Out(updater)
        log = get_logger(component="a2a", run_id=run_id)
        if current is None:
            assert message is not None, "the SDK starts a task with a message"
            await event_queue.enqueue_event(_new_task(run_id, context.context_id, message))
            await self._start(run_id, message, out, log)
            return
        if current.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
            log.info("a2a_message_ignored", state=TaskState.Name(current.status.state))
            return  # nothing here waits for a message: the task goes on as it was
        given = await take_answer(self.served.store, run_id, message)
        log.info("a2a_answer", next=given.next.value)
        if given.next is Answered.WAITING:
            await out.questions(given.waiting, given.note)
        elif given.next is Answered.ELSEWHERE:
            await out.working(given.note)  # the caller whose answer stands goes on
        else:
            await out.working(given.note)
            await self._guarded(self._resume(run_id, current, out), out, None, log)

    async def _resume(self, run_id: str, current: A2ATask, out: Out) -> None:
        # Inside the guard: a task store that kept no first message ends the task as an
        # envelope, not as a resume claimed and never run.
        await self.served.resume(run_id, _first(current), out)

    async def _start(self, run_id: str, message: Message, out: Out, log: Any) -> None:
        task, skill = task_of(message)
        if not task.query.strip():
            refused = _Refused(
                "the message has no text: the task's query is the text of its parts",
                "empty_query",
                task,
                skill or "a2a",
            )
            await out.outcome(refused.envelope)
            return
        await out.working(f"started: {task.label!r}")
        await self._guarded(self.served.start(run_id, task, skill, out), out, task, log)

    @staticmethod
    async def _guarded(run: Any, out: Out, task: Task | None, log: Any) -> None:
        """Run `run`; what it raises ends the task as an envelope, never as a bare failure."""
        try:
            await run
        except _Refused as exc:
            await out.outcome(exc.envelope)
        except Exception as exc:
            log.exception("a2a_run_failed")
            envelope = default_classifier.classify(
                exc,
                source="a2a",
                attempted_query="" if task is None else task.query,
                attempts=0,
            )
            if not isinstance(exc, UsageError):
                # The text of an unexpected failure (paths, hosts) stays in our log: the
                # remote client learns its kind, as from AG-UI.
                hidden = f"the run failed: {type(exc).__name__}"
                envelope = envelope.model_copy(update={"message": hidden, "details": None})
            await out.outcome(envelope)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """The SDK cancels the running `execute`; the task says it ended so."""
        assert context.task_id is not None
        assert context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def task_of(message: Message) -> tuple[Task, str | None]:
    """The task a message asks for, and the skill it names (None: none)."""
    query = "\n".join(part.text for part in message.parts if part.WhichOneof("content") == "text")
    metadata: dict[str, Any] = plain(message.metadata)
    skill = metadata.pop(_SKILL, None)
    topic = metadata.pop(_TOPIC, None)
    metadata.pop(_BY, None)
    return (
        Task(
            query=query,
            topic=topic if isinstance(topic, str) else None,
            metadata=metadata,
        ),
        skill if isinstance(skill, str) else None,
    )


def _first(task: A2ATask) -> Message:
    """The message that started the task: what a resumed run runs again."""
    for message in task.history:
        if message.role == Role.ROLE_USER:
            first: Message = message
            return first
    raise LookupError(f"A2A task {task.id} keeps no first message to resume")


def _new_task(task_id: str, context_id: str, message: Message) -> A2ATask:
    task = A2ATask(id=task_id, context_id=context_id)
    task.status.state = TaskState.TASK_STATE_SUBMITTED
    task.history.append(message)
    return task


def _description(agent: Subagent) -> str:
    own = type(agent).__dict__.get("__doc__")
    return agent.description or (
        own.strip().splitlines()[0] if own else f"The {agent.name} subagent."
    )
