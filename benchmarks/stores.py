"""What a checkpoint store costs a run (issue 28): the same fan-out with and without one.

    python -m benchmarks --only stores
    AGENTMESH_BENCH_POSTGRES_DSN=postgresql://... python -m benchmarks --only stores

10,000 tasks, each awaiting once (`asyncio.sleep(0)`) as real I/O would and returning a
one-line result, run by one `Coordinator` (64 in flight, the default):

* **plain**: no store;
* **memory**: `MemoryStore`;
* **sqlite**: `SQLiteStore` (its defaults: WAL, `synchronous=FULL`), the plan and one
  record per task;
* **sqlite + checkpoint**: the subagent with `checkpoint=True`, one `ctx.record_partial`
  per task (progress restored at its start, saved, then the record);
* **postgres**, **postgres + checkpoint**: the same with `PostgresStore`, when a DSN is
  given in `AGENTMESH_BENCH_POSTGRES_DSN` (or the tests' `AGENTMESH_TEST_POSTGRES_DSN`).
  The server's CPU is not this process's: for PostgreSQL, wall time is the figure.

Growth: the same runs (no store, `SQLiteStore`, `SQLiteStore` with `checkpoint=True`)
at 10,000 and 100,000 tasks, alternating, each a per-task CPU time; the ratio of the
two sizes' medians says whether a task costs more as the run grows (issue 28: ≤ 1.3×).

Times are this process's CPU time (`time.process_time`, the store's thread included) per
task, and wall time; medians of alternating rounds, each ratio to the plain run of the
same round. Size: the SQLite file (after `close`, WAL folded in) per task, and the same
less each task's own data (its query and its result's text).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentmesh import Context, Coordinator, Task, subagent
from agentmesh.checkpoints import CheckpointStore, MemoryStore, PostgresStore, SQLiteStore
from benchmarks._harness import Samples, rotated, spread, table

DSN_VARIABLES = ("AGENTMESH_BENCH_POSTGRES_DSN", "AGENTMESH_TEST_POSTGRES_DSN")
NAMES = {
    "plain": "no store",
    "memory": "MemoryStore",
    "sqlite": "SQLiteStore",
    "sqlite_checkpoint": "SQLiteStore, checkpoint=True + 1 partial a task",
    "postgres": "PostgresStore",
    "postgres_checkpoint": "PostgresStore, checkpoint=True + 1 partial a task",
}


@dataclass(slots=True)
class StoreRow:
    """One contender's samples over the rounds."""

    name: str
    cpu_us: Samples = field(default_factory=Samples)
    wall_us: Samples = field(default_factory=Samples)
    ratio: Samples = field(default_factory=Samples)
    bytes_per_task: Samples = field(default_factory=Samples)
    beyond_own_data: Samples = field(default_factory=Samples)

    def to_json(self) -> dict[str, Any]:
        return {
            "cpu_us_per_task": self.cpu_us.to_json(),
            "wall_us_per_task": self.wall_us.to_json(),
            "x_plain": self.ratio.to_json(),
            "bytes_per_task": self.bytes_per_task.to_json(),
            "bytes_per_task_beyond_own_data": self.beyond_own_data.to_json(),
        }


def postgres_dsn() -> str | None:
    for variable in DSN_VARIABLES:
        dsn = os.environ.get(variable)
        if dsn:
            return dsn
    return None


def _worker(checkpoint: bool) -> Any:
    @subagent(name="worker", checkpoint=checkpoint)
    async def worker(task: Task, ctx: Context) -> str:
        await asyncio.sleep(0)
        if checkpoint:
            ctx.record_partial([task.query], completed=task.query)
        return f"answer to {task.query}"

    return worker


def _store(key: str, folder: Path, dsn: str | None, schema: str) -> CheckpointStore | None:
    if key == "plain":
        return None
    if key == "memory":
        return MemoryStore()
    if key.startswith("sqlite"):
        return SQLiteStore(folder / "checkpoints.sqlite")
    assert dsn is not None
    return PostgresStore(dsn, schema=schema)


