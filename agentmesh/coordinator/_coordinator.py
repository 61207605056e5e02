"""The Coordinator: concurrent dispatch, a decision for every envelope, an honest report."""

from __future__ import annotations

import asyncio
import functools
import inspect
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias, cast

from pydantic import ConfigDict, TypeAdapter

from agentmesh._engine._attempts import propagates
from agentmesh._engine._human import AskWithoutStore, DecisionBook
from agentmesh._engine._model_calls import is_usage_refusal, usage_limit_envelope
from agentmesh._logging import get_logger, logs_info
from agentmesh._numbers import number, whole
from agentmesh._tracing import record_outcome, span, tracing
from agentmesh.checkpoints import CheckpointStore
from agentmesh.classify import default_classifier
from agentmesh.coordinator._helper_models import HelperModels
from agentmesh.coordinator._llm_helpers import LLMRewriter, LLMSynthesizer
from agentmesh.coordinator._plan import Job, OneEach
from agentmesh.coordinator._resume import (
    Redo,
    check_asks,
    load_plan,
    load_records,
    originals,
    refuse_masked,
    save_plan,
    settle,
    stored,
)
from agentmesh.coordinator._router import Rewriter, RouteContext, Router, RouterLike
from agentmesh.coordinator._synthesis import DeterministicSynthesizer, Synthesizer, coverage_entry
from agentmesh.decisions import HumanDecision
from agentmesh.envelope import (
    ErrorCategory,
    ErrorEnvelope,
    ErrorType,
    Outcome,
    PartialResults,
    Success,
)
from agentmesh.errors import UsageError
from agentmesh.events import (
    DEFAULT_BUFFER,
    EscalationPending,
    Routed,
    RunFinished,
    RunStarted,
    RunStream,
    TaskFinished,
)
from agentmesh.events import TaskStarted as TaskStartedEvent
from agentmesh.events._channel import EventSink
from agentmesh.events._stream import Start
from agentmesh.executors._local import Dispatch, Executor, LocalExecutor
from agentmesh.policies import ToolPolicy
from agentmesh.report import (
    Accept,
    AcceptEmpty,
    CoverageStatus,
    Escalate,
    RecordGap,
    Report,
    RetryWithFeedback,
    Route,
    Step,
    TaskRecord,
    TryAlternative,
)
from agentmesh.retry import RetryBudget
from agentmesh.scope import RunScope
from agentmesh.subagents import Subagent
from agentmesh.task import Task
from agentmesh.usage import ModelPrice, PriceTable, UsageLimits
from agentmesh.usage._meter import UsageMeter

__all__ = ["AlternativeHandler", "Coordinator"]

AlternativeHandler: TypeAlias = Callable[
    [Task, ErrorEnvelope], "Task | Outcome | Awaitable[Task | Outcome | None] | None"
]
"""`handler(task, envelope)` returns a new Task to run, an Outcome to use, or None."""


