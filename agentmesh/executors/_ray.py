"""`RayExecutor`: the same coordinator, its subagents running on a Ray cluster.

Each (subagent, task) runs `Subagent.run` in a worker, one of a pool of long-lived
workers that take dispatches in batches (`_ray_pool`; with Ray `task_options` other than
`num_cpus`, a Ray task each), and returns the outcome's wire form; routing, synthesis
and the report stay on the driver. What it adds to what an event loop can do:

* **A worker dies mid-task** (killed, out of memory, node lost): no Ray retries
  (agentmesh owns every retry once); the task is a transient `unavailable` envelope
  with the partial results it recorded (each acknowledged by the run-state actor).
* **Deadline and cancellation**: the worker gets the run's deadline (as a wall-clock
  instant, so time spent queued counts); a worker that does not hand back its outcome
  in time is cancelled and its task cut with its partials. A cancelled run cancels its
  remote tasks (gracefully, then by force after `cancel_grace` seconds) and returns
  only once none is running.
* **Shipping**: subagents, policies and stores are pickled by value (modules that are
  not installed, such as a script or a test file, go by value too) and put into the
  object store once; each worker deserializes them once. One that cannot be pickled is
  a `UsageError` at its first dispatch that names it. A `PostgresStore` travels as its
  connection string and each worker opens its own pool; a `SQLiteStore` as its path,
  shared storage only for workers on this machine; a store the workers cannot share is
  refused before a run starts (`check_store`). A person's approvals: see
  `_ray_approvals`.
* **Events** of a streamed run reach the driver while a task runs, in batches, in
  their order, numbered in the run, with the worker's timestamps; a consumer that is
  behind holds the workers (`_ray_pool`). A Ray task's come with its outcome.
* **Run-wide state** lives in one small actor per executor (`_ray_state`): the retry
  budget, forbidden calls, policy memory, the in-run ledger, rate-limit starts, the
  models' health and usage limits (`_ray_models`), and the user's state.

This module is the executor's face: its options, its lifecycle and one dispatch.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any, Final, Self

from pydantic import ConfigDict, TypeAdapter

from agentmesh._engine._model_calls import marked_usage_refusal
from agentmesh._logging import get_logger
from agentmesh._numbers import number, whole
from agentmesh.envelope import ErrorEnvelope, Outcome, PartialResults
from agentmesh.errors import UsageError
from agentmesh.executors._local import Dispatch
from agentmesh.executors._ray_approvals import keep_asked
from agentmesh.executors._ray_failures import (
    _as_defaults,
    _cause,
    _cut,
    _lost,
    _settled,
    _unavailable,
)
from agentmesh.executors._ray_pool import Job, WorkerPool, pool_slots
from agentmesh.executors._ray_shared import apply_ops, merge_scope
from agentmesh.executors._ray_shipping import (
    _by_value,
    _module,
    _modules_of,
    _unshippable,
    refuse_unshared,
)
from agentmesh.executors._ray_spec import Shipment, SpecMaker
from agentmesh.subagents import Subagent
from agentmesh.task import Task

if TYPE_CHECKING:
    from agentmesh.executors._ray_spec import Spec

__all__ = ["RayExecutor"]

_OUTCOME: Final[TypeAdapter[Outcome]] = TypeAdapter(Outcome, config=ConfigDict(defer_build=True))
# How long past the deadline a worker may take to hand back its cut outcome; shorter
# than the coordinator's own guard, so the executor cuts first and keeps the partials.
_DEADLINE_GRACE: Final = 0.25
# How long a force-cancelled task may take to be confirmed gone.
_KILL_WAIT: Final = 10.0
_NAMESPACE: Final = "agentmesh"
# Seconds between the driver's hand-backs of finished tasks' budget to the actor.
_SETTLE_EVERY: Final = 0.02


class RayExecutor:
    """Runs each subagent task as a Ray task, on a local Ray instance or a cluster.

    Args:
        address: None starts a local Ray instance (or uses the one this process already
            started with `ray.init`); `"auto"` joins the cluster this machine belongs to;
            `"ray://host:10001"` joins one through Ray Client.
        num_cpus: CPUs of the local instance (only with `address=None`).
        task_options: Ray options for every task: `{"num_cpus": 0.25}` runs four
            I/O-bound subagents per worker (per CPU); any other (such as
            `{"resources": {"gpu_box": 1}}`) makes each dispatch a Ray task of its own.
        ship_modules: more modules (or their names) to pickle by value, for the helpers
            of a subagent that the workers cannot import.
        cancel_grace: seconds a cancelled task gets to unwind (its `finally` blocks run)
            before its worker is killed.
        budget_batch: retry tokens a worker leases at once from the run's budget.
        state_refresh: seconds between a running task's fetches of the state other
            workers wrote (stateful policies); 0 to fetch it only at dispatch.
        init_options: more keyword arguments for `ray.init` (e.g. `runtime_env`).

    Ray is connected on first use, or by `connect()`; `close()` (or `async with`)
    removes the run-state actor and shuts down the Ray instance if this executor
    started it.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        num_cpus: int | None = None,
        task_options: Mapping[str, Any] | None = None,
        ship_modules: Iterable[ModuleType | str] = (),
        cancel_grace: float = 1.0,
        budget_batch: int = 4,
        state_refresh: float = 0.1,
        init_options: Mapping[str, Any] | None = None,
    ) -> None:
        try:
            import ray  # noqa: F401  # fail here, not at the first dispatch
        except ImportError:
            raise UsageError(
                "RayExecutor needs Ray: pip install 'agentmesh-failwell[ray]'"
            ) from None
        if address is not None and not isinstance(address, str):
            raise UsageError(
                f"RayExecutor(address=) takes None, 'auto' or 'ray://…', got {address!r}"
            )
        if num_cpus is not None and address is not None:
            raise UsageError("RayExecutor(num_cpus=) sizes a local instance; not with address=")
        if num_cpus is not None:
            num_cpus = whole("RayExecutor(num_cpus=)", num_cpus, at_least=1)
        cancel_grace = number("RayExecutor(cancel_grace=)", cancel_grace, unit="seconds")
        budget_batch = whole("RayExecutor(budget_batch=)", budget_batch, at_least=1)
        state_refresh = number("RayExecutor(state_refresh=)", state_refresh, unit="seconds")
        self.address = address
        self.num_cpus = num_cpus
        self.task_options = dict(task_options or {})
        self.cancel_grace = cancel_grace
        self.budget_batch = budget_batch
        self.state_refresh = state_refresh
        self.init_options = dict(init_options or {})
        self._ship_modules = [_module(m) for m in ship_modules]
        self._actor_name = f"agentmesh-state-{uuid.uuid4().hex[:12]}"
        self._actor: Any = None
        self._remote: Any = None
        self._pool: WorkerPool | None = None
        self._specs: SpecMaker | None = None
        self._owns_ray = False
        self._closed = False
        # id(obj) -> (obj, shipment or the UsageError it raised); obj is kept so that
        # its id is not reused while the entry exists.
        self._shipped: dict[int, tuple[object, Shipment | UsageError]] = {}
        self._unsettled: dict[str, list[float]] = {}
        self._settled_at = 0.0
        self._log = get_logger()

    def check_store(self, store: object) -> None:
        """Refuse a store the workers cannot share (UsageError): asked before a run."""
        refuse_unshared(self, store)

    # -- lifecycle ------------------------------------------------------------------------

    def connect(self) -> Self:
        """Connect to Ray (starting a local instance if need be); a no-op when connected.

        Starting a local instance takes a few seconds; call this before a run with a
        deadline so that the run does not pay for it.
        """
        if self._closed:
            raise UsageError("this RayExecutor is closed; create a new one")
        if self._actor is not None:
            return self
        import ray

        from agentmesh.executors._ray_state import StateActor
        from agentmesh.executors._ray_worker import run_task

        if not ray.is_initialized():
            options: dict[str, Any] = {"namespace": _NAMESPACE, **self.init_options}
            if self.address is None:
                options.setdefault("include_dashboard", False)
                if self.num_cpus is not None:
                    options["num_cpus"] = self.num_cpus
            ray.init(address=self.address, **options)
            self._owns_ray = True
        for module in self._ship_modules:
            _by_value(module)
        # Ray's own retries are off: agentmesh owns every retry, once.
        self._remote = ray.remote(max_retries=0, retry_exceptions=False)(run_task)
        self._actor = (
            ray.remote(StateActor)
            .options(name=self._actor_name, namespace=_NAMESPACE, num_cpus=0, max_restarts=0)
            .remote()
        )
        slots = pool_slots(self.task_options)
        self._pool = None if slots is None else WorkerPool(slots, self._actor).start()
        self._specs = SpecMaker(
            self._ship, (self._actor_name, _NAMESPACE), self.budget_batch, self.state_refresh
        )
        return self

    def close(self) -> None:
        """Remove the run-state actor; shut Ray down if this executor started it."""
        if self._closed:
            return
        self._closed = True
        if self._actor is None:
            return
        import ray

        if ray.is_initialized():
            if self._pool is not None:
                self._pool.close()
            ray.kill(self._actor)
            if self._owns_ray:
                ray.shutdown()
        self._actor = self._remote = self._pool = self._specs = None
        self._shipped.clear()

    async def __aenter__(self) -> Self:
        return self.connect()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    async def round_trip(self, n: int = 100) -> float:
        """Seconds for one round trip to the run-state actor (the mean of `n`)."""
        self.connect()
        await self._actor.ping.remote()
        start = time.perf_counter()
        for _ in range(n):
            await self._actor.ping.remote()
        return (time.perf_counter() - start) / n

    async def budget(self, run_id: str) -> dict[str, float] | None:
        """The run's cluster-wide retry budget as the actor holds it (None: untouched)."""
        self.connect()
        counts: dict[str, float] | None = await self._actor.budget.remote(run_id)
        return counts

    # -- the executor seam ---------------------------------------------------------------

    async def execute(self, subagent: Subagent, task: Task, dispatch: Dispatch) -> Outcome:
        """Run `subagent` on `task` as a Ray task and return its outcome."""
        deadline_at = None if dispatch.timeout is None else time.time() + dispatch.timeout
        self.connect()
        scope = dispatch.scope
        assert self._specs is not None
        spec = self._specs.spec(subagent, task, dispatch, deadline_at)
        if self._pool is not None:
            ref: Any = self._pool.submit(spec, scope.events)
        else:
            ref = self._remote.options(**self.task_options).remote(spec)
        wait = None if dispatch.timeout is None else dispatch.timeout + _DEADLINE_GRACE
        try:
            async with asyncio.timeout(wait) as timeout:
                result: dict[str, Any] = await ref
        except asyncio.CancelledError:
            await self._stop(ref)
            self._actor.forget.remote(spec.run_id, spec.call, lost=True)
            raise
        except TimeoutError:
            if not timeout.expired():
                raise
            await self._stop(ref, force=True)
            partials, _, _ = await self._take(spec)
            return _cut(subagent, task, dispatch.timeout, partials)
        except Exception as exc:
            if not _lost(exc):
                raise _cause(exc) from None
            return await self._lost_outcome(subagent, task, dispatch, spec, exc)
        budget = scope.budget
        if budget is not None and result["budget"] is not None:
            first_attempts, retries, denied, deposits, unused = result["budget"]
            # The driver's budget object counts what the workers did, for the run's log.
            budget.first_attempts += first_attempts
            budget.retries += retries
            budget.denied += denied
            if deposits or unused or denied:
                self._settle(spec.run_id, (budget.ratio, budget.reserve), deposits, unused, denied)
        if result["state"]:
            apply_ops(scope.state, result["state"])
            self._specs.changed(scope)
        if result["shared"]:
            merge_scope(scope, result["shared"])
            self._specs.changed(scope)
        await keep_asked(scope, result["asked"])  # before the coordinator records the task
        if result["usage_stop"] is not None and scope.usage.stop is None:
            scope.usage.stop = result["usage_stop"]  # a run-wide limit the actor keeps
        if scope.events is not None:
            for event in result["events"]:
                scope.events.forward(event)  # numbered in the driver's run, in their order
        outcome = _OUTCOME.validate_python(result["outcome"])
        if result["usage_refusal"] and isinstance(outcome, ErrorEnvelope):
            return marked_usage_refusal(outcome)  # the worker's usage limit refused it
        return outcome

    async def _lost_outcome(
        self, subagent: Subagent, task: Task, dispatch: Dispatch, spec: Spec, exc: Exception
    ) -> ErrorEnvelope:
        """The envelope of a task whose worker was lost, with the progress it recorded."""
        scope = dispatch.scope
        partials, state, shared = await self._take(spec)
        # What the lost task wrote reached the actor, not this process: merge it in.
        apply_ops(scope.state, _as_defaults(state))
        merge_scope(scope, _as_defaults(shared))
        if self._specs is not None:
            self._specs.changed(scope)
        self._log.warning(
            "ray_task_lost",
            run_id=spec.run_id,
            task_id=spec.task_id,
            subagent=subagent.name,
            error=type(exc).__name__,
            partial=partials is not None,
        )
        return _unavailable(subagent, task, exc, partials)

    # -- helpers -------------------------------------------------------------------------

    def _ship(
        self, obj: object, what: str, check: Callable[[object], None] | None = None
    ) -> Shipment:
        """Put `obj` into the object store once; a UsageError naming it if it cannot go.

        `check` may refuse `obj` with a UsageError first (once: its finding is kept).
        """
        import ray

        entry = self._shipped.get(id(obj))
        if entry is not None and entry[0] is obj:
            if isinstance(entry[1], UsageError):
                raise entry[1]
            return entry[1]
        if check is not None:
            try:
                check(obj)
            except UsageError as refused:
                self._shipped[id(obj)] = (obj, refused)
                raise
        for module in _modules_of(obj):
            _by_value(module)
        try:
            ref = ray.put(obj)
        except Exception as exc:
            error = _unshippable(obj, what, exc)
            self._shipped[id(obj)] = (obj, error)
            raise error from None
        shipment = Shipment(uuid.uuid4().hex, ref)
        if self._pool is not None:
            # Named by key in the specs; the pool sends each worker the ref once.
            self._pool.refs[shipment.key] = ref
            shipment = Shipment(shipment.key, None)
        self._shipped[id(obj)] = (obj, shipment)
        return shipment

    def _settle(
        self, run_id: str, terms: tuple[float, float], deposits: int, unused: int, denied: int
    ) -> None:
        """Hand back finished tasks' deposits and unused tokens, many tasks per call (until
        then the run's budget errs on the safe side: fewer retries)."""
        pending = self._unsettled.setdefault(run_id, [*terms, 0, 0, 0])
        pending[2] += deposits
        pending[3] += unused
        pending[4] += denied
        now = time.monotonic()
        if now - self._settled_at < _SETTLE_EVERY:
            return
        self._settled_at = now
        for pending_run, (ratio, reserve, d, u, n) in self._unsettled.items():
            self._actor.settle.remote(pending_run, ratio, reserve, int(d), int(u), int(n))
        self._unsettled.clear()

    async def _stop(self, ref: Any, *, force: bool = False) -> None:
        """Cancel a remote task (a pool's job or a Ray task) and return once it no longer
        runs: graceful first (its `finally` blocks run), by force after `cancel_grace`;
        cancelled again meanwhile, by force at once."""
        import ray

        if isinstance(ref, Job):
            assert self._pool is not None
            await self._pool.stop(ref, force=force, grace=self.cancel_grace)
            return
        try:
            ray.cancel(ref, force=force)
            if await _settled(ref, self.cancel_grace if not force else _KILL_WAIT):
                return
            if not force:
                ray.cancel(ref, force=True)
                await _settled(ref, _KILL_WAIT)
        except asyncio.CancelledError:
            ray.cancel(ref, force=True)
            raise

    async def _take(
        self, spec: Any
    ) -> tuple[PartialResults | None, dict[str, Any], dict[str, Any]]:
        """A lost task's recorded progress, the run's state and its scope's, from the actor."""
        try:
            taken: tuple[
                PartialResults | None, dict[str, Any], dict[str, Any]
            ] = await asyncio.wait_for(self._actor.take.remote(spec.run_id, spec.call), _KILL_WAIT)
        except Exception as exc:
            # The actor went down with its node: the progress went with it.
            self._log.warning("ray_partials_lost", run_id=spec.run_id, error=repr(exc))
            return None, {}, {}
        return taken

    def __repr__(self) -> str:
        state = "closed" if self._closed else "connected" if self._actor is not None else "new"
        return f"<RayExecutor address={self.address!r} {state}>"
