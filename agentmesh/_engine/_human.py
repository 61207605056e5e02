"""Pending decisions as data: the run scope's book of questions for a person, and the
gate in the tool path that stops a call a policy asked about.

Layout in the checkpoint store, stage `agentmesh.decisions`, one key per decision id:
`{"pending": PendingApproval, "answer": null, "applied": bool}`; stage
`agentmesh.answers`, one key per answered id: `{"answer": {...}}`, claimed
(`CheckpointStore.claim`), so that of two people answering at once exactly one wins,
in any number of processes. A decision is answered once: the answer is claimed before
the resumed run uses it, and a resume that is interrupted goes on with
`resume(run_id)`, which reads it back. `applied` is set once the task that used it has
finished. (A store written before answers had their own stage keeps them under
`answer` of the pending record; they are read from there too.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Final, Protocol

import pydantic
from pydantic import Discriminator, StrictBool, Tag, TypeAdapter

from agentmesh._codec import read_as
from agentmesh._engine._answer_checks import (
    MAY_HAVE_RUN,
    AlreadyAnswered,
    BookEntry,
    check_edit,
    describe,
)
from agentmesh._engine._ledger import claim_in, digest
from agentmesh._limits import recorded
from agentmesh._redaction import redact
from agentmesh.approvals import (
    Approval,
    ApprovalKind,
    Approve,
    Edit,
    PendingApproval,
    Reject,
)
from agentmesh.checkpoints import CheckpointStore
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, ErrorType, Ruling
from agentmesh.errors import UsageError

if TYPE_CHECKING:
    from agentmesh.classify import Classifier
    from agentmesh.task import Task
    from agentmesh.tools import Tool

__all__ = [
    "MAY_HAVE_RUN",
    "PERSON",
    "AlreadyAnswered",
    "AskWithoutStore",
    "Asker",
    "BookEntry",
    "DecisionBook",
    "Go",
    "RuleAgain",
    "ask_person",
    "refuse_asks_without_store",
]

STAGE: Final = "agentmesh.decisions"
# The answers, one key per decision id, each claimed: apart from the pending records,
# so that saving a question and claiming its answer never overwrite each other.
ANSWERS: Final = "agentmesh.answers"
# The "policy" a person's rejection is recorded under, in rulings and envelopes.
PERSON: Final = "person"
_PENDING: Final[TypeAdapter[PendingApproval]] = TypeAdapter(PendingApproval)


class AskWithoutStore(UsageError):
    """`Ruling.ask` in a run without a checkpoint store: nobody could ever answer it."""


def refuse_asks_without_store(policies: Iterable[Any], missing: str) -> None:
    """Refuse, where a run without a store is set up, tool policies that may ask a person.

    (`ToolPolicy` objects, not named: the policies' events carry the scope, which names
    this module's `DecisionBook`.)"""
    asking = sorted({getattr(p, "name", type(p).__name__) for p in policies if p.asks})
    if asking:
        raise UsageError(
            f"policies {asking} may ask a person (Ruling.ask), but {missing}: a pending "
            "approval must be kept in a checkpoint store to be answered"
        )


@dataclass(slots=True)
class _Entry:
    pending: PendingApproval
    answer: Approval | None = None
    applied: bool = False
    answered_at: datetime | None = None
    answered_by: str | None = None  # who, as the console that claimed the answer named them

    def frozen(self) -> BookEntry:
        return BookEntry(
            self.pending, self.answer, self.applied, self.answered_at, self.answered_by
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "pending": _PENDING.dump_python(self.pending, mode="json", by_alias=True),
            # The answer lives under its own claimed key (ANSWERS), never here.
            "answer": None,
            "applied": self.applied,
        }


def _answer_json(answer: Approval) -> dict[str, Any]:
    if isinstance(answer, Approve):
        return {"decision": "approve"}
    if isinstance(answer, Reject):
        return {"decision": "reject", "reason": answer.reason}
    return {"decision": "edit", "arguments": answer.arguments, "query": answer.query}


def _answer_kind(data: Any) -> Any:
    return data.get("decision") if isinstance(data, dict) else None


# How `_answer_json` wrote an answer, read back by pydantic into the answer itself: the
# answer classes' own checks (a reason, exactly one of arguments and query) apply.
_StoredAnswer = Annotated[
    Annotated[Approve, Tag("approve")]
    | Annotated[Reject, Tag("reject")]
    | Annotated[Edit, Tag("edit")],
    Discriminator(_answer_kind),
]


@dataclass(frozen=True, slots=True)
class _StoredEntry:
    """An `_Entry` as the store holds it (`_Entry.to_json`), read back typed."""

    pending: PendingApproval
    answer: _StoredAnswer | None
    applied: StrictBool


@dataclass(frozen=True, slots=True)
class _ClaimedAnswer:
    """An answer as `give` claims it under its own key (stage `ANSWERS`), read back typed."""

    answer: _StoredAnswer
    by: str | None = None


class DecisionBook:
    """The pending decisions of one run and the answers given to them (from the store)."""

    __slots__ = ("_entries", "_of_task", "run_id", "store")

    def __init__(self, store: CheckpointStore, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self._entries: dict[str, _Entry] = {}
        # The same entries by task, oldest first: each finished task asks for its own,
        # and a run of thousands of tasks must not walk every question for each.
        self._of_task: dict[str, list[_Entry]] = {}

    def _add(self, decision_id: str, entry: _Entry) -> None:
        self._entries[decision_id] = entry
        self._of_task.setdefault(entry.pending.task_id, []).append(entry)

    @classmethod
    async def load(cls, store: CheckpointStore, run_id: str) -> DecisionBook:
        """The run's decisions; a damaged one raises `CheckpointError` naming it."""
        book = cls(store, run_id)
        for checkpoint in await store.list(run_id, STAGE):
            stored: _StoredEntry = read_as(
                store, checkpoint, _StoredEntry, expected="a pending approval"
            )
            book._add(checkpoint.key, _Entry(stored.pending, stored.answer, stored.applied))
        for claimed in await store.list(run_id, ANSWERS):
            entry = book._entries.get(claimed.key)
            if entry is not None:
                answer: _ClaimedAnswer = read_as(
                    store, claimed, _ClaimedAnswer, expected="a claimed answer"
                )
                entry.answer, entry.answered_by = answer.answer, answer.by
                entry.answered_at = claimed.saved_at
        return book

    def answer(self, decision_id: str) -> Approval | None:
        entry = self._entries.get(decision_id)
        return None if entry is None else entry.answer

    def unanswered(self) -> tuple[PendingApproval, ...]:
        return tuple(e.pending for e in self._entries.values() if e.answer is None)

    def answered(self, task_id: str) -> tuple[tuple[PendingApproval, Approval], ...]:
        """The answered, not yet applied decisions of one task, oldest first."""
        return tuple(
            (e.pending, e.answer)
            for e in self._of_task.get(task_id, ())
            if e.answer is not None and not e.applied
        )

    def given(self, task_id: str) -> tuple[tuple[PendingApproval, Approval], ...]:
        """Every answered decision of one task, applied before or not, oldest first."""
        entries = self._of_task.get(task_id)
        if entries is None:  # most tasks: no question asked
            return ()
        return tuple((e.pending, e.answer) for e in entries if e.answer is not None)

    def escalation_id(self, task_id: str) -> str:
        """The id of the task's next escalation: one per escalation a person answered."""
        earlier = sum(
            e.pending.kind is ApprovalKind.ESCALATION for e in self._of_task.get(task_id, ())
        )
        return digest([self.run_id, task_id, "escalation", earlier])[:12]

    async def pend(self, pending: PendingApproval) -> None:
        """Save a question for a person (a question already asked keeps its answer)."""
        if pending.id in self._entries:
            return
        entry = _Entry(pending)
        await self.store.put(self.run_id, STAGE, pending.id, entry.to_json())
        self._add(pending.id, entry)

    def entries(self) -> tuple[BookEntry, ...]:
        """Every question with its answer, if any: who gave it, when, whether it was used."""
        return tuple(
            BookEntry(e.pending, e.answer, e.applied, e.answered_at, e.answered_by)
            for e in self._entries.values()
        )

    async def give(self, decisions: Mapping[str, Approval], *, by: str | None = None) -> None:
        """Check every answer, then claim each in the store, before anything runs.

        Of two callers answering one decision at once, in any processes, exactly one
        wins; the other gets an `AlreadyAnswered` naming the answer that won. Answers
        this call claimed before losing one stand. `by` names who answers (a console's).
        """
        for decision_id, answer in decisions.items():
            self._check(decision_id, answer)
        claimed: list[str] = []
        for decision_id, answer in decisions.items():
            entry = self._entries[decision_id]
            winner = await claim_in(
                self.store,
                self.run_id,
                ANSWERS,
                decision_id,
                {"answer": _answer_json(answer), **({} if by is None else {"by": by})},
                purpose=f"the answer to approval {decision_id!r}",
            )
            if winner is not None:
                won: _ClaimedAnswer = read_as(
                    self.store, winner, _ClaimedAnswer, expected="a claimed answer"
                )
                entry.answer, entry.answered_at, entry.answered_by = (
                    won.answer,
                    winner.saved_at,
                    won.by,
                )
                stand = (
                    f" This call claimed {claimed} first: those answers stand." if claimed else ""
                )
                raise AlreadyAnswered(self._taken(entry) + stand, entry=entry.frozen())
            entry.answer, entry.answered_at, entry.answered_by = answer, datetime.now(UTC), by
            claimed.append(decision_id)

    async def applied(self, task_id: str) -> None:
        """The task that used its answers has finished: they cannot be given again."""
        for decision_id, entry in self._entries.items():
            if entry.pending.task_id == task_id and entry.answer is not None and not entry.applied:
                entry.applied = True
                await self.store.put(self.run_id, STAGE, decision_id, entry.to_json())

    def _check(self, decision_id: str, answer: object) -> None:
        if not isinstance(answer, Approve | Reject | Edit):
            raise UsageError(
                f"resume(approvals=) maps approval ids to Approve(), Reject(reason) or "
                f"Edit(...); {decision_id!r} got {answer!r}"
            )
        entry = self._entries.get(decision_id)
        if entry is None:
            waiting = sorted(e.pending.id for e in self._entries.values() if e.answer is None)
            raise UsageError(
                f"resume(approvals=): run {self.run_id!r} has no pending approval "
                f"{decision_id!r}; waiting: {waiting or 'none'}"
            )
        if entry.answer is not None:
            raise AlreadyAnswered(self._taken(entry), entry=entry.frozen())
        check_edit(entry.pending, answer)

    def _taken(self, entry: _Entry) -> str:
        """Why an answered decision takes no other answer, naming the one that won."""
        assert entry.answer is not None
        when = "" if entry.answered_at is None else f" at {entry.answered_at:%Y-%m-%d %H:%M:%S} UTC"
        when = when if entry.answered_by is None else f" by {entry.answered_by!r}{when}"
        return (
            f"resume(approvals=): approval {entry.pending.id!r} was already answered: "
            f"{describe(entry.answer)}{when}. An approval is answered once; to go on with "
            f"that answer, call resume({self.run_id!r}) without it"
        )


# -- the gate in the tool path -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Go:
    """What the call goes on with after a person's answer: maybe edited arguments, and
    the pre-tool ruling on them (None: no objection; a deny still wins)."""

    arguments: dict[str, Any]
    validated: dict[str, Any]
    ruling: Ruling | None


RuleAgain = Callable[[dict[str, Any], frozenset[str]], Ruling | None]
"""The pre-tool policies run again on (maybe edited) arguments, the answered ones silent."""


class Asker(Protocol):
    """The task that asks (the engine's `TaskEngine`): who it is, and what it asked."""

    task: Task
    subagent: str
    task_id: str
    log: Any
    classifier: Classifier
    ask_counts: dict[str, int] | None
    pending_decision: ErrorEnvelope | None


async def ask_person(
    ctx: Asker,
    book: DecisionBook | None,
    tool: Tool[Any, Any],
    arguments: dict[str, Any],
    validated: dict[str, Any],
    asked: Ruling,
    rule_again: RuleAgain,
) -> Go | ErrorEnvelope:
    """Follow a policy's `ask` to a person's answer: go on, or an envelope to fail with.

    `rule_again(validated, answered)` runs the pre-tool policies again on (maybe edited)
    arguments, with the policies whose question is answered not asking again: an
    approved or edited call is never asked about forever, yet every rule still applies.
    """
    answered: set[str] = set()
    source = f"{ctx.subagent}/{tool.name}"
    current: Ruling | None = asked
    while current is not None and current.action == "ask":
        if book is None:
            raise AskWithoutStore(
                f"policy {current.policy} returned Ruling.ask for {tool.name}, but the run "
                "has no checkpoint store: give the Coordinator store= so a person can "
                "answer it (coordinator.resume)"
            )
        decision_id = _call_decision_id(ctx, book, tool.name, validated, current.policy)
        answer = book.answer(decision_id)
        if answer is None:
            return await _pend(ctx, book, decision_id, tool, validated, current, source)
        attempted = {"tool": tool.name, "arguments": recorded(arguments)}
        ctx.log.info("decision_applied", decision=decision_id, answer=type(answer).__name__)
        if isinstance(answer, Reject):
            return rejected(answer.reason, attempted, source)
        if isinstance(answer, Edit) and answer.arguments is not None:
            arguments = {**arguments, **answer.arguments}
            attempted = {"tool": tool.name, "arguments": recorded(arguments)}
            try:
                validated = await tool.avalidate(arguments)
            except pydantic.ValidationError as exc:
                return ctx.classifier.classify(
                    exc, source=source, attempted_query=attempted, attempts=0
                )
        answered.add(current.policy)
        current = rule_again(validated, frozenset(answered))
    return Go(arguments, validated, current)


def _call_decision_id(
    ctx: Asker, book: DecisionBook, tool: str, validated: dict[str, Any], policy: str
) -> str:
    """The same id for the same question in every process: run, task, call, occurrence."""
    call = [tool, digest(validated), policy]
    base = digest(call)
    counts = ctx.ask_counts
    if counts is None:  # most tasks never ask: their engines carry no dict for it
        counts = ctx.ask_counts = {}
    number = counts.get(base, 0) + 1
    counts[base] = number
    return digest([book.run_id, ctx.subagent, ctx.task_id, call, number])[:12]


async def _pend(
    ctx: Asker,
    book: DecisionBook,
    decision_id: str,
    tool: Tool[Any, Any],
    validated: dict[str, Any],
    asked: Ruling,
    source: str,
) -> ErrorEnvelope:
    # The values the tool would get (defaults included): what the person decides about.
    masked = recorded(validated)
    pending = PendingApproval(
        id=decision_id,
        kind=ApprovalKind.TOOL_CALL,
        task_id=ctx.task_id,
        subagent=ctx.subagent,
        topic=ctx.task.label,
        query=ctx.task.query,
        reason=asked.reason,
        policy=asked.policy,
        tool=tool.name,
        arguments=masked if isinstance(masked, dict) else {"arguments": masked},
        # Masked as it will be at rest: a secret's property reads "[REDACTED]" here too.
        input_schema=redact(tool.input_schema),
    )
    # Durable before the task stops: the question must outlive this process.
    await book.pend(pending)
    ctx.log.info("decision_pending", decision=decision_id, policy=asked.policy)
    envelope = ErrorEnvelope(
        error_category=ErrorCategory.PERMISSION,
        error_type=ErrorType.DECISION_PENDING,
        is_retryable=False,
        message=f"waiting for a person's approval {decision_id}: {asked.reason}",
        attempted_query={"tool": tool.name, "arguments": masked},
        source=source,
        attempts=0,
        policy=asked,
    )
    ctx.pending_decision = envelope
    return envelope


def rejected(reason: str, attempted_query: Any, source: str) -> ErrorEnvelope:
    """The envelope of a call a person rejected: never made, never retried."""
    text = f"rejected by a person: {reason}"
    return ErrorEnvelope(
        error_category=ErrorCategory.PERMISSION,
        error_type=ErrorType.REJECTED,
        is_retryable=False,
        message=text,
        attempted_query=attempted_query,
        source=source,
        attempts=0,
        policy=Ruling(action="deny", reason=text, policy=PERSON),
    )