class Coordinator:
    """The hub: fans tasks out to subagents, routes every outcome, reports coverage.

    Args:
        subagents: the spokes. A task names one in `Task.subagent`; a task that names
            none goes to the only subagent, or fans out to all of them.
        rewriter: `rewriter(task, envelope)` (sync or async) proposes a corrected query
            for a validation failure: retry with feedback.
        synthesizer: builds the Report (default: deterministic, no model).
        router: decides about each outcome (default: `Router()`'s table).
        policies: tool-use policies applied to every subagent's tool calls, before the
            subagents' own.
        alternatives: named alternative approaches served by another subagent; handlers
            can also be registered with `@coordinator.alternative(name)`.
        max_concurrency: subagent runs in flight at once.
        timeout: seconds for a whole run; its deadline bounds every call and backoff.
        max_rounds: rewrite rounds per task.
        retry_budget: shared by all subagents of a run; by default a fresh
            `RetryBudget()` per run. Pass `RetryBudget.unlimited()` to disable.
        min_coverage: the share of entries that must be answered for the report to be
            sufficient (e.g. 0.8).
        executor: where subagents run (default: this event loop).
        store: checkpoints for the subagents' runs: a rerun with the same `run_id` does not
            repeat completed non-idempotent tool calls, and subagents declared with
            `checkpoint=True` continue from their recorded progress. With a store, a
            policy's `Decision.ask` and an `Escalate` wait for a person as pending
            decisions, and `resume(run_id, decisions=...)` goes on (without one, a
            policy declared with `asks=True` is refused here).
        usage_limits: `UsageLimits` on what the run's model calls may use together; once
            one is reached no model call starts, and tasks not yet started end with a
            `usage_limit_exceeded` envelope (a gap that says so).
        prices: model name -> `ModelPrice`, overriding or extending `DEFAULT_PRICES`
            for the run's costs (or a `PriceTable`).
    """

    def __init__(
        self,
        subagents: Sequence[Subagent],
        *,
        rewriter: Rewriter | None = None,
        synthesizer: Synthesizer | None = None,
        router: RouterLike | None = None,
        policies: Sequence[ToolPolicy] = (),
        alternatives: Mapping[str, Subagent] | None = None,
        max_concurrency: int = 64,
        timeout: float | None = None,
        max_rounds: int = 3,
        retry_budget: RetryBudget | None = None,
        min_coverage: float | None = None,
        executor: Executor | None = None,
        store: CheckpointStore | None = None,
        usage_limits: UsageLimits | None = None,
        prices: PriceTable | Mapping[str, ModelPrice] | None = None,
    ) -> None:
        if isinstance(subagents, Subagent) or not isinstance(subagents, Sequence | Iterable):
            raise UsageError(f"Coordinator takes a list of subagents, got {subagents!r}")
        subagents = list(subagents)
        if not subagents:
            raise UsageError("Coordinator needs at least one subagent")
        for sub in [*subagents, *(alternatives or {}).values()]:
            if not isinstance(sub, Subagent):
                raise UsageError(f"Coordinator takes Subagent objects, got {sub!r}")
        names = [sub.name for sub in subagents]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise UsageError(f"subagent names must be unique; repeated: {duplicates}")
        max_concurrency = whole("Coordinator(max_concurrency=)", max_concurrency, at_least=1)
        if timeout is not None:
            timeout = number("Coordinator(timeout=)", timeout, above=True, unit="seconds")
        max_rounds = whole("Coordinator(max_rounds=)", max_rounds, at_least=0)
        if router is not None and (
            isinstance(router, type)
            or not inspect.iscoroutinefunction(getattr(router, "route", None))
        ):
            raise UsageError(
                f"router= takes an object with `async def route(ctx)` (e.g. Router()), "
                f"got {router!r}"
            )
        if min_coverage is not None:
            min_coverage = number("Coordinator(min_coverage=)", min_coverage, at_most=1)
        for policy in policies:
            if not isinstance(policy, ToolPolicy):
                raise UsageError(f"{policy!r} is not a policy; use @pre_tool_use / @post_tool_use")
        check_asks(policies, [*subagents, *(alternatives or {}).values()], store)
        self.subagents = {sub.name: sub for sub in subagents}
        self.rewriter = rewriter
        self.synthesizer: Synthesizer = synthesizer or DeterministicSynthesizer()
        self.router: RouterLike = router or Router()
        # Router subclasses that override only `on_*` rows keep the default success row.
        self._default_success_row = getattr(type(self.router), "route", None) is Router.route
        self.policies = tuple(policies)
        self.max_concurrency = max_concurrency
        self.timeout = timeout
        self.max_rounds = max_rounds
        self.retry_budget = retry_budget
        self.min_coverage = min_coverage
        self.executor: Executor = executor or LocalExecutor()
        self.store = store
        if usage_limits is not None and not isinstance(usage_limits, UsageLimits):
            raise UsageError(f"Coordinator(usage_limits=) takes UsageLimits, got {usage_limits!r}")
        self.usage_limits = usage_limits
        self.prices = prices if isinstance(prices, PriceTable) else PriceTable(prices)
        self._alternative_subagents: dict[str, Subagent] = dict(alternatives or {})
        self._alternative_handlers: dict[str, AlternativeHandler] = {}
        self._alternative_names = frozenset(self._alternative_subagents)

    def alternative(self, name: str) -> Callable[[AlternativeHandler], AlternativeHandler]:
        """Register `handler(task, envelope)` as the alternative approach `name`."""

        def register(handler: AlternativeHandler) -> AlternativeHandler:
            if name in self._alternative_subagents or name in self._alternative_handlers:
                raise UsageError(f"alternative {name!r} is already registered")
            self._alternative_handlers[name] = handler
            self._alternative_names = self._alternative_names | {name}
            return handler

        return register

    @property
    def alternative_names(self) -> frozenset[str]:
        return self._alternative_names

    async def run(
        self, tasks: Task | str | Iterable[Task | str], *, run_id: str | None = None
    ) -> Report:
        """Run every task to a decision and return the report. Never raises for a task.

        `tasks` is an iterable of Tasks or query strings (a list, a generator); a lone
        Task or string is one task. This is `stream()` drained: the same run, whose
        events nobody reads (so none is built); the report is the one its
        `RunFinished` event would carry.
        """
        return await self.stream(tasks, run_id=run_id).drain()

    def stream(
        self,
        tasks: Task | str | Iterable[Task | str],
        *,
        run_id: str | None = None,
        buffer: int = DEFAULT_BUFFER,
    ) -> RunStream:
        """The run of `tasks` as it happens: `async for event in coordinator.stream(tasks)`.

        Takes the arguments of `run()`; the run starts at the first iteration. Every
        event is delivered, in order, ending with `RunFinished(report)`. `buffer` is how
        many unread events the stream holds: past it, the run waits for its consumer
        (at its next dispatch or tool call). Leaving early (`break` in
        `async with coordinator.stream(...) as events:`, or `await events.aclose()`)
        cancels the run and waits until nothing of it runs; `events.report` is then
        the partial report (see `RunStream`).
        """
        if run_id is not None and not isinstance(run_id, str):
            raise UsageError(f"Coordinator.run(run_id=) takes a str, got {run_id!r}")
        buffer = whole("Coordinator.stream(buffer=)", buffer, at_least=1)
        return RunStream(self, Start(self._plan(tasks)), run_id or uuid.uuid4().hex[:12], buffer)

    def _new_run(
        self, run_id: str, events: EventSink | None, book: DecisionBook | None = None
    ) -> _Run:
        """The shared parts of one run, its deadline counted from now."""
        loop = asyncio.get_running_loop()
        return _Run(
            run_id=run_id,
            at=None if self.timeout is None else loop.time() + self.timeout,
            budget=self.retry_budget if self.retry_budget is not None else RetryBudget(),
            slots=asyncio.Semaphore(self.max_concurrency),
            log=(log := get_logger(run_id=run_id)),
            info=logs_info(log),
            usage=UsageMeter(self.usage_limits, self.prices),
            events=events,
            book=book,
        )

    async def _run(
        self,
        run: _Run,
        jobs: Sequence[Job],
        saved: dict[str, TaskRecord] | None = None,
    ) -> Report:
        with span("run", run_id=run.run_id) as current:
            if self.store is not None and run.book is None:
                # What a resume in another process needs: the plan, then the decisions.
                await save_plan(self.store, run.run_id, jobs)
                run.attach(await DecisionBook.load(self.store, run.run_id))
            report = await self._run_jobs(run, jobs, saved)
            if current is not None:
                current.set_attributes(
                    {
                        "agentmesh.coverage.ratio": report.coverage_ratio,
                        "agentmesh.coverage.sufficient": report.sufficient,
                        "agentmesh.tasks": len(report.coverage),
                    }
                )
            return report

    async def resume(
        self,
        run_id: str,
        *,
        decisions: Mapping[str, HumanDecision] | None = None,
        tasks: Task | str | Iterable[Task | str] | None = None,
    ) -> Report:
        """Go on with run `run_id` from its checkpoints, with a person's `decisions`.

        `decisions` maps pending decision ids (`Report.pending_decisions`) to `Approve()`,
        `Reject(reason)` or `Edit(...)`. Finished tasks are not run again; the tasks that
        waited on an answered decision go on; unanswered ones keep waiting. A decision
        is answered once: the first resume that gives it claims it in the store before
        anything runs (of two at once, in any processes, exactly one wins), and a later
        resume that gives it again gets `UsageError` naming the answer that won. To go
        on after an interrupted resume, call `resume(run_id)` without that decision:
        claimed answers are read from the store. The store holds tasks with secrets
        masked: a task stored masked that must run again needs `tasks`, the tasks the
        run was started with (checked against its plan). Raises `UsageError` for a run
        the store does not have, an unknown decision id, a decision already answered,
        or a masked task without `tasks`. This is `resume_stream()` drained.
        """
        return await self.resume_stream(run_id, decisions=decisions, tasks=tasks).drain()

    def resume_stream(
        self,
        run_id: str,
        *,
        decisions: Mapping[str, HumanDecision] | None = None,
        tasks: Task | str | Iterable[Task | str] | None = None,
        buffer: int = DEFAULT_BUFFER,
    ) -> RunStream:
        """`resume()` as it happens: `async for event in coordinator.resume_stream(...)`.

        Takes the arguments of `resume()` and `buffer` as `stream()` does; the events are
        those of the tasks that go on, then `RunFinished` with the report `resume()`
        returns. The plan is read and the decisions checked at the first iteration.
        """
        if self.store is None:
            raise UsageError("Coordinator.resume() needs the Coordinator's store= of the run")
        if not isinstance(run_id, str) or not run_id:
            raise UsageError(f"Coordinator.resume(run_id=) takes a str, got {run_id!r}")
        if decisions is not None and not isinstance(decisions, Mapping):
            raise UsageError(
                f"resume(decisions=) takes a dict of id -> decision, got {decisions!r}"
            )
        buffer = whole("Coordinator.resume_stream(buffer=)", buffer, at_least=1)
        given = None if tasks is None else self._plan(tasks)
        opening = functools.partial(self._resuming, run_id, dict(decisions or {}), given)
        return RunStream(self, opening, run_id, buffer)

    async def _resuming(
        self,
        run_id: str,
        decisions: dict[str, HumanDecision],
        given: Sequence[Job] | None,
    ) -> Start:
        """What a resume starts from: the plan, the decisions given (saved) and records."""
        assert self.store is not None
        plan = await load_plan(self.store, run_id, self.subagents)
        jobs = list(plan.jobs) if given is None else originals(plan, given, run_id)
        book = await DecisionBook.load(self.store, run_id)
        await book.give(decisions)
        saved = await load_records(self.store, run_id)
        if given is None:
            refuse_masked(plan, saved, book, run_id)
        return Start(jobs, book, saved)

    async def _run_jobs(
        self,
        run: _Run,
        jobs: Sequence[Job],
        saved: dict[str, TaskRecord] | None = None,
    ) -> Report:
        log, events = run.log, run.events
        log.info("run_started", tasks=len(jobs), subagents=list(self.subagents))
        if events is not None:
            events.emit(RunStarted, None, tasks=len(jobs), subagents=tuple(self.subagents))
        # Each task writes its record into its own slot, so no finished asyncio.Task (its
        # coroutine, context and weak reference) is kept until the end of the run.
        slots: list[TaskRecord | None] = [None] * len(jobs)
        run.records = slots
        if saved is not None:
            await self._resumed(run, jobs, slots, saved)
        bug: BaseException | None = None
        queue = ((i, job) for i, job in enumerate(jobs) if slots[i] is None)
        to_run = slots.count(None)
        try:
            async with asyncio.TaskGroup() as group:
                # A pool of workers pulling jobs, not an asyncio Task per job: 10,000 queued
                # jobs are 10,000 tuples, and a Task with its scheduling costs more than
                # the bookkeeping of the job it runs.
                for _ in range(min(self.max_concurrency, to_run)):
                    group.create_task(self._work(run, slots, queue))
        except ExceptionGroup as escaped:
            # Only what must not become an envelope gets here (a bug in strict mode): the
            # caller gets that exception, with its traceback, not the group's wrapper.
            if len(escaped.exceptions) != 1:
                raise
            bug = escaped.exceptions[0]
        if bug is not None:
            # Raised outside the handler: the user's own cause and context stay as they were.
            raise bug
        del jobs
        records = cast(list[TaskRecord], slots)  # the group ended: every slot is filled
        report = await self._synthesize(run, records, log)
        if run.book is not None:
            report = report.model_copy(update={"pending_decisions": run.book.unanswered()})
        report = _with_helper_usage(report, run)
        log.info(
            "run_finished",
            entries=len(report.coverage),
            coverage=round(report.coverage_ratio, 4),
            sufficient=report.sufficient,
            retries=run.budget.retries,
            retries_denied=run.budget.denied,
        )
        if events is not None:
            events.emit(RunFinished, None, report=report)
        return report

    async def _resumed(
        self,
        run: _Run,
        jobs: Sequence[Job],
        slots: list[TaskRecord | None],
        saved: dict[str, TaskRecord],
    ) -> None:
        """Fill the slots of the tasks a resume does not run again; note what goes on how."""
        assert run.book is not None
        assert self.store is not None
        for index, (task_id, task, _sub) in enumerate(jobs):
            record = saved.get(task_id)
            if record is None:
                continue  # never finished (the process stopped): it runs again
            answers = run.book.answered(task_id)
            settled = settle(record, answers, task) if answers else record
            if isinstance(settled, Redo):
                run.redo[index] = settled
                continue
            if answers:
                settled = await stored(run.book, self.store, settled, None, None, run.events)
                run.log.info("decision_settled", task_id=task_id, status=settled.status.value)
            slots[index] = settled

    async def _stopped_report(self, run: _Run, jobs: Sequence[Job], reason: str) -> Report:
        """The report of a run stopped early: every task, each unfinished one a gap.

        An unfinished task keeps its steps so far and the progress it had recorded (a
        `partial` entry when there is some). Deterministic synthesis: no model is
        called for a run that its caller stopped.
        """
        records: list[TaskRecord] = []
        unfinished = 0
        for index, (task_id, task, subagent) in enumerate(jobs):
            record = run.records[index] if index < len(run.records) else None
            if record is None:
                unfinished += 1
                job = run.active.get(index) or _Job(
                    task_id=task_id, original=task, subagent=subagent, task=task
                )
                partials = None if run.events is None else run.events.partial(task_id)
                stopped = _stopped(job.current, job.task, reason, partials)
                decision = RecordGap(reason)
                job.steps.append(_step(job, stopped, decision, reason))
                record = job.finish(decision)
            records.append(record)
        report = await DeterministicSynthesizer().synthesize(
            records, run_id=run.run_id, min_coverage=self.min_coverage
        )
        note = f"Run stopped early: {unfinished} of {len(jobs)} tasks unfinished ({reason})."
        update: dict[str, Any] = {"synthesis_note": note}
        if run.book is not None:
            # The questions asked before the stop are in the store: the report names them.
            update["pending_decisions"] = run.book.unanswered()
        return _with_helper_usage(report.model_copy(update=update), run)

    def _plan(self, tasks: Task | str | Iterable[Task | str]) -> Sequence[Job]:
        """Pair each task with its subagent(s); bad names fail before anything runs.

        When every task goes to one subagent, the plan is two lists (`OneEach`), not a
        tuple per job kept for the whole run.
        """
        planned: list[Task] = []
        targets: list[Subagent | None] = []  # None: the task fans out to every subagent
        only = next(iter(self.subagents.values())) if len(self.subagents) == 1 else None
        for index, task in enumerate(self._each_task(tasks)):
            if isinstance(task, str):
                task = Task(query=task)
            elif not isinstance(task, Task):
                raise UsageError(f"Coordinator.run() takes Tasks or query strings, got {task!r}")
            if task.subagent is not None and task.subagent not in self.subagents:
                raise UsageError(
                    f"task {task.id or f'task-{index}'} names subagent {task.subagent!r}; "
                    f"known: {sorted(self.subagents)}"
                )
            planned.append(task)
            targets.append(only if task.subagent is None else self.subagents[task.subagent])
        chosen = [target for target in targets if target is not None]
        if len(chosen) == len(planned):
            return OneEach(planned, chosen)
        jobs: list[Job] = []
        for index, (task, target) in enumerate(zip(planned, targets, strict=True)):
            base = task.id or f"task-{index}"
            if target is not None:
                jobs.append((base, task, target))
            else:
                jobs += [(f"{base}/{name}", task, sub) for name, sub in self.subagents.items()]
        return jobs

    @staticmethod
    def _each_task(tasks: object) -> Iterable[object]:
        """`tasks` as an iterable; a lone Task or query string is one task, never split."""
        if isinstance(tasks, Task | str):
            return (tasks,)
        # Iterable, but never meant as tasks: bytes give ints, a mapping its keys.
        if isinstance(tasks, bytes | bytearray | memoryview | Mapping) or not isinstance(
            tasks, Iterable
        ):
            raise UsageError(
                "Coordinator.run(tasks=) takes a Task, a query string, or an iterable of them "
                f"(a list, a generator), got a {type(tasks).__name__}"
            )
        return tasks

    async def _work(
        self,
        run: _Run,
        records: list[TaskRecord | None],
        queue: Iterator[tuple[int, tuple[str, Task, Subagent]]],
    ) -> None:
        """Take the next job once a slot is free for its first dispatch; until none is left."""
        while True:
            await run.slots.acquire()
            index, job = next(queue, (-1, None))
            if job is None:
                run.slots.release()
                return
            task_id, task, subagent = job
            # Without tracing, no span to open: one coroutine less per job in flight.
            follow = self._drive if tracing() else self._follow
            await follow(run, records, index, task_id, task, subagent)

    async def _drive(
        self,
        run: _Run,
        records: list[TaskRecord | None],
        index: int,
        task_id: str,
        task: Task,
        subagent: Subagent,
    ) -> None:
        """`_follow` in a span of its own when tracing is on."""
        with span(
            "task", run_id=run.run_id, task_id=task_id, subagent=subagent.name, topic=task.topic
        ) as current:
            await self._follow(run, records, index, task_id, task, subagent)
            record = records[index]
            if current is not None and record is not None:
                current.set_attribute("agentmesh.coverage.status", record.status.value)
                record_outcome(current, record.final)

    async def _follow(
        self,
        run: _Run,
        records: list[TaskRecord | None],
        index: int,
        task_id: str,
        task: Task,
        subagent: Subagent,
    ) -> None:
        """Dispatch one task, follow the router's decisions to a final state, record it."""
        job = _Job(task_id=task_id, original=task, subagent=subagent, task=task)
        redo = run.redo.get(index) if run.redo else None
        if redo is not None:
            # Going on after a person's answer: the history so far stays in the record.
            job.steps, job.task = list(redo.steps), redo.task
        # The run's logger with the task named in each event: binding a logger per task
        # costs more than the events (filtered out by default) that would use it.
        log, name, events = run.log, subagent.name, run.events
        if events is not None:
            run.active[index] = job  # for the report of a run stopped early
            events.emit(TaskStartedEvent, task_id, task=job.task, subagent=name)
        outcome = await self._execute(run, job, subagent, job.task, holding_slot=True)
        while True:
            try:
                decision = await self._decide(run, job, outcome)
            except BaseException as exc:
                # A broken router or rewriter must not abort the run: it becomes a gap.
                # (A stray CancelledError or another BaseException from it too; the run's
                # own cancellation and interrupts go on.)
                if propagates(exc, subagent.classifier, user_code=False):
                    raise
                log.error("routing_failed", task_id=task_id, subagent=name, error=repr(exc))
                decision = RecordGap(f"routing failed: {type(exc).__name__}: {exc}")
            details = _describe(decision)
            job.steps.append(_step(job, outcome, decision, details.get("reason")))
            if events is not None:
                events.emit(
                    Routed,
                    task_id,
                    subagent=job.current.name,
                    task=job.task,
                    decision=decision,
                    reason=details.get("reason"),
                )
            if run.info:  # the quiet default drops INFO: no event built for it per task
                log.info(
                    "route_decision",
                    task_id=task_id,
                    subagent=name,
                    decision=type(decision).__name__,
                    **details,
                )
            if isinstance(decision, RetryWithFeedback):
                job.rewrites += 1
                job.tried_queries += (decision.task.query,)
                job.task = decision.task
                outcome = await self._execute(run, job, job.current, decision.task)
            elif isinstance(decision, TryAlternative):
                job.tried_alternatives += (decision.name,)
                assert isinstance(outcome, ErrorEnvelope)  # _decide allows alternatives only then
                try:
                    alternative = await self._alternative(run, job, decision.name, outcome)
                except BaseException as exc:
                    if propagates(exc, subagent.classifier, user_code=False):
                        raise
                    log.error(
                        "alternative_failed",
                        task_id=task_id,
                        subagent=name,
                        alternative=decision.name,
                        error=repr(exc),
                    )
                    alternative = None
                if alternative is not None:
                    outcome = alternative
            else:
                record = job.finish(decision)
                if run.book is not None and self.store is not None:
                    record = await stored(
                        run.book, self.store, record, decision, outcome, run.events
                    )
                records[index] = record
                if events is not None:
                    self._finished(events, run, index, record, decision)
                return

    @staticmethod
    def _finished(
        events: EventSink, run: _Run, index: int, record: TaskRecord, decision: Route
    ) -> None:
        """The events of a task that reached its final state."""
        if isinstance(decision, Escalate):
            # The id a person answers, when the run has a store to keep the question.
            waiting = () if run.book is None else run.book.unanswered()
            ids = [pending.id for pending in waiting if pending.task_id == record.task_id]
            events.emit(
                EscalationPending,
                record.task_id,
                subagent=record.subagent,
                task=record.task,
                reason=decision.reason,
                decision_id=ids[-1] if ids else None,
            )
        events.emit(TaskFinished, record.task_id, entry=coverage_entry(record))
        run.active.pop(index, None)

    async def _decide(self, run: _Run, job: _Job, outcome: Outcome) -> Route:
        """The router's decision, within what no router may change."""
        if is_usage_refusal(outcome):
            # The run's limit stopped it, whatever a router wants: a gap that says so, not
            # an escalation per task nor a new attempt that the limit would stop again.
            return RecordGap(outcome.message)
        if outcome.policy is not None:
            verdict = outcome.policy
            if verdict.action == "ask":
                return Escalate(outcome.message if isinstance(outcome, ErrorEnvelope) else "")
            if isinstance(outcome, ErrorEnvelope) and outcome.error_type == ErrorType.REJECTED:
                return RecordGap(outcome.message)  # a person's no: never retried, never escalated
            if verdict.action == "escalate":
                return Escalate(f"policy {verdict.policy}: {verdict.reason}")
            if verdict.action == "forbid_retry":
                return RecordGap(f"retry forbidden by policy {verdict.policy}: {verdict.reason}")
        if self._default_success_row and isinstance(outcome, Success):
            # What Router.route answers for every success, without building its context.
            return AcceptEmpty() if outcome.is_empty else Accept()
        # The router (and the rewriter it calls) is user code: the run's deadline bounds it too.
        timeout = asyncio.timeout_at(run.at)
        try:
            async with timeout:
                decision = await self.router.route(
                    RouteContext(
                        task=job.task,
                        outcome=outcome,
                        subagent=job.subagent.name,
                        rewrites=job.rewrites,
                        max_rounds=self.max_rounds,
                        tried_queries=frozenset(job.tried_queries),
                        tried_alternatives=frozenset(job.tried_alternatives),
                        alternatives=self.alternative_names,
                        rewriter=self._rewriter_for(run, job),
                    )
                )
        except TimeoutError:
            if not timeout.expired():
                raise
            return RecordGap("deadline reached while routing; no new attempt started")
        if isinstance(decision, Accept | AcceptEmpty) and isinstance(outcome, ErrorEnvelope):
            # "Covered" or "nothing found" for a failure would be silent suppression.
            return RecordGap(
                f"the router accepted a failure ({outcome.error_type}): {outcome.message}"
            )
        if not isinstance(decision, RetryWithFeedback | TryAlternative):
            return decision
        if isinstance(outcome, Success):
            # Never retried: empty is an answer, and only the final outcome's data is
            # synthesized, so a retry that then failed would discard what was found.
            return AcceptEmpty() if outcome.is_empty else Accept()
        if outcome.error_category in (ErrorCategory.PERMISSION, ErrorCategory.BUSINESS):
            # Neither is ever retried nor worked around, whatever a custom router says.
            return Escalate(outcome.user_message or outcome.message)
        if run.remaining() == 0:
            return RecordGap("deadline reached; no new attempt started")
        if isinstance(decision, RetryWithFeedback):
            if decision.task.query in job.tried_queries:
                return RecordGap(f"query already tried: {decision.task.query!r}")
            if job.rewrites >= self.max_rounds:
                return RecordGap(f"no rounds left after {job.rewrites} rewrites")
        elif decision.name not in self.alternative_names:
            return RecordGap(f"no handler for alternative {decision.name!r}")
        elif decision.name in job.tried_alternatives:
            return RecordGap(f"alternative {decision.name!r} already tried")
        return decision

    def _rewriter_for(self, run: _Run, job: _Job) -> Rewriter | None:
        """The rewriter as this task's routing calls it: a model's calls counted in the run."""
        if isinstance(self.rewriter, LLMRewriter):
            return self.rewriter._in_run(run.helpers, job.task_id)
        return self.rewriter

    async def _synthesize(self, run: _Run, records: list[TaskRecord], log: Any) -> Report:
        """The synthesizer's report; the deterministic one, saying why, if it fails or is late.

        Every result is in `records` already: a broken or slow synthesizer must not cost
        them, nor hold the run past its deadline.
        """
        try:
            async with asyncio.timeout_at(run.at):
                if isinstance(self.synthesizer, LLMSynthesizer):
                    # Its model call is the run's: admitted by its limits, counted in its report.
                    return await self.synthesizer._synthesize(
                        records, run.run_id, self.min_coverage, run.helpers
                    )
                return await self.synthesizer.synthesize(
                    records, run_id=run.run_id, min_coverage=self.min_coverage
                )
        except BaseException as exc:
            # A stray CancelledError or another BaseException of a custom synthesizer too;
            # the run's own cancellation and interrupts go on.
            if isinstance(self.synthesizer, DeterministicSynthesizer) or propagates(
                exc, default_classifier, user_code=False
            ):
                raise
            reason = "the run's deadline passed" if isinstance(exc, TimeoutError) else repr(exc)
            log.error("synthesis_failed", error=reason)
            report = await DeterministicSynthesizer().synthesize(
                records, run_id=run.run_id, min_coverage=self.min_coverage
            )
            note = (
                f"Summary unavailable: the synthesizer failed ({reason}) — "
                "deterministic synthesis used."
            )
            return report.model_copy(update={"synthesis_note": note})

    async def _execute(
        self, run: _Run, job: _Job, subagent: Subagent, task: Task, *, holding_slot: bool = False
    ) -> Outcome:
        """Run `subagent` on `task` in a concurrency slot (already taken if `holding_slot`)."""
        job.current = subagent
        if run.events is not None:
            await run.events.room()  # a stream's consumer that is behind holds the run here
        if not holding_slot:
            await run.slots.acquire()
        try:
            remaining = run.remaining()
            if remaining == 0:
                return _not_started(subagent, task)
            exhausted = run.scope.usage.exhausted()
            if exhausted is not None:
                run.log.info("usage_limit_not_started", task_id=job.task_id, reason=exhausted)
                return usage_limit_envelope(
                    f"{exhausted}; this task did not start", source=subagent.name
                )
            try:
                # The executor is trusted to honour the dispatch's timeout, but not blindly:
                # a remote engine that ignores it must not hold the run past its deadline.
                # The Dispatch is an argument, not a local: once the executor has read it,
                # a task in flight does not keep it.
                if run.at is None:  # no deadline, no guard: a Timeout costs ~1 us per task
                    outcome = await self._start(run, job, subagent, task, remaining)
                else:
                    async with asyncio.timeout_at(run.at + _EXECUTOR_GRACE):
                        outcome = await self._start(run, job, subagent, task, remaining)
                # A custom executor may hand back the wire form (a dict from elsewhere).
                outcome = _normalized(outcome)
            except BaseException as exc:
                # Subagent.run never raises for a task failure; an executor might, or hand
                # back something that is not an outcome: that task fails, no other. An ask
                # nobody can answer is misuse: the caller must hear of it.
                if isinstance(exc, AskWithoutStore) or propagates(
                    exc, subagent.classifier, user_code=True
                ):
                    raise
                return subagent.classifier.classify(
                    exc, source=subagent.name, attempted_query=task.query, attempts=0
                )
        finally:
            run.slots.release()
        return outcome

    def _start(
        self, run: _Run, job: _Job, subagent: Subagent, task: Task, timeout: float | None
    ) -> Awaitable[Outcome]:
        """The executor's run of `subagent` on `task`, not yet awaited."""
        if type(self.executor) is LocalExecutor:
            # The default executor runs the subagent right here, as `LocalExecutor.execute`
            # does: its run itself, without a Dispatch per task only to be read back at
            # once (a frozen dataclass of eight fields, ~1.2 us). A subclass goes the
            # general way below.
            return subagent.run(
                task,
                run_id=run.run_id,
                task_id=job.task_id,
                budget=run.budget,
                timeout=timeout,
                policies=self.policies,
                state=run.state,
                store=self.store,
                scope=run.scope,
            )
        return self.executor.execute(subagent, task, self._dispatch(run, job, timeout))

    def _dispatch(self, run: _Run, job: _Job, timeout: float | None) -> Dispatch:
        """How the executor runs `job`'s next step: its identity, time, the run's parts."""
        return Dispatch(
            run_id=run.run_id,
            task_id=job.task_id,
            timeout=timeout,
            policies=self.policies,
            budget=run.budget,
            state=run.state,
            store=self.store,
            scope=run.scope,
        )

    async def _alternative(
        self, run: _Run, job: _Job, name: str, envelope: ErrorEnvelope
    ) -> Outcome | None:
        if name in self._alternative_subagents:
            return await self._execute(run, job, self._alternative_subagents[name], job.task)
        # A handler is user code: the run's deadline bounds it (a TimeoutError here is
        # logged by _drive as a failed alternative). The task it returns runs below, outside
        # this timeout, so the subagent is cut by its own deadline and keeps its partials.
        async with asyncio.timeout_at(run.at):
            result: Any = self._alternative_handlers[name](job.task, envelope)
            if inspect.isawaitable(result):
                result = await result
        if result is None or isinstance(result, Success | ErrorEnvelope):
            return None if result is None else _normalized(result)
        if not isinstance(result, Task):
            raise UsageError(
                f"alternative {name!r} returned {result!r}; expected Task, Outcome or None"
            )
        target = job.current
        if result.subagent is not None:
            if result.subagent not in self.subagents:
                raise UsageError(f"alternative {name!r} named unknown subagent {result.subagent!r}")
            target = self.subagents[result.subagent]
        if result.query in job.tried_queries and target is job.current:
            return None  # the same query on the same subagent again would change nothing
        job.task = result
        job.tried_queries += (result.query,)
        return await self._execute(run, job, target, result)


