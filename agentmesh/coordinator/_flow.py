"""`TaskFlow`: one task's journey through a run, from its first dispatch to its record.

The steps, each named once: `follow` (the whole journey, to a final route), `dispatch`
(one attempt placed with the executor, in a concurrency slot), `decide` (the router's
route within the guard's rules) and `alternative` (the approach a route names).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ConfigDict, TypeAdapter

from agentmesh._engine._attempts import propagates
from agentmesh._engine._human import AskWithoutStore
from agentmesh._engine._model_calls import usage_limit_envelope
from agentmesh._tracing import record_outcome, span
from agentmesh.coordinator._guard import Tried, fixed_route, guarded
from agentmesh.coordinator._llm_helpers import LLMRewriter
from agentmesh.coordinator._resume import stored
from agentmesh.coordinator._router import Rewriter, RouteContext
from agentmesh.coordinator._state import RunState
from agentmesh.coordinator._synthesis import coverage_entry
from agentmesh.envelope import (
    ErrorCategory,
    ErrorEnvelope,
    ErrorType,
    Outcome,
    Success,
)
from agentmesh.errors import UsageError
from agentmesh.events import EscalationPending, Routed, TaskFinished
from agentmesh.events import TaskStarted as TaskStartedEvent
from agentmesh.executors import Dispatch, LocalExecutor
from agentmesh.report import (
    Accept,
    AcceptEmpty,
    CoverageStatus,
    Escalate,
    RecordGap,
    RetryWithFeedback,
    Route,
    Step,
    TaskRecord,
    TryAlternative,
)
from agentmesh.subagents import Subagent
from agentmesh.task import Task

__all__ = ["TaskFlow", "normalized"]

# How long past the run's deadline an executor may take to hand back a cut task.
_EXECUTOR_GRACE: Final = 0.5
_ACCEPT, _ACCEPT_EMPTY = Accept(), AcceptEmpty()  # frozen, no fields: one serves every task


@dataclass(slots=True, eq=False, init=False)  # __init__ written out: one frame per task, not 2
class TaskFlow:
    """One (task, subagent) pair of a run: its progress, and the steps that make it."""

    run: RunState
    index: int  # its place in the plan: the slot its record goes to
    task_id: str
    original: Task
    subagent: Subagent
    task: Task
    current: Subagent
    steps: list[Step]
    rewrites: int
    # Tuples, not sets: a few names at most, and an empty set is 216 bytes per task.
    tried_queries: tuple[str, ...]
    tried_alternatives: tuple[str, ...]

    def __init__(self, run: RunState, index: int, task_id: str, task: Task, sub: Subagent) -> None:
        self.run, self.index, self.task_id = run, index, task_id
        self.original, self.task, self.subagent, self.current = task, task, sub, sub
        self.steps, self.rewrites, self.tried_queries = [], 0, (task.query,)
        self.tried_alternatives = ()

    async def follow_traced(self) -> None:
        """`follow` in a span of its own (when tracing is on)."""
        run = self.run
        with span(
            "task",
            run_id=run.run_id,
            task_id=self.task_id,
            subagent=self.subagent.name,
            topic=self.task.topic,
        ) as current:
            await self.follow()
            record = run.records[self.index]
            if current is not None and record is not None:
                current.set_attribute("agentmesh.coverage.status", record.status.value)
                record_outcome(current, record.final)

    async def follow(self) -> None:
        """Dispatch the task, take the routes decided to a final one, record it.

        Called holding a concurrency slot for the first dispatch.
        """
        run = self.run
        redo = run.redo.get(self.index) if run.redo else None
        if redo is not None:
            # Going on after a person's answer: the history so far stays in the record.
            self.steps, self.task = list(redo.steps), redo.task
        events = run.scope.events
        if events is not None:
            run.active[self.index] = self  # for the report of a run stopped early
            events.emit(TaskStartedEvent, self.task_id, task=self.task, subagent=self.subagent.name)
        outcome = await self.dispatch(self.subagent, self.task, holding_slot=True)
        while True:
            route = await self._route(outcome)
            if isinstance(route, RetryWithFeedback):
                self.rewrites += 1
                self.tried_queries += (route.task.query,)
                self.task = route.task
                outcome = await self.dispatch(self.current, route.task)
            elif isinstance(route, TryAlternative):
                self.tried_alternatives += (route.name,)
                assert isinstance(outcome, ErrorEnvelope)  # the guard allows it only then
                alternative = await self._try_alternative(route.name, outcome)
                if alternative is not None:
                    outcome = alternative
            else:
                await self._record(route, outcome)
                return

    async def _route(self, outcome: Outcome) -> Route:
        """The route taken for `outcome`, noted in the steps, the events and the log."""
        run = self.run
        try:
            route = await self.decide(outcome)
        except BaseException as exc:
            # A broken router or rewriter must not abort the run: it becomes a gap. (A
            # stray CancelledError or another BaseException from it too; the run's own
            # cancellation and interrupts go on.)
            if propagates(exc, self.subagent.classifier, user_code=False):
                raise
            run.log.error(
                "routing_failed",
                task_id=self.task_id,
                subagent=self.subagent.name,
                error=repr(exc),
            )
            route = RecordGap(f"routing failed: {type(exc).__name__}: {exc}")
        reason = None if type(route) is Accept else _reason(route)  # Accept: nothing to say
        self.steps.append(self._step(outcome, route, reason))
        events = run.scope.events
        if events is not None:
            events.emit(
                Routed,
                self.task_id,
                subagent=self.current.name,
                task=self.task,
                decision=route,
                reason=reason,
            )
        if run.info:  # the quiet default drops INFO: no event built for it per task
            run.log.info(
                "route_decision",
                task_id=self.task_id,
                subagent=self.subagent.name,
                decision=type(route).__name__,
                **({} if reason is None else {"reason": reason}),
            )
        return route

    async def _try_alternative(self, name: str, envelope: ErrorEnvelope) -> Outcome | None:
        """`alternative`, a failure of which is logged and leaves the outcome as it was."""
        try:
            return await self.alternative(name, envelope)
        except BaseException as exc:
            if propagates(exc, self.subagent.classifier, user_code=False):
                raise
            self.run.log.error(
                "alternative_failed",
                task_id=self.task_id,
                subagent=self.subagent.name,
                alternative=name,
                error=repr(exc),
            )
            return None

    async def _record(self, route: Route, outcome: Outcome) -> None:
        """The task reached its final route: its record, stored and announced."""
        run = self.run
        record = self.finish(route)
        scope, store = run.scope, run.hub.store
        book, events = scope.decisions, scope.events
        if book is not None and store is not None:
            record = await stored(scope, store, record, route, outcome, self.original)
        run.records[self.index] = record
        if events is None:
            return
        if isinstance(route, Escalate):
            # The id a person answers, when the run has a store to keep the question.
            waiting = () if book is None else book.unanswered()
            ids = [pending.id for pending in waiting if pending.task_id == record.task_id]
            events.emit(
                EscalationPending,
                record.task_id,
                subagent=record.subagent,
                task=record.task,
                reason=route.reason,
                approval_id=ids[-1] if ids else None,
            )
        events.emit(TaskFinished, record.task_id, entry=coverage_entry(record))
        run.active.pop(self.index, None)

    async def decide(self, outcome: Outcome) -> Route:
        """The router's route for `outcome`, within the guard's rules."""
        run = self.run
        fixed = fixed_route(outcome)
        if fixed is not None:
            return fixed
        if run.default_success_row and isinstance(outcome, Success):
            # What Router.route answers for every success, without building its context.
            return _ACCEPT_EMPTY if outcome.is_empty else _ACCEPT
        hub = run.hub
        # The router (and the rewriter it calls) is user code: the run's deadline bounds it too.
        timeout = asyncio.timeout_at(run.at)
        try:
            async with timeout:
                route = await hub.router.route(
                    RouteContext(
                        task=self.task,
                        outcome=outcome,
                        subagent=self.subagent.name,
                        rewrites=self.rewrites,
                        max_rounds=hub.limits.rounds,
                        tried_queries=frozenset(self.tried_queries),
                        tried_alternatives=frozenset(self.tried_alternatives),
                        alternatives=hub.alternative_names,
                        rewriter=self._rewriter(),
                    )
                )
        except TimeoutError:
            if not timeout.expired():
                raise
            return RecordGap("deadline reached while routing; no new attempt started")
        tried = Tried(
            queries=self.tried_queries,
            alternatives=self.tried_alternatives,
            rewrites=self.rewrites,
            max_rounds=hub.limits.rounds,
            alternative_names=hub.alternative_names,
            time_left=run.remaining() != 0,
        )
        return guarded(route, outcome, tried)

    def _rewriter(self) -> Rewriter | None:
        """The rewriter as this task's routing calls it: a model's calls counted in the run."""
        rewriter = self.run.hub.rewriter
        if isinstance(rewriter, LLMRewriter):
            return rewriter._in_run(self.run.helpers, self.task_id)
        return rewriter

    async def alternative(self, name: str, envelope: ErrorEnvelope) -> Outcome | None:
        """The outcome of the alternative approach `name`; None: nothing new to try."""
        run, hub = self.run, self.run.hub
        if name in hub.alternative_subagents:
            return await self.dispatch(hub.alternative_subagents[name], self.task)
        # A handler is user code: the run's deadline bounds it (a TimeoutError here is
        # logged as a failed alternative). The task it returns runs below, outside this
        # timeout, so the subagent is cut by its own deadline and keeps its partials.
        async with asyncio.timeout_at(run.at):
            result: Any = hub.alternative_handlers[name](self.task, envelope)
            if inspect.isawaitable(result):
                result = await result
        if result is None or isinstance(result, Success | ErrorEnvelope):
            return None if result is None else normalized(result)
        if not isinstance(result, Task):
            raise UsageError(
                f"alternative {name!r} returned {result!r}; expected Task, Outcome or None"
            )
        target = self.current
        if result.subagent is not None:
            if result.subagent not in hub.subagents:
                raise UsageError(f"alternative {name!r} named unknown subagent {result.subagent!r}")
            target = hub.subagents[result.subagent]
        if result.query in self.tried_queries and target is self.current:
            return None  # the same query on the same subagent again would change nothing
        self.task = result
        self.tried_queries += (result.query,)
        return await self.dispatch(target, result)

    async def dispatch(
        self, subagent: Subagent, task: Task, *, holding_slot: bool = False
    ) -> Outcome:
        """`subagent`'s outcome on `task`, placed with the executor in a concurrency slot.

        The slot is taken here unless `holding_slot`; it is released here either way.
        """
        run = self.run
        self.current = subagent
        events = run.scope.events
        if events is not None:
            await events.room()  # a stream's consumer that is behind holds the run here
        if not holding_slot:
            await run.slots.acquire()
        try:
            if run.at is not None or run.scope.usage.limits is not None:
                # Only a deadline or usage limits can keep a task from starting.
                refused = self._not_placed(subagent, task)
                if refused is not None:
                    return refused
            try:
                return normalized(await self._placed(subagent, task))
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

    def _not_placed(self, subagent: Subagent, task: Task) -> ErrorEnvelope | None:
        """Why the task does not start at all (the deadline, the usage limits), or None."""
        run = self.run
        if run.remaining() == 0:
            return ErrorEnvelope(
                error_category=ErrorCategory.TRANSIENT,
                error_type="timeout",
                is_retryable=True,
                message="the run's deadline passed before this task could start",
                attempted_query=task.query,
                source=subagent.name,
                attempts=0,
            )
        exhausted = run.scope.usage.exhausted()
        if exhausted is None:
            return None
        run.log.info("usage_limit_not_started", task_id=self.task_id, reason=exhausted)
        return usage_limit_envelope(f"{exhausted}; this task did not start", source=subagent.name)

    def _placed(self, subagent: Subagent, task: Task) -> Awaitable[Any]:
        """What the executor hands back for `subagent` on `task` (an outcome, or its wire
        form), to await.

        The executor is trusted to honour the dispatch's timeout, but not blindly: a remote
        engine that ignores it must not hold the run past its deadline.
        """
        run = self.run
        executor, at = run.hub.executor, run.at
        remaining = None if at is None else run.remaining()
        if isinstance(executor, LocalExecutor):
            # Its own way in, without a Dispatch per task only to be read back at once.
            started = executor.start(subagent, task, run.scope, self.task_id, remaining)
        else:
            started = executor.execute(subagent, task, Dispatch(run.scope, self.task_id, remaining))
        if at is None:  # no deadline, no guard: the executor's run itself, awaited by dispatch
            return started
        return _within(started, at + _EXECUTOR_GRACE)

    def finish(self, route: Route) -> TaskRecord:
        """The task's record, ending with `route`."""
        status, reason = _status(route, self.steps)
        return TaskRecord(
            self.task_id, self.original, self.subagent.name, tuple(self.steps), status, reason
        )

    def _step(self, outcome: Outcome, route: Route, reason: str | None) -> Step:
        return Step(
            self.current.name,
            self.task.query,
            outcome,
            type(route).__name__,
            reason,
            route.name if isinstance(route, TryAlternative) else None,
        )

    def stop(self, reason: str) -> TaskRecord:
        """The record of this task, unfinished when its run was stopped: a gap saying why.

        It keeps the progress the task had recorded (the run's events hold it).
        """
        events = self.run.scope.events
        partials = None if events is None else events.partial(self.task_id)
        envelope = ErrorEnvelope(
            error_category=ErrorCategory.TRANSIENT,
            error_type=ErrorType.CANCELLED,
            is_retryable=True,
            message=reason,
            attempted_query=self.task.query,
            source=self.current.name,
            attempts=0,
            partial_results=partials,
        )
        route = RecordGap(reason)
        self.steps.append(self._step(envelope, route, reason))
        return self.finish(route)


