"""Run by the SIGKILL test in a child process: not a test module.

Runs Retrieval -> Analysis -> Synthesis on a SQLite store. Retrieval appends a line to
a counter file (its side effect, visible across processes); Analysis prints "ready" and
blocks until the process is killed.

    python pipeline_crash_worker.py <database> <counter file>
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from agentmesh import Pipeline
from agentmesh.checkpoints import SQLiteStore

RUN_ID = "crash-run"
QUERY = "asyncio cancellation"


def count_retrieval(counter: Path) -> None:
    with counter.open("a") as file:
        file.write("retrieval\n")


async def main(database: Path, counter: Path) -> None:
    async def retrieval(query: str) -> list[str]:
        count_retrieval(counter)
        return [f"doc about {query}"]

    async def analysis(docs: list[str]) -> str:
        print("ready", flush=True)
        await asyncio.Event().wait()  # until SIGKILL
        return "unreachable"

    async def synthesis(summary: str) -> str:
        return summary

    async with SQLiteStore(database) as store:
        pipeline = Pipeline(
            [("retrieval", retrieval), ("analysis", analysis), ("synthesis", synthesis)],
            store=store,
        )
        await pipeline.run(QUERY, run_id=RUN_ID)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2])))
