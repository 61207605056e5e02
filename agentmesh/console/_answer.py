"""A person's answer given on the console: read from a form, checked, claimed in the store.

The answer is claimed through the run's `DecisionBook`, the same way
`coordinator.resume(run_id, approvals=...)` claims one: of two people answering at once,
in any number of processes, exactly one wins, and the other learns whose answer stands
and when. The application then goes on with `coordinator.resume(run_id)`, which takes the
answers from the store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import jsonschema

from agentmesh._engine._answer_checks import AlreadyAnswered, answer_of_form, describe
from agentmesh._engine._human import DecisionBook
from agentmesh._redaction import REDACTED
from agentmesh.approvals import Approval, ApprovalKind, Edit, PendingApproval
from agentmesh.checkpoints import CheckpointStore, event_table_of
from agentmesh.errors import UsageError

__all__ = ["AnswerTaken", "answer_approval", "answer_from_form"]

MAX_NAME: Final = 80


@dataclass(frozen=True, slots=True)
class AnswerTaken:
    """Somebody answered first: their answer (as written), who they said they were, when."""

    answer: str
    by: str | None
    at: datetime | None


async def answer_approval(
    store: CheckpointStore, run_id: str, approval_id: str, answer: Approval, *, by: str
) -> AnswerTaken | None:
    """Claim `answer` to approval `approval_id` of run `run_id`, atomically, as `by`.

    Returns None when this answer was claimed (it stands), or the `AnswerTaken` that
    stood before. A question the run does not have, or an answer that does not fit it
    (an `Edit` of an escalation's arguments), raises `UsageError`.
    """
    if not isinstance(by, str) or not by.strip() or len(by) > MAX_NAME:
        raise UsageError(f"answer_approval(by=) takes a name of 1 to {MAX_NAME} characters")
    book = await DecisionBook.load(store, run_id)
    try:
        await book.give({approval_id: answer}, by=by.strip())
    except AlreadyAnswered as exc:
        won = exc.entry
        assert won.answer is not None
        return AnswerTaken(describe(won.answer), won.answered_by, won.answered_at)
    table = event_table_of(store)
    if table is not None:
        # An application waiting in `resume_when_answered` is woken (PostgreSQL: NOTIFY).
        await table.nudge(run_id)
    return None


def answer_from_form(pending: PendingApproval, form: Mapping[str, Any]) -> Approval:
    """The answer a form gives: `action` approve, reject (`reason`) or edit (`arguments`
    as a JSON object for a call, merged over the asked ones and checked against the
    tool's schema; `query` for an escalated task). A `UsageError` says what is wrong."""
    arguments: Any = None
    if form.get("action") == "edit" and pending.kind is not ApprovalKind.ESCALATION:
        try:
            arguments = json.loads(str(form.get("arguments", "")))
        except ValueError as exc:
            raise UsageError(f"the edited arguments are not JSON: {exc}") from None
    answer = answer_of_form(pending, form, arguments)
    if isinstance(answer, Edit) and answer.arguments is not None:
        check_arguments(pending, answer.arguments)
    return answer


def check_arguments(pending: PendingApproval, edited: dict[str, Any]) -> None:
    """Refuse edited arguments that the tool's JSON schema refuses, before they are sent.

    The call is made with the edit merged over the arguments asked about, so that is
    what is checked. A secret's property is masked in the stored schema: it takes any
    value here (an edit that holds a secret is refused anyway).
    """
    schema = _unmasked(pending.input_schema)
    if schema is None:
        return
    merged = {**(pending.arguments or {}), **edited}
    validator = jsonschema.Draft202012Validator(schema)
    problems = sorted(validator.iter_errors(merged), key=lambda error: list(error.path))
    if problems:
        said = "; ".join(_problem(error) for error in problems[:5])
        raise UsageError(f"the edited arguments do not fit {pending.tool}'s schema: {said}")


def _problem(error: jsonschema.ValidationError) -> str:
    where = "/".join(str(part) for part in error.path)
    return f"{where}: {error.message}" if where else error.message


def _unmasked(schema: Any) -> Any:
    """The schema with every masked part accepting anything (`{}`)."""
    if schema == REDACTED:
        return {}
    if isinstance(schema, dict):
        return {key: _unmasked(value) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_unmasked(value) for value in schema]
    return schema
