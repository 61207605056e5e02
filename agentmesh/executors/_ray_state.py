"""The run-state actor: what every Ray worker of a run must agree on.

One small actor per `RayExecutor` keeps, per run: the retry budget (handed out to
workers in leases, so a retry costs a round trip only when a worker's lease is empty),
the user's state and the run scope's forbidden calls and policy memory, the in-run
ledger of completed non-idempotent calls, the health of the models the run calls and
its usage meter (`_ray_models`: each claim one method call, so one step for the
cluster), and the partial results each running task has recorded (so a worker that
dies mid-task still hands its progress to the driver).
And, for all runs, the rate log of every rate-limited tool or subagent, so a limit
holds for the cluster, not per worker. It runs on no CPU of its own (`num_cpus=0`) and
does nothing but small dictionary updates.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, Final

from agentmesh.envelope import ErrorEnvelope, PartialResults
from agentmesh.executors._ray_models import RunModels, Settings, View
from agentmesh.usage import PriceTable, UsageLimits

__all__ = ["StateActor", "apply_op"]

# Runs the actor remembers; the least recently used one is forgotten past this. The
# executor cannot know when a run ends (the coordinator never says), so this bounds a
# long-lived executor's memory instead.
MAX_RUNS: Final = 10_000

# What a worker's `Outbox` may tell the actor: the methods that answer nothing.
_TOLD: Final = frozenset(
    {
        "model_heard",
        "model_slept",
        "model_release",
        "model_cancel",
        "model_abandon",
        "usage_settle",
    }
)

Op = tuple[Any, ...]
"""A state write: ("set" | "default", key, value), ("set_in" | "default_in", key, item,
value), ("del", key) or ("del_in", key, item); a "default" sets only what is absent."""


def apply_op(state: dict[str, Any], op: Op) -> None:
    """Apply one state write to a plain dict (the driver's copy or the actor's)."""
    kind, key = op[0], op[1]
    if kind == "set" or (kind == "default" and key not in state):
        state[key] = dict(op[2]) if type(op[2]) is dict else op[2]
    elif kind in ("set_in", "default_in"):
        inner = state.get(key)
        if not isinstance(inner, dict):
            inner = state[key] = {}
        if kind == "set_in" or op[2] not in inner:
            inner[op[2]] = op[3]
    elif kind == "del":
        state.pop(key, None)
    elif kind == "del_in":
        inner = state.get(key)
        if isinstance(inner, dict):
            inner.pop(op[2], None)


@dataclass(slots=True)
class _Budget:
    ratio: float
    reserve: float
    first_attempts: int = 0
    granted: int = 0  # tokens leased out, minus those handed back unused
    denied: int = 0

    @property
    def tokens(self) -> float:
        return self.reserve + self.ratio * self.first_attempts - self.granted


@dataclass(slots=True)
class _RunState:
    budget: _Budget | None = None
    state: dict[str, Any] = field(default_factory=dict)
    shared: dict[str, Any] = field(default_factory=dict)  # the run scope's
    version: int = 0
    partials: dict[str, PartialResults] = field(default_factory=dict)
    rows: dict[tuple[str, str, str], tuple[Any, ...]] = field(default_factory=dict)
    models: RunModels = field(default_factory=RunModels)


class StateActor:
    """Per-run shared state; wrapped with `ray.remote` by the executor."""

    def __init__(self) -> None:
        self._runs: OrderedDict[str, _RunState] = OrderedDict()
        # Start times (this actor's clock) per rate limit, reserved ones included.
        self._starts: dict[tuple[str, int, float], deque[float]] = {}

    def _run(self, run_id: str) -> _RunState:
        run = self._runs.get(run_id)
        if run is None:
            run = self._runs[run_id] = _RunState()
            while len(self._runs) > MAX_RUNS:
                self._runs.popitem(last=False)
        else:
            self._runs.move_to_end(run_id)
        return run

    def ping(self) -> None:
        """A no-op: measures one round trip."""

    # -- partial results of running tasks ---------------------------------------------

    def record(self, run_id: str, call: str, partials: PartialResults) -> None:
        self._run(run_id).partials[call] = partials

    def forget(self, run_id: str, call: str, *, lost: bool = False) -> None:
        """A task ended: its progress is not needed; `lost`: its worker did not end it,
        so what it held of the models is given back too."""
        run = self._run(run_id)
        run.partials.pop(call, None)
        if lost:
            run.models.drop(call)

    def recorded(self, calls: list[tuple[str, str]]) -> list[bool]:
        """Whether each (run, dispatch) has recorded progress that it still holds."""
        return [call in self._run(run_id).partials for run_id, call in calls]

    def take(
        self, run_id: str, call: str
    ) -> tuple[PartialResults | None, dict[str, Any], dict[str, Any]]:
        """A lost task's last recorded progress, the run's state and its scope's dict;
        what it held of the models is given back."""
        run = self._run(run_id)
        run.models.drop(call)
        return run.partials.pop(call, None), run.state, run.shared

    # -- rate limits --------------------------------------------------------------------

    def rate_start(self, name: str, n: int, per: float) -> float:
        """Reserve the next start allowed by `(n, per)` for limiter `name`: seconds to wait.

        A limiter's starts are counted for the whole cluster, as the remote service
        counts them. Reservations come out in order, so the log stays sorted.
        """
        now = time.monotonic()
        starts = self._starts.setdefault((name, n, per), deque())
        while starts and starts[0] <= now - per:
            starts.popleft()
        at = now if len(starts) < n else max(now, starts[-n] + per)
        starts.append(at)
        return at - now

    # -- model health and usage limits (see `_ray_models`): one claim, one call ----------

    def model_claim(
        self, run_id: str, settings: Settings, key: str, call: str, number: int = 0
    ) -> tuple[Any, View]:
        return self._run(run_id).models.claim(settings, key, call, number)

    def model_abandon(self, run_id: str, call: str, number: int) -> None:
        self._run(run_id).models.abandon(call, number)

    def model_rates(self, run_id: str, key: str, needs: dict[str, int]) -> Any:
        models = self._run(run_id).models
        return models.health().admit_rates(models.seat(key), lambda: needs)

    def model_heard(
        self, run_id: str, key: str, headers: dict[str, str], unspent: dict[str, int] | None
    ) -> None:
        models = self._run(run_id).models
        models.health().settle_rates(models.seat(key), headers, unspent=unspent)

    def model_slept(self, run_id: str, key: str, unslept: float) -> None:
        models = self._run(run_id).models
        models.health().rates_slept(models.seat(key), unslept)

    def model_release(
        self, run_id: str, key: str, ticket: int, failure: ErrorEnvelope | None
    ) -> View:
        return self._run(run_id).models.release(key, ticket, failure)

    def model_cancel(self, run_id: str, key: str, ticket: int) -> None:
        self._run(run_id).models.cancel(key, ticket)

    def models_told(self, run_id: str, messages: list[tuple[str, tuple[Any, ...]]]) -> None:
        """What a worker's task told of its models without waiting (see `Outbox`), in order."""
        for method, args in messages:
            if method in _TOLD:
                getattr(self, method)(run_id, *args)

    def usage_admit(
        self,
        run_id: str,
        terms: tuple[UsageLimits | None, PriceTable],
        model: str,
        subagent: str,
        limits: UsageLimits | None,
        worst_case: float | None,
    ) -> tuple[float | str | None, tuple[str, str] | None]:
        return self._run(run_id).models.admit(terms, model, subagent, limits, worst_case)

    def usage_settle(
        self, run_id: str, model: str, subagent: str, tokens: dict[str, Any], reserved: float
    ) -> None:
        meter = self._run(run_id).models.meter
        if meter is not None:
            meter.settle(model, subagent, reserved=reserved, **tokens)

    # -- the retry budget ---------------------------------------------------------------

    def _budget(self, run_id: str, ratio: float, reserve: float) -> _Budget:
        run = self._run(run_id)
        if run.budget is None:
            run.budget = _Budget(ratio, reserve)
        return run.budget

    def lease(self, run_id: str, ratio: float, reserve: float, deposits: int, want: int) -> int:
        """Count `deposits` first attempts, then grant up to `want` retry tokens."""
        budget = self._budget(run_id, ratio, reserve)
        budget.first_attempts += deposits
        grant = max(0, min(want, math.floor(budget.tokens + 1e-9)))
        budget.granted += grant
        return grant

    def settle(
        self, run_id: str, ratio: float, reserve: float, deposits: int, unused: int, denied: int
    ) -> None:
        """A task ended: count its last first attempts, take back its unused tokens."""
        budget = self._budget(run_id, ratio, reserve)
        budget.first_attempts += deposits
        budget.granted -= unused
        budget.denied += denied

    def budget(self, run_id: str) -> dict[str, float] | None:
        run = self._runs.get(run_id)
        if run is None or run.budget is None:
            return None
        b = run.budget
        return {
            "first_attempts": b.first_attempts,
            "retries": b.granted,
            "denied": b.denied,
            "tokens": b.tokens,
        }

    # -- stateful policies ------------------------------------------------------------

    def write(self, run_id: str, ops: list[Op], space: str = "state") -> None:
        """Apply writes to the run's state, or (`space="scope"`) to its scope's dict."""
        run = self._run(run_id)
        target = run.shared if space == "scope" else run.state
        for op in ops:
            apply_op(target, op)
        run.version += len(ops)

    def state_since(
        self, run_id: str, version: int
    ) -> tuple[int, dict[str, Any] | None, dict[str, Any] | None]:
        """The run's state and scope dict if they changed since `version`, and the version."""
        run = self._run(run_id)
        if run.version == version:
            return run.version, None, None
        return run.version, run.state, run.shared

    # -- the in-run ledger (rows: a checkpoint's address, then the checkpoint) ----------

    def row_put(self, row: tuple[Any, ...]) -> None:
        self._run(row[0]).rows[(row[0], row[1], row[2])] = row

    def row_claim(self, row: tuple[Any, ...]) -> tuple[Any, ...] | None:
        # An actor runs one method at a time: the look and the write are one step.
        rows = self._run(row[0]).rows
        existing = rows.get((row[0], row[1], row[2]))
        if existing is None:
            rows[(row[0], row[1], row[2])] = row
        return existing

    def row_get(self, run_id: str, stage: str, key: str) -> tuple[Any, ...] | None:
        return self._run(run_id).rows.get((run_id, stage, key))

    def row_list(self, run_id: str, stage: str | None) -> list[tuple[Any, ...]]:
        rows = self._run(run_id).rows.values()
        return [row for row in rows if stage is None or row[1] == stage]

    def row_delete(self, run_id: str, stage: str | None, key: str | None) -> int:
        rows = self._run(run_id).rows
        doomed = [
            address
            for address in rows
            if (stage is None or address[1] == stage) and (key is None or address[2] == key)
        ]
        for address in doomed:
            del rows[address]
        return len(doomed)
