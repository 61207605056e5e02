"""What a run keeps in its store so that another process can resume it after a person's
approvals: the plan (which task went to which subagent, under which id), each finished
task's record, and the approvals (`agentmesh._engine._human`).

Layout, stage `agentmesh.run`: key `plan` holds `[{taskId, task, subagent, masked}]`;
key `record/<task id>` a finished task's `TaskRecord` (secrets masked, as everything at
rest). `masked` says the stored task differs from the one given (secrets were masked):
such a task never runs again from the store alone, only with its original
(`resume(tasks=)`). A new plan under a run id replaces the old plan with its records and
approvals: task ids repeat from run to run (task-0, task-1, ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any, ClassVar, Final, cast

from pydantic import AfterValidator, ConfigDict, StrictBool, TypeAdapter
from pydantic.alias_generators import to_camel

from agentmesh._codec import read_as
from agentmesh._engine._at_rest import (
    compact_plan,
    compact_record,
    expanded_plan,
    expanded_record,
    usual_record,
)
from agentmesh._engine._human import ANSWERS, DecisionBook
from agentmesh._engine._human import STAGE as DECISIONS
from agentmesh._engine._saved_progress import FOLDED_KEY
from agentmesh._engine._writes import writes_behind
from agentmesh._redaction import redact, redact_data
from agentmesh.approvals import Approval, ApprovalKind, Approve, Edit, PendingApproval, Reject
from agentmesh.checkpoints import CheckpointStore
from agentmesh.coordinator._answers import answered
from agentmesh.envelope import ErrorEnvelope, Outcome, Success
from agentmesh.errors import UsageError
from agentmesh.events import ApprovalApplied
from agentmesh.report import CoverageStatus, Escalate, Route, Step, TaskRecord
from agentmesh.scope import RunScope
from agentmesh.subagents import Subagent
from agentmesh.task import Task

__all__ = [
    "Plan",
    "Redo",
    "flush",
    "load_plan",
    "load_records",
    "opening",
    "originals",
    "refuse_masked",
    "save_plan",
    "settle",
    "stored",
]

STAGE: Final = "agentmesh.run"
_PLAN: Final = "plan"
_TASK: Final[TypeAdapter[Task]] = TypeAdapter(Task)
_TASKS: Final[TypeAdapter[list[Task]]] = TypeAdapter(
    list[Task], config=ConfigDict(defer_build=True)
)

Job = tuple[str, Task, Subagent]


@dataclass(frozen=True, slots=True)
class Redo:
    """A task to run again after a person's answer: from this task, after these steps."""

    task: Task
    steps: tuple[Step, ...]


@dataclass(frozen=True, slots=True)
class Plan:
    """A run's plan as the store holds it: its jobs, and the tasks stored masked."""

    jobs: tuple[Job, ...]
    masked: frozenset[str]


async def save_plan(store: CheckpointStore, run_id: str, jobs: Sequence[Job]) -> None:
    # The old plan's records and questions go first: under the same task ids they would
    # be taken for this plan's. Deleted before the new plan is written, so a crash in
    # between leaves no plan at all rather than a new plan with old records.
    await store.delete(run_id, STAGE)
    await store.delete(run_id, DECISIONS)
    await store.delete(run_id, ANSWERS)
    await store.put(run_id, STAGE, _PLAN, _planned(jobs))


