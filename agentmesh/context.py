"""`Context`: what a subagent gets to do its work — tool calls, progress, deadline, logger.

`ctx.call(tool, **args)` is the tool path of the design (in `agentmesh._engine._tool_call`):

    pre-tool policies (may deny) -> input validation -> limits -> local retry
    -> classification -> post-tool policies (may forbid retry / escalate / withhold)

It returns the tool's data, or raises `ToolCallFailed` carrying the final envelope.
A `Context` is a view over the task's engine (`agentmesh._engine`): what the engine
does between attempts is not part of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from agentmesh._engine import _partials, _rulings
from agentmesh._engine._model_calls import call_model
from agentmesh._engine._partials import PartialRecorder
from agentmesh._engine._task import TaskEngine
from agentmesh._engine._tool_call import ToolCall
from agentmesh._signatures import kept_for_one_release
from agentmesh._tracing import record_outcome, span
from agentmesh.errors import ToolCallFailed
from agentmesh.retry import RetryBudget
from agentmesh.scope import RunScope
from agentmesh.task import Task
from agentmesh.tools import Tool

if TYPE_CHECKING:
    from agentmesh.models import Model, ModelResponse

# `PartialRecorder` is the type of `ctx.partials`, which a body reads.
__all__ = ["Context", "PartialRecorder"]


# Engine helpers this module exported before issue 25: importable here for one release.
__getattr__ = kept_for_one_release(
    __name__,
    {
        # The engine calls it `apply_ruling` now (a policy's ruling, issue 25).
        "apply_verdict": ("is internal to agentmesh's task engine", lambda: _rulings.apply_ruling),
        "merge_partials": (
            "is internal to agentmesh's task engine",
            lambda: _partials.merge_partials,
        ),
    },
)


R = TypeVar("R")


class Context:
    """Everything a subagent's body needs for one task: tools, progress, time, identity.

    Created by `Subagent.run` (one per task run); subagents never build one themselves.
    `scope` is the run's `RunScope`: what every task of the run shares.
    """

    def __init__(self, engine: TaskEngine) -> None:
        self._engine = engine

    # Read through to the engine: a task's Context is made for every task, most bodies
    # read two or three of these, and a view of one field is the cheapest to make.
    @property
    def task(self) -> Task:
        """The task this body works on."""
        return self._engine.task

    @property
    def subagent(self) -> str:
        """The name of the subagent running the task."""
        return self._engine.subagent

    @property
    def scope(self) -> RunScope:
        """What every task of the run shares (`RunScope`)."""
        return self._engine.scope

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self._engine.run_id

    @property
    def task_id(self) -> str:
        """The task's id in the run."""
        return self._engine.task_id

    @property
    def budget(self) -> RetryBudget | None:
        """The run's retry budget (None without one)."""
        return self._engine.scope.budget

    @property
    def deadline(self) -> float | None:
        """The task's deadline, absolute in the running loop's clock (None without one)."""
        return self._engine.deadline

    @property
    def state(self) -> dict[str, Any]:
        """The user's dict of the run, shared by its policies (`event.state`)."""
        return self._engine.state

    @property
    def log(self) -> Any:
        """The task's logger, bound to its run, task and subagent."""
        return self._engine.log

    @property
    def attempt(self) -> int:
        """The number of the body's attempt under way (1 for the first)."""
        return self._engine.attempt

    @property
    def partials(self) -> PartialRecorder:
        """The task's progress across its attempts (`record_partial`, restored checkpoints)."""
        return self._engine.partials

    def remaining(self) -> float | None:
        """Seconds left before the deadline, or None when there is none."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - asyncio.get_running_loop().time())

    def record_partial(
        self,
        findings: Iterable[Any] | Any = (),
        *,
        completed: str | Iterable[str] | None = None,
        pending: str | Iterable[str] | None = None,
    ) -> None:
        """Record progress that must survive a later failure.

        Args:
            findings: results found so far (a list; a single dict or string is one finding).
            completed: the source(s) now done; they leave `pending`.
            pending: the source(s) still to do.
        """
        self._engine.record_partial(findings, completed, pending)

    async def save_partials(self) -> None:
        """Wait until the recorded progress is saved (a no-op without `checkpoint=True`).

        Saving starts by itself at every `record_partial`; await this before a long step
        that does not go through `ctx.call` to be sure the progress is durable first.
        """
        await self._engine.save_partials()

    async def call_model(self, model: Model, **request: Any) -> ModelResponse:
        """One model turn, as `ctx.call` makes a tool call: see `agentmesh._engine._model_calls`.

        Keyword arguments: `messages`, `system`, `tools`, `tool_choice`, `max_tokens` as
        for `Model.create`; `retry` (each model's local retries, the subagent's policy by
        default) and `usage_limits` (the caller's own). Raises `CallFailed` when it failed.
        """
        return await call_model(self._engine, model, **request)

    async def call(self, tool: Tool[..., R], /, *args: Any, **kwargs: Any) -> R:
        """Call `tool` through policies, validation, limits and local retry.

        The arguments are checked against the tool's schema when the call is made (a
        mismatch is a validation envelope); statically only the result type is, since
        the tool's injected parameters (`ctx`, `idempotency_key`) are not the caller's.

        Returns the tool's data. Raises `ToolCallFailed` (carrying the envelope) when the
        call failed for good; catch it to go on with other sources, or let it propagate to
        make it the subagent's outcome.
        """
        engine = self._engine
        with span(
            "tool",
            tool=getattr(tool, "name", None),
            subagent=self.subagent,
            run_id=self.run_id,
            task_id=self.task_id,
        ) as current:
            try:
                data = await ToolCall(engine, self, tool).run(args, kwargs)
            except ToolCallFailed as failed:
                record_outcome(current, failed.envelope)
                raise
            if current is not None:
                current.set_attributes({"agentmesh.outcome": "success"})
            return data
