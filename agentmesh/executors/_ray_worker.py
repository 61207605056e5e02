"""What runs inside a Ray worker: one (subagent, task) to its outcome's wire form.

The worker runs `Subagent.run` exactly as the local executor does, on its own event
loop, in a `RunScope` whose parts are cluster-wide: a retry budget leased from the
run-state actor, forbidden calls and policy memory whose writes reach the actor (and
come back to the driver with the result), a ledger kept in the actor, rate-limit
starts reserved with it, and the models' health and usage limits claimed in it. The
user's state dict is shared the same way. Every `ctx.record_partial` is acknowledged by
the actor before it returns, so the progress a task recorded survives the worker being
killed the next instant.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Final, Literal, TypeVar, overload

import pydantic_core
import ray

from agentmesh._codec import SCHEMA_VERSION
from agentmesh._engine._model_calls import is_usage_refusal
from agentmesh._engine._saved_progress import SavedProgress
from agentmesh._logging import get_logger
from agentmesh.checkpoints import Checkpoint, CheckpointStore
from agentmesh.context import Context
from agentmesh.envelope import Outcome, PartialResults
from agentmesh.events import EventSink, RunEvent
from agentmesh.executors._ray_approvals import asked_by, worker_book
from agentmesh.executors._ray_models import ClusterModelHealth, ClusterUsageMeter, Outbox
from agentmesh.executors._ray_shared import Refresher, SharedState, _WorkerScope
from agentmesh.executors._ray_spec import Shipment, Spec
from agentmesh.executors._ray_state import Op
from agentmesh.policies import ToolPolicy
from agentmesh.retry import RetryBudget
from agentmesh.subagents import Subagent
from agentmesh.task import Task

__all__ = ["REFS", "run_spec", "run_task", "wire"]

T = TypeVar("T")

Space = Literal["state", "scope"]
"""Which of a run's shared dicts a write goes to: the user's state or the scope's."""

# How long a worker waits for the actor to acknowledge a partial result or a lease.
_ACTOR_TIMEOUT: Final = 30.0

# Shipped objects a worker keeps deserialized, most recently used last.
_SHIPPED: OrderedDict[str, Any] = OrderedDict()
_MAX_SHIPPED: Final = 256
# Refs of shipments sent to a pool worker once, apart from the specs (which name them).
REFS: dict[str, Any] = {}
_ACTORS: dict[tuple[str, str], Any] = {}
# Each subagent's tapped copy (`_tapped`), by id, with the subagent (so its id stays its).
_TAPPED: dict[int, tuple[Subagent, Subagent]] = {}
# The running task's line to the actor, in its asyncio task's context (`run_spec`).
_LINK: ContextVar[_Link] = ContextVar("agentmesh_ray_link")


def wire(outcome: Outcome) -> dict[str, Any]:
    """The outcome's wire shape (camelCase keys); values stay Python objects.

    Not `to_dict()`: JSON mode would turn a tuple into a list and a model into a dict,
    and a run's report must be the same whichever executor ran it.
    """
    fields = type(outcome).model_fields
    return {info.alias or name: getattr(outcome, name) for name, info in fields.items()}


def run_task(spec: Spec) -> dict[str, Any]:
    """The remote function (a Ray task each): the task's events come with its outcome."""
    events = EventCollector(spec.run_id) if spec.terms.events else None
    return asyncio.run(run_spec(spec, events))


async def run_spec(spec: Spec, events: EventSink | None) -> dict[str, Any]:
    """Run one dispatch on this event loop; its events go to `events` (None: none built)."""
    subagent: Subagent = _unship(spec.subagent)
    terms = spec.terms
    policies: Sequence[ToolPolicy] = () if terms.policies is None else _unship(terms.policies)
    store: CheckpointStore | None = None if terms.store is None else _unship(terms.store)
    link = _Link(_actor(terms.actor), spec)
    state = SharedState(terms.state, link)
    shared = SharedState(terms.shared, _Writes(link, "scope"))
    budget = _budget(spec, link)
    scope = _WorkerScope(
        shared,
        spec.run_id,
        budget=budget,
        ledger_store=_ActorStore(link),
        rates=link,
        policies=policies,
        state=state,
        store=store,
        events=events,
        decisions=worker_book(store, spec.run_id, spec.answers),
        **_models(spec, link),
    )
    scope.saved_progress = SavedProgress.of_task(subagent.name, spec.task_id, spec.saved_progress)
    timeout = None if spec.deadline_at is None else max(0.0, spec.deadline_at - time.time())
    refresher = Refresher(terms.state_refresh, link.actor, spec.run_id, state, shared)
    _LINK.set(link)  # this task's (its asyncio task's own context): the tap reads it
    try:
        outcome = await _tapped(subagent).run(
            spec.task, scope=scope, task_id=spec.task_id, timeout=timeout
        )
    finally:
        await refresher.stop()
    link.done()
    counts = None
    if budget is not None:
        # The driver settles with the actor for many tasks at once: first attempts not
        # deposited yet and tokens leased but not used go back in one call, not one each.
        counts = (budget.first_attempts, budget.retries, budget.denied, *_unsettled(budget))
    return {
        "outcome": wire(outcome),
        # Not part of the wire form (nothing from outside may claim it): said beside it.
        "usage_refusal": is_usage_refusal(outcome),
        "budget": counts,
        "state": state.ops,
        "shared": shared.ops,
        # Empty when the events went to the driver as they came (the worker pool's).
        "events": events.events if isinstance(events, EventCollector) else (),
        "usage_stop": scope.usage.stop,
        "asked": asked_by(scope.decisions),
    }


