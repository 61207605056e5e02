"""`RunScope`: everything the tasks of one run share, in one typed object.

The coordinator creates one per run (and `Subagent.run` one when it is called alone);
`Dispatch` carries it to the executor and `Context` holds it as `ctx.scope`. It is the
one carrier of a run's state, each part a typed field, and keeps the framework's run-wide
memory out of the user's `state` dict:

* the retry budget of the run;
* the run's tool policies (the coordinator's, applied before each subagent's own), the
  user's `state` dict its policies share, and its checkpoint `store` (None: none);
* the in-run ledger's store: a completed non-idempotent call is not made again within
  the run, even without a durable store;
* forbidden calls (`forbidden_calls`): "no new attempt of this call" holds for the rest
  of the run, whichever subagent asks again;
* policy memory (`policy_memory`): what a stateful policy learned, one mapping per
  policy name;
* rate-limit reservations: who counts the starts of a rate-limited tool or subagent
  (this process, unless an executor counts them for a whole cluster);
* model usage and its limits: every model call of the run is admitted and counted by
  its `UsageMeter` (on the Ray executor, a worker's meter asks the run-state actor's);
* model health (`model_health`): each model's breaker, quota and window of calls in
  flight, so that one task's 529 keeps the others away from an overloaded model (on
  the Ray executor, a worker's health asks the run-state actor's);
* pending decisions: the questions for a person and their answers, kept in the run's
  checkpoint store (None without a store: nobody could answer them).
* the event sink: where the run's events go when someone streams them (None when
  nobody does: then no event is built);
* saved progress (`saved_progress`): which tasks hold progress saved in the run's store,
  listed once when the run starts, so that a task with none reads nothing (None:
  unknown, each checkpointing task reads its own).

An executor that runs tasks elsewhere (the Ray executor) hands its workers a subclass
whose parts reach its shared state; the interface stays the same.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from agentmesh.checkpoints import CheckpointStore, MemoryStore
from agentmesh.usage import UsageMeter

if TYPE_CHECKING:
    from agentmesh._engine._human import DecisionBook
    from agentmesh._engine._saved_progress import SavedProgress
    from agentmesh.envelope import Ruling
    from agentmesh.events import EventSink
    from agentmesh.models import ModelHealth
    from agentmesh.retry import RetryBudget
    from agentmesh.throttle import RateReservations

__all__ = ["RunScope"]

# The keys of the deprecated `shared=` mapping: the forbidden calls, one per policy name.
_FORBIDDEN: Final = "forbidden_calls"
_POLICY: Final = "policy:"


class RunScope:
    """The shared parts of one run: budget, ledger, forbidden calls, policy memory, rates.

    Args:
        run_id: the run's id; a new one if None.
        budget: the retry budget shared by every task of the run; none by default.
        ledger_store: where the in-run ledger keeps completed non-idempotent calls; an
            in-memory store of this run by default (a durable `store=` given to a run
            takes its place for the tasks that get it).
        rates: who reserves rate-limit starts for the run's limiters; None to count
            them in this process.
        forbidden_calls: call id -> the ruling that forbids it for the rest of the run
            (an executor that shares them elsewhere passes its own); empty by default.
        policy_memory: policy name -> what that stateful policy keeps for the run;
            empty by default.
        policies: the run's tool policies, applied before each subagent's own.
        state: the user's dict of the run, shared by its policies (`event.state`); a
            fresh one by default. The framework keeps nothing in it.
        store: the run's checkpoint store (see `Subagent.run(store=)`); None: none.
        usage: the run's model usage and its limits; a meter without limits by default.
        decisions: the run's pending decisions and their answers (the coordinator's,
            with a store); None: `Ruling.ask` is refused.
        events: the sink of the run's events (see `Coordinator.stream`); None when
            nobody reads them.
        model_health: the models' health the run's tasks share (see `ModelHealth`); a
            fresh one of this run by default (made at the first model call).
        shared: deprecated: the forbidden calls and policy memory under string keys;
            give `forbidden_calls=` and `policy_memory=`.
    """

    __slots__ = (
        "_ledger_store",
        "_model_health",
        "budget",
        "decisions",
        "events",
        "forbidden_calls",
        "policies",
        "policy_memory",
        "rates",
        "run_id",
        "saved_progress",
        "state",
        "store",
        "usage",
    )

    def __init__(
        self,
        run_id: str | None = None,
        *,
        budget: RetryBudget | None = None,
        ledger_store: CheckpointStore | None = None,
        rates: RateReservations | None = None,
        forbidden_calls: dict[str, Ruling] | None = None,
        policy_memory: dict[str, dict[str, Any]] | None = None,
        policies: Sequence[Any] = (),
        state: dict[str, Any] | None = None,
        store: CheckpointStore | None = None,
        usage: UsageMeter | None = None,
        decisions: DecisionBook | None = None,
        events: EventSink | None = None,
        model_health: ModelHealth | None = None,
        shared: dict[str, Any] | None = None,
    ) -> None:
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.events = events
        self.budget = budget
        self.rates = rates
        self._ledger_store = ledger_store
        self._model_health = model_health
        self.usage = usage if usage is not None else UsageMeter()
        self.forbidden_calls: dict[str, Ruling] = {} if forbidden_calls is None else forbidden_calls
        self.policy_memory: dict[str, dict[str, Any]] = (
            {} if policy_memory is None else policy_memory
        )
        if shared is not None:
            warnings.warn(
                "RunScope(shared=) is deprecated; give forbidden_calls= and policy_memory=",
                DeprecationWarning,
                stacklevel=2,
            )
            self.forbidden_calls.update(shared.get(_FORBIDDEN, {}))
            for key, memory in shared.items():
                if key.startswith(_POLICY):
                    self.policy_memory[key[len(_POLICY) :]] = memory
        # `ToolPolicy` objects, checked by the coordinator; not named here: policies sit
        # above the scope (their events carry it), and the scope must not import them.
        self.policies: tuple[Any, ...] = tuple(policies)
        self.state: dict[str, Any] = {} if state is None else state
        self.store = store
        self.decisions = decisions
        # Which tasks hold progress saved in `store`: the coordinator's listing at the
        # run's start (None: unknown, each task with `checkpoint=True` reads its own).
        self.saved_progress: SavedProgress | None = None

    @property
    def ledger_store(self) -> CheckpointStore:
        """The store of the run's in-run ledger (created on first use)."""
        if self._ledger_store is None:
            # Lazily: most runs call no non-idempotent tool and never need one.
            self._ledger_store = MemoryStore()
        return self._ledger_store

    @property
    def model_health(self) -> ModelHealth:
        """The health of the models the run calls (created on first use)."""
        if self._model_health is None:
            # Lazily: most runs call no model, and the models package is not loaded then.
            from agentmesh.models import ModelHealth

            self._model_health = ModelHealth()
        return self._model_health

    def forbidden(self, call_id: str) -> Ruling | None:
        """The ruling that forbids the call `call_id` for the rest of the run, or None."""
        return self.forbidden_calls.get(call_id)

    def forbid(self, call_id: str, ruling: Ruling) -> None:
        """Forbid the call `call_id` for the rest of the run, as `ruling` says."""
        self.forbidden_calls[call_id] = ruling

    def memory_for(self, policy: object) -> dict[str, Any]:
        """The mapping a stateful policy keeps for this run (policies of one name share it).

        By name, not by object: a policy shipped to another process is a copy of itself.
        """
        name = getattr(policy, "name", None) or type(policy).__name__
        return self.policy_memory.setdefault(name, {})

    def __repr__(self) -> str:
        return f"<RunScope {self.run_id}>"
