"""Run by the human-decision tests in a fresh process each time: not a test module.

A support desk with two refunds, one under the limit and one over it; a policy asks a
person about refunds over 100. Every refund made appends a line to a counter file (the
side effect, visible across processes). Prints the report's JSON on stdout.

    python decisions_worker.py STORE COUNTER run
    python decisions_worker.py STORE COUNTER resume DECISIONS_JSON [--crash-after-refund]

STORE is `sqlite:PATH` or `postgres:SCHEMA` (the DSN in AGENTMESH_TEST_POSTGRES_DSN).
DECISIONS_JSON maps ids to `{"approve": true}`, `{"reject": "why"}`, `{"edit": {...}}`.
With `--crash-after-refund`, the process dies (os._exit) right after a refund is made.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from agentmesh import Context, Coordinator, RetryPolicy, Task, subagent, tool
from agentmesh.checkpoints import CheckpointStore, PostgresStore, SQLiteStore
from agentmesh.decisions import Approve, Edit, HumanDecision, Reject
from agentmesh.policies import Decision, ToolCallEvent, pre_tool_use

RUN_ID = "desk-run"
LIMIT = 100
TASKS = [
    Task(query="refund order A-1", topic="A-1", metadata={"order": "A-1", "amount": 40}),
    Task(query="refund order B-2", topic="B-2", metadata={"order": "B-2", "amount": 900}),
]


def build(counter: Path, crash_after_refund: bool) -> Coordinator:
    @tool(idempotent=True)
    async def lookup(order: str) -> dict[str, str]:
        return {"order": order, "customer": f"customer of {order}"}

    @tool(impact="financial")
    async def refund(order: str, amount: int) -> str:
        with counter.open("a") as file:
            file.write(f"{order} {amount}\n")
        return f"refunded {amount} on {order}"

    @tool(idempotent=True)
    async def notify(order: str) -> str:
        if crash_after_refund:
            os._exit(3)  # the process dies after the refund was made and recorded
        return f"customer of {order} notified"

    @pre_tool_use(tool="refund", asks=True)
    def refund_limit(event: ToolCallEvent) -> Decision | None:
        amount = event.arguments["amount"]
        if amount > LIMIT:
            return Decision.ask(f"refund of {amount} is over the limit of {LIMIT}")
        return None

    @subagent(name="desk", checkpoint=True, retry=RetryPolicy.never())
    async def desk(task: Task, ctx: Context) -> list[Any]:
        order = task.metadata["order"]
        found = await ctx.call(lookup, order=order)
        ctx.record_partial([found], completed="lookup")
        done = await ctx.call(refund, order=order, amount=task.metadata["amount"])
        return [found, done, await ctx.call(notify, order=order)]

    return Coordinator([desk], policies=[refund_limit], store=open_store(sys.argv[1]))


def open_store(spec: str) -> CheckpointStore:
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        return SQLiteStore(Path(where))
    return PostgresStore(os.environ["AGENTMESH_TEST_POSTGRES_DSN"], schema=where)


def decisions(text: str) -> dict[str, HumanDecision]:
    parsed: dict[str, HumanDecision] = {}
    for decision_id, answer in json.loads(text).items():
        if "approve" in answer:
            parsed[decision_id] = Approve()
        elif "reject" in answer:
            parsed[decision_id] = Reject(answer["reject"])
        else:
            parsed[decision_id] = Edit(arguments=answer["edit"])
    return parsed


async def main(argv: list[str]) -> None:
    counter, command = Path(argv[2]), argv[3]
    coordinator = build(counter, "--crash-after-refund" in argv)
    assert coordinator.store is not None
    async with coordinator.store:  # type: ignore[attr-defined]  # every store here is a StoreBase
        if command == "run":
            report = await coordinator.run(TASKS, run_id=RUN_ID)
        else:
            report = await coordinator.resume(RUN_ID, decisions=decisions(argv[4]))
    print(report.to_json(indent=None), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv))
