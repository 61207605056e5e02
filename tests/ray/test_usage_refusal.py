"""A remote task refused by its usage limit is the framework's refusal on the driver too."""

from __future__ import annotations

from agentmesh import Coordinator, Task
from agentmesh.coordinator import CoverageStatus
from agentmesh.executors import LocalExecutor, RayExecutor
from agentmesh.models import ScriptedModel, UsageLimits
from agentmesh.subagents import LLMSubagent


class TestRemoteUsageRefusal:
    async def test_a_refused_remote_task_is_a_gap_as_on_the_local_executor(
        self, ray_executor: RayExecutor
    ) -> None:
        """Its envelope comes back as wire data, and is still a gap, never an escalation."""
        agent = LLMSubagent(
            "a", ScriptedModel(["never asked"]), usage_limits=UsageLimits(max_model_calls=0)
        )

        async def status(executor: LocalExecutor | RayExecutor) -> CoverageStatus:
            report = await Coordinator([agent], executor=executor).run([Task(query="q")])
            return report.coverage[0].status

        assert await status(LocalExecutor()) is CoverageStatus.GAP
        assert await status(ray_executor) is CoverageStatus.GAP
