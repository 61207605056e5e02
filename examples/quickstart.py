"""agentmesh in one screen: four ways a call can end, each reported honestly.

Run it with `python3 dev.py demo` (or `.venv/bin/python examples/quickstart.py`).
Offline; no key, no network.

1. a transient timeout, recovered locally by the subagent's retry policy;
2. a validation error: not retried, the envelope names the bad field;
3. an empty result: a success ("searched, nothing found"), not an error, not retried;
4. a policy at work: a refund over the limit is denied before the tool runs.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from agentmesh import (
    Context,
    ErrorEnvelope,
    Outcome,
    RetryPolicy,
    Task,
    TransientError,
    configure_logging,
    subagent,
    tool,
)
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use

DOCS = {
    "asyncio cancellation": ["Task.cancel() requests cancellation", "asyncio.timeout() cancels"],
    "structured concurrency": ["TaskGroup cancels siblings when one task fails"],
}
_flaky_calls = 0


@tool(idempotent=True)
async def search_docs(query: str, limit: int = 5) -> list[str]:
    """Search a small in-memory documentation index; times out twice to show recovery."""
    global _flaky_calls
    _flaky_calls += 1
    if query == "asyncio cancellation" and _flaky_calls <= 2:
        raise TransientError("search backend timed out", error_type="timeout")
    return DOCS.get(query, [])[:limit]


@tool(impact="financial", idempotent=True)
async def refund(order_id: str, amount: int) -> str:
    """Refund an order (pretend)."""
    return f"refunded ${amount} on {order_id}"


@pre_tool_use(tool="refund")
def refund_limit(event: ToolCallEvent) -> Ruling | None:
    """Deterministic, not a prompt: refunds above $500 need a supervisor."""
    if event.arguments["amount"] > 500:
        return Ruling.deny("refunds above $500 need a supervisor")
    return None


@subagent(
    name="docs",
    retry=RetryPolicy(max_attempts=4, initial_delay=0.05, max_delay=1.0),
    alternatives=["narrow_query"],
)
async def docs_agent(task: Task, ctx: Context) -> list[str]:
    limit = task.metadata.get("limit", 5)
    return await ctx.call(search_docs, query=task.query, limit=limit)


@subagent(name="support", policies=[refund_limit])
async def support_agent(task: Task, ctx: Context) -> str:
    return await ctx.call(refund, order_id="#12345", amount=int(task.query))


def show(title: str, outcome: Outcome) -> None:
    print(f"\n== {title}")
    if isinstance(outcome, ErrorEnvelope):
        wire: dict[str, Any] = outcome.to_dict()
        print(json.dumps(wire, indent=2))
    else:
        kind = "empty result (searched, nothing found)" if outcome.is_empty else "result"
        print(f"{kind} after {outcome.attempts} attempt(s): {outcome.data}")


async def main() -> None:
    show(
        "1. transient timeout, recovered locally",
        await docs_agent.run(Task(query="asyncio cancellation", topic="cancellation")),
    )
    print(f"(search_docs was called {_flaky_calls} times: two timeouts, then the answer)")
    show(
        "2. validation error: not retried, names the field",
        await docs_agent.run(Task(query="structured concurrency", metadata={"limit": "lots"})),
    )
    show("3. empty result: a success", await docs_agent.run(Task(query="tokio internals")))
    show("4a. policy allows a small refund", await support_agent.run("120"))
    show("4b. policy denies a large refund, the tool never runs", await support_agent.run("900"))


if __name__ == "__main__":
    # `-v` shows every decision the framework takes as a structured log line.
    if "-v" in sys.argv:
        configure_logging("INFO")
    asyncio.run(main())