def _planned(jobs: Sequence[Job]) -> list[dict[str, Any]]:
    """The plan's jobs as JSON data, each task with secrets masked (and saying so)."""
    ids: list[str] = []
    names: list[str] = []
    tasks: list[dict[str, Any] | None] = []
    others: list[Task] = []
    for task_id, task, subagent in jobs:  # one pass: a plan may build its jobs as it goes
        ids.append(task_id)
        names.append(subagent.name)
        # A task that is only its query (most) as its JSON without defaults, directly.
        only_query = type(task) is Task and task.topic is None and task.subagent is None
        if only_query and not task.metadata and task.feedback is None and task.id is None:
            tasks.append({"query": task.query})
        else:
            tasks.append(None)
            others.append(task)
    if others:
        # The others in one dump without the fields at their defaults (the reader fills
        # them in again): one call for the plan, not one per task.
        dumped = iter(_TASKS.dump_python(others, mode="json", exclude_defaults=True))
        tasks = [next(dumped) if data is None else data for data in tasks]
    plan = compact_plan(zip(ids, cast(list[dict[str, Any]], tasks), names, strict=True))
    clean = redact_data(plan) is plan  # one screening of the whole plan: most hold no secret
    if clean:
        return plan
    for entry in plan:
        kept = redact_data(entry["task"])
        if kept != entry["task"]:
            entry["task"], entry["masked"] = kept, True
    return plan


async def load_plan(store: CheckpointStore, run_id: str, subagents: dict[str, Subagent]) -> Plan:
    saved = await store.get(run_id, STAGE, _PLAN)
    if saved is None:
        raise UsageError(
            f"resume(run_id={run_id!r}): {store!r} holds no plan of that run; "
            "run it first with Coordinator(store=...).run(tasks, run_id=...)"
        )
    jobs: list[Job] = []
    masked: set[str] = set()
    items: list[_PlannedJob] = read_as(
        store, saved, list[_PlannedJob], part=expanded_plan(saved.value), expected="a run's plan"
    )
    for item in items:
        if item.subagent not in subagents:
            raise UsageError(
                f"resume(run_id={run_id!r}): the run's task {item.task_id} went to subagent "
                f"{item.subagent!r}, which this Coordinator does not have; "
                f"known: {sorted(subagents)}"
            )
        jobs.append((item.task_id, item.task, subagents[item.subagent]))
        if item.masked:
            masked.add(item.task_id)
    return Plan(tuple(jobs), frozenset(masked))


def _has_steps(record: TaskRecord) -> TaskRecord:
    if not record.steps:
        raise ValueError("a task's record has at least one step")
    return record


_StoredRecord = Annotated[TaskRecord, AfterValidator(_has_steps)]
"""A `TaskRecord` as `stored` saved it: a finished task took at least one step."""


@dataclass(frozen=True, slots=True)
class _PlannedJob:
    """One job of a plan as `save_plan` stores it, read back typed."""

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(
        alias_generator=to_camel, populate_by_name=True
    )

    task_id: str
    task: Task
    subagent: str
    masked: StrictBool = False


def originals(plan: Plan, given: Sequence[Job], run_id: str) -> list[Job]:
    """The run's jobs with the caller's original tasks, once they match the stored plan."""
    mine = [(task_id, sub.name, task) for task_id, task, sub in plan.jobs]
    theirs = [(task_id, sub.name, _masked(task)) for task_id, task, sub in given]
    for index in range(max(len(mine), len(theirs))):
        if index < min(len(mine), len(theirs)) and mine[index] == theirs[index]:
            continue
        where = (mine if index < len(mine) else theirs)[index][0]
        raise UsageError(
            f"resume(tasks=) must be the tasks run {run_id!r} was started with "
            f"({len(mine)} jobs); they differ from its plan at {where}"
        )
    return list(given)


def _masked(task: Task) -> Task:
    return _TASK.validate_python(redact(_TASK.dump_python(task, mode="json")))


def refuse_masked(
    plan: Plan, saved: dict[str, TaskRecord], book: DecisionBook, run_id: str
) -> None:
    """Refuse a resume that would run a task on the masked values of its stored plan."""
    if not plan.masked:
        return
    again = [
        task_id
        for task_id, task, _sub in plan.jobs
        if task_id in plan.masked and _runs_again(saved.get(task_id), book, task)
    ]
    if again:
        raise UsageError(
            f"resume(run_id={run_id!r}): task(s) {again} would run again, but the plan "
            "holds them with secrets masked; pass the run's original tasks with "
            f"resume({run_id!r}, tasks=...); the approvals given are claimed and stand, "
            "so give them no more"
        )


