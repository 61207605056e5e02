"""Only the framework's own usage-limit refusal is forced to a gap; a user's error of that
name is routed like any other business error."""

from __future__ import annotations

from agentmesh import BusinessError, Context, Coordinator, ErrorEnvelope, Task, subagent
from agentmesh._engine._model_calls import is_usage_refusal
from agentmesh.coordinator import CoverageStatus, Route, RouteContext, Router
from agentmesh.models import ScriptedModel, UsageLimits
from agentmesh.subagents import LLMSubagent


@subagent(name="billing")
async def billing(task: Task, ctx: Context) -> None:
    """A tool whose own business rule is called "usage_limit_exceeded" (a customer's quota)."""
    raise BusinessError("the customer used up the plan's quota", error_type="usage_limit_exceeded")


class SeesEverything(Router):
    """A router that records each envelope it is asked about."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def route(self, ctx: RouteContext) -> Route:
        if isinstance(ctx.outcome, ErrorEnvelope):
            self.seen.append(ctx.outcome.error_type)
        return await super().route(ctx)


class TestUsageRefusalIsStructural:
    async def test_a_users_envelope_named_usage_limit_exceeded_is_routed_normally(self) -> None:
        """A subagent's business error of that name reaches the router and is escalated."""
        router = SeesEverything()
        report = await Coordinator([billing], router=router).run([Task(query="q", topic="plan")])
        [entry] = report.coverage
        assert entry.status is CoverageStatus.ESCALATED
        assert router.seen == ["usage_limit_exceeded"]

    async def test_the_frameworks_refusal_is_still_a_gap_the_router_never_sees(self) -> None:
        """A model call the run's limit refused ends the task as a gap, whatever the router."""
        router = SeesEverything()
        agent = LLMSubagent("a", ScriptedModel(["never asked"]))
        coordinator = Coordinator(
            [agent], router=router, usage_limits=UsageLimits(max_model_calls=0)
        )
        report = await coordinator.run([Task(query="q", topic="t")])
        [entry] = report.coverage
        assert entry.status is CoverageStatus.GAP
        assert entry.reason is not None
        assert "max_model_calls=0 reached" in entry.reason
        assert router.seen == []

    async def test_a_refusal_read_back_from_its_json_is_no_longer_the_frameworks(self) -> None:
        """The mark is not part of the wire form: JSON from outside cannot claim it."""
        agent = LLMSubagent("a", ScriptedModel(["never asked"]))
        coordinator = Coordinator([agent], usage_limits=UsageLimits(max_model_calls=0))
        final = (await coordinator.run(["q"])).records[0].final
        assert isinstance(final, ErrorEnvelope)
        assert is_usage_refusal(final)
        assert not is_usage_refusal(ErrorEnvelope.model_validate(final.to_dict()))
