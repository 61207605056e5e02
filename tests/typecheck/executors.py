"""Type-checked, never run: the executors as a user sees them."""

from __future__ import annotations

from agentmesh import Coordinator, Report, Task, subagent
from agentmesh.context import Context
from agentmesh.executors import Executor, LocalExecutor, RayExecutor


@subagent(name="docs")
async def docs(task: Task, ctx: Context) -> list[str]:
    return [task.query]


async def on_a_cluster(tasks: list[Task]) -> Report:
    local: Executor = LocalExecutor()
    remote: Executor = RayExecutor("auto", task_options={"num_cpus": 0.25})
    assert local is not remote
    async with RayExecutor(num_cpus=2, cancel_grace=0.5) as executor:
        seconds: float = await executor.round_trip()
        assert seconds > 0
        return await Coordinator([docs], executor=executor).run(tasks)