def _runs_again(record: TaskRecord | None, book: DecisionBook, task: Task) -> bool:
    if record is None:
        return True  # never finished: it runs from the start
    answers = book.answered(record.task_id)
    return bool(answers) and isinstance(settle(record, answers, task), Redo)


async def load_records(store: CheckpointStore, run_id: str, plan: Plan) -> dict[str, TaskRecord]:
    """The run's finished tasks; a damaged record raises `CheckpointError` naming it."""
    jobs = {task_id: (task, sub.name) for task_id, task, sub in plan.jobs}
    records: dict[str, TaskRecord] = {}
    for saved in await store.list(run_id, STAGE):
        if not saved.key.startswith("record/"):
            continue
        task_id = saved.key.removeprefix("record/")
        task, subagent = jobs.get(task_id, (None, None))
        value = expanded_record(saved.value, task_id, task, subagent)
        records[task_id] = read_as(
            store, saved, _StoredRecord, part=value, expected="a task's record"
        )
    return records


async def stored(
    scope: RunScope,
    store: CheckpointStore,
    record: TaskRecord,
    decision: Route | None,
    outcome: Outcome | None,
    planned: Task | None = None,
) -> TaskRecord:
    """Keep a finished task of the run `scope` carries: an escalation becomes a pending
    decision in its book, answers used are spent (each in the record, and an
    `ApprovalApplied` event), and the record is saved for a later resume, superseding
    the task's progress not saved yet. Returns the record to report.

    `planned`: the task as the run's plan has it, which the record then need not repeat.
    """
    book, events, progress = scope.decisions, scope.events, scope.saved_progress
    if book is None:
        raise UsageError("a run's records are kept with its book of decisions: none is open")
    if isinstance(decision, Escalate) and outcome is not None and not _asked(outcome):
        pending = PendingApproval(
            id=book.escalation_id(record.task_id),
            kind=ApprovalKind.ESCALATION,
            task_id=record.task_id,
            subagent=record.subagent,
            topic=record.task.label,
            query=record.steps[-1].query,
            reason=decision.reason,
            policy="router" if outcome.policy is None else outcome.policy.policy,
        )
        await book.pend(pending)
        reason = f"waiting for a person's approval {pending.id}: {decision.reason}"
        record = TaskRecord(
            record.task_id, record.task, record.subagent, record.steps, record.status, reason
        )
    given = book.given(record.task_id)
    if given:  # most tasks had no answer: nothing to spend
        fresh = {pending.id for pending, _answer in book.answered(record.task_id)}
        # Every answer the task used, those of earlier resumes too: the record is replaced.
        answers = tuple(answered(pending, answer) for pending, answer in given)
        record = replace(record, answers=answers)
        if events is not None:
            for answer in answers:
                if answer.id in fresh:
                    events.emit(
                        ApprovalApplied, record.task_id, subagent=answer.subagent, approval=answer
                    )
        await book.applied(record.task_id)
    # A record a person's answer or question touched is saved at once, in step with the
    # decisions; any other is written behind (`_keep`).
    asked = isinstance(decision, Escalate) or (outcome is not None and _asked(outcome))
    at_once = bool(given) or asked
    carried = None
    if progress is not None and not at_once and isinstance(record.final, Success):
        # The record written behind carries the task's progress not queued yet.
        carried = progress.superseded(record.steps[-1].subagent, record.task_id)
    await _keep(store, book.run_id, record, planned, at_once=at_once, progress=carried)
    return record


async def _keep(
    store: CheckpointStore,
    run_id: str,
    record: TaskRecord,
    planned: Task | None,
    at_once: bool,
    progress: dict[str, Any] | None = None,
) -> None:
    """Save a finished task's record; unless `at_once`, written behind when the store can:
    queued for its next batch, committed before the run reports (`flush`). A process
    killed before that runs those tasks again when resumed (their side effects are
    claimed in the ledger at once, and never made twice)."""
    planned_task = record.task is planned or record.task == planned
    data = usual_record(record, planned_task)
    if data is None:
        # The plan's subagent for the task is the record's: a task keeps its subagent.
        data = redact_data(compact_record(record, record.subagent, planned_task))
    if progress is not None:
        data[FOLDED_KEY] = redact_data(progress)  # masked as a part of the record would be
    key = f"record/{record.task_id}"
    behind = None if at_once else writes_behind(store)
    if behind is None or not behind.put_behind(run_id, STAGE, key, data):
        await store.put(run_id, STAGE, key, data)


