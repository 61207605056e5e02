"""The executor seam: "run this subagent on this task -> outcome".

The coordinator only ever awaits `executor.execute(...)`, so a distributed engine can
take the local event loop's place without touching routing or synthesis.
"""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from agentmesh.envelope import Outcome
from agentmesh.scope import RunScope
from agentmesh.subagents import Subagent
from agentmesh.task import Task

__all__ = ["Dispatch", "Executor", "LocalExecutor"]


@dataclass(frozen=True, slots=True)
class Dispatch:
    """How to place one task: the run it belongs to, its id in the run, and its time.

    `scope` is the run's `RunScope` (the coordinator's, one per run), the one carrier of
    what the run's tasks share: its id, retry budget, policies, state and store. An
    executor passes it on to `Subagent.run(scope=...)`, or builds one with the same
    interface where the task runs (as the Ray executor does) and merges back what the
    task wrote.
    """

    scope: RunScope
    task_id: str
    timeout: float | None = None  # seconds from now; None: no limit

    @property
    def run_id(self) -> str:
        """The id of the run (the scope's)."""
        return self.scope.run_id


class Executor(Protocol):
    """Where subagents run.

    An executor whose tasks run in other processes may also have `check_store(store)`,
    which raises `UsageError` for a checkpoint store they cannot share: the
    `Coordinator` asks it before a run or a resume starts.
    """

    async def execute(self, subagent: Subagent, task: Task, dispatch: Dispatch) -> Outcome: ...


class LocalExecutor:
    """Runs subagents on the current event loop (the default)."""

    # Whether this class runs `execute` as LocalExecutor's own: asked once per class,
    # when it is made, not once per task in `start`.
    _own_execute: bool = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._own_execute = cls.execute is LocalExecutor.execute

    def execute(
        self, subagent: Subagent, task: Task, dispatch: Dispatch
    ) -> Coroutine[Any, Any, Outcome]:
        # The run's coroutine itself, not one awaiting it: a frame less per task in flight.
        return subagent.run(
            task, scope=dispatch.scope, task_id=dispatch.task_id, timeout=dispatch.timeout
        )

    def start(
        self, subagent: Subagent, task: Task, scope: RunScope, task_id: str, timeout: float | None
    ) -> Coroutine[Any, Any, Outcome]:
        """`execute` without a `Dispatch`: the coordinator's way in, one object less per task.

        A subclass that overrides `execute` is called through it, as any executor is.
        """
        if not self._own_execute:
            return self.execute(subagent, task, Dispatch(scope, task_id, timeout))
        return subagent.run(task, scope=scope, task_id=task_id, timeout=timeout)
