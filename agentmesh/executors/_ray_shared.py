"""A run's shared dicts across the Ray workers: the user's state and the scope's parts.

In a worker, `SharedState` is the run's dict whose writes go to the run-state actor
(and come back to the driver with the result), `Refresher` brings in other workers'
writes while a task runs, and `_WorkerScope` is the `RunScope` that reads and writes
forbidden calls and policy memory on it. On the driver, `scope_wire`
gives a scope's wire form, and `apply_ops` and `merge_scope` merge a worker's writes back.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any, Final, Protocol

from agentmesh.envelope import Ruling
from agentmesh.executors._ray_state import Op, apply_op
from agentmesh.scope import RunScope
from agentmesh.subagents import Subagent

__all__ = ["Refresher", "SharedState", "apply_ops", "merge_scope", "progress_known", "scope_wire"]


class _Writer(Protocol):
    """Where a `SharedState` sends its writes: the worker's line to the actor."""

    def write(self, op: Op) -> None: ...


# The scope's parts on the wire (the actor's "scope" space): one flat dict whose writes
# one level deep are shared, the forbidden calls under one key, each policy's memory
# under `policy:<name>`.
_FORBIDDEN: Final = "forbidden_calls"
_POLICY: Final = "policy:"


class SharedState(dict[str, Any]):
    """A run's shared dict in a worker: writes go to the actor and back to the driver.

    Used for the user's state and for the run scope's forbidden calls and policy memory.
    Covers what stateful policies do with `event.state` or their memory: set or delete a
    key, and set or delete an item of a dict stored under a key
    (`state.setdefault(k, {})[item] = v`). Other workers' writes arrive every
    `state_refresh` seconds while the task runs.
    """

    def __init__(self, snapshot: dict[str, Any], link: _Writer) -> None:
        super().__init__()
        self._link = link
        self.ops: list[Op] = []
        self.merge(snapshot)

    def _wrap(self, key: str, value: Any) -> Any:
        return _SharedMap(self, key, value) if type(value) is dict else value

    def emit(self, op: Op) -> None:
        self.ops.append(op)
        self._link.write(op)

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, self._wrap(key, value))
        self.emit(("set", key, dict(value) if isinstance(value, dict) else value))

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            super().__setitem__(key, self._wrap(key, default))
            # An empty default needs no write: an item set in it creates it everywhere.
            if not (type(default) is dict and not default):
                # Not a "set": another worker may have filled the key meanwhile.
                self.emit(("default", key, dict(default) if isinstance(default, dict) else default))
        return self[key]

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self.emit(("del", key))

    def pop(self, key: str, *default: Any) -> Any:
        if key in self:
            value = self[key]
            del self[key]
            return value
        return super().pop(key, *default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def merge(self, snapshot: dict[str, Any]) -> None:
        """Take in another copy's keys and items (those of dicts under a key are added)."""
        for key, value in snapshot.items():
            current = self.get(key)
            if isinstance(current, _SharedMap) and isinstance(value, dict):
                dict.update(current, value)
            else:
                dict.__setitem__(self, key, self._wrap(key, value))


class Refresher:
    """Merges in what other workers of the run wrote, every `interval` seconds (0: never)
    while a task runs; a timer until the first, so a short task costs no asyncio Task."""

    __slots__ = ("_task", "_timer")

    def __init__(
        self, interval: float, actor: Any, run_id: str, state: SharedState, shared: SharedState
    ) -> None:
        self._task: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        if interval > 0:
            args = (interval, actor, run_id, state, shared)
            self._timer = asyncio.get_running_loop().call_later(interval, self._start, args)

    def _start(self, args: tuple[float, Any, str, SharedState, SharedState]) -> None:
        self._task = asyncio.create_task(_refresh_every(*args))

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


async def _refresh_every(
    interval: float, actor: Any, run_id: str, state: SharedState, shared: SharedState
) -> None:
    """Merge in what other workers of the run wrote now, then every `interval` seconds."""
    version = 0
    while True:
        try:
            version, state_now, shared_now = await actor.state_since.remote(run_id, version)
        except Exception:  # the actor is gone: keep what we know
            return
        if state_now is not None:
            state.merge(state_now)
        if shared_now is not None:
            shared.merge(shared_now)
        await asyncio.sleep(interval)


class _SharedMap(dict[Any, Any]):
    """A dict stored under a key of `SharedState`: its item writes are shared too."""

    def __init__(self, owner: SharedState, key: str, items: dict[Any, Any]) -> None:
        super().__init__(items)
        self._owner = owner
        self._key = key

    def __setitem__(self, item: Any, value: Any) -> None:
        super().__setitem__(item, value)
        self._owner.emit(("set_in", self._key, item, value))

    def setdefault(self, item: Any, default: Any = None) -> Any:
        if item not in self:
            super().__setitem__(item, default)
            self._owner.emit(("default_in", self._key, item, default))
        return self[item]

    def __delitem__(self, item: Any) -> None:
        super().__delitem__(item)
        self._owner.emit(("del_in", self._key, item))

    def pop(self, item: Any, *default: Any) -> Any:
        if item in self:
            value = self[item]
            del self[item]
            return value
        return super().pop(item, *default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for item, value in dict(*args, **kwargs).items():
            self[item] = value

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))


