"""What a run's event log costs (issue 29): the same run with and without one.

    python -m benchmarks --only eventlog
    AGENTMESH_BENCH_POSTGRES_DSN=postgresql://... python -m benchmarks --only eventlog

10,000 tasks, each awaiting once (`asyncio.sleep(0)`) and returning a one-line result,
run by one `Coordinator` with a store, once with `event_log=None` and once with the
default `EventLog()` (every event encoded and masked as `event.to_json()`, appended in
batches by group commit): SQLiteStore (WAL, `synchronous=FULL`), MemoryStore, and
PostgresStore when a DSN is given. A task of this run has three events (TaskStarted,
Routed, TaskFinished), and the run two more (RunStarted, RunFinished with the report).

Times are this process's CPU time per task and wall time per task (medians of
alternating rounds); the log's cost is the difference to the run without it in the same
round. Size: the SQLite file per task, with and without the log.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentmesh import Context, Coordinator, Task, subagent
from agentmesh.checkpoints import CheckpointStore, MemoryStore, PostgresStore, SQLiteStore
from agentmesh.events import EventLog
from benchmarks._harness import Samples, rotated, spread, table
from benchmarks.stores import postgres_dsn

NAMES = {"sqlite": "SQLiteStore", "memory": "MemoryStore", "postgres": "PostgresStore"}


@dataclass(slots=True)
class LogRow:
    """One store's samples over the rounds, without and with the event log."""

    name: str
    cpu_without: Samples = field(default_factory=Samples)
    cpu_with: Samples = field(default_factory=Samples)
    cpu_extra: Samples = field(default_factory=Samples)
    wall_extra: Samples = field(default_factory=Samples)
    bytes_without: Samples = field(default_factory=Samples)
    bytes_with: Samples = field(default_factory=Samples)

    def to_json(self) -> dict[str, Any]:
        return {
            "cpu_us_per_task_without_log": self.cpu_without.to_json(),
            "cpu_us_per_task_with_log": self.cpu_with.to_json(),
            "log_cpu_us_per_task": self.cpu_extra.to_json(),
            "log_wall_us_per_task": self.wall_extra.to_json(),
            "bytes_per_task_without_log": self.bytes_without.to_json(),
            "bytes_per_task_with_log": self.bytes_with.to_json(),
        }


@subagent(name="worker")
async def _worker(task: Task, ctx: Context) -> str:
    await asyncio.sleep(0)
    return f"answer to {task.query}"


def _store(key: str, folder: Path, dsn: str | None) -> CheckpointStore:
    if key == "memory":
        return MemoryStore()
    if key == "sqlite":
        return SQLiteStore(folder / "checkpoints.sqlite")
    assert dsn is not None
    return PostgresStore(dsn, schema="agentmesh_bench_events")


async def _one(
    key: str, logged: bool, n: int, folder: Path, dsn: str | None
) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of `n` tasks."""
    store = _store(key, folder, dsn)
    await store.open()  # type: ignore[attr-defined]  # every built-in store opens
    log = EventLog() if logged else None
    coordinator = Coordinator([_worker], store=store, event_log=log)
    tasks = [Task(query=f"question {index}") for index in range(n)]
    run_id = f"bench-events-{key}-{logged}"
    cpu, wall = time.process_time(), time.perf_counter()
    report = await coordinator.run(tasks, run_id=run_id)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if isinstance(store, PostgresStore):
        await store.delete(run_id)
        table = store.event_table()
        await table._tables(_forget(table, run_id))  # the next round starts from nothing
    await store.close()
    if report.coverage_ratio != 1.0:
        raise RuntimeError(f"{key}: the run did not cover every task")
    return cpu, wall


def _forget(table: Any, run_id: str) -> Any:
    async def forget(connection: Any) -> None:
        for statement in (
            "DELETE FROM {rows} WHERE run_id = %s",
            "DELETE FROM {heads} WHERE run_id = %s",
        ):
            await connection.execute(table._sql(statement), (run_id,))

    return forget


def run(rounds: int, n: int = 10_000) -> list[LogRow]:
    """Every store without and with its log, alternating round by round."""
    dsn = postgres_dsn()
    keys = [key for key in NAMES if dsn is not None or key != "postgres"]
    rows = {key: LogRow(NAMES[key]) for key in keys}
    for number in range(rounds):
        for key in rotated(keys, number):
            measured = {}
            for logged in (False, True):
                with tempfile.TemporaryDirectory() as folder:
                    cpu, wall = asyncio.run(_one(key, logged, n, Path(folder), dsn))
                    size = sum(p.stat().st_size for p in Path(folder).iterdir() if p.is_file())
                measured[logged] = (cpu, wall, size)
                print(".", end="", flush=True)
            row = rows[key]
            (cpu0, wall0, size0), (cpu1, wall1, size1) = measured[False], measured[True]
            row.cpu_without.add(cpu0 / n * 1e6)
            row.cpu_with.add(cpu1 / n * 1e6)
            row.cpu_extra.add((cpu1 - cpu0) / n * 1e6)
            row.wall_extra.add((wall1 - wall0) / n * 1e6)
            if key == "sqlite":
                row.bytes_without.add(size0 / n)
                row.bytes_with.add(size1 / n)
    print()
    return list(rows.values())


def print_table(rows: Sequence[LogRow], n: int) -> None:
    lines = [
        [
            row.name,
            spread(row.cpu_without, "{:.0f}"),
            spread(row.cpu_with, "{:.0f}"),
            spread(row.cpu_extra, "{:.0f}"),
            spread(row.wall_extra, "{:.0f}"),
            spread(row.bytes_without, "{:.0f}") if row.bytes_without.values else "",
            spread(row.bytes_with, "{:.0f}") if row.bytes_with.values else "",
        ]
        for row in rows
    ]
    print(
        table(
            [
                "store",
                "CPU µs/task, no log",
                "with log",
                "log CPU µs/task",
                "log wall µs/task",
                "bytes/task, no log",
                "with log",
            ],
            lines,
            f"The run's event log: {n:,} tasks, each awaiting once, one-line results",
        )
    )
    print()