def _status(route: Route, steps: list[Step]) -> tuple[CoverageStatus, str | None]:
    if isinstance(route, Accept):
        return CoverageStatus.COVERED, None
    if isinstance(route, AcceptEmpty):
        return CoverageStatus.EMPTY, "searched, nothing found"
    if isinstance(route, Escalate):
        return CoverageStatus.ESCALATED, route.reason
    reason = route.reason if isinstance(route, RecordGap) else type(route).__name__
    has_partial = any(
        isinstance(step.outcome, ErrorEnvelope)
        and step.outcome.partial_results is not None
        and (step.outcome.partial_results.findings or step.outcome.partial_results.completed)
        for step in steps
    )
    return (CoverageStatus.PARTIAL if has_partial else CoverageStatus.GAP), reason


_OUTCOME: Final[TypeAdapter[Outcome]] = TypeAdapter(Outcome, config=ConfigDict(defer_build=True))


def normalized(outcome: Any) -> Outcome:
    """The outcome as a Step holds it: a `Success` or an `ErrorEnvelope`, else validated.

    Steps are built without validation; this is the part of it that changed anything:
    the wire form (a dict) becomes the model the report's serializer expects.
    """
    kind = type(outcome)
    if kind is Success or kind is ErrorEnvelope:
        made: Outcome = outcome  # typed by assignment: `cast` would be a call per task
        return made
    return _OUTCOME.validate_python(outcome)


def _reason(route: Route) -> str | None:
    if isinstance(route, RetryWithFeedback):
        return f"retry with query {route.task.query!r}"
    if isinstance(route, TryAlternative):
        return f"try alternative {route.name!r}"
    if isinstance(route, Escalate | RecordGap):
        return route.reason
    return None


async def _within(started: Awaitable[Any], at: float) -> Any:
    """`started`, awaited until the loop time `at` at the latest."""
    async with asyncio.timeout_at(at):
        return await started
