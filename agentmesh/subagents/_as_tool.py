"""A subagent as a tool, so that a model-backed lead agent can coordinate subagents itself."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from agentmesh._engine._task import engine_of
from agentmesh.context import Context
from agentmesh.envelope import ErrorEnvelope
from agentmesh.errors import CallFailed
from agentmesh.task import Task
from agentmesh.tools import Impact, Tool

if TYPE_CHECKING:
    from agentmesh.envelope import Outcome
    from agentmesh.policies import ToolPolicy
    from agentmesh.scope import RunScope

__all__ = ["Delegate", "subagent_tool"]


class Delegate(Protocol):
    """What a subagent tool runs (a `Subagent`): its name, description and `run`."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    async def run(
        self,
        task: Task,
        *,
        timeout: float | None,  # noqa: ASYNC109  # as `Subagent.run` takes it
        policies: Sequence[ToolPolicy],
        state: dict[str, Any] | None,
        scope: RunScope | None,
    ) -> Outcome: ...


def subagent_tool(
    subagent: Delegate,
    *,
    name: str | None = None,
    description: str | None = None,
    impact: Impact | None = None,
) -> Tool[..., Any]:
    """A tool that runs `subagent` on a query, inside the caller's run.

    The subagent's envelope reaches the caller unchanged (category, attempted query,
    partial results, alternatives) and is final: the subagent already retried locally.
    An empty success is a plain empty result. The run id, retry budget, deadline, policies
    and policy state are the caller's, so run-wide rules hold across the nesting; give
    `impact` so that impact-based policies see the delegation itself.
    """

    async def run_subagent(query: str, ctx: Context) -> Any:
        engine = engine_of(ctx)
        outcome = await subagent.run(
            Task(query=query, topic=ctx.task.topic),
            scope=ctx.scope,
            timeout=ctx.remaining(),
            # The caller's rules (the coordinator's among them) hold for the nested run.
            policies=engine.policies.policies,
            state=ctx.state,
        )
        # Its rulings and retries belong to the caller's task too, whatever the caller
        # does next (an envelope carries them as well, but may be caught and dropped).
        engine.adopt(outcome)
        if isinstance(outcome, ErrorEnvelope):
            raise CallFailed(outcome)
        return outcome.data

    return Tool(
        run_subagent,
        name=name or subagent.name,
        description=description or subagent.description or f"Ask the {subagent.name} subagent.",
        impact=impact,
    )
