"""`Context`: what a subagent gets to do its work — tool calls, progress, deadline, logger.

`ctx.call(tool, **args)` is the tool path of the design (in `agentmesh._engine._tool_call`):

    pre-tool policies (may deny) -> input validation -> limits -> local retry
    -> classification -> post-tool policies (may forbid retry / escalate / withhold)

It returns the tool's data, or raises `ToolCallFailed` carrying the final envelope.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from agentmesh._engine._attempts import RetryTally
from agentmesh._engine._partials import PartialRecorder, merge_partials
from agentmesh._engine._rulings import TaskRulings, apply_verdict
from agentmesh._engine._task_checkpoints import open_ledger, open_progress, restore_partials
from agentmesh._engine._tool_call import call_tool
from agentmesh._tracing import record_outcome, span
from agentmesh.checkpoints._ledger import ToolLedger
from agentmesh.checkpoints._store import CheckpointStore
from agentmesh.classify import Classifier
from agentmesh.envelope import ErrorEnvelope, PolicyVerdict, Success, ToolsLeftOut
from agentmesh.errors import ToolCallFailed, UsageError
from agentmesh.policies import PolicyChain
from agentmesh.retry import RetryPolicy
from agentmesh.scope import RunScope
from agentmesh.task import Task
from agentmesh.tools import Tool
from agentmesh.usage._records import UsageTally

if TYPE_CHECKING:
    from agentmesh.models import Model, ModelResponse

__all__ = ["Context", "PartialRecorder", "apply_verdict", "merge_partials"]

R = TypeVar("R")


class Context:
    """Everything a subagent's body needs for one task: tools, progress, time, identity.

    Created by `Subagent.run` (one per task run); subagents never build one themselves.
    `scope` is the run's `RunScope`: what every task of the run shares.
    """

    def __init__(
        self,
        *,
        task: Task,
        subagent: str,
        scope: RunScope,
        task_id: str,
        retry: RetryPolicy,
        policies: PolicyChain,
        classifier: Classifier,
        deadline: float | None,
        state: dict[str, Any],
        log: Any,
        store: CheckpointStore | None = None,
        checkpoint: bool = False,
    ) -> None:
        self.task = task
        self.subagent = subagent
        self.scope = scope
        self.run_id = scope.run_id
        self.task_id = task_id
        self.retry = retry
        self.policies = policies
        self.classifier = classifier
        self.budget = scope.budget
        self.deadline = deadline
        self.state = state
        self.log = log
        self.attempt = 0
        # The subagent's run deposited one first attempt into the retry budget; its first
        # source call (tool or model turn) is that attempt, later ones deposit their own.
        # One deposit per task, not one per layer: a storm stays at 1.3x, not 1.5x.
        self._deposit_covered = True
        self._partials: PartialRecorder | None = None  # made at the first record
        self._verdicts = TaskRulings()
        # What this task's model calls used, across all its attempts (`ctx.call_model`).
        self.usage = UsageTally()
        # Questions for a person (`Decision.ask`): their occurrences in this attempt, the
        # one that stopped the task, and an ask nobody could answer (see `_human`).
        self.ask_counts: dict[str, int] = {}
        self.pending_decision: ErrorEnvelope | None = None
        self.misuse: UsageError | None = None
        # Optional sources of tools this attempt went on without (see `leave_out`).
        self._left_out: list[ToolsLeftOut] | None = None
        # The run's events as this task emits them; None when nobody streams the run.
        self.events = None if scope.events is None else scope.events.for_task(task_id, subagent)
        self.store = store
        # Made at its first use: most tasks call no non-idempotent tool, and a ledger per
        # task in flight would be two objects more for the garbage collector to walk.
        self._ledger: ToolLedger | None = None
        self._progress = open_progress(store, scope.run_id, subagent, task_id, log, save=checkpoint)

    @property
    def ledger(self) -> ToolLedger | None:
        """The task's side-effect ledger of non-idempotent calls (None without a store)."""
        if self._ledger is None and self.store is not None:
            self._ledger = open_ledger(
                self.store, self.run_id, self.subagent, self.task_id, self.log
            )
        return self._ledger

    @property
    def partials(self) -> PartialRecorder:
        """The task's progress across its attempts (`record_partial`, restored checkpoints).

        Made at first use: most tasks record none, and every task in flight would hold an
        empty recorder.
        """
        if self._partials is None:
            self._partials = PartialRecorder()
        return self._partials

    @property
    def checkpointing(self) -> bool:
        """Whether recorded progress is saved to a store (`checkpoint=True` and a store)."""
        return self._progress is not None

    @property
    def escalations(self) -> list[PolicyVerdict]:
        """Escalations a post-tool policy called for, kept even when the body recovers."""
        return self._verdicts.escalations

    @property
    def retries(self) -> RetryTally:
        """Every local retry of this task's source calls, for its outcome."""
        return self._verdicts.retries

    @property
    def rulings(self) -> tuple[PolicyVerdict, ...]:
        """The policy rulings on this task's tool calls so far, each with its tool."""
        return self._verdicts.rulings

    def start_attempt(self, number: int) -> None:
        """Called by `Subagent.run` before each attempt of the task."""
        self.attempt = number
        self.ask_counts.clear()
        self._left_out = None  # the outcome tells what the attempt that made it lacked
        if self._ledger is not None:  # one made later starts with no calls counted
            self._ledger.new_attempt()

    async def restore_partials(self) -> bool:
        """Load the progress a previous run of this task saved; True when there was some.

        Called by `Subagent.run` for a subagent with `checkpoint=True`. A store that cannot
        be read is logged and the task starts over: redoing work is safe, the ledger
        still refuses to repeat a side effect it cannot rule out.
        """
        if self._progress is None:
            return False
        restored = await restore_partials(self._progress, self.partials, self.log)
        if restored and self.events is not None:
            self.events.restored(self.partials)
        return restored

    async def save_partials(self) -> None:
        """Wait until the recorded progress is saved (a no-op without `checkpoint=True`).

        Saving starts by itself at every `record_partial`; await this before a long step
        that does not go through `ctx.call` to be sure the progress is durable first.
        """
        if self._progress is not None:
            await self._progress.flush()

    def annotate(self, outcome: Success[Any] | ErrorEnvelope) -> Success[Any] | ErrorEnvelope:
        """The task's outcome carrying its rulings, local retries, model usage and the
        tools it went without.

        Called by `Subagent.run`. Counts already on the outcome (a nested subagent's,
        passed on) are kept and added.
        """
        outcome = self._verdicts.annotate(outcome)
        if self._left_out:
            outcome = outcome.model_copy(update={"tools_left_out": tuple(self._left_out)})
        # Usage is not merged from the outcome: a nested run's was adopted already
        # (`adopt`), and the envelope it failed with may be this very outcome.
        usage = self.usage.summary()
        return outcome if usage is None else outcome.model_copy(update={"usage": usage})

    def leave_out(self, source: str, error_type: str, reason: str) -> None:
        """Say that this attempt goes on without the tools of `source`, and why.

        Called by `LLMSubagent` when an optional source of tools cannot be listed; the
        task's outcome carries it (`tools_left_out`) and its report entry says it.
        """
        if self._left_out is None:
            self._left_out = []
        self._left_out.append(ToolsLeftOut(source=source, error_type=error_type, reason=reason))

    def adopt(self, outcome: Success[Any] | ErrorEnvelope) -> None:
        """Take in what a nested run reported: its rulings, its retries, an escalation.

        A subagent used as a tool runs in a context of its own; without this, a lead that
        recovers (or simply answers "Done.") would drop what the nested run was told.
        """
        self._verdicts.adopt(outcome)
        self.usage.merge(outcome.usage)

    def deposit_for_call(self) -> bool:
        """Whether a source call now deposits into the retry budget (see `__init__`)."""
        if self._deposit_covered:
            self._deposit_covered = False
            return False
        return True

    def remaining(self) -> float | None:
        """Seconds left before the deadline, or None when there is none."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - asyncio.get_running_loop().time())

    def record_partial(
        self,
        findings: Iterable[Any] | Any = (),
        *,
        completed: str | Iterable[str] | None = None,
        pending: str | Iterable[str] | None = None,
    ) -> None:
        """Record progress that must survive a later failure.

        Args:
            findings: results found so far (a list; a single dict or string is one finding).
            completed: the source(s) now done; they leave `pending`.
            pending: the source(s) still to do.
        """
        if self.events is None:
            self.partials.record(findings, completed=completed, pending=pending)
        else:
            self.events.record(self.partials, findings, completed, pending)
        self.log.debug("partial_recorded", completed=completed, pending=pending)
        if self._progress is not None:
            self._progress.schedule(self.partials.snapshot())

    async def call_model(self, model: Model, **request: Any) -> ModelResponse:
        """One model turn, as `ctx.call` makes a tool call: see `agentmesh._engine._model_calls`.

        Keyword arguments: `messages`, `system`, `tools`, `tool_choice`, `max_tokens` as
        for `Model.create`; `retry` (each model's local retries, the subagent's policy by
        default) and `usage_limits` (the caller's own). Raises `CallFailed` when it failed.
        """
        from agentmesh._engine._model_calls import call_model

        return await call_model(self, model, **request)

    async def call(self, tool: Tool[..., R], /, *args: Any, **kwargs: Any) -> R:
        """Call `tool` through policies, validation, limits and local retry.

        The arguments are checked against the tool's schema when the call is made (a
        mismatch is a validation envelope); statically only the result type is, since
        the tool's injected parameters (`ctx`, `idempotency_key`) are not the caller's.

        Returns the tool's data. Raises `ToolCallFailed` (carrying the envelope) when the
        call failed for good; catch it to go on with other sources, or let it propagate to
        make it the subagent's outcome.
        """
        with span(
            "tool",
            tool=getattr(tool, "name", None),
            subagent=self.subagent,
            run_id=self.run_id,
            task_id=self.task_id,
        ) as current:
            try:
                data = await call_tool(self, tool, args, kwargs)
            except ToolCallFailed as failed:
                record_outcome(current, failed.envelope)
                raise
            if current is not None:
                current.set_attributes({"agentmesh.outcome": "success"})
            return data
