"""What a person's answer must be to stand, checked before it is claimed; how it reads;
and what a question of a run's book holds once answered (who answered, when).

Apart from the book (`agentmesh._engine._human`) so that a console can check an answer
the same way before it offers to send it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from agentmesh._redaction import REDACTED, redact
from agentmesh.approvals import Approval, ApprovalKind, Approve, Edit, PendingApproval, Reject
from agentmesh.errors import UsageError

__all__ = [
    "MAY_HAVE_RUN",
    "AlreadyAnswered",
    "BookEntry",
    "answer_of_form",
    "check_edit",
    "describe",
]

# The "policy" that asks a person before a call that may have run is made again.
MAY_HAVE_RUN: Final = "agentmesh.ledger"


@dataclass(frozen=True, slots=True)
class BookEntry:
    """One question of the book as it stands: its answer, when and by whom, and if used."""

    pending: PendingApproval
    answer: Approval | None
    applied: bool
    answered_at: datetime | None
    answered_by: str | None


class AlreadyAnswered(UsageError):
    """An answer lost: the question was answered first (`entry`: that answer, who, when)."""

    def __init__(self, message: str, *, entry: BookEntry) -> None:
        super().__init__(message)
        self.entry = entry


def describe(answer: Approval) -> str:
    """An answer as a person would write it, with secrets masked."""
    if isinstance(answer, Approve):
        return "Approve()"
    if isinstance(answer, Reject):
        return f"Reject({redact(answer.reason)!r})"
    if answer.arguments is not None:
        return f"Edit(arguments={redact(answer.arguments)!r})"
    return f"Edit(query={redact(answer.query)!r})"


def check_edit(pending: PendingApproval, answer: Approval) -> None:
    """Refuse an `Edit` that does not fit the question (a `UsageError` saying why)."""
    if not isinstance(answer, Edit):
        return
    if pending.policy == MAY_HAVE_RUN:
        # Other arguments would be another call, claimed under another key.
        raise UsageError(
            f"approval {pending.id!r} asks whether to call {pending.tool} again after a call "
            "that may have run: answer Approve() or Reject(reason), not Edit"
        )
    if pending.kind is ApprovalKind.TOOL_CALL and answer.arguments is None:
        raise UsageError(
            f"approval {pending.id!r} is about a call of {pending.tool}: "
            "use Edit(arguments=...), not Edit(query=...)"
        )
    if pending.kind is ApprovalKind.ESCALATION and answer.query is None:
        raise UsageError(f"approval {pending.id!r} is about an escalated task: use Edit(query=...)")
    if answer.arguments is not None and redact(answer.arguments) != answer.arguments:
        # Stored masked, the call would later get "[REDACTED]" instead of the value.
        raise UsageError(
            f"Edit(arguments=) for {pending.id!r} holds a secret; it cannot be stored "
            "masked and sent in clear later"
        )


def answer_of_form(pending: PendingApproval, form: Mapping[str, Any], arguments: Any) -> Approval:
    """The answer a person's form gives (the console's page, an A2A follow-up message):
    `action` approve, reject (`reason`) or edit (`query` for an escalated task, else the
    call's changed `arguments`, already read as JSON). A `UsageError` says what is wrong.
    """
    action = str(form.get("action", ""))
    if action == "approve":
        return Approve()
    if action == "reject":
        return Reject(str(form.get("reason", "")).strip())
    if action != "edit":
        raise UsageError(f"the answer must be approve, reject or edit, not {action[:40]!r}")
    if pending.kind is ApprovalKind.ESCALATION:
        return Edit(query=str(form.get("query", "")).strip())
    if not isinstance(arguments, dict):
        raise UsageError('the edited arguments must be a JSON object: {"name": value, ...}')
    # A masked value sent back as shown must not replace the secret the call was asked with.
    kept = {key: value for key, value in arguments.items() if value != REDACTED}
    if not kept:
        raise UsageError("the edit changes no argument: answer approve instead")
    return Edit(arguments=kept)
