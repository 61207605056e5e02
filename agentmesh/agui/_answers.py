"""A run's pending approvals as AG-UI interrupts, and a resume's entries as a person's answers.

An interrupt's id names the agentmesh run and the approval (`<run id>#<approval id>`),
so the run that resumes needs nothing but the resume entries to find both. The answer
rides the entry's `payload`:

    {"approved": true}                                   Approve()
    {"approved": true, "editedArgs": {"amount": 250}}    Edit(arguments=...)  (a tool call)
    {"approved": true, "query": "refund order B-2 ..."}  Edit(query=...)      (an escalation)
    {"approved": false, "reason": "not this customer"}   Reject(reason)

and an entry with status "cancelled" (the person abandoned the question) is a
rejection: the call is not made. Who answered comes from the entry's `metadata.by`.
The answers are claimed in the store through the run's `DecisionBook`, as the console
and `Coordinator.resume` claim them: of two answers at once exactly one wins.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from ag_ui.core import Interrupt, ResumeEntry

from agentmesh._engine._answer_checks import describe
from agentmesh._engine._human import AlreadyAnswered, DecisionBook
from agentmesh.approvals import Approval, ApprovalKind, Approve, Edit, PendingApproval, Reject
from agentmesh.checkpoints import CheckpointStore
from agentmesh.errors import UsageError

__all__ = ["Claimed", "ResumeRefused", "claim_answers", "interrupt_for", "tool_call_id"]

_SEPARATOR: Final = "#"
# Who answered, when the entry does not say.
DEFAULT_BY: Final = "ag-ui"
MAX_BY: Final = 80
CANCELLED: Final = "the question was cancelled through AG-UI"


class ResumeRefused(UsageError):
    """A resume that cannot go on; `code` says why, for the stream's RUN_ERROR."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def tool_call_id(run_id: str, approval_id: str) -> str:
    """The id of the call a pending approval asks about, as the interrupted run streams it."""
    return f"approval:{run_id}{_SEPARATOR}{approval_id}"


def interrupt_for(run_id: str, pending: PendingApproval) -> Interrupt:
    """The AG-UI interrupt that asks a person for `pending`'s answer."""
    if pending.kind is ApprovalKind.TOOL_CALL:
        message = f"{pending.reason}: may {pending.subagent} call {pending.tool}{_shown(pending)}?"
        edit: dict[str, Any] = {"editedArgs": pending.input_schema or {"type": "object"}}
    else:
        message = f"{pending.reason}: accept what task {pending.topic!r} ended with?"
        edit = {"query": {"type": "string", "minLength": 1}}
    return Interrupt(
        id=f"{run_id}{_SEPARATOR}{pending.id}",
        reason="tool_approval" if pending.kind is ApprovalKind.TOOL_CALL else "escalation",
        message=message,
        tool_call_id=(
            tool_call_id(run_id, pending.id) if pending.kind is ApprovalKind.TOOL_CALL else None
        ),
        response_schema={
            "type": "object",
            "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}, **edit},
            "required": ["approved"],
        },
        metadata={
            "agentmesh": {
                "runId": run_id,
                "approvalId": pending.id,
                "taskId": pending.task_id,
                "subagent": pending.subagent,
                "topic": pending.topic,
                "policy": pending.policy,
                "tool": pending.tool,
                "arguments": pending.arguments,
            }
        },
    )


@dataclass(frozen=True, slots=True)
class Claimed:
    """The answers a resume claimed: the run they belong to."""

    run_id: str
    answers: dict[str, Approval]


async def claim_answers(store: CheckpointStore, entries: Sequence[ResumeEntry]) -> Claimed:
    """Read the answers `entries` give and claim them in the store.

    The protocol's rule holds: one resume answers every interrupt the run left open,
    each once, and nothing else. The answers are claimed in the order of their ids, so
    of two resumes answering the same questions at once the one that wins the first
    claim wins them all; the other gets `ResumeRefused` ("already_answered") naming the
    answer that stood and who gave it, and which of its own answers it claimed first
    (those stand: a claim is never taken back).
    """
    run_ids, answers, by = set(), {}, DEFAULT_BY
    for entry in entries:
        run_id, _, approval_id = entry.interrupt_id.rpartition(_SEPARATOR)
        if not run_id or not approval_id:
            raise ResumeRefused(f"no interrupt {entry.interrupt_id!r}", "unknown_interrupt")
        if approval_id in answers:
            raise ResumeRefused(f"interrupt {entry.interrupt_id!r} is answered twice", "duplicate")
        run_ids.add(run_id)
        answers[approval_id] = _approval(entry)
        by = _by(entry) or by
    if len(run_ids) != 1:
        raise ResumeRefused("the resume entries name interrupts of several runs", "several_runs")
    (run_id,) = run_ids
    book = await DecisionBook.load(store, run_id)
    _check_coverage(book, run_id, answers)
    try:
        await book.give(dict(sorted(answers.items())), by=by)
    except AlreadyAnswered as exc:
        won = exc.entry
        assert won.answer is not None
        who = "" if won.answered_by is None else f" by {won.answered_by}"
        _, stand, kept = str(exc).partition(" This call claimed ")
        raise ResumeRefused(
            f"approval {won.pending.id} was already answered{who}: {describe(won.answer)}"
            + (f"; this resume claimed {kept}" if stand else ""),
            "already_answered",
        ) from None
    except UsageError as exc:  # an answer that does not fit its question
        raise ResumeRefused(str(exc), "invalid_answer") from None
    return Claimed(run_id, answers)


def _check_coverage(book: DecisionBook, run_id: str, answers: dict[str, Approval]) -> None:
    known = {entry.pending.id: entry for entry in book.entries()}
    unknown = sorted(set(answers) - set(known))
    if unknown:
        raise ResumeRefused(f"run {run_id!r} has no interrupt {unknown[0]!r}", "unknown_interrupt")
    # An answered one among them is refused by the claim itself (`DecisionBook.give`).
    open_ = sorted(p.id for p in book.unanswered() if p.id not in answers)
    if open_:
        raise ResumeRefused(
            f"a resume answers every open interrupt; unanswered: {', '.join(open_)}",
            "unanswered_interrupts",
        )


def _approval(entry: ResumeEntry) -> Approval:
    """The answer one resume entry gives (see the module's docstring)."""
    payload = entry.payload if isinstance(entry.payload, dict) else {}
    reason = payload.get("reason")
    if entry.status == "cancelled":
        return Reject(reason if isinstance(reason, str) and reason.strip() else CANCELLED)
    approved = payload.get("approved")
    if not isinstance(approved, bool):
        raise ResumeRefused(
            f'interrupt {entry.interrupt_id!r}: the payload needs "approved": true or false',
            "invalid_answer",
        )
    try:
        if not approved:
            return Reject(reason if isinstance(reason, str) else "")
        if payload.get("editedArgs") is not None:
            return Edit(arguments=payload["editedArgs"])
        if payload.get("query") is not None:
            return Edit(query=payload["query"])
    except UsageError as exc:
        raise ResumeRefused(f"interrupt {entry.interrupt_id!r}: {exc}", "invalid_answer") from None
    return Approve()


def _by(entry: ResumeEntry) -> str | None:
    given = (entry.metadata or {}).get("by")
    if isinstance(given, str) and given.strip() and len(given) <= MAX_BY:
        return given.strip()
    return None


def _shown(pending: PendingApproval) -> str:
    shown = ", ".join(
        f"{k}={json.dumps(v, default=str)}" for k, v in (pending.arguments or {}).items()
    )
    return f"({shown})"