def apply_ops(state: dict[str, Any], ops: Iterable[Op]) -> None:
    """Merge a worker's state writes into the driver's copy of the run's state."""
    for op in ops:
        apply_op(state, op)


def scope_wire(scope: RunScope) -> dict[str, Any]:
    """The scope's forbidden calls and policy memory, as a worker's `SharedState` holds them."""
    shared: dict[str, Any] = {_POLICY + name: dict(m) for name, m in scope.policy_memory.items()}
    if scope.forbidden_calls:
        shared[_FORBIDDEN] = dict(scope.forbidden_calls)
    return shared


def progress_known(scope: RunScope, subagent: Subagent, task_id: str) -> bool | None:
    """Whether the run's store may hold the task's saved progress, as the run knows it
    (None: unknown, the worker reads it). Noted as saved from now on when the subagent
    checkpoints: the worker may save some, and a later dispatch of the task reads it."""
    known = scope.saved_progress
    if known is None or not subagent.checkpoint:
        return None
    holds = known.holds(subagent.name, task_id)
    known.note(subagent.name, task_id)
    return holds


def merge_scope(scope: RunScope, ops: Iterable[Op]) -> None:
    """Merge a worker's writes to the scope's wire form into the driver's scope."""
    shared: dict[str, Any] = {_POLICY + name: m for name, m in scope.policy_memory.items()}
    shared[_FORBIDDEN] = scope.forbidden_calls
    apply_ops(shared, ops)
    # A write of a whole key replaced its dict: the scope keeps what the key holds now.
    forbidden = shared.pop(_FORBIDDEN, {})
    if forbidden is not scope.forbidden_calls:
        scope.forbidden_calls.clear()
        scope.forbidden_calls.update(forbidden)
    for key, memory in shared.items():
        name = key[len(_POLICY) :]
        if scope.policy_memory.get(name) is not memory:
            scope.policy_memory[name] = memory


class _WorkerScope(RunScope):
    """A worker's scope: forbidden calls and policy memory read and written on the wire.

    Every write reaches the actor (and the driver); other workers' writes arrive with
    the refreshes of `shared`.
    """

    __slots__ = ("_shared",)

    def __init__(self, shared: SharedState, run_id: str, **parts: Any) -> None:
        super().__init__(run_id, **parts)
        self._shared = shared

    def forbidden(self, call_id: str) -> Ruling | None:
        calls: dict[str, Ruling] | None = self._shared.get(_FORBIDDEN)
        return None if calls is None else calls.get(call_id)

    def forbid(self, call_id: str, ruling: Ruling) -> None:
        self._shared.setdefault(_FORBIDDEN, {})[call_id] = ruling

    def memory_for(self, policy: object) -> dict[str, Any]:
        name = getattr(policy, "name", None) or type(policy).__name__
        memory: dict[str, Any] = self._shared.setdefault(_POLICY + name, {})
        return memory
