"""A customer-support hub: billing, shipping and knowledge-base subagents behind one coordinator.

Save it as `support_hub.py` and run `python support_hub.py` (in a clone of the repository:
`python -m examples.howto.support_hub`). Offline: every backend is in memory.

One customer writes in with three questions, and each part of the hub fails differently:

- shipping: the carrier's API is rate limited twice, then answers (retried locally);
- billing: a refund of $450 is above the $200 limit, refused by a policy before it runs;
- knowledge base: one of three sections times out for good; the other two are kept.

The report says, topic by topic, what is covered, what was escalated and where the gap is.
(For a refund that waits for a person's approval instead, see `examples/support_desk`.)
"""

from __future__ import annotations

import asyncio

from agentmesh import Context, Coordinator, RetryPolicy, Task, TransientError, subagent, tool
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use
from agentmesh.testing import FailTimes, RecordingSleep

REFUND_LIMIT = 200
ARTICLES = {
    "returns": "Items can be returned within 30 days.",
    "warranty": "Electronics carry a two-year warranty.",
    "exchanges": "Exchanges ship free once the return is scanned.",
}

# The carrier answers 429 twice before it lets us in: FailTimes plays that script.
carrier_limit = FailTimes(
    2, lambda: TransientError("carrier API: 429", error_type="rate_limited", retry_after=1.5)
)
# The hub never really waits in this demo; RecordingSleep keeps the delays it would have slept.
carrier_waits = RecordingSleep()
kb_waits = RecordingSleep()


@tool(idempotent=True)
async def track_parcel(order: str) -> dict[str, str]:
    """Where the order's parcel is (idempotent: safe to ask again after a failure)."""
    carrier_limit()
    return {"order": order, "status": "out for delivery"}


@tool(impact="financial")
async def refund(order: str, amount: int) -> str:
    """Pay money back; never reached here, since the policy refuses the amount first."""
    return f"refunded ${amount} on {order}"


@tool(idempotent=True)
async def read_article(section: str) -> str:
    """One section of the help centre; the 'exchanges' service is down all along."""
    if section == "exchanges":
        raise TimeoutError("help-centre search for 'exchanges' timed out")
    return ARTICLES[section]


@pre_tool_use(tool=refund)
def refund_limit(event: ToolCallEvent) -> Ruling | None:
    """Money is decided in code, not in a prompt: a refund above the limit never runs."""
    if event.arguments["amount"] > REFUND_LIMIT:
        return Ruling.deny(f"refunds above ${REFUND_LIMIT} need a supervisor")
    return None


# `retry_after=1.5` from the carrier is honoured: each backoff is at least 1.5 seconds.
@subagent(name="shipping", retry=RetryPolicy(max_attempts=4, max_delay=5, sleep=carrier_waits))
async def shipping(task: Task, ctx: Context) -> dict[str, str]:
    return await ctx.call(track_parcel, order=task.metadata["order"])


@subagent(name="billing", policies=[refund_limit])
async def billing(task: Task, ctx: Context) -> str:
    return await ctx.call(refund, order=task.metadata["order"], amount=task.metadata["amount"])


@subagent(name="kb", retry=RetryPolicy(max_attempts=2, sleep=kb_waits))
async def knowledge_base(task: Task, ctx: Context) -> list[str]:
    sections = task.metadata["sections"]
    # Saying what is pending first lets the report name what the failure left undone.
    ctx.record_partial(pending=sections)
    for section in sections:
        article = await ctx.call(read_article, section=section)
        ctx.record_partial([f"{section}: {article}"], completed=section)
    return list(ctx.partials.findings)


TICKET = [
    Task(
        query="where is my parcel?",
        topic="delivery",
        subagent="shipping",
        metadata={"order": "A-1001"},
    ),
    Task(
        query="refund my broken kettle",
        topic="refund",
        subagent="billing",
        metadata={"order": "A-1001", "amount": 450},
    ),
    Task(
        query="what are my options?",
        topic="policies",
        subagent="kb",
        metadata={"sections": ["returns", "warranty", "exchanges"]},
    ),
]


async def main() -> None:
    hub = Coordinator([shipping, billing, knowledge_base])
    report = await hub.run(TICKET, run_id="ticket-1001")
    for entry in report.coverage:
        print(f"{entry.topic:<9} {entry.status.value:<9} {entry.reason}")
    print(f"\ncoverage: {report.coverage_ratio:.0%} of topics answered")
    print(f"shipping waited {carrier_waits.delays} s between attempts (the carrier's retry-after)")
    print(f"carrier API called {carrier_limit.calls} times")
    print("\n" + report.to_markdown())


if __name__ == "__main__":
    asyncio.run(main())