@dataclass(slots=True)
class _Run:
    run_id: str
    at: float | None
    budget: RetryBudget
    slots: asyncio.Semaphore
    log: Any
    info: bool  # whether `log` writes INFO lines (see `logs_info`)
    usage: UsageMeter | None = None
    events: EventSink | None = None
    book: DecisionBook | None = None
    state: dict[str, Any] = field(default_factory=dict)
    scope: RunScope = field(init=False)
    # The model calls of the coordinator's own helpers (LLMRewriter, LLMSynthesizer).
    helpers: HelperModels = field(init=False)
    # Tasks of a resume that go on after a person's answer, by their index in the plan.
    redo: dict[int, Redo] = field(default_factory=dict)
    # What a stream's early stop reports: the records so far, the tasks in flight.
    records: list[TaskRecord | None] = field(default_factory=list)
    active: dict[int, _Job] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # One scope per run: what all of its tasks share (see `agentmesh.scope`).
        self.scope = RunScope(
            self.run_id,
            budget=self.budget,
            usage=self.usage,
            decisions=self.book,
            events=self.events,
        )
        self.helpers = HelperModels(self.scope, self.at)

    def attach(self, book: DecisionBook) -> None:
        """The run's pending decisions, once loaded from the store."""
        self.book = self.scope.decisions = book

    def remaining(self) -> float | None:
        if self.at is None:
            return None
        return max(0.0, self.at - asyncio.get_running_loop().time())


