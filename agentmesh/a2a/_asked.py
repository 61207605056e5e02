"""A remote agent's question (`input-required`) as a person's approval, and its answer.

A remote task that asks for input ends the run of our task with an envelope carrying an
`escalate` ruling: the coordinator escalates it, and with a store that is a pending
approval whose reason is the remote agent's question (secrets masked). The remote task's
id is kept in the run's store (stage `agentmesh.a2a`, key `<subagent>/<task id>`).

A person answers with `Edit(query=answer)`: the task runs again with the answer as its
query, and this module tells `A2AAgent` that the query is an answer, due to that remote
task: the answer is sent as a follow-up message of the same remote task (its task and
context ids), never as a new task. Sending it is claimed in the store first (key
`<subagent>/<task id>/answer/<approval id>`): of two resumes at once, or an attempt
after one that may have sent it, exactly one sends; the others follow the remote task by
its id. `Reject(reason)` or `Approve()` end the task without running it again: the
remote task is not sent anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from agentmesh.approvals import ApprovalKind, Edit
from agentmesh.context import Context
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, Ruling

__all__ = ["ASKED", "Due", "claim_sending", "due", "escalation", "forget", "remember"]

STAGE: Final = "agentmesh.a2a"
# The `policy` an escalated question is asked under: in the ruling and the pending approval.
ASKED: Final = "a2a_input_required"


@dataclass(frozen=True, slots=True)
class Due:
    """A person's answer due to a remote task that waits for it."""

    task_id: str
    context_id: str
    question: str  # the mark of the status that asked (`_agent._mark`)
    approval: str  # the id of the pending approval it answers


@dataclass(frozen=True, slots=True)
class _Waiting:
    """The remote task that asked, as `remember` keeps it."""

    task_id: str
    context_id: str
    question: str


def _key(ctx: Context) -> str:
    return f"{ctx.subagent}/{ctx.task_id}"


async def remember(ctx: Context, task_id: str, context_id: str, question: str) -> None:
    """Keep the ids of the remote task that asks and of its question, for the answer."""
    store = ctx.scope.store
    if store is not None:  # without one nobody can answer: the escalation says it all
        waiting = {"task_id": task_id, "context_id": context_id, "question": question}
        await store.put(ctx.run_id, STAGE, _key(ctx), waiting)


async def forget(ctx: Context) -> None:
    """The remote task no longer waits for an answer from this task."""
    store = ctx.scope.store
    if store is not None:
        await store.delete(ctx.run_id, STAGE, _key(ctx))


async def due(ctx: Context) -> Due | None:
    """The remote task this run's query answers, if a person answered its question.

    Only a fresh answer counts (an `Edit(query=...)` of this task's escalated question,
    given to this resume and not used yet): a task run anew under an old run id never
    sends its query to a remote task of an earlier plan.
    """
    store, book = ctx.scope.store, ctx.scope.decisions
    if store is None or book is None:
        return None
    for pending, answer in reversed(book.answered(ctx.task_id)):
        if (
            pending.kind is ApprovalKind.ESCALATION
            and pending.policy == ASKED
            and pending.subagent == ctx.subagent
            and isinstance(answer, Edit)
            and answer.query == ctx.task.query
        ):
            waiting = await store.get(ctx.run_id, STAGE, _key(ctx), model=_Waiting)
            if waiting is None:
                return None
            return Due(waiting.task_id, waiting.context_id, waiting.question, pending.id)
    return None


async def claim_sending(ctx: Context, answer: Due) -> bool:
    """Whether this call sends `answer` (it won the claim): at most one ever does."""
    store = ctx.scope.store
    assert store is not None  # `due` found the answer there
    key = f"{_key(ctx)}/answer/{answer.approval}"
    return await store.claim(ctx.run_id, STAGE, key, {"task_id": answer.task_id}) is None


def escalation(ctx: Context, question: str, agent: str, remote_task: str) -> ErrorEnvelope:
    """The envelope of a task whose remote agent asks `question` (already masked)."""
    reason = f"the A2A agent {agent} asks: {question or '(no text)'}"
    how = "answer with Edit(query=...)"
    return ErrorEnvelope(
        error_category=ErrorCategory.PERMISSION,
        error_type="input_required",
        is_retryable=False,
        message=reason,
        attempted_query=ctx.task.query,
        source=agent,
        attempts=ctx.attempt,
        details=f"A2A task {remote_task} waits for input; {how}: sent to that task",
        policy=Ruling(action="escalate", reason=f"{reason}; {how}", policy=ASKED),
    )
