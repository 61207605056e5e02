"""A person's answer to a served task's question: read from an A2A message, then claimed.

The answer is a follow-up message on the task that waits (`input-required`): the text
`approve` or `reject: <reason>`, or a data part `{"approvalId", "action", "reason",
"arguments", "query"}` (the run console's fields; `approvalId` may be left out while one
question waits). It is claimed through the run's `DecisionBook.give(by=...)`, as the
console claims one: of two clients answering at once, in any number of processes,
exactly one wins and the other learns whose answer stands. Once nothing of the run waits
for a person, which caller goes on with the run is claimed too (keyed by the answered
questions), so a run is resumed once for the same answers.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from a2a.helpers.proto_helpers import get_data_parts, get_text_parts
from a2a.types.a2a_pb2 import Message

from agentmesh._engine._answer_checks import AlreadyAnswered, BookEntry, answer_of_form, describe
from agentmesh._engine._human import DecisionBook
from agentmesh._engine._ledger import digest
from agentmesh.a2a._server_parts import plain
from agentmesh.approvals import Approval, PendingApproval
from agentmesh.checkpoints import CheckpointStore
from agentmesh.errors import UsageError

__all__ = ["STAGE", "Answered", "Given", "take_answer"]

# Beside the run's own checkpoints: the server's claims and the task it serves.
STAGE: Final = "agentmesh.a2a"
_MAX_NAME: Final = 80
_ANONYMOUS: Final = "an A2A client"


class Answered(enum.Enum):
    """What an answer leads to, for the caller that gave it."""

    WAITING = "waiting"  # a question still waits (or the answer did not fit): ask again
    RESUME = "resume"  # this caller claimed the run's next step: it goes on with it
    ELSEWHERE = "elsewhere"  # every question is answered and another caller goes on


@dataclass(frozen=True, slots=True)
class Given:
    """What became of an answer: what happens next, what to tell the client, what waits."""

    next: Answered
    note: str
    waiting: tuple[PendingApproval, ...] = ()


async def take_answer(store: CheckpointStore, run_id: str, message: Message | None) -> Given:
    """Claim the answer `message` gives to run `run_id`'s question, and say what follows."""
    book = await DecisionBook.load(store, run_id)
    try:
        answers = _answers(message, book)
        await book.give(answers, by=_by(message))
        note = "; ".join(f"approval {key}: {describe(value)}" for key, value in answers.items())
    except AlreadyAnswered as exc:
        note = _taken(exc.entry)
    except UsageError as exc:
        note = f"The answer was not taken: {exc}"
        waiting = book.unanswered()
        return Given(Answered.WAITING if waiting else Answered.ELSEWHERE, note, waiting)
    # Read again: another person may have answered the run's other questions meanwhile,
    # and whoever answers last must see them, or nobody claims the resume.
    book = await DecisionBook.load(store, run_id)
    waiting = book.unanswered()
    if waiting:
        return Given(Answered.WAITING, note, waiting)
    answered = sorted(entry.pending.id for entry in book.entries() if entry.answer is not None)
    won = await store.claim(run_id, STAGE, f"resume/{digest(answered)}", {"at": time.time()})
    if won is not None:
        return Given(Answered.ELSEWHERE, f"{note}; the task goes on with the answer that stands")
    return Given(Answered.RESUME, note)


def _taken(entry: BookEntry) -> str:
    """Whose answer stands, and since when."""
    assert entry.answer is not None
    who = "" if entry.answered_by is None else f" by {entry.answered_by!r}"
    when = "" if entry.answered_at is None else f" at {entry.answered_at:%Y-%m-%d %H:%M:%S} UTC"
    return (
        f"approval {entry.pending.id} was already answered{who}{when}: "
        f"{describe(entry.answer)} stands"
    )


def _by(message: Message | None) -> str:
    """Who answers, as the message's metadata names them (as a console's name field)."""
    if message is None or "by" not in message.metadata:
        return _ANONYMOUS
    name = message.metadata["by"]
    if not isinstance(name, str) or not name.strip():
        return _ANONYMOUS
    return name.strip()[:_MAX_NAME]


def _answers(message: Message | None, book: DecisionBook) -> dict[str, Approval]:
    """Approval id -> answer, from the message's data parts, else its text."""
    if message is None:
        raise UsageError("the message carries no answer")
    data = plain(get_data_parts(list(message.parts)))
    forms = [form for form in data if isinstance(form, dict)]
    if not forms:
        text = " ".join(get_text_parts(list(message.parts))).strip()
        forms = [_form_of_text(text)]
    answers: dict[str, Approval] = {}
    for form in forms:
        pending = _which(form, book)
        answers[pending.id] = answer_of_form(pending, form, form.get("arguments"))
    return answers


def _form_of_text(text: str) -> dict[str, Any]:
    word, _, rest = text.replace(":", " ", 1).partition(" ")
    action = word.strip().lower()
    if action not in ("approve", "reject"):
        raise UsageError(f"answer 'approve' or 'reject: <reason>', not {text[:40]!r}")
    return {"action": action, "reason": rest.strip()}


def _which(form: Mapping[str, Any], book: DecisionBook) -> PendingApproval:
    """The question a form answers: the one it names, else the only one waiting."""
    named = form.get("approvalId")
    waiting = book.unanswered()
    if named is None:
        if len(waiting) == 1:
            return waiting[0]
        answered = [entry.pending for entry in book.entries() if entry.answer is not None]
        if not waiting and answered:
            return answered[-1]  # answered a moment ago by another: `give` says by whom
        ids = [pending.id for pending in waiting]
        raise UsageError(f"name the approval answered (approvalId): one of {ids or 'none'}")
    # One answered already is found too: `give` then says whose answer stands.
    for entry in book.entries():
        if entry.pending.id == named:
            return entry.pending
    raise UsageError(f"no approval {str(named)[:40]!r} here; waiting: {[p.id for p in waiting]}")
