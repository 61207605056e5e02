"""What the console shows of a run, read from its checkpoint store alone.

A coordinator with a store keeps, under stage `agentmesh.run`, the run's plan and each
finished task's record (`agentmesh.coordinator`), and its questions for a person in a
`DecisionBook`. The report is rebuilt from the records by the deterministic synthesis
(a model-written summary is not kept in the store); unfinished tasks are in the plan.

A run's status is read from those: a question unanswered is `waiting for a person`; an
answer not yet used, `answered, waiting to resume`; every task finished, `finished`;
otherwise `running`, or `stopped`: a run whose event log (`agentmesh.events.EventLog`)
has no `RunFinished` after its last start and no event for `stale_after` seconds. A run
written without an event log is `stopped` when nothing was saved for that long.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import ClassVar, Final

from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

from agentmesh._codec import read_as
from agentmesh._engine._at_rest import expanded_plan, expanded_record
from agentmesh._engine._human import DecisionBook
from agentmesh.approvals import Approval, PendingApproval
from agentmesh.checkpoints import CheckpointStore, RunStamp, event_table_of
from agentmesh.coordinator import DeterministicSynthesizer
from agentmesh.errors import UsageError
from agentmesh.events import EventLogPage, read_events
from agentmesh.report import CoverageStatus, Report, TaskRecord
from agentmesh.task import Task

__all__ = [
    "ApprovalState",
    "PlannedTask",
    "RunStatus",
    "RunSummary",
    "RunView",
    "list_runs",
    "load_run",
    "run_stamps",
]

# The coordinator's layout in the store (agentmesh/coordinator/_resume.py).
RUN_STAGE: Final = "agentmesh.run"
_PLAN: Final = "plan"
_RECORD: Final = "record/"
STALE_AFTER: Final = 900.0


class RunStatus(enum.StrEnum):
    """Where a run stands, as the store shows it."""

    RUNNING = "running"
    WAITING = "waiting for a person"
    ANSWERED = "answered, waiting to resume"
    FINISHED = "finished"
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class PlannedTask:
    """One task of a run's plan: its id, topic and the subagent it went to."""

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(
        alias_generator=to_camel, populate_by_name=True
    )

    task_id: str
    task: Task
    subagent: str


@dataclass(frozen=True, slots=True)
class ApprovalState:
    """A question for a person and its answer, if any: who gave it, when, whether used."""

    pending: PendingApproval
    answer: Approval | None
    answered_by: str | None
    answered_at: datetime | None
    applied: bool


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One line of the runs page."""

    run_id: str
    started: datetime
    updated: datetime
    status: RunStatus
    tasks: int
    finished: int
    covered: int  # finished tasks answered: covered or empty
    waiting: int  # questions nobody answered yet
    cost_usd: float | None  # what the model calls of the finished tasks cost; None: unknown

    @property
    def coverage(self) -> float | None:
        """The share of planned tasks answered (covered or empty); None without tasks."""
        return None if not self.tasks else self.covered / self.tasks


@dataclass(frozen=True, slots=True)
class RunView:
    """Everything the run page shows: the summary, the plan, the report, the questions."""

    summary: RunSummary
    plan: tuple[PlannedTask, ...]
    report: Report
    approvals: tuple[ApprovalState, ...]

    @property
    def unfinished(self) -> tuple[PlannedTask, ...]:
        """The planned tasks that have no record yet."""
        done = {record.task_id for record in self.report.records}
        return tuple(task for task in self.plan if task.task_id not in done)


async def list_runs(
    store: CheckpointStore,
    *,
    page: int = 1,
    per_page: int = 25,
    stale_after: float = STALE_AFTER,
) -> tuple[tuple[RunSummary, ...], bool]:
    """One page of the store's coordinator runs, newest first, and whether more follow."""
    if type(page) is not int or page < 1 or type(per_page) is not int or per_page < 1:
        raise UsageError(f"list_runs(page=, per_page=) take ints >= 1, got {page}, {per_page}")
    stamps = await run_stamps(store, limit=per_page + 1, offset=(page - 1) * per_page)
    summaries = []
    for stamp in stamps[:per_page]:
        view = await _view(store, stamp, stale_after)
        if view is not None:
            summaries.append(view.summary)
    return tuple(summaries), len(stamps) > per_page


