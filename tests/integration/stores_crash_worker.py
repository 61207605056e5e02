"""Run by the group-commit crash test in a child process: not a test module.

Runs `TASKS` tasks on a SQLite store. Each makes one call of a non-idempotent tool that
appends a line to the calls file (its side effect, visible across processes). The task
`hold` makes its call, waits until every other task has returned (their records written
behind, in a batch or queued for one), prints "ready" and blocks until the process is
killed.

    python stores_crash_worker.py <database> <calls file>
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from agentmesh import Context, Coordinator, Task, subagent, tool
from agentmesh.checkpoints import SQLiteStore

RUN_ID = "crash-fanout"
TASKS = 40
HOLD = "hold"


def tasks() -> list[Task]:
    return [Task(query=HOLD if index == 0 else f"q{index}") for index in range(TASKS)]


def call_once(calls: Path, query: str) -> str:
    with calls.open("a") as file:
        file.write(f"{query}\n")
    return f"done {query}"


async def main(database: Path, calls: Path) -> None:
    returned = 0
    others_done = asyncio.Event()

    @tool
    async def act(query: str) -> str:
        return call_once(calls, query)

    @subagent(name="worker")
    async def worker(task: Task, ctx: Context) -> str:
        nonlocal returned
        result = await ctx.call(act, query=task.query)
        if task.query != HOLD:
            returned += 1
            if returned == TASKS - 1:
                others_done.set()
            return result
        await others_done.wait()
        print("ready", flush=True)
        await asyncio.Event().wait()  # until SIGKILL
        return "unreachable"

    async with SQLiteStore(database) as store:
        await Coordinator([worker], store=store).run(tasks(), run_id=RUN_ID)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2])))
