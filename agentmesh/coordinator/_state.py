"""What one run's parts are, and what they read of the coordinator that runs them."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentmesh._engine._human import DecisionBook
from agentmesh.checkpoints import CheckpointStore
from agentmesh.coordinator._helper_models import HelperModels
from agentmesh.coordinator._limits import RunLimits
from agentmesh.coordinator._resume import Redo
from agentmesh.coordinator._router import Rewriter, RouterLike
from agentmesh.coordinator._synthesis import Synthesizer
from agentmesh.events import EventSink
from agentmesh.executors import Executor
from agentmesh.models import ModelHealth
from agentmesh.policies import ToolPolicy
from agentmesh.report import TaskRecord
from agentmesh.retry import RetryBudget
from agentmesh.scope import RunScope
from agentmesh.subagents import Subagent
from agentmesh.usage import PriceTable

__all__ = ["Hub", "RunState"]


class Hub(Protocol):
    """The coordinator's configuration, as a run reads it (the `Coordinator` meets it)."""

    subagents: dict[str, Subagent]
    rewriter: Rewriter | None
    synthesizer: Synthesizer
    router: RouterLike
    executor: Executor
    store: CheckpointStore | None
    limits: RunLimits
    retry_budget: RetryBudget | None
    policies: tuple[ToolPolicy, ...]
    prices: PriceTable
    model_health: ModelHealth | None

    @property
    def alternative_names(self) -> frozenset[str]: ...

    @property
    def alternative_subagents(self) -> Mapping[str, Subagent]: ...

    @property
    def alternative_handlers(self) -> Mapping[str, Any]: ...

    @property
    def default_success_row(self) -> bool: ...


@dataclass(slots=True, eq=False)
class RunState:
    """The parts of one run that its tasks share, its deadline counted from its start."""

    hub: Hub
    at: float | None
    slots: asyncio.Semaphore
    log: Any
    info: bool  # whether `log` writes INFO lines (see `logs_info`)
    # Whether every success is routed as `Router.route` routes it (the hub's, read once).
    default_success_row: bool
    scope: RunScope
    # The model calls of the coordinator's own helpers (LLMRewriter, LLMSynthesizer).
    helpers: HelperModels
    # Tasks of a resume that go on after a person's answer, by their index in the plan.
    redo: dict[int, Redo] = field(default_factory=dict)
    # What a stream's early stop reports: the records so far, the tasks in flight.
    records: list[TaskRecord | None] = field(default_factory=list)
    active: dict[int, Any] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return self.scope.run_id

    @property
    def events(self) -> EventSink | None:
        return self.scope.events

    @property
    def book(self) -> DecisionBook | None:
        return self.scope.decisions

    def remaining(self) -> float | None:
        """Seconds left before the run's deadline (never below 0); None: no deadline."""
        if self.at is None:
            return None
        return max(0.0, self.at - asyncio.get_running_loop().time())
