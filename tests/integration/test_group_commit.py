"""Group commit: a run's writes share transactions, and nothing reported is lost.

A store batches the puts made while it is busy into one transaction; a coordinator
writes its task records behind and commits them before it reports. What a person, a
resumed run or another process relies on must still be there.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from agentmesh import (
    Context,
    Coordinator,
    RetryPolicy,
    Task,
    TransientError,
    subagent,
    tool,
)
from agentmesh.checkpoints import CheckpointStore, MemoryStore, SQLiteStore
from agentmesh.errors import CheckpointError
from tests.integration import stores_crash_worker as worker

ROOT = Path(__file__).parents[2]

_COUNT_RECORDS = """
import asyncio, sys
from agentmesh.checkpoints import SQLiteStore

async def main():
    async with SQLiteStore(sys.argv[1]) as store:
        rows = await store.list(sys.argv[2], "agentmesh.run")
    print(sum(row.key.startswith("record/") for row in rows))

asyncio.run(main())
"""


def _one_line() -> object:
    @subagent(name="lines")
    async def lines(task: Task, ctx: Context) -> str:
        await asyncio.sleep(0)
        return f"answer to {task.query}"

    return lines


def _records_seen_by_another_process(database: Path, run_id: str) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    completed = subprocess.run(
        [sys.executable, "-c", _COUNT_RECORDS, str(database), run_id],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    return int(completed.stdout.strip())


class TestWhatARunReportsIsDurable:
    async def test_another_process_sees_every_task_once_the_report_is_back(
        self, tmp_path: Path
    ) -> None:
        """The store still open: the report's tasks are committed, for anyone to read."""
        database = tmp_path / "checkpoints.sqlite"
        tasks = [Task(query=f"question {index}") for index in range(300)]
        async with SQLiteStore(database) as store:
            report = await Coordinator([_one_line()], store=store).run(tasks, run_id="fan")
            assert len(report.coverage) == 300
            seen = await asyncio.to_thread(_records_seen_by_another_process, database, "fan")
        assert seen == 300

    async def test_a_resume_reads_back_every_record_as_it_was_reported(
        self, store: CheckpointStore
    ) -> None:
        """Records kept without what the plan says read back the same: successes, empty
        results, retried tasks, failures with their progress."""
        flaky: set[str] = {"retried"}

        @subagent(name="mixed", retry=RetryPolicy(max_attempts=2, sleep=_no_sleep))
        async def mixed(task: Task, ctx: Context) -> list[str]:
            if task.query in flaky:
                flaky.discard(task.query)
                raise TransientError("try again")
            if task.query == "broken":
                ctx.record_partial(["half"], completed="first", pending="second")
                raise ValueError("the second source is gone")
            return [] if task.query == "nothing" else [task.query, "more"]

        tasks = [
            Task(query=query, topic=f"topic {query}", metadata={"n": index})
            for index, query in enumerate(["plain", "nothing", "retried", "broken"])
        ]
        first = await Coordinator([mixed], store=store).run(tasks, run_id="mixed-run")
        again = await Coordinator([mixed], store=store).resume("mixed-run")
        assert _dumped(again.records) == _dumped(first.records)
        assert [entry.status for entry in again.coverage] == [
            entry.status for entry in first.coverage
        ]


async def _no_sleep(seconds: float) -> None:
    pass


def _dumped(records: Sequence[object]) -> list[object]:
    import pydantic_core

    return [pydantic_core.to_jsonable_python(record, by_alias=True) for record in records]


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
class TestKilledMidBatch:
    async def test_a_resume_finishes_every_task_and_makes_no_call_twice(
        self, tmp_path: Path
    ) -> None:
        """SIGKILL while finished tasks' records wait for their batch: the resume runs the
        unrecorded ones again, and their calls come back from the ledger, not twice."""
        database, calls = tmp_path / "checkpoints.sqlite", tmp_path / "calls.txt"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            worker.__file__,
            str(database),
            str(calls),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        assert child.stdout is not None
        try:
            line = await asyncio.wait_for(child.stdout.readline(), timeout=60)
        finally:
            child.send_signal(signal.SIGKILL)
            _, stderr = await child.communicate()
        assert line == b"ready\n", f"the worker never got ready: {stderr!r}"
        assert child.returncode == -signal.SIGKILL
        assert len(calls.read_text().splitlines()) == worker.TASKS

        @tool
        async def act(query: str) -> str:
            return worker.call_once(calls, query)

        @subagent(name="worker")
        async def resumed(task: Task, ctx: Context) -> str:
            return str(await ctx.call(act, query=task.query))

        async with SQLiteStore(database) as store:
            report = await Coordinator([resumed], store=store).resume(worker.RUN_ID)
        assert [entry.status.value for entry in report.coverage] == ["covered"] * worker.TASKS
        assert sorted(calls.read_text().splitlines()) == sorted(t.query for t in worker.tasks())