@dataclass(slots=True)
class _Job:
    """The mutable progress of one (task, subagent) pair while the run goes on."""

    task_id: str
    original: Task
    subagent: Subagent
    task: Task
    current: Subagent = field(init=False)
    steps: list[Step] = field(default_factory=list)
    rewrites: int = 0
    # Tuples, not sets: a few names at most, and an empty set is 216 bytes per job.
    tried_queries: tuple[str, ...] = ()
    tried_alternatives: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.current = self.subagent
        self.tried_queries = (self.task.query,)

    def finish(self, decision: Route) -> TaskRecord:
        status, reason = _status(decision, self.steps)
        return TaskRecord(
            self.task_id, self.original, self.subagent.name, tuple(self.steps), status, reason
        )


def _status(decision: Route, steps: list[Step]) -> tuple[CoverageStatus, str | None]:
    if isinstance(decision, Accept):
        return CoverageStatus.COVERED, None
    if isinstance(decision, AcceptEmpty):
        return CoverageStatus.EMPTY, "searched, nothing found"
    if isinstance(decision, Escalate):
        return CoverageStatus.ESCALATED, decision.reason
    reason = decision.reason if isinstance(decision, RecordGap) else type(decision).__name__
    has_partial = any(
        isinstance(step.outcome, ErrorEnvelope)
        and step.outcome.partial_results is not None
        and (step.outcome.partial_results.findings or step.outcome.partial_results.completed)
        for step in steps
    )
    return (CoverageStatus.PARTIAL if has_partial else CoverageStatus.GAP), reason