async def _one(key: str, n: int, folder: Path, dsn: str | None, schema: str) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of `n` tasks."""
    store = _store(key, folder, dsn, schema)
    if store is not None and hasattr(store, "open"):
        await store.open()  # opening the file or the pool is not the run's cost
    # The checkpoints alone: the run's event log is measured by `benchmarks.event_log`.
    worker = _worker(key.endswith("checkpoint"))
    coordinator = Coordinator([worker], store=store, event_log=None)
    tasks = [Task(query=f"question {index}") for index in range(n)]
    cpu, wall = time.process_time(), time.perf_counter()
    report = await coordinator.run(tasks, run_id=f"bench-{key}")
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if store is not None:
        if isinstance(store, PostgresStore):
            await store.delete(f"bench-{key}")
        await store.close()
    if len(report.coverage) != n or report.coverage_ratio != 1.0:
        raise RuntimeError(f"{key}: the run did not cover every task")
    return cpu, wall


def _own_data(n: int) -> int:
    """The bytes of the tasks' own data: each query and each result's text."""
    return sum(len(f"question {i}") + len(f"answer to question {i}") for i in range(n))


def _size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.iterdir() if path.is_file())


def run(rounds: int, n: int = 10_000) -> list[StoreRow]:
    """Every contender, alternating round by round."""
    dsn = postgres_dsn()
    keys = [key for key in NAMES if dsn is not None or not key.startswith("postgres")]
    rows = {key: StoreRow(NAMES[key]) for key in keys}
    own = _own_data(n)
    schema = "agentmesh_bench"
    for number in range(rounds):
        cpu_of: dict[str, float] = {}
        for key in rotated(keys, number):
            with tempfile.TemporaryDirectory() as folder:
                cpu, wall = asyncio.run(_one(key, n, Path(folder), dsn, schema))
                if key.startswith("sqlite"):
                    size = _size(Path(folder))
                    rows[key].bytes_per_task.add(size / n)
                    rows[key].beyond_own_data.add((size - own) / n)
            cpu_of[key] = cpu
            rows[key].cpu_us.add(cpu / n * 1e6)
            rows[key].wall_us.add(wall / n * 1e6)
            print(".", end="", flush=True)
        for key in keys:
            rows[key].ratio.add(cpu_of[key] / cpu_of["plain"])
    print()
    return list(rows.values())


GROWTH_KEYS = ("plain", "sqlite", "sqlite_checkpoint")


def growth(rounds: int, small: int, big: int) -> dict[str, dict[str, Any]]:
    """Per-task CPU µs of each growth contender at `small` and `big` tasks, alternating."""
    samples = {(key, n): Samples() for key in GROWTH_KEYS for n in (small, big)}
    for number in range(rounds):
        for key in rotated(list(GROWTH_KEYS), number):
            for n in (small, big) if number % 2 == 0 else (big, small):
                with tempfile.TemporaryDirectory() as folder:
                    cpu, _wall = asyncio.run(_one(key, n, Path(folder), None, ""))
                samples[key, n].add(cpu / n * 1e6)
                print(".", end="", flush=True)
    print()
    return {
        NAMES[key]: {
            "small": small,
            "big": big,
            "cpu_us_small": samples[key, small].to_json(),
            "cpu_us_big": samples[key, big].to_json(),
            "x_growth": samples[key, big].median / samples[key, small].median,
        }
        for key in GROWTH_KEYS
    }


def print_growth(rows: dict[str, dict[str, Any]]) -> None:
    first = next(iter(rows.values()))
    small, big = first["small"], first["big"]
    lines = [
        [
            name,
            f"{row['cpu_us_small']['median']:.0f}",
            f"{row['cpu_us_big']['median']:.0f}",
            f"{row['x_growth']:.2f}",
        ]
        for name, row in rows.items()
    ]
    print(
        table(
            ["run", f"CPU µs/task at {small:,}", f"at {big:,}", "× growth"],
            lines,
            f"Checkpoint stores, growth: {small:,} and {big:,} tasks",
        )
    )
    print()


def print_table(rows: Sequence[StoreRow], n: int) -> None:
    lines = [
        [
            row.name,
            spread(row.cpu_us, "{:.0f}"),
            spread(row.ratio, "{:.2f}"),
            spread(row.wall_us, "{:.0f}"),
            spread(row.bytes_per_task, "{:.0f}") if row.bytes_per_task.values else "",
            spread(row.beyond_own_data, "{:.0f}") if row.beyond_own_data.values else "",
        ]
        for row in rows
    ]
    print(
        table(
            ["run", "CPU µs/task", "× plain", "wall µs/task", "bytes/task", "beyond own data"],
            lines,
            f"Checkpoint stores: {n:,} tasks, each awaiting once, one-line results",
        )
    )
    if not any(row.name.startswith("PostgresStore") for row in rows):
        print(f"(PostgreSQL: set {DSN_VARIABLES[0]} to measure it)")
    print()


def targets(rows: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """Issue 28's targets, from the section's JSON, each with its figure and whether met."""
    checks: list[tuple[str, str, bool]] = []
    x = {key: rows[NAMES[key]]["x_plain"]["median"] for key in NAMES if NAMES[key] in rows}
    if "sqlite" in x:
        checks.append(("SQLiteStore run ≤ 1.5× plain", f"{x['sqlite']:.2f}×", x["sqlite"] <= 1.5))
        beyond = rows[NAMES["sqlite"]]["bytes_per_task_beyond_own_data"]["median"]
        checks.append(
            ("≤ 200 bytes a finished task beyond its data", f"{beyond:.0f}", beyond <= 200)
        )
    if "sqlite_checkpoint" in x:
        ratio = x["sqlite_checkpoint"]
        checks.append(("checkpoint + partial ≤ 2× plain", f"{ratio:.2f}×", ratio <= 2))
    for name, row in rows.get("growth", {}).items():
        ratio = row["x_growth"]
        checks.append(
            (f"{name}: {row['big']:,} tasks ≤ 1.3× {row['small']:,}", f"{ratio:.2f}×", ratio <= 1.3)
        )
    if "postgres" in x:
        wall = {
            key: rows[NAMES[key]]["wall_us_per_task"]["median"] for key in ("sqlite", "postgres")
        }
        ratio = wall["postgres"] / wall["sqlite"]
        checks.append(("PostgresStore ≤ 2× SQLiteStore (wall)", f"{ratio:.2f}×", ratio <= 2))
    return checks