async def run_stamps(store: CheckpointStore, *, limit: int, offset: int = 0) -> Sequence[RunStamp]:
    """The store's coordinator runs (those with a plan), newest first."""
    runs = getattr(store, "runs", None)
    if runs is None:
        raise UsageError(f"{store!r} cannot list its runs: use SQLiteStore or PostgresStore")
    stamps: Sequence[RunStamp] = await runs(stage=RUN_STAGE, limit=limit, offset=offset)
    return stamps


async def load_run(
    store: CheckpointStore, run_id: str, *, stale_after: float = STALE_AFTER
) -> RunView | None:
    """The run `run_id` as the store holds it, or None when it holds no plan of it."""
    checkpoints = await store.list(run_id)
    if not checkpoints:
        return None
    times = [checkpoint.saved_at for checkpoint in checkpoints]
    return await _view(store, RunStamp(run_id, min(times), max(times)), stale_after)


async def _view(store: CheckpointStore, stamp: RunStamp, stale_after: float) -> RunView | None:
    saved = await store.get(stamp.run_id, RUN_STAGE, _PLAN)
    if saved is None:
        return None
    # At rest, plan and records leave out what can be derived (`_at_rest`): expanded first.
    plan: list[PlannedTask] = read_as(
        store, saved, list[PlannedTask], part=expanded_plan(saved.value), expected="a run's plan"
    )
    planned = {task.task_id: task for task in plan}
    found: dict[str, TaskRecord] = {}
    for c in await store.list(stamp.run_id, RUN_STAGE):
        if not c.key.startswith(_RECORD):
            continue
        task_id = c.key.removeprefix(_RECORD)
        known = planned.get(task_id)
        value = expanded_record(
            c.value,
            task_id,
            None if known is None else known.task,
            None if known is None else known.subagent,
        )
        found[task_id] = read_as(store, c, TaskRecord, part=value, expected="a task's record")
    records = [found[task.task_id] for task in plan if task.task_id in found]
    head = await _log_head(store, stamp.run_id)
    book = await DecisionBook.load(store, stamp.run_id)
    approvals = tuple(
        ApprovalState(e.pending, e.answer, e.answered_by, e.answered_at, e.applied)
        for e in book.entries()
    )
    report = await DeterministicSynthesizer().synthesize(
        records, run_id=stamp.run_id, min_coverage=None
    )
    report = report.model_copy(update={"pending_approvals": book.unanswered()})
    usage = report.usage
    updated = stamp.last_saved
    if head is not None:
        assert head.last_event_at is not None
        updated = max(updated, head.last_event_at)
    summary = RunSummary(
        run_id=stamp.run_id,
        started=stamp.first_saved,
        updated=updated,
        status=_status(len(plan), len(records), approvals, updated, stale_after, head),
        tasks=len(plan),
        finished=len(records),
        covered=sum(
            e.status in (CoverageStatus.COVERED, CoverageStatus.EMPTY) for e in report.coverage
        ),
        waiting=sum(state.answer is None for state in approvals),
        cost_usd=0.0 if usage is None else usage.cost_usd,  # no model call costs nothing
    )
    return RunView(summary, tuple(plan), report, approvals)


async def _log_head(store: CheckpointStore, run_id: str) -> EventLogPage | None:
    """Where the run's event log stands, or None: no log, or a store of the user's own
    that keeps none."""
    if event_table_of(store) is None:
        return None
    head = await read_events(store, run_id, limit=0)
    return None if head.last_event_at is None else head


def _status(
    tasks: int,
    finished: int,
    approvals: Sequence[ApprovalState],
    updated: datetime,
    stale_after: float,
    head: EventLogPage | None,
) -> RunStatus:
    if any(state.answer is None for state in approvals):
        return RunStatus.WAITING
    if any(not state.applied for state in approvals):
        return RunStatus.ANSWERED
    if head is not None and head.finished:
        return RunStatus.FINISHED  # its log ends with RunFinished
    if head is None and finished >= tasks:
        return RunStatus.FINISHED  # written without an event log: its records say
    idle = (datetime.now(UTC) - updated).total_seconds()
    return RunStatus.RUNNING if idle < stale_after else RunStatus.STOPPED
