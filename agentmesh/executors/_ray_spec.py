"""A dispatch on the wire: what the driver sends a Ray worker for one (subagent, task).

A `Spec` is one dispatch: its subagent, task, ids and deadline. What every dispatch of
a run shares (the run's state and scope parts as they are now, its policies, store,
retry budget and model terms, the run-state actor's address) is one `RunTerms`, built
by `SpecMaker` once per run per turn of the driver's event loop, not once per dispatch:
the specs of a batch hold the same object, which pickle writes once. The big,
long-lived parts (a subagent, the policies, a store, the prices) travel as `Shipment`s:
put into the object store once, each worker fetching each once.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentmesh.executors._ray_approvals import answers_for
from agentmesh.executors._ray_models import ModelTerms, model_terms
from agentmesh.executors._ray_shared import progress_known, scope_wire
from agentmesh.executors._ray_shipping import _check_shared

if TYPE_CHECKING:
    from agentmesh.approvals import Approval
    from agentmesh.executors._local import Dispatch
    from agentmesh.scope import RunScope
    from agentmesh.subagents import Subagent
    from agentmesh.task import Task

__all__ = ["RunTerms", "Shipment", "Spec", "SpecMaker"]


@dataclass(frozen=True, slots=True)
class Shipment:
    """An object put into the object store once, fetched once per worker process."""

    key: str
    # ray.ObjectRef, nested so that Ray does not resolve it for every task; None when the
    # ref goes to a pool worker apart, once (`_ray_pool`), and the key names it.
    ref: Any


@dataclass(frozen=True, slots=True)
class RunTerms:
    """What every dispatch of one run shares, as the run is at one turn of the driver."""

    policies: Shipment | None
    store: Shipment | None
    budget: tuple[float, float] | None  # (ratio, reserve); (0, inf) means unlimited
    budget_batch: int
    state: dict[str, Any]  # the user's state (a snapshot: workers copy it, never write it)
    shared: dict[str, Any]  # the run scope's forbidden calls and policy memory
    state_refresh: float
    actor: tuple[str, str]  # (name, namespace)
    events: bool  # whether the driver streams the run: send the task's events
    models: ModelTerms | None  # the run's model health settings, usage limits, prices

    def shipments(self) -> tuple[Shipment, ...]:
        """The shipments these terms name (a worker needs their refs)."""
        boxes = [box for box in (self.policies, self.store) if box is not None]
        if self.models is not None:
            boxes.append(self.models.prices)
        return tuple(boxes)

    def __reduce__(self) -> tuple[Any, ...]:
        # A tuple of the values: the dataclass's own way reads `fields()` per object.
        return (RunTerms, tuple(getattr(self, name) for name in _TERMS))


@dataclass(frozen=True, slots=True)
class Spec:
    """Everything about one dispatch, one argument (Ray serializes one object per task,
    not ten); the run's shared parts are its `terms`."""

    subagent: Shipment
    task: Task
    run_id: str
    task_id: str
    call: str  # unique per dispatch: partial results are kept under it
    deadline_at: float | None  # wall clock (time.time()), shared by driver and worker
    terms: RunTerms
    answers: dict[str, Approval] | None = None  # the task's answers; None: the run has no book
    saved_progress: bool | None = None  # the store may hold the task's progress (None: ask it)

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            Spec,
            (
                self.subagent,
                self.task,
                self.run_id,
                self.task_id,
                self.call,
                self.deadline_at,
                self.terms,
                self.answers,
                self.saved_progress,
            ),
        )


_TERMS = tuple(RunTerms.__dataclass_fields__)

Ship = Callable[..., Shipment]
"""The executor's `_ship(obj, what, check=None)`: `obj` put into the object store once."""


class SpecMaker:
    """The driver's side: each dispatch's `Spec`, its run's `RunTerms` made once a turn.

    The terms are a snapshot of the run's state: taken at the first dispatch of a turn
    of the event loop and shared by that turn's dispatches of the run, or again once a
    task's writes were merged in (`changed`). A worker sees the state no older than at
    its dispatch, as before, and other workers' writes with its refreshes.
    """

    def __init__(
        self, ship: Ship, actor: tuple[str, str], budget_batch: int, state_refresh: float
    ) -> None:
        self._ship = ship
        self._actor = actor
        self._budget_batch = budget_batch
        self._state_refresh = state_refresh
        # Unique per dispatch of this executor, without a uuid4 each (its os.urandom).
        self._prefix = uuid.uuid4().hex[:16]
        self._count = itertools.count()
        self._terms: dict[int, tuple[RunScope, RunTerms]] = {}  # this turn's, by scope
        self._loop: asyncio.AbstractEventLoop | None = None

    def spec(
        self, subagent: Subagent, task: Task, dispatch: Dispatch, deadline_at: float | None
    ) -> Spec:
        """The dispatch as a worker takes it (a UsageError for what cannot be shipped)."""
        scope = dispatch.scope
        box = self._ship(subagent, f"subagent {subagent.name!r}")
        return Spec(
            box,
            task,
            dispatch.run_id,
            dispatch.task_id,
            f"{self._prefix}-{next(self._count)}",
            deadline_at,
            self.terms(scope),
            answers_for(scope, dispatch.task_id),
            progress_known(scope, subagent, dispatch.task_id),
        )

    def terms(self, scope: RunScope) -> RunTerms:
        """The run's terms as they are now: made at most once a turn of the loop."""
        entry = self._terms.get(id(scope))
        if entry is not None and entry[0] is scope:
            return entry[1]
        terms = self._make(scope)
        loop = asyncio.get_running_loop()
        if not self._terms or loop is not self._loop:
            # The turn's first: forgotten when the turn ends (also on a new event loop,
            # where the last one's clearing may never have run).
            self._terms.clear()
            self._loop = loop
            loop.call_soon(self._terms.clear)
        self._terms[id(scope)] = (scope, terms)
        return terms

    def changed(self, scope: RunScope) -> None:
        """The run's state or scope parts changed (a task's writes merged in)."""
        self._terms.pop(id(scope), None)

    def _make(self, scope: RunScope) -> RunTerms:
        policies = None
        if scope.policies:
            policies = self._ship(scope.policies, "the coordinator's policies")
        store = None
        if scope.store is not None:
            store = self._ship(scope.store, f"store {scope.store!r}", check=_check_shared)
        budget = scope.budget
        return RunTerms(
            policies,
            store,
            None if budget is None else (budget.ratio, budget.reserve),
            self._budget_batch,
            dict(scope.state),
            scope_wire(scope),
            self._state_refresh,
            self._actor,
            scope.events is not None,
            model_terms(scope, self._ship),
        )
