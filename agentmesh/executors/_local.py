"""The executor seam: "run this subagent on this task -> outcome".

The coordinator only ever awaits `executor.execute(...)`, so a distributed engine can
take the local event loop's place without touching routing or synthesis.
"""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentmesh.checkpoints import CheckpointStore
from agentmesh.envelope import Outcome
from agentmesh.policies import ToolPolicy
from agentmesh.retry import RetryBudget
from agentmesh.scope import RunScope
from agentmesh.subagents import Subagent
from agentmesh.task import Task

__all__ = ["Dispatch", "Executor", "LocalExecutor"]


@dataclass(frozen=True, slots=True)
class Dispatch:
    """How to run one task: its identity in the run, its time, and the run's shared parts.

    `scope` is the run's `RunScope` (the coordinator's, one per run; `run_id` and
    `budget` are its own); without one, the task gets a scope of its own. An executor
    passes it on to `Subagent.run(scope=...)`, or builds one with the same interface
    where the task runs (as the Ray executor does) and merges back what the task wrote.
    """

    run_id: str
    task_id: str
    timeout: float | None = None  # seconds from now; None: no limit
    policies: Sequence[ToolPolicy] = ()
    budget: RetryBudget | None = None
    state: dict[str, Any] = field(default_factory=dict)
    store: CheckpointStore | None = None
    scope: RunScope | None = None


class Executor(Protocol):
    """Where subagents run."""

    async def execute(self, subagent: Subagent, task: Task, dispatch: Dispatch) -> Outcome: ...


class LocalExecutor:
    """Runs subagents on the current event loop (the default)."""

    def execute(
        self, subagent: Subagent, task: Task, dispatch: Dispatch
    ) -> Coroutine[Any, Any, Outcome]:
        # The run's coroutine itself, not one awaiting it: a frame less per task in flight.
        return subagent.run(
            task,
            run_id=dispatch.run_id,
            task_id=dispatch.task_id,
            budget=dispatch.budget,
            timeout=dispatch.timeout,
            policies=dispatch.policies,
            state=dispatch.state,
            store=dispatch.store,
            scope=dispatch.scope,
        )