def _models(spec: Spec, link: _Link) -> dict[str, Any]:
    """The scope's model health and usage meter: the run's, kept in the actor."""
    if spec.terms.models is None:
        return {}
    outbox, terms = link.outbox, spec.terms.models
    return {
        "model_health": ClusterModelHealth(outbox, spec.run_id, spec.call, terms),
        "usage": ClusterUsageMeter(outbox, spec.run_id, terms, _unship(terms.prices)),
    }


def _unsettled(budget: RetryBudget) -> tuple[int, int]:
    if isinstance(budget, LeasedBudget):
        return budget.deposits, budget.lease
    return 0, 0


def _unship(box: Shipment) -> Any:
    obj = _SHIPPED.get(box.key)
    if obj is None:
        obj = ray.get(box.ref if box.ref is not None else REFS[box.key])
        _SHIPPED[box.key] = obj
        while len(_SHIPPED) > _MAX_SHIPPED:
            _SHIPPED.popitem(last=False)
    else:
        _SHIPPED.move_to_end(box.key)
    return obj


def _actor(address: tuple[str, str]) -> Any:
    actor = _ACTORS.get(address)
    if actor is None:
        name, namespace = address
        actor = _ACTORS[address] = ray.get_actor(name, namespace=namespace)
    return actor


class _Link:
    """The worker's line to the run-state actor for one task."""

    __slots__ = ("actor", "outbox", "recorded", "spec", "warned")

    def __init__(self, actor: Any, spec: Spec) -> None:
        self.actor = actor
        self.spec = spec
        self.warned = False
        self.recorded = False
        self.outbox = Outbox(actor, spec.run_id)  # what the task tells of its models

    @property
    def log(self) -> Any:
        return get_logger(run_id=self.spec.run_id, task_id=self.spec.task_id)

    def partials(self, snapshot: PartialResults | None) -> None:
        """Hand the task's progress to the actor and wait until it has it."""
        if snapshot is None:
            return
        self.recorded = True
        try:
            ray.get(
                self.actor.record.remote(self.spec.run_id, self.spec.call, snapshot),
                timeout=_ACTOR_TIMEOUT,
            )
        except Exception as exc:
            # The progress is still in the task's own context: only a worker death
            # would lose it now. Say so once, and go on.
            if not self.warned:
                self.warned = True
                self.log.warning("partials_not_shared", error=f"{type(exc).__name__}: {exc}")

    async def reserve_start(self, name: str, n: int, per_seconds: float) -> float | None:
        """The scope's rate reservations: the actor counts every worker's starts."""
        try:
            delay: float = await self.actor.rate_start.remote(name, n, per_seconds)
        except Exception as exc:
            # The actor is gone: the limit still holds in this worker, if not beyond it.
            if not self.warned:
                self.warned = True
                self.log.warning("rate_limit_not_shared", error=f"{type(exc).__name__}: {exc}")
            return None
        return delay

    def write(self, op: Op, space: Space = "state") -> None:
        self.actor.write.remote(self.spec.run_id, [op], space)

    def done(self) -> None:
        self.outbox.flush()
        if self.recorded:
            self.actor.forget.remote(self.spec.run_id, self.spec.call)


class _Writes:
    """The link as one space's writer: a `SharedState` of the scope writes there."""

    __slots__ = ("link", "space")

    def __init__(self, link: _Link, space: Space) -> None:
        self.link = link
        self.space = space

    def write(self, op: Op) -> None:
        self.link.write(op, self.space)


def _tapped(subagent: Subagent) -> Subagent:
    """A shallow copy of `subagent` whose context reports every partial result to the
    running task's link (`_LINK`); one per subagent, kept."""
    entry = _TAPPED.get(id(subagent))
    if entry is not None and entry[0] is subagent:
        return entry[1]
    inner = subagent.handle

    async def handle(task: Task, ctx: Context) -> Any:
        if not getattr(ctx, "_agentmesh_tapped", False):
            record = ctx.record_partial
            link = _LINK.get()

            def record_partial(
                findings: Iterable[Any] | Any = (),
                *,
                completed: str | Iterable[str] | None = None,
                pending: str | Iterable[str] | None = None,
            ) -> None:
                record(findings, completed=completed, pending=pending)
                link.partials(ctx.partials.snapshot())

            # An instance attribute shadows the method for this context only.
            ctx.record_partial = record_partial  # type: ignore[method-assign]  # see above
            ctx._agentmesh_tapped = True  # type: ignore[attr-defined]  # a marker
            link.partials(ctx.partials.snapshot())  # progress restored from a checkpoint
        return await inner(task, ctx)

    clone = copy.copy(subagent)
    clone.handle = handle  # type: ignore[method-assign]  # the copy's own, not the class's
    if len(_TAPPED) >= _MAX_SHIPPED:
        _TAPPED.clear()
    _TAPPED[id(subagent)] = (subagent, clone)
    return clone