class _Refusing(MemoryStore):
    """A store that batches like SQLite and refuses the keys `refused`: a write that fails."""

    _group_commit = True

    def __init__(self, refused: str) -> None:
        super().__init__()
        self.refused = refused

    async def _put(self, row: tuple[str, str, str, int, str, float]) -> None:
        if row[2] == self.refused:
            raise CheckpointError("the disk refused this one")
        await super()._put(row)

    async def _put_many(self, rows: Sequence[tuple[str, str, str, int, str, float]]) -> list[None]:
        for row in rows:
            await self._put(row)
        return [None] * len(rows)


class TestABatch:
    async def test_puts_made_at_once_are_each_saved_on_return(self, tmp_path: Path) -> None:
        """200 concurrent puts: when each returns, its value is in the file for anyone."""
        database = tmp_path / "checkpoints.sqlite"
        async with SQLiteStore(database) as store:
            await asyncio.gather(*(store.put("r", "s", f"k{i}", {"i": i}) for i in range(200)))
            async with SQLiteStore(database) as other:
                rows = await other.list("r")
        assert sorted(json.dumps(row.value) for row in rows) == sorted(
            json.dumps({"i": i}) for i in range(200)
        )

    async def test_gets_made_at_once_each_find_their_own_value(
        self, store: CheckpointStore
    ) -> None:
        """Reads batched together: each gets its key's value, the same key twice alike,
        a missing key None."""
        for index in range(0, 100, 2):
            await store.put("r", f"stage {index}", "k", {"index": index})
        wanted = [f"stage {index}" for index in range(100)] + ["stage 4", "stage 5"]
        found = await asyncio.gather(*(store.get("r", stage, "k") for stage in wanted))
        values = [None if checkpoint is None else checkpoint.value for checkpoint in found]
        expected = [{"index": index} if index % 2 == 0 else None for index in range(100)]
        assert values == [*expected, {"index": 4}, None]

    async def test_a_write_that_fails_fails_its_own_put_only(self) -> None:
        """One refused row in a batch: its put raises, the others are saved."""
        async with _Refusing("refused") as store:
            keys = ["a", "refused", "b"]
            results = await asyncio.gather(
                *(store.put("r", "s", key, key) for key in keys), return_exceptions=True
            )
            assert results[0] is None
            assert results[2] is None
            assert isinstance(results[1], CheckpointError)
            assert [row.key for row in await store.list("r")] == ["a", "b"]

    async def test_a_record_written_behind_that_fails_fails_the_run(self) -> None:
        """A task's record the store cannot write: the run raises instead of reporting."""

        @subagent(name="lines")
        async def lines(task: Task, ctx: Context) -> str:
            return "fine"

        tasks = [Task(query="x", id="kept"), Task(query="y", id="lost")]
        async with _Refusing("record/lost") as store:
            with pytest.raises(CheckpointError, match="refused"):
                await Coordinator([lines], store=store).run(tasks, run_id="r")

    async def test_a_lost_record_fails_its_own_run_not_another_on_the_same_store(
        self,
    ) -> None:
        """Two runs share a store at once; only run B's record cannot be written: B
        raises, A reports, whichever flushes first."""

        @subagent(name="lines")
        async def lines(task: Task, ctx: Context) -> str:
            await asyncio.sleep(0)
            return "fine"

        coordinator_tasks = {"A": [Task(query="x", id="a")], "B": [Task(query="y", id="lost")]}
        async with _Refusing("record/lost") as store:
            coordinator = Coordinator([lines], store=store)
            a, b = await asyncio.gather(
                coordinator.run(coordinator_tasks["A"], run_id="A"),
                coordinator.run(coordinator_tasks["B"], run_id="B"),
                return_exceptions=True,
            )
            assert not isinstance(a, BaseException)
            assert a.coverage_ratio == 1.0
            assert isinstance(b, CheckpointError)


class TestSavedProgress:
    async def test_progress_that_is_not_json_is_not_saved_and_the_task_goes_on(
        self, tmp_path: Path
    ) -> None:
        """A finding only repr can show: the task still answers; its progress is not kept."""

        @subagent(name="odd", checkpoint=True)
        async def odd(task: Task, ctx: Context) -> str:
            ctx.record_partial([object()], completed="first")
            return "answered"

        async with SQLiteStore(tmp_path / "checkpoints.sqlite") as store:
            outcome = await odd.run(Task(query="q", id="t"), run_id="r", store=store)
            assert outcome.data == "answered"
            assert await store.get("r", "odd/t", "partials") is None


class TestSize:
    async def test_a_finished_one_line_task_costs_a_few_hundred_bytes(self, tmp_path: Path) -> None:
        """1,000 one-line tasks: the file grows by their data and under 300 bytes each
        (their checkpoints; the event log is measured by `benchmarks.stores`)."""
        database = tmp_path / "checkpoints.sqlite"
        tasks = [Task(query=f"question {index}") for index in range(1_000)]
        async with SQLiteStore(database) as store:
            coordinator = Coordinator([_one_line()], store=store, event_log=None)
            await coordinator.run(tasks, run_id="size")
        own = sum(len(t.query) + len(f"answer to {t.query}") for t in tasks)
        assert (_size(tmp_path) - own) / len(tasks) < 300


def _size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.iterdir())
