"""The Coordinator: its configuration and the public entry points of a run.

The run itself is `Run` (`_run.py`); one task's journey is `TaskFlow` (`_flow.py`);
the rules no router may change are the router's guard (`_guard.py`); planning is
`plan()` (`_plan.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TypeAlias

from agentmesh._engine._human import DecisionBook, refuse_asks_without_store
from agentmesh._numbers import number, whole
from agentmesh.approvals import Approval
from agentmesh.checkpoints import CheckpointStore, event_table_of
from agentmesh.coordinator._answers import given_approvals
from agentmesh.coordinator._limits import RunLimits
from agentmesh.coordinator._plan import plan
from agentmesh.coordinator._resume import opening
from agentmesh.coordinator._router import Rewriter, Router, RouterLike
from agentmesh.coordinator._run import Run
from agentmesh.coordinator._synthesis import DeterministicSynthesizer, Synthesizer
from agentmesh.envelope import ErrorEnvelope, Outcome
from agentmesh.errors import UsageError
from agentmesh.events import DEFAULT_BUFFER, EventLog, RunStream
from agentmesh.executors import Executor, LocalExecutor
from agentmesh.models import FallbackModel, ModelHealth
from agentmesh.policies import ToolPolicy
from agentmesh.report import Report
from agentmesh.retry import RetryBudget
from agentmesh.subagents import LLMSubagent, Subagent
from agentmesh.task import Task
from agentmesh.usage import ModelPrice, PriceTable, UsageLimits

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
        limits: the run's limits as one `RunLimits` (concurrency, timeout, rounds,
            min_coverage, usage); or give them as the plain keywords below (not both).
        max_concurrency: subagent runs in flight at once (`RunLimits.concurrency`).
        timeout: seconds for a whole run; its deadline bounds every call and backoff.
        max_rounds: rewrite rounds per task (`RunLimits.rounds`).
        retry_budget: shared by all subagents of a run; by default a fresh
            `RetryBudget()` per run. Pass `RetryBudget.unlimited()` to disable.
        min_coverage: the share of entries that must be answered for the report to be
            sufficient (e.g. 0.8).
        executor: where subagents run (default: this event loop).
        store: checkpoints for the subagents' runs: a rerun with the same `run_id` does not
            repeat completed non-idempotent tool calls, and subagents declared with
            `checkpoint=True` continue from their recorded progress. With a store, a
            policy's `Ruling.ask` and an `Escalate` wait for a person as pending
            approvals, and `resume(run_id, approvals=...)` goes on (without one, a
            policy declared with `asks=True` is refused here).
        usage_limits: `UsageLimits` (`RunLimits.usage`) on what the run's model calls
            may use together; once one is reached no model call starts, and tasks not
            yet started end with a `usage_limit_exceeded` envelope (a gap that says so).
        prices: model name -> `ModelPrice`, overriding or extending `DEFAULT_PRICES`
            for the run's costs (or a `PriceTable`).
        model_health: what the tasks learn of each model's health (breakers, quotas,
            calls in flight), shared by every run given the same object; by default
            each run has a fresh `ModelHealth()` of its own.
        event_log: with a store, write each run's events there, bounded as this
            `EventLog` says, for a console in another process to follow the run live
            (`EventLog()` keeps 16 MiB a run). None (the default) writes none: the log
            costs a run of trivial tasks about 200 µs of CPU a task (docs/performance.md).
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
        limits: RunLimits | None = None,
        max_concurrency: int = 64,
        timeout: float | None = None,
        max_rounds: int = 3,
        retry_budget: RetryBudget | None = None,
        min_coverage: float | None = None,
        executor: Executor | None = None,
        store: CheckpointStore | None = None,
        usage_limits: UsageLimits | None = None,
        prices: PriceTable | Mapping[str, ModelPrice] | None = None,
        model_health: ModelHealth | None = None,
        event_log: EventLog | None = None,
    ) -> None:
        self.limits = RunLimits.of(
            limits,
            max_concurrency=max_concurrency,
            timeout=timeout,
            max_rounds=max_rounds,
            min_coverage=min_coverage,
            usage_limits=usage_limits,
        )
        spokes = _checked_subagents(subagents, alternatives)
        _check_router(router)
        for policy in policies:
            if not isinstance(policy, ToolPolicy):
                raise UsageError(f"{policy!r} is not a policy; use @pre_tool_use / @post_tool_use")
        if store is None:
            everyone = [*spokes, *(alternatives or {}).values()]
            refuse_asks_without_store(
                [*policies, *(p for sub in everyone for p in sub.policies)],
                "the Coordinator has no store=",
            )
        self.subagents = {sub.name: sub for sub in spokes}
        self.rewriter = rewriter
        self.synthesizer: Synthesizer = synthesizer or DeterministicSynthesizer()
        self.router: RouterLike = router or Router()
        # Router subclasses that override only `on_*` rows keep the default success row.
        self._default_success_row = getattr(type(self.router), "route", None) is Router.route
        self.policies = tuple(policies)
        self.retry_budget = retry_budget
        self.executor: Executor = executor or LocalExecutor()
        self.store = store
        self.prices = prices if isinstance(prices, PriceTable) else PriceTable(prices)
        _check_hard_cap(self.limits.usage, self.prices, [*spokes, *(alternatives or {}).values()])
        _check_kinds(model_health, event_log)
        self.model_health = model_health
        self.event_log = event_log
        self._alternative_subagents: dict[str, Subagent] = dict(alternatives or {})
        self._alternative_handlers: dict[str, AlternativeHandler] = {}
        self._alternative_names = frozenset(self._alternative_subagents)

    # The limits, as the plain keywords name them.
    @property
    def max_concurrency(self) -> int:
        return self.limits.concurrency

    @property
    def timeout(self) -> float | None:
        return self.limits.timeout

    @property
    def max_rounds(self) -> int:
        return self.limits.rounds

    @property
    def min_coverage(self) -> float | None:
        return self.limits.min_coverage

    @property
    def usage_limits(self) -> UsageLimits | None:
        return self.limits.usage

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

    @property
    def alternative_subagents(self) -> Mapping[str, Subagent]:
        """The alternatives served by a subagent, by name."""
        return self._alternative_subagents

    @property
    def alternative_handlers(self) -> Mapping[str, AlternativeHandler]:
        """The alternatives served by a handler (`@coordinator.alternative`), by name."""
        return self._alternative_handlers

    def _check_store(self) -> None:
        """Let the executor refuse a store its workers cannot share, before a run starts
        (an executor that runs tasks elsewhere says so with a `check_store(store)`)."""
        check = getattr(self.executor, "check_store", None)
        if check is not None and self.store is not None:
            check(self.store)

    @property
    def default_success_row(self) -> bool:
        """Whether every success is routed as `Router.route` routes it (no custom row)."""
        return self._default_success_row

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
        self._check_store()
        run = Run(self, run_id or uuid.uuid4().hex[:12])
        jobs = plan(tasks, self.subagents)
        return RunStream(run, jobs, buffer, store=self.store, event_log=self.event_log)

    async def resume(
        self,
        run_id: str,
        *,
        approvals: Mapping[str, Approval] | None = None,
        tasks: Task | str | Iterable[Task | str] | None = None,
        decisions: Mapping[str, Approval] | None = None,
    ) -> Report:
        """Go on with run `run_id` from its checkpoints, with a person's `approvals`.

        `approvals` maps pending approval ids (`Report.pending_approvals`) to `Approve()`,
        `Reject(reason)` or `Edit(...)`. Finished tasks are not run again; the tasks that
        waited on an answered approval go on; unanswered ones keep waiting. An approval
        is answered once: the first resume that gives it claims it in the store before
        anything runs (of two at once, in any processes, exactly one wins), and a later
        resume that gives it again gets `UsageError` naming the answer that won. To go
        on after an interrupted resume, call `resume(run_id)` without that approval:
        answers claimed in the store (by an interrupted resume, or a person on the run
        console, `agentmesh.console`) are read from it. The store holds tasks with secrets
        masked: a task stored masked that must run again needs `tasks`, the tasks the
        run was started with (checked against its plan). Raises `UsageError` for a run
        the store does not have, an unknown approval id, an approval already answered,
        or a masked task without `tasks`. This is `resume_stream()` drained.
        `decisions=` is the old name of `approvals=` (deprecated, for one release).
        """
        approvals = given_approvals("resume", approvals, decisions)
        return await self.resume_stream(run_id, approvals=approvals, tasks=tasks).drain()

    async def resume_when_answered(
        self,
        run_id: str,
        *,
        poll: float = 1.0,
        tasks: Task | str | Iterable[Task | str] | None = None,
    ) -> Report:
        """Wait until a person has answered every pending approval of run `run_id` (on
        the run console, or by another process's `resume`), then `resume(run_id)` with
        the answers the store holds. A `PostgresStore` (or a `MemoryStore`) wakes the
        wait as soon as the console records an answer; a SQLite store is checked every
        `poll` seconds (which is also the longest a notified wait goes unchecked).
        Bound the wait with `asyncio.timeout(...)` around the call. `tasks` as for
        `resume()`."""
        poll = number("resume_when_answered(poll=)", poll, above=True, unit="seconds")
        store = self.store
        if store is None:
            raise UsageError("Coordinator.resume_when_answered() needs the Coordinator's store=")
        self._check_store()  # before the wait, not after it
        table = event_table_of(store)
        # Watching before the first look: an answer given after it wakes the wait.
        async with contextlib.AsyncExitStack() as stack:
            watching = None if table is None else table.watch(run_id)
            watch = None if watching is None else await stack.enter_async_context(watching)
            while (await DecisionBook.load(store, run_id)).unanswered():
                if watch is not None and watch.notifies:
                    await watch.changed(poll)
                else:
                    await asyncio.sleep(poll)
        return await self.resume(run_id, tasks=tasks)

    def resume_stream(
        self,
        run_id: str,
        *,
        approvals: Mapping[str, Approval] | None = None,
        tasks: Task | str | Iterable[Task | str] | None = None,
        buffer: int = DEFAULT_BUFFER,
        decisions: Mapping[str, Approval] | None = None,
    ) -> RunStream:
        """`resume()` as it happens: `async for event in coordinator.resume_stream(...)`.

        Takes the arguments of `resume()` and `buffer` as `stream()` does; the events are
        those of the tasks that go on, then `RunFinished` with the report `resume()`
        returns. The plan is read and the approvals checked at the first iteration.
        """
        approvals = given_approvals("resume_stream", approvals, decisions)
        if self.store is None:
            raise UsageError("Coordinator.resume() needs the Coordinator's store= of the run")
        if not isinstance(run_id, str) or not run_id:
            raise UsageError(f"Coordinator.resume(run_id=) takes a str, got {run_id!r}")
        if approvals is not None and not isinstance(approvals, Mapping):
            raise UsageError(
                f"resume(approvals=) takes a dict of id -> approval, got {approvals!r}"
            )
        buffer = whole("Coordinator.resume_stream(buffer=)", buffer, at_least=1)
        self._check_store()  # before any answer is claimed
        given = None if tasks is None else plan(tasks, self.subagents)
        start = functools.partial(
            opening, self.store, self.subagents, run_id, dict(approvals or {}), given
        )
        run = Run(self, run_id)
        return RunStream(run, start, buffer, store=self.store, event_log=self.event_log)


def _checked_subagents(
    subagents: object, alternatives: Mapping[str, Subagent] | None
) -> list[Subagent]:
    """The subagents as a list, each a `Subagent` with a name of its own."""
    if isinstance(subagents, Subagent) or not isinstance(subagents, Sequence | Iterable):
        raise UsageError(f"Coordinator takes a list of subagents, got {subagents!r}")
    spokes = list(subagents)
    if not spokes:
        raise UsageError("Coordinator needs at least one subagent")
    for sub in [*spokes, *(alternatives or {}).values()]:
        if not isinstance(sub, Subagent):
            raise UsageError(f"Coordinator takes Subagent objects, got {sub!r}")
    names = [sub.name for sub in spokes]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise UsageError(f"subagent names must be unique; repeated: {duplicates}")
    return spokes


def _check_hard_cap(
    limits: UsageLimits | None, prices: PriceTable, subagents: Sequence[Subagent]
) -> None:
    """Refuse at once an LLM subagent's model with no price under a hard cost cap.

    Its calls could only be refused, task after task: the run could never do what it
    was built for. A model called another way is refused at its call, as it would be
    under a soft cap.
    """
    for sub in subagents:
        if not isinstance(sub, LLMSubagent):
            continue
        hard = [bound for bound in (limits, sub.usage_limits) if bound is not None and bound.hard]
        if not hard:
            continue
        chain = sub.model.models if isinstance(sub.model, FallbackModel) else (sub.model,)
        for model in chain:
            if prices.price_of(model.name) is None:
                raise UsageError(
                    f"LLMSubagent {sub.name}: model {model.name!r} has no known price, and "
                    f"a hard cost cap (max_cost_usd={hard[0].max_cost_usd:g}, hard=True) "
                    "must reserve what each call may cost; give its price in "
                    "Coordinator(prices=...)"
                )


def _check_kinds(model_health: object, event_log: object) -> None:
    if model_health is not None and not isinstance(model_health, ModelHealth):
        raise UsageError(f"Coordinator(model_health=) takes a ModelHealth, got {model_health!r}")
    if event_log is not None and not isinstance(event_log, EventLog):
        raise UsageError(f"Coordinator(event_log=) takes an EventLog or None, got {event_log!r}")


def _check_router(router: object) -> None:
    if router is not None and (
        isinstance(router, type) or not inspect.iscoroutinefunction(getattr(router, "route", None))
    ):
        raise UsageError(
            f"router= takes an object with `async def route(ctx)` (e.g. Router()), got {router!r}"
        )
