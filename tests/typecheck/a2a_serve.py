"""Type-checked, never run: serving subagents and a coordinator over A2A as a user sees it."""

from __future__ import annotations

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount

from agentmesh import Coordinator, RetryBudget, Task, subagent
from agentmesh.a2a import A2AAgent, serve
from agentmesh.checkpoints import SQLiteStore
from agentmesh.context import Context


@subagent(name="docs")
async def docs(task: Task, ctx: Context) -> list[str]:
    return [task.query]


agents = serve(
    [docs],
    name="research",
    url="http://127.0.0.1:9999",
    token="a-secret-of-sixteen-or-more",
    timeout=30,
    retry_budget=RetryBudget(),
    store=SQLiteStore("approvals.sqlite"),
)
hub = serve(Coordinator([docs, A2AAgent("http://127.0.0.1:9998")]), name="hub")
site = Starlette(routes=[Mount("/research", app=agents), Mount("/hub", app=hub)])


def run() -> None:
    uvicorn.run(agents, host="127.0.0.1", port=9999)
