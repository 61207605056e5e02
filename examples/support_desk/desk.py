"""The desk: three tickets, a lookup, a refund tool, and a policy that asks a person."""

from __future__ import annotations

from typing import Any

from agentmesh import Context, RetryPolicy, Task, subagent, tool
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use

LIMIT = 250

TICKETS = [
    Task(query="refund order A-1", topic="A-1", metadata={"order": "A-1", "amount": 40}),
    Task(query="refund order B-2", topic="B-2", metadata={"order": "B-2", "amount": 900}),
    Task(query="refund order C-3", topic="C-3", metadata={"order": "C-3", "amount": 120}),
]


@tool(idempotent=True)
async def lookup(order: str) -> dict[str, str]:
    """The order's customer (offline: made up from the order number)."""
    return {"order": order, "customer": f"customer-{order.lower()}"}


@tool(impact="financial")
async def refund(order: str, amount: int) -> str:
    """Pay money back: not idempotent, so the ledger makes sure it happens once."""
    return f"refunded {amount} on {order}"


@pre_tool_use(tool=refund, asks=True)
def refund_limit(event: ToolCallEvent) -> Ruling | None:
    """Refunds over the limit need a person's approval."""
    amount = event.arguments["amount"]
    if amount > LIMIT:
        return Ruling.ask(f"refund of {amount} is over the limit of {LIMIT}")
    return None


@subagent(name="desk", checkpoint=True, retry=RetryPolicy.never())
async def desk(task: Task, ctx: Context) -> list[Any]:
    order = task.metadata["order"]
    customer = await ctx.call(lookup, order=order)
    ctx.record_partial([customer], completed="lookup")
    return [customer, await ctx.call(refund, order=order, amount=task.metadata["amount"])]
