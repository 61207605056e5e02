"""`Run`: one run of a coordinator, from its plan to its report.

It executes the plan with a pool of workers (each task a `TaskFlow`), fills in what a
resume does not run again, synthesizes the report, and reports a run stopped early.
A `RunStream` drives it; `Coordinator.run()` is that stream drained.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from itertools import chain, compress, repeat
from operator import attrgetter, is_, is_not
from typing import Any, cast

from agentmesh._engine._attempts import propagates
from agentmesh._engine._human import DecisionBook
from agentmesh._engine._model_calls import is_usage_refusal
from agentmesh._engine._saved_progress import SavedProgress
from agentmesh._logging import get_logger, logs_info
from agentmesh._tracing import span, tracing
from agentmesh.classify import default_classifier
from agentmesh.coordinator._flow import TaskFlow
from agentmesh.coordinator._helper_models import HelperModels
from agentmesh.coordinator._llm_synthesizer import LLMSynthesizer
from agentmesh.coordinator._plan import Job
from agentmesh.coordinator._resume import STAGE, Redo, flush, save_plan, settle, stored
from agentmesh.coordinator._state import Hub, RunState
from agentmesh.coordinator._synthesis import DeterministicSynthesizer
from agentmesh.envelope import Outcome, Success
from agentmesh.events import EventSink, RunFinished, RunStarted
from agentmesh.report import CoverageStatus, Report, TaskRecord, UsageStop
from agentmesh.retry import RetryBudget
from agentmesh.scope import RunScope
from agentmesh.usage import UsageMeter

__all__ = ["Run"]

_STEPS, _USAGE = attrgetter("steps"), attrgetter("outcome.usage")


class Run:
    """One run of `hub`'s configuration, named `run_id`; it starts at `begin()`."""

    __slots__ = ("_state", "hub", "run_id")

    def __init__(self, hub: Hub, run_id: str) -> None:
        self.hub = hub
        self.run_id = run_id
        self._state: RunState | None = None

    def begin(self, events: EventSink | None, book: DecisionBook | None = None) -> None:
        """Make the run's shared parts, its deadline counted from now."""
        hub, limits = self.hub, self.hub.limits
        at = None if limits.timeout is None else asyncio.get_running_loop().time() + limits.timeout
        budget = hub.retry_budget if hub.retry_budget is not None else RetryBudget()
        # One scope per run: what all of its tasks share (see `agentmesh.scope`).
        scope = RunScope(
            self.run_id,
            budget=budget,
            usage=UsageMeter(limits.usage, hub.prices),
            policies=hub.policies,
            store=hub.store,
            decisions=book,
            events=events,
            model_health=hub.model_health,
        )
        log = get_logger(run_id=self.run_id)
        self._state = RunState(
            hub=hub,
            at=at,
            slots=asyncio.Semaphore(limits.concurrency),
            log=log,
            info=logs_info(log),
            default_success_row=hub.default_success_row,
            scope=scope,
            helpers=HelperModels(scope, at),
        )

    @property
    def state(self) -> RunState:
        assert self._state is not None, "Run.begin() first"
        return self._state

    async def execute(
        self, jobs: Sequence[Job], saved: dict[str, TaskRecord] | None = None
    ) -> Report:
        """Run every job to a final route and return the report (in a span of its own)."""
        run, store = self.state, self.hub.store
        with span("run", run_id=self.run_id) as current:
            if store is not None and self._checkpoints():
                # One listing of the run's saved progress instead of one read per task.
                run.scope.saved_progress = await SavedProgress.listed(store, self.run_id, STAGE)
            if store is not None and run.book is None:
                # What a resume in another process needs: the plan, then the decisions.
                await save_plan(store, self.run_id, jobs)
                run.scope.decisions = await DecisionBook.load(store, self.run_id)
            report = await self._execute(jobs, saved)
            if current is not None:
                current.set_attributes(
                    {
                        "agentmesh.coverage.ratio": report.coverage_ratio,
                        "agentmesh.coverage.sufficient": report.sufficient,
                        "agentmesh.tasks": len(report.coverage),
                    }
                )
            return report

    def _checkpoints(self) -> bool:
        """Whether a subagent of the run saves its progress (`checkpoint=True`)."""
        hub = self.hub
        subagents = chain(hub.subagents.values(), hub.alternative_subagents.values())
        return any(subagent.checkpoint for subagent in subagents)

    async def _execute(self, jobs: Sequence[Job], saved: dict[str, TaskRecord] | None) -> Report:
        run = self.state
        log, events = run.log, run.events
        log.info("run_started", tasks=len(jobs), subagents=list(self.hub.subagents))
        if events is not None:
            events.emit(RunStarted, None, tasks=len(jobs), subagents=tuple(self.hub.subagents))
        # Each task writes its record into its own slot, so no finished asyncio.Task (its
        # coroutine, context and weak reference) is kept until the end of the run.
        records: list[TaskRecord | None] = [None] * len(jobs)
        run.records = records
        if saved is not None:
            await self._fill_resumed(jobs, saved)
        await self._pool(jobs)
        del jobs
        if self.hub.store is not None:
            await flush(self.hub.store, run.scope)  # every record committed before the report
        report = await self._synthesize(cast(list[TaskRecord], records))
        if run.book is not None:
            report = report.model_copy(update={"pending_approvals": run.book.unanswered()})
        report = self._with_helper_usage(report)
        report = self._with_usage_stop(report)
        report = self._with_model_concurrency(report)
        log.info(
            "run_finished",
            entries=len(report.coverage),
            coverage=round(report.coverage_ratio, 4),
            sufficient=report.sufficient,
            retries=run.scope.budget.retries if run.scope.budget else 0,
            retries_denied=run.scope.budget.denied if run.scope.budget else 0,
        )
        if events is not None:
            events.emit(RunFinished, None, report=report)
        return report

    async def _pool(self, jobs: Sequence[Job]) -> None:
        """Every job not recorded yet, followed by a pool of workers; a bug raised as is."""
        run = self.state
        # Lazy as a generator, but in C: no bytecode per job. A record is read as its job is.
        queue = compress(enumerate(jobs), map(is_, run.records, repeat(None)))
        to_run = run.records.count(None)
        bug: BaseException | None = None
        try:
            async with asyncio.TaskGroup() as group:
                # A pool of workers pulling jobs, not an asyncio Task per job: 10,000 queued
                # jobs are 10,000 tuples, and a Task with its scheduling costs more than
                # the bookkeeping of the job it runs.
                for _ in range(min(self.hub.limits.concurrency, to_run)):
                    group.create_task(self._worker(queue))
        except ExceptionGroup as escaped:
            # Only what must not become an envelope gets here (a bug in strict mode): the
            # caller gets that exception, with its traceback, not the group's wrapper.
            if len(escaped.exceptions) != 1:
                raise
            bug = escaped.exceptions[0]
        if bug is not None:
            # Raised outside the handler: the user's own cause and context stay as they were.
            raise bug

    async def _worker(self, queue: Iterator[tuple[int, Job]]) -> None:
        """Take the next job once a slot is free for its first dispatch; until none is left."""
        run = self.state
        traced = tracing()
        while True:
            await run.slots.acquire()
            index, job = next(queue, (-1, None))
            if job is None:
                run.slots.release()
                return
            task_id, task, subagent = job
            flow = TaskFlow(run, index, task_id, task, subagent)
            # Without tracing, no span to open: one coroutine less per job in flight.
            await (flow.follow_traced() if traced else flow.follow())

    async def _fill_resumed(self, jobs: Sequence[Job], saved: dict[str, TaskRecord]) -> None:
        """Fill the slots of the tasks a resume does not run again; note what goes on how."""
        run, store = self.state, self.hub.store
        book = run.book
        assert book is not None
        assert store is not None
        for index, (task_id, task, _sub) in enumerate(jobs):
            record = saved.get(task_id)
            if record is None:
                continue  # never finished (the process stopped): it runs again
            answers = book.answered(task_id)
            settled = settle(record, answers, task) if answers else record
            if isinstance(settled, Redo):
                run.redo[index] = settled
                continue
            if answers:
                settled = await stored(run.scope, store, settled, None, None, task)
                run.log.info("decision_settled", task_id=task_id, status=settled.status.value)
            run.records[index] = settled

    async def stopped_report(self, jobs: Sequence[Job], reason: str) -> Report:
        """The report of a run stopped early: every task, each unfinished one a gap.

        An unfinished task keeps its steps so far and the progress it had recorded (a
        `partial` entry when there is some). Deterministic synthesis: no model is
        called for a run that its caller stopped.
        """
        run = self.state
        if self.hub.store is not None:
            await flush(self.hub.store, run.scope)  # the finished tasks' records committed
        records: list[TaskRecord] = []
        unfinished = 0
        for index, (task_id, task, subagent) in enumerate(jobs):
            record = run.records[index] if index < len(run.records) else None
            if record is None:
                unfinished += 1
                flow = run.active.get(index) or TaskFlow(run, index, task_id, task, subagent)
                record = flow.stop(reason)
            records.append(record)
        report = await DeterministicSynthesizer().synthesize(
            records, run_id=self.run_id, min_coverage=self.hub.limits.min_coverage
        )
        note = f"Run stopped early: {unfinished} of {len(jobs)} tasks unfinished ({reason})."
        update: dict[str, Any] = {"synthesis_note": note}
        if run.book is not None:
            # The questions asked before the stop are in the store: the report names them.
            update["pending_approvals"] = run.book.unanswered()
        return self._with_helper_usage(report.model_copy(update=update))

    async def _synthesize(self, records: list[TaskRecord]) -> Report:
        """The synthesizer's report; the deterministic one, saying why, if it fails or is late.

        Every result is in `records` already: a broken or slow synthesizer must not cost
        them, nor hold the run past its deadline.
        """
        run, synthesizer = self.state, self.hub.synthesizer
        min_coverage = self.hub.limits.min_coverage
        try:
            async with asyncio.timeout_at(run.at):
                if isinstance(synthesizer, LLMSynthesizer):
                    # Its model call is the run's: admitted by its limits, counted in its report.
                    return await synthesizer._synthesize(
                        records, self.run_id, min_coverage, run.helpers
                    )
                return await synthesizer.synthesize(
                    records, run_id=self.run_id, min_coverage=min_coverage
                )
        except BaseException as exc:
            # A stray CancelledError or another BaseException of a custom synthesizer too;
            # the run's own cancellation and interrupts go on.
            if isinstance(synthesizer, DeterministicSynthesizer) or propagates(
                exc, default_classifier, user_code=False
            ):
                raise
            reason = "the run's deadline passed" if isinstance(exc, TimeoutError) else repr(exc)
            run.log.error("synthesis_failed", error=reason)
            report = await DeterministicSynthesizer().synthesize(
                records, run_id=self.run_id, min_coverage=min_coverage
            )
            note = (
                f"Summary unavailable: the synthesizer failed ({reason}) — "
                "deterministic synthesis used."
            )
            return report.model_copy(update={"synthesis_note": note})

    def _with_model_concurrency(self, report: Report) -> Report:
        """The report, with the calls in flight each model's window settled at."""
        # `report.usage is None`, asked in C (no bytecode per step) instead of summed.
        steps = chain.from_iterable(map(_STEPS, report.records))
        if not report.helper_usage and not any(map(is_not, map(_USAGE, steps), repeat(None))):
            return report  # no model called: none to show (and the health is not made)
        used = report.usage_by_model
        settled = {
            name: size
            for name, size in self.state.scope.model_health.concurrency().items()
            if name in used  # a health shared with other runs knows their models too
        }
        return report.model_copy(update={"model_concurrency": settled}) if settled else report

    def _with_helper_usage(self, report: Report) -> Report:
        """The report with what the coordinator's own helpers' model calls used, if any."""
        usage = self.state.helpers.usage()
        return report.model_copy(update={"helper_usage": usage}) if usage else report

    def _with_usage_stop(self, report: Report) -> Report:
        """The report saying how far the run got, when a run-wide usage limit stopped it."""
        meter = self.state.scope.usage
        if meter.stop is None:
            return report
        limit, reason = meter.stop
        covered = not_started = stopped = 0
        for record in report.records:
            if record.status in (CoverageStatus.COVERED, CoverageStatus.EMPTY):
                covered += 1
            elif is_usage_refusal(record.final):
                if any(_did_work(step.outcome) for step in record.steps):
                    stopped += 1
                else:
                    not_started += 1
        limits = meter.limits
        cap = None if limits is None else limits.max_cost_usd
        stop = UsageStop(
            limit=limit,
            reason=reason,
            tasks=len(report.records),
            covered=covered,
            not_started=not_started,
            stopped=stopped,
            spent_usd=meter.total().cost_usd,
            cap_usd=cap,
            hard=limits is not None and limits.hard,
        )
        self.state.log.info("usage_stopped_run", how_far=stop.headline())
        return report.model_copy(update={"usage_stop": stop})

    def __repr__(self) -> str:
        return f"<Run {self.run_id}>"


def _did_work(outcome: Outcome) -> bool:
    """Whether an attempt got anywhere: an answer, a model call counted, partial results."""
    if isinstance(outcome, Success):
        return True
    return outcome.usage is not None or outcome.partial_results is not None
