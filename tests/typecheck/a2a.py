"""Type-checked, never run: a remote A2A agent as a user writes it, its options typed."""

from __future__ import annotations

from agentmesh import Coordinator, RetryPolicy
from agentmesh.a2a import A2AAgent
from agentmesh.approvals import Edit
from agentmesh.checkpoints import MemoryStore
from agentmesh.envelope import Outcome


async def papers(token: str) -> Outcome:
    agent = A2AAgent(
        "https://papers.example.org/a2a",
        name="papers",
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
        retry=RetryPolicy(max_attempts=2),  # the options of any subagent, typed
        alternatives=["web"],
        max_concurrency=4,
    )
    A2AAgent("https://papers.example.org/a2a", retri=2)  # type: ignore[call-arg]
    A2AAgent("https://papers.example.org/a2a", max_concurrency="4")  # type: ignore[arg-type]
    return await agent.run("retry budgets")


async def answered(agent: A2AAgent) -> None:
    coordinator = Coordinator([agent], store=MemoryStore())
    report = await coordinator.run(["which papers?"], run_id="papers-1")
    for pending in report.pending_approvals:  # the remote agent's questions
        await coordinator.resume("papers-1", approvals={pending.id: Edit(query="2024")})