def _step(job: _Job, outcome: Outcome, decision: Route, reason: str | None) -> Step:
    return Step(
        job.current.name,
        job.task.query,
        outcome,
        type(decision).__name__,
        reason,
        decision.name if isinstance(decision, TryAlternative) else None,
    )


_OUTCOME: Final[TypeAdapter[Outcome]] = TypeAdapter(Outcome, config=ConfigDict(defer_build=True))


def _normalized(outcome: Any) -> Outcome:
    """The outcome as a Step holds it: a `Success` or an `ErrorEnvelope`, else validated.

    Steps are built without validation; this is the part of it that changed anything:
    the wire form (a dict) becomes the model the report's serializer expects.
    """
    kind = type(outcome)
    if kind is Success or kind is ErrorEnvelope:
        return cast(Outcome, outcome)
    return _OUTCOME.validate_python(outcome)


def _with_helper_usage(report: Report, run: _Run) -> Report:
    """The report with what the coordinator's own helpers' model calls used, if any."""
    usage = run.helpers.usage()
    return report.model_copy(update={"helper_usage": usage}) if usage else report


# How long past the run's deadline an executor may take to hand back a cut task.
_EXECUTOR_GRACE: Final = 0.5


def _describe(decision: Route) -> dict[str, str]:
    if isinstance(decision, RetryWithFeedback):
        return {"reason": f"retry with query {decision.task.query!r}"}
    if isinstance(decision, TryAlternative):
        return {"reason": f"try alternative {decision.name!r}"}
    if isinstance(decision, Escalate | RecordGap):
        return {"reason": decision.reason}
    return {}


def _not_started(subagent: Subagent, task: Task) -> ErrorEnvelope:
    return ErrorEnvelope(
        error_category=ErrorCategory.TRANSIENT,
        error_type="timeout",
        is_retryable=True,
        message="the run's deadline passed before this task could start",
        attempted_query=task.query,
        source=subagent.name,
        attempts=0,
    )


def _stopped(
    subagent: Subagent, task: Task, reason: str, partials: PartialResults | None
) -> ErrorEnvelope:
    return ErrorEnvelope(
        error_category=ErrorCategory.TRANSIENT,
        error_type=ErrorType.CANCELLED,
        is_retryable=True,
        message=reason,
        attempted_query=task.query,
        source=subagent.name,
        attempts=0,
        partial_results=partials,
    )
