"""`TaskEngine`: one task's state in the engine, below the `Context` its body sees.

`Subagent.run` makes one per task and hands the body a `Context` over it; the tool
path, model turns and questions for a person work on the engine, never on the
`Context`. What a task's outcome must carry (rulings, retries, usage, the tools it
went without) is collected here, and `annotate` puts it on the outcome.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentmesh._engine._attempts import RetryTally
from agentmesh._engine._events import TaskEvents
from agentmesh._engine._ledger import ToolLedger
from agentmesh._engine._partials import PartialRecorder
from agentmesh._engine._rulings import TaskRulings
from agentmesh._engine._task_checkpoints import open_ledger, open_progress, restore_partials
from agentmesh._engine._usage import UsageTally
from agentmesh.checkpoints import CheckpointStore
from agentmesh.classify import Classifier
from agentmesh.envelope import ErrorEnvelope, Ruling, Success, ToolsLeftOut
from agentmesh.errors import UsageError
from agentmesh.policies import PolicyChain
from agentmesh.retry import RetryBudget, RetryPolicy
from agentmesh.scope import RunScope
from agentmesh.task import Task

__all__ = ["TaskEngine", "engine_of"]


class TaskEngine:
    """Everything the engine keeps for one task across its attempts.

    Args:
        checkpoint: save the task's recorded progress to `store` (the subagent's
            `checkpoint=True` with a durable store).

    What every task reads is a plain attribute, not a property: `budget` (the run's
    retry budget, None without one), `escalations` (what a post-tool policy escalated,
    kept even when the body recovers), `retries` (every local retry of the task's source
    calls), `checkpointing` (whether recorded progress is saved to a store).
    """

    __slots__ = (
        "_deposit_covered",
        "_ledger",
        "_left_out",
        "_partials",
        "_progress",
        "ask_counts",
        "attempt",
        "budget",
        "checkpointing",
        "classifier",
        "deadline",
        "escalations",
        "events",
        "log",
        "misuse",
        "pending_decision",
        "policies",
        "retries",
        "retry",
        "rulings",
        "run_id",
        "scope",
        "state",
        "store",
        "subagent",
        "task",
        "task_id",
        "usage",
    )

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
        self.deadline = deadline
        self.state = state
        self.log = log
        self.attempt = 0
        # The subagent's run deposited one first attempt into the retry budget; its first
        # source call (tool or model turn) is that attempt, later ones deposit their own.
        # One deposit per task, not one per layer: a storm stays at 1.3x, not 1.5x.
        self._deposit_covered = True
        self._partials: PartialRecorder | None = None  # made at the first record
        # The policy rulings on the task's calls, its escalations and local retries: the
        # engine's own, handed to each tool call (`ToolCall`), never set from outside.
        self.rulings = rulings = TaskRulings()
        self.escalations: list[Ruling] = rulings.escalations
        self.retries: RetryTally = rulings.retries
        self.budget: RetryBudget | None = scope.budget
        # What this task's model calls used, across all its attempts.
        self.usage = UsageTally()
        # Questions for a person (`Ruling.ask`): their occurrences in this attempt, the
        # one that stopped the task, and an ask nobody could answer (see `_human`).
        self.ask_counts: dict[str, int] | None = None  # made at the first ask
        self.pending_decision: ErrorEnvelope | None = None
        self.misuse: UsageError | None = None
        # Optional sources of tools this attempt went on without (see `leave_out`).
        self._left_out: list[ToolsLeftOut] | None = None
        # The run's events as this task emits them; None when nobody streams the run.
        self.events: TaskEvents | None = (
            None if scope.events is None else TaskEvents(scope.events, task_id, subagent)
        )
        self.store = store
        # Made at its first use: most tasks call no non-idempotent tool, and a ledger per
        # task in flight would be two objects more for the garbage collector to walk.
        self._ledger: ToolLedger | None = None
        self._progress = progress = (
            open_progress(store, scope, subagent, task_id, log) if checkpoint else None
        )
        self.checkpointing = progress is not None

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
        """The task's progress across its attempts; made at first use (most record none)."""
        if self._partials is None:
            self._partials = PartialRecorder()
        return self._partials

    def start_attempt(self, number: int) -> None:
        """Before each attempt of the task's body."""
        self.attempt = number
        if self.ask_counts:  # most attempts ask nobody: nothing to clear
            self.ask_counts.clear()
        self._left_out = None  # the outcome tells what the attempt that made it lacked
        if self._ledger is not None:  # one made later starts with no calls counted
            self._ledger.new_attempt()

    def deposit_for_call(self) -> bool:
        """Whether a source call now deposits into the retry budget (see `__init__`)."""
        if self._deposit_covered:
            self._deposit_covered = False
            return False
        return True

    async def restore_partials(self) -> bool:
        """Load the progress a previous run of this task saved; True when there was some.

        A store that cannot be read is logged and the task starts over: redoing work is
        safe, the ledger still refuses to repeat a side effect it cannot rule out.
        """
        if self._progress is None:
            return False
        restored = await restore_partials(self._progress, self.partials, self.log)
        if restored and self.events is not None:
            self.events.restored(self.partials)
        return restored

    async def save_partials(self, *, durable: bool = True) -> None:
        """Wait until the recorded progress is saved (a no-op without checkpointing).

        `durable=False`: progress written behind is left to the coordinator's run, which
        commits it before it reports (see `ProgressSaver`).
        """
        if self._progress is not None:
            await self._progress.flush(durable=durable)

    def record_partial(
        self,
        findings: Iterable[Any] | Any,
        completed: str | Iterable[str] | None,
        pending: str | Iterable[str] | None,
    ) -> None:
        """Record progress that must survive a later failure (`Context.record_partial`)."""
        if self.events is None:
            self.partials.record(findings, completed=completed, pending=pending)
        else:
            self.events.record(self.partials, findings, completed, pending)
        self.log.debug("partial_recorded", completed=completed, pending=pending)
        if self._progress is not None:
            self._progress.schedule(self.partials)

    def annotate(self, outcome: Success[Any] | ErrorEnvelope) -> Success[Any] | ErrorEnvelope:
        """The task's outcome carrying its rulings, local retries, model usage and the
        tools it went without.

        Counts already on the outcome (a nested subagent's, passed on) are kept and added.
        """
        outcome = self.rulings.annotate(outcome)
        if self._left_out:
            outcome = outcome.model_copy(update={"tools_left_out": tuple(self._left_out)})
        # Usage is not merged from the outcome: a nested run's was adopted already
        # (`adopt`), and the envelope it failed with may be this very outcome.
        usage = self.usage.summary()
        return outcome if usage is None else outcome.model_copy(update={"usage": usage})

    def leave_out(self, source: str, error_type: str, reason: str) -> None:
        """Say that this attempt goes on without the tools of `source`, and why.

        The task's outcome carries it (`tools_left_out`) and its report entry says it.
        """
        if self._left_out is None:
            self._left_out = []
        self._left_out.append(ToolsLeftOut(source=source, error_type=error_type, reason=reason))

    def adopt(self, outcome: Success[Any] | ErrorEnvelope) -> None:
        """Take in what a nested run reported: its rulings, its retries, an escalation.

        A subagent used as a tool runs in an engine of its own; without this, a lead that
        recovers (or simply answers "Done.") would drop what the nested run was told.
        """
        self.rulings.adopt(outcome)
        self.usage.merge(outcome.usage)


def engine_of(ctx: Any) -> TaskEngine:
    """The engine behind a subagent's `Context`: for the framework's own layers (a
    subagent used as a tool, an MCP tool, an `LLMSubagent`), never for a body."""
    # The Context's one private part, read here only: the engine stays off its face.
    engine: TaskEngine = ctx._engine
    return engine
