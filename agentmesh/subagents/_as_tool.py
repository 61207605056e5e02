"""A subagent as a tool, so that a model-backed lead agent can coordinate subagents itself."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentmesh._engine._task import engine_of
from agentmesh.context import Context
from agentmesh.envelope import ErrorEnvelope
from agentmesh.errors import CallFailed
from agentmesh.task import Task
from agentmesh.tools import Impact, Tool

if TYPE_CHECKING:
    from agentmesh.subagents._base import Subagent

__all__ = ["subagent_tool"]


def subagent_tool(
    subagent: Subagent,
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
