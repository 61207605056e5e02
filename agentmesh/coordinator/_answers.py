"""A person's answers in the report: each answer a task used, as data and as text."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from agentmesh._limits import recorded
from agentmesh.approvals import (
    AnsweredApproval,
    Approval,
    ApprovalKind,
    Approve,
    Edit,
    PendingApproval,
    Reject,
)
from agentmesh.envelope import PolicyVerdict
from agentmesh.errors import UsageError

__all__ = ["answer_notes", "answered", "asked_and_answered", "given_approvals"]

_NAMES: Final[dict[type[Any], Literal["approve", "reject", "edit"]]] = {
    Approve: "approve",
    Reject: "reject",
    Edit: "edit",
}


def given_approvals(
    method: str, approvals: Mapping[str, Approval] | None, decisions: Mapping[str, Approval] | None
) -> Mapping[str, Approval] | None:
    """The `approvals=` of `Coordinator.<method>`, also when given by their old name."""
    if decisions is None:
        return approvals
    if approvals is not None:
        raise UsageError(
            f"Coordinator.{method}() takes approvals= or its old name decisions=, not both"
        )
    warnings.warn(
        f"Coordinator.{method}(decisions=) is now {method}(approvals=) (a person's answer "
        f"is an approval); the old keyword goes in the next release",
        DeprecationWarning,
        stacklevel=3,
    )
    return decisions


def answered(pending: PendingApproval, answer: Approval) -> AnsweredApproval:
    """The record of `answer` to `pending`: the call's arguments before and after, masked."""
    edited: dict[str, Any] | None = None
    if isinstance(answer, Edit) and answer.arguments is not None:
        # As the call is made: the edit merged over the arguments asked about.
        masked = recorded({**(pending.arguments or {}), **answer.arguments})
        edited = masked if isinstance(masked, dict) else {"arguments": masked}
    return AnsweredApproval(
        id=pending.id,
        kind=pending.kind,
        answer=_NAMES[type(answer)],
        task_id=pending.task_id,
        subagent=pending.subagent,
        topic=pending.topic,
        policy=pending.policy,
        reason=pending.reason,
        query=pending.query,
        tool=pending.tool,
        arguments=pending.arguments,
        edited_arguments=edited,
        edited_query=answer.query if isinstance(answer, Edit) else None,
        answer_reason=answer.reason if isinstance(answer, Reject) else None,
    )


def answer_notes(answers: Sequence[AnsweredApproval]) -> list[str]:
    """What the answers that let a task go on did, for its coverage reason."""
    return [note for item in answers if (note := item.note()) is not None]


def asked_and_answered(ruling: PolicyVerdict, answers: Sequence[AnsweredApproval]) -> bool:
    """Whether `ruling` is a policy's question about a call that a person answered."""
    return ruling.action == "ask" and any(
        (item.policy, item.tool, item.reason) == (ruling.policy, ruling.tool, ruling.reason)
        for item in answers
        if item.kind is ApprovalKind.TOOL_CALL
    )