def _budget(spec: Spec, link: _Link) -> RetryBudget | None:
    if spec.terms.budget is None:
        return None
    ratio, reserve = spec.terms.budget
    if reserve == float("inf"):
        return RetryBudget.unlimited()  # nothing to share: no round trips
    return LeasedBudget(link, ratio, reserve, spec.terms.budget_batch)


class LeasedBudget(RetryBudget):
    """The run's retry budget as one worker sees it: tokens leased from the actor.

    First attempts are counted locally and deposited with the next lease or at the end;
    a retry takes a token from the local lease and asks the actor for `batch` more only
    when the lease is empty. The run's bound (reserve + ratio x first attempts) holds:
    the actor never grants more tokens than the deposits so far allow.
    """

    __slots__ = ("_batch", "_link", "deposits", "lease")

    def __init__(self, link: _Link, ratio: float, reserve: float, batch: int) -> None:
        super().__init__(ratio=ratio, reserve=reserve)
        self._link = link
        self._batch = batch
        self.deposits = 0  # first attempts the actor has not counted yet
        self.lease = 0  # tokens leased and not used yet

    def record_first_attempt(self) -> None:
        self.first_attempts += 1
        self.deposits += 1

    def try_spend(self) -> bool:
        if self.lease < 1:
            self.lease += self._ask()
        if self.lease >= 1:
            self.lease -= 1
            self.retries += 1
            return True
        self.denied += 1
        return False

    def _ask(self) -> int:
        spec = self._link.spec
        try:
            granted: int = ray.get(
                self._link.actor.lease.remote(
                    spec.run_id, self.ratio, self.reserve, self.deposits, self._batch
                ),
                timeout=_ACTOR_TIMEOUT,
            )
        except Exception as exc:
            # No answer means no permission: a retry storm is worse than one gap.
            self._link.log.warning("retry_budget_unreachable", error=f"{type(exc).__name__}")
            return 0
        self.deposits = 0
        return granted


class _ActorStore:
    """The in-run ledger, kept in the run-state actor so every worker of the run sees it.

    A `CheckpointStore` whose checkpoints live in the actor: a completed non-idempotent
    call is then not made again by a coordinator's second round of the task, whichever
    worker runs it.
    """

    def __init__(self, link: _Link) -> None:
        self._actor = link.actor

    async def put(self, run_id: str, stage: str, key: str, value: object) -> None:
        await self._actor.row_put.remote(_row(run_id, stage, key, value))

    async def claim(self, run_id: str, stage: str, key: str, value: object) -> Checkpoint | None:
        existing: _Row | None = await self._actor.row_claim.remote(_row(run_id, stage, key, value))
        return None if existing is None else existing[3]

    @overload
    async def get(self, run_id: str, stage: str, key: str) -> Checkpoint | None: ...
    @overload
    async def get(self, run_id: str, stage: str, key: str, *, model: type[T]) -> T | None: ...
    async def get(
        self, run_id: str, stage: str, key: str, *, model: type[T] | None = None
    ) -> Checkpoint | T | None:
        row: _Row | None = await self._actor.row_get.remote(run_id, stage, key)
        if row is None:
            return None
        return row[3] if model is None else row[3].value_as(model)

    async def list(self, run_id: str, stage: str | None = None) -> Sequence[Checkpoint]:
        rows: list[_Row] = await self._actor.row_list.remote(run_id, stage)
        return tuple(row[3] for row in rows)

    async def delete(self, run_id: str, stage: str | None = None, key: str | None = None) -> int:
        count: int = await self._actor.row_delete.remote(run_id, stage, key)
        return count

    async def close(self) -> None:
        """Nothing to release: the checkpoints live in the actor, as long as the run."""


_Row = tuple[str, str, str, Checkpoint]
"""A checkpoint as the run-state actor keeps it: its address first, which is all it reads."""


def _row(run_id: str, stage: str, key: str, value: object) -> _Row:
    checkpoint = Checkpoint(
        run_id=run_id,
        stage=stage,
        key=key,
        value=pydantic_core.to_jsonable_python(value, by_alias=True),
        schema_version=SCHEMA_VERSION,
        saved_at=datetime.now(UTC),
    )
    return (run_id, stage, key, checkpoint)


class EventCollector(EventSink):
    """Keeps a task's events in a list, handed back to the driver with its outcome."""

    __slots__ = ("events",)

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id)
        self.events: list[RunEvent] = []

    def _put(self, event: RunEvent) -> None:
        self.events.append(event)