async def flush(store: CheckpointStore, scope: RunScope) -> None:
    """Wait until every record and every task's progress written behind is committed
    (raising a failure of a record the run wrote)."""
    if scope.saved_progress is not None:
        await scope.saved_progress.committed()
    behind = writes_behind(store)
    if behind is not None:
        await behind.flush(scope.run_id)


def _asked(outcome: Outcome) -> bool:
    """Whether the outcome already waits for a person: a policy's ask in the tool path."""
    return outcome.policy is not None and outcome.policy.action == "ask"


def settle(
    saved: TaskRecord, answers: Sequence[tuple[PendingApproval, Approval]], task: Task
) -> TaskRecord | Redo:
    """A waiting task after a person's answers: a final record, or `task` to run again.

    An answered question about a call is answered where the call is made: the task runs
    again (its completed side effects are replayed from the ledger, not repeated). An
    escalated task runs again only with an edited query: approving an escalated failure
    accepts it, as rejecting it does, for running it again would escalate it again.
    """
    last = saved.steps[-1]
    for pending, answer in answers:
        if pending.kind is ApprovalKind.TOOL_CALL:
            return Redo(task.with_query(_last_query(task, last.query)), saved.steps)
        if isinstance(answer, Reject):
            why = f"rejected by a person: {answer.reason}"
            return _final(saved, "Reject", why, CoverageStatus.GAP)
        if isinstance(answer, Edit) and answer.query is not None:
            return Redo(task.with_query(answer.query), saved.steps)
        assert isinstance(answer, Approve)
        if isinstance(last.outcome, Success):
            status = CoverageStatus.EMPTY if last.outcome.is_empty else CoverageStatus.COVERED
            return _final(saved, "Approve", "approved by a person", status)
        why = f"failure accepted by a person (escalated: {pending.reason})"
        return _final(saved, "Approve", why, _failed(saved))
    return saved


def _last_query(task: Task, stored: str) -> str:
    """The query the task was at: the original's own when the step holds it masked."""
    return task.query if redact(task.query) == stored else stored


def _failed(saved: TaskRecord) -> CoverageStatus:
    """A failure that ends the task: `partial` when some step recorded progress."""
    for step in saved.steps:
        found = step.outcome.partial_results if isinstance(step.outcome, ErrorEnvelope) else None
        if found is not None and (found.findings or found.completed):
            return CoverageStatus.PARTIAL
    return CoverageStatus.GAP


def _final(saved: TaskRecord, decision: str, reason: str, status: CoverageStatus) -> TaskRecord:
    last = saved.steps[-1]
    step = Step(last.subagent, last.query, last.outcome, decision, reason)
    # Covered too: the entry says a person approved it, not only that it was answered.
    return replace(saved, steps=(*saved.steps, step), status=status, reason=reason)


async def opening(
    store: CheckpointStore,
    subagents: dict[str, Subagent],
    run_id: str,
    decisions: dict[str, Approval],
    given: Sequence[Job] | None,
) -> tuple[list[Job], DecisionBook, dict[str, TaskRecord]]:
    """What a resume starts from: the plan, the decisions given (saved) and the records."""
    plan = await load_plan(store, run_id, subagents)
    jobs = list(plan.jobs) if given is None else originals(plan, given, run_id)
    book = await DecisionBook.load(store, run_id)
    await book.give(decisions)
    saved = await load_records(store, run_id, plan)
    if given is None:
        refuse_masked(plan, saved, book, run_id)
    return jobs, book, saved
