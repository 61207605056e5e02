"""Run by the approval tests in a fresh process each time: not a test module.

A support desk with two refunds, one under the limit and one over it; a policy asks a
person about refunds over 100. Every call of the refund tool appends a line to a
counter file as it starts (the side effect, visible across processes). Prints the
report's JSON on stdout, or `{"usageError": message}` when resume raises `UsageError`.

    python approvals_worker.py STORE COUNTER run
    python approvals_worker.py STORE COUNTER resume APPROVALS_JSON [options]

STORE is `sqlite:PATH` or `postgres:SCHEMA` (the DSN in AGENTMESH_TEST_POSTGRES_DSN).
APPROVALS_JSON maps ids to `{"approve": true}`, `{"reject": "why"}`, `{"edit": {...}}`.
Options: `--crash-after-refund`: the process dies (os._exit) right after a refund is
made; `--block-in-refund`: a refund of order B-2 never returns (the test kills the
process); `--barrier=DIR`: write `DIR/<pid>.ready`, then wait for `DIR/go` before
resuming, so that two processes resume at the same moment.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from agentmesh import Context, Coordinator, RetryPolicy, Task, UsageError, subagent, tool
from agentmesh.approvals import Approval, Approve, Edit, Reject
from agentmesh.checkpoints import CheckpointStore, PostgresStore, SQLiteStore
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use

RUN_ID = "desk-run"
LIMIT = 100
TASKS = [
    Task(query="refund order A-1", topic="A-1", metadata={"order": "A-1", "amount": 40}),
    Task(query="refund order B-2", topic="B-2", metadata={"order": "B-2", "amount": 900}),
]


def build(counter: Path, crash_after_refund: bool, block_in_refund: bool = False) -> Coordinator:
    @tool(idempotent=True)
    async def lookup(order: str) -> dict[str, str]:
        return {"order": order, "customer": f"customer of {order}"}

    @tool(impact="financial")
    async def refund(order: str, amount: int) -> str:
        with counter.open("a") as file:
            file.write(f"{order} {amount}\n")
        if block_in_refund and order == "B-2":
            await asyncio.sleep(3600)  # the refund is under way when the test kills the process
        return f"refunded {amount} on {order}"

    @tool(idempotent=True)
    async def notify(order: str) -> str:
        if crash_after_refund:
            os._exit(3)  # the process dies after the refund was made and recorded
        return f"customer of {order} notified"

    @pre_tool_use(tool="refund", asks=True)
    def refund_limit(event: ToolCallEvent) -> Ruling | None:
        amount = event.arguments["amount"]
        if amount > LIMIT:
            return Ruling.ask(f"refund of {amount} is over the limit of {LIMIT}")
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


def decisions(text: str) -> dict[str, Approval]:
    parsed: dict[str, Approval] = {}
    for decision_id, answer in json.loads(text).items():
        if "approve" in answer:
            parsed[decision_id] = Approve()
        elif "reject" in answer:
            parsed[decision_id] = Reject(answer["reject"])
        else:
            parsed[decision_id] = Edit(arguments=answer["edit"])
    return parsed


def wait_at(barrier: Path) -> None:
    """Say this process is ready, then wait until the test lets every process go at once."""
    (barrier / f"{os.getpid()}.ready").touch()
    while not (barrier / "go").exists():
        time.sleep(0.001)


async def main(argv: list[str]) -> None:
    counter, command = Path(argv[2]), argv[3]
    coordinator = build(counter, "--crash-after-refund" in argv, "--block-in-refund" in argv)
    barrier = next((Path(a.partition("=")[2]) for a in argv if a.startswith("--barrier=")), None)
    assert coordinator.store is not None
    async with coordinator.store:  # type: ignore[attr-defined]  # every store here is a StoreBase
        if command == "run":
            report = await coordinator.run(TASKS, run_id=RUN_ID)
        else:
            if barrier is not None:
                wait_at(barrier)
            try:
                report = await coordinator.resume(RUN_ID, approvals=decisions(argv[4]))
            except UsageError as exc:
                print(json.dumps({"usageError": str(exc)}), flush=True)
                return
    print(report.to_json(indent=None), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv))
