"""`Subagent`: runs one task and always hands back exactly one outcome."""

from __future__ import annotations

import abc
import asyncio
import uuid
from collections.abc import Awaitable, Coroutine, Sequence
from typing import Any, Unpack

from agentmesh._engine._attempts import AttemptRules, attempt_call
from agentmesh._engine._ledger import task_key
from agentmesh._engine._partials import merge_partials
from agentmesh._engine._task import TaskEngine
from agentmesh._limits import recorded
from agentmesh._logging import get_logger, logs_info
from agentmesh._numbers import number
from agentmesh._signatures import spell_out
from agentmesh._tracing import agent_span, record_outcome
from agentmesh.checkpoints import CheckpointStore
from agentmesh.context import Context
from agentmesh.envelope import ErrorEnvelope, ErrorType, Outcome, Success
from agentmesh.errors import UsageError
from agentmesh.policies import PolicyChain, ToolPolicy
from agentmesh.retry import RetryBudget
from agentmesh.scope import RunScope
from agentmesh.subagents._as_tool import subagent_tool
from agentmesh.subagents._options import SubagentKwargs, SubagentOptions
from agentmesh.task import Task
from agentmesh.tools import Impact, Tool

__all__ = ["Subagent"]


class Subagent(abc.ABC):
    """A spoke of the hub: does one kind of work and reports an honest outcome.

    Subclass it and implement `handle`, or decorate a function with `@subagent`.
    `run` never raises for a task failure (cancellation propagates): it returns a
    `Success` (possibly empty) or an `ErrorEnvelope` with the partial results recorded
    through `ctx.record_partial`.

    Args:
        name: the subagent's name, used as `source` and in routing.
        retry: the local retry policy for the subagent's own transient failures and for
            its tool calls (a tool may declare its own).
        alternatives: named approaches the coordinator may try when this one fails.
        policies: tool-use policies for this subagent's tool calls.
        rate_limit: `(n, per_seconds)`: at most n runs per window.
        max_concurrency: at most this many runs at once.
        classifier: maps exceptions to envelopes (default: the built-in mappings).
        checkpoint: persist `ctx.record_partial` when run with a `store`, so a re-run of
            the same run and task continues from its pending sources.
        breaker: a `CircuitBreaker`: fail fast while this subagent keeps failing.

    The options, checked, are `self.options` (a `SubagentOptions`).
    """

    name: str = ""
    description: str = ""

    def __init__(self, name: str | None = None, **options: Unpack[SubagentKwargs]) -> None:
        self.name = name or self.name or type(self).__name__
        self.options = checked = SubagentOptions.of(self.name, options)
        self.retry = checked.retry
        self.alternatives = checked.alternatives
        self.policies = checked.policies
        self.limiter = checked.limiter(self.name)
        self.classifier = checked.classifier
        self.checkpoint = checked.checkpoint
        breaker = checked.breaker
        if breaker is not None and breaker.name is None:
            breaker.name = self.name
        self.breaker = breaker
        self._chain = PolicyChain(self.policies)
        # Made once: every task's attempts are judged by the same rules.
        self._attempt_rules = AttemptRules(
            checked.retry, checked.classifier, breaker, user_code=True
        )

    @abc.abstractmethod
    async def handle(self, task: Task, ctx: Context) -> Any:
        """Do the work and return the result; `[]`/`None` mean "searched, nothing found"."""

    async def run(
        self,
        task: Task | str,
        *,
        scope: RunScope | None = None,
        task_id: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109  # becomes the deadline of every step inside
        run_id: str | None = None,
        budget: RetryBudget | None = None,
        policies: Sequence[ToolPolicy] | None = None,
        state: dict[str, Any] | None = None,
        store: CheckpointStore | None = None,
    ) -> Outcome:
        """Run `task` with local retries and return its one outcome.

        Args:
            task: the task, or a bare query string.
            scope: the `RunScope` of the run this task belongs to, the carrier of what
                the run's tasks share (a coordinator passes its own); a new one, from
                the keywords below, if None.
            task_id: identifies this task in logs; new if None.
            timeout: seconds for everything this task does, waits included.
            run_id: names the run in logs and checkpoints (the scope's, or new, if None).
            budget: the retry budget shared across the run (the scope's, or none).
            policies: more policies, applied before this subagent's own (the scope's if
                None).
            state: the user's dict of the run, shared by its policies (`event.state`);
                the scope's (a fresh one) if None. The framework keeps nothing in it.
            store: checkpoints of the run (the scope's if None): completed
                non-idempotent tool calls are recorded there and not repeated when the
                same run and task run again (and, with `checkpoint=True`, the partial
                results). Without a task id, one is derived from the task's content.
                Without a store, the scope's in-run ledger still keeps such a call from
                being made twice in the run.

        `run_id` and `budget` given with a `scope` must be its own; `policies`, `state`
        and `store` given with one take the scope's place for this task.
        """
        body = self._start(task, scope, task_id, timeout, run_id, budget, policies, state, store)
        engine = body.engine
        if engine.checkpointing:
            await engine.restore_partials()
        with agent_span(self.name) as current:
            try:
                outcome = await body.attempts()
            finally:
                if engine.checkpointing:
                    # Progress survives even a cancellation: saved now, or by the run.
                    await engine.save_partials(durable=False)
            return self._settled(outcome, engine, current)

    def _start(
        self,
        task: Task | str,
        scope: RunScope | None,
        task_id: str | None,
        timeout: float | None,
        run_id: str | None,
        budget: RetryBudget | None,
        policies: Sequence[ToolPolicy] | None,
        state: dict[str, Any] | None,
        store: CheckpointStore | None,
    ) -> _Body:
        """The task's engine, from `run`'s arguments checked, and its body's attempts."""
        if not isinstance(task, Task):  # a Task, most often: one test for it
            if not isinstance(task, str):
                raise UsageError(f"{self.name}.run() takes a Task or a query string, got {task!r}")
            task = Task(query=task)
        at = None
        if timeout is not None:
            timeout = number(f"{self.name}.run(timeout=)", timeout, unit="seconds")
            at = asyncio.get_running_loop().time() + timeout
        scope = self._scope(scope, run_id, budget)
        if store is None:
            store = scope.store
        # Resuming needs the same task id in every process: derive it when none is given.
        task_id = task_id or task.id or (uuid.uuid4().hex[:12] if store is None else task_key(task))
        engine = TaskEngine(
            task=task,
            subagent=self.name,
            scope=scope,
            task_id=task_id,
            retry=self.retry,
            policies=self._policy_chain(scope.policies if policies is None else policies),
            classifier=self.classifier,
            deadline=at,
            state=scope.state if state is None else state,
            log=get_logger(run_id=scope.run_id, task_id=task_id, subagent=self.name),
            store=store if store is not None else scope.ledger_store,
            checkpoint=self.checkpoint and store is not None,
        )
        return _Body(self, task, engine, at, timeout)

    def _settled(self, outcome: Outcome, engine: TaskEngine, current: Any) -> Outcome:
        """The task's one outcome, from its attempts' (`current`: the run's span, if any).

        What stopped the task comes first; then the rulings and retries on the way,
        never silent; then what the subagent knows of a failure; then the log line.
        """
        if engine.misuse is not None:
            raise engine.misuse  # an ask nobody can answer: misuse, even if the body caught it
        if engine.pending_decision is not None:
            # The task waits for a person, whatever the body made of the stopped call.
            outcome = engine.pending_decision
        if current is not None:  # tracing is on
            record_outcome(current, outcome)
        if engine.escalations and outcome.policy is None:
            # The body caught or used the escalated call and went on: the ruling stands.
            update: dict[str, Any] = {"policy": engine.escalations[0]}
            if isinstance(outcome, ErrorEnvelope):
                update["is_retryable"] = False
            outcome = outcome.model_copy(update=update)
        outcome = engine.annotate(outcome)
        log = engine.log
        if isinstance(outcome, ErrorEnvelope):
            outcome = self._complete(outcome, engine)
            log.info(
                "subagent_outcome",
                status="error",
                category=outcome.error_category.value,
                error_type=outcome.error_type,
                retryable=outcome.is_retryable,
                attempts=outcome.attempts,
                partial=outcome.partial_results is not None,
            )
            return outcome
        assert isinstance(outcome, Success)
        if logs_info(log):  # the quiet default drops it: no emptiness test per task for it
            log.info(
                "subagent_outcome",
                status="empty" if outcome.is_empty else "success",
                attempts=outcome.attempts,
            )
        return outcome

    def _policy_chain(self, policies: Sequence[ToolPolicy]) -> PolicyChain:
        """`policies`, then the subagent's own: made once when nothing is added."""
        chain = self._chain
        if policies or chain.policies is not self.policies:
            # Added policies (a coordinator's), or `self.policies` set after __init__.
            chain = PolicyChain((*policies, *self.policies))
        return chain

    def _scope(
        self, scope: RunScope | None, run_id: str | None, budget: RetryBudget | None
    ) -> RunScope:
        """The run's scope: the one given (which `run_id` and `budget` must agree with)."""
        if scope is None:
            return RunScope(run_id, budget=budget)
        if not isinstance(scope, RunScope):
            raise UsageError(f"{self.name}.run(scope=) takes a RunScope, got {scope!r}")
        if run_id is not None and run_id != scope.run_id:
            raise UsageError(
                f"{self.name}.run(run_id={run_id!r}) differs from the scope's run "
                f"{scope.run_id!r}; give one of them"
            )
        if budget is not None and budget is not scope.budget:
            raise UsageError(
                f"{self.name}.run(budget=) is not the scope's retry budget; give the "
                "budget to the RunScope"
            )
        return scope

    def _complete(self, envelope: ErrorEnvelope, engine: TaskEngine) -> ErrorEnvelope:
        """Add what the subagent knows: its progress and its alternatives."""
        alternatives = dict.fromkeys((*self.alternatives, *(envelope.alternative_approaches or ())))
        return envelope.model_copy(
            update={
                "partial_results": merge_partials(
                    envelope.partial_results, engine.partials.snapshot()
                ),
                "alternative_approaches": tuple(alternatives) or None,
            }
        )

    def as_tool(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        impact: Impact | None = None,
    ) -> Tool[..., Any]:
        """This subagent as a tool of a model-backed lead (see `LLMSubagent`)."""
        return subagent_tool(self, name=name, description=description, impact=impact)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class _Body:
    """Attempts of a subagent's body for one task: a small object, not closures.

    A task in flight keeps this one object instead of a cell per captured variable.
    """

    __slots__ = ("at", "bounded", "ctx", "engine", "subagent", "task", "timeout")

    def __init__(
        self,
        subagent: Subagent,
        task: Task,
        engine: TaskEngine,
        at: float | None,
        timeout: float | None,
    ) -> None:
        self.subagent, self.task, self.engine = subagent, task, engine
        self.ctx = Context(engine)  # what the body sees of its task
        self.at, self.timeout = at, timeout
        # Without a deadline or limits there is nothing to enter: that saves a timeout
        # scope and a no-op context manager per attempt on the dispatch path.
        self.bounded = at is not None or not subagent.limiter.is_unlimited

    def attempts(self) -> Coroutine[Any, Any, Outcome]:
        """The body's attempts under the subagent's rules (`attempt_call`), to await."""
        engine, at = self.engine, self.at
        # The body itself is the work, not a bound method of it; and without a deadline
        # nothing adjusts: two objects fewer per task in flight.
        return attempt_call(
            self,
            rules=self.subagent._attempt_rules,
            source=engine.subagent,
            attempted_query=recorded(self.task.query),
            log=engine.log,
            scope=engine,  # the run's budget, the task's deadline, tally and events
            adjust=None if at is None else self.at_deadline,
        )

    def __call__(self, number: int) -> Awaitable[Any]:
        """Attempt `number` of the body."""
        engine = self.engine
        engine.start_attempt(number)
        engine.log.debug("subagent_attempt", attempt=number)
        if not self.bounded:
            # The body's own coroutine, awaited by the caller at once: no frame between.
            return self.subagent.handle(self.task, self.ctx)
        return self._bounded()

    async def _bounded(self) -> Any:
        subagent = self.subagent
        async with asyncio.timeout_at(self.at), subagent.limiter.slot(self.ctx.scope.rates):
            return await subagent.handle(self.task, self.ctx)

    def at_deadline(self, envelope: ErrorEnvelope, exc: BaseException) -> ErrorEnvelope:
        at = self.at
        if at is None or asyncio.get_running_loop().time() < at:
            return envelope
        if envelope.error_type != ErrorType.TIMEOUT:
            return envelope
        message = f"cut at the deadline ({self.timeout:g}s): {envelope.message}"
        return envelope.model_copy(update={"message": message})


spell_out(Subagent.__init__, SubagentKwargs, SubagentOptions)
