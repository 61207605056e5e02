"""`WritesBehind`: the seam through which a run writes what it need not wait for.

A store that implements it gets the run's task records put behind and flushed before
the report, and each task's saved progress queued; a store without it gets an awaited
`put` for each, and works the same.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentmesh import Context, Coordinator, Task, subagent
from agentmesh.checkpoints import MemoryStore, SQLiteStore, WritesBehind
from tests.user_store import UserStore


@subagent(name="notes", checkpoint=True)
async def notes(task: Task, ctx: Context) -> str:
    ctx.record_partial([task.query], completed=task.query)
    return f"noted {task.query}"


class BehindStore(UserStore):
    """A user's store that also writes behind: queued writes land at `flush`."""

    def __init__(self) -> None:
        super().__init__()
        self.behind: list[tuple[str, str, str, object]] = []
        self.queued = 0
        self.flushed: list[int] = []  # how many writes were behind at each flush

    def put_behind(self, run_id: str, stage: str, key: str, value: object) -> bool:
        self.behind.append((run_id, stage, key, value))
        return True

    def put_queued(
        self, run_id: str, stage: str, key: str, value: object
    ) -> asyncio.Future[None] | None:
        self.queued += 1
        return asyncio.ensure_future(self.inner.put(run_id, stage, key, value))

    async def flush(self, run_id: str) -> None:
        self.flushed.append(len(self.behind))
        while self.behind:
            await self.inner.put(*self.behind.pop(0))


class TestWritesBehind:
    async def test_the_built_in_stores_write_behind(self, tmp_path: Any) -> None:
        """`MemoryStore` and `SQLiteStore` implement the protocol."""
        assert isinstance(MemoryStore(), WritesBehind)
        assert isinstance(SQLiteStore(tmp_path / "checkpoints.sqlite"), WritesBehind)

    async def test_a_store_that_writes_behind_has_every_record_flushed_before_the_report(
        self,
    ) -> None:
        """Records go behind, each carrying its task's progress (the tasks succeed before
        their progress is queued), and all of it is there at the report."""
        store = BehindStore()
        report = await Coordinator([notes], store=store).run(["a", "b", "c"], run_id="r")
        assert report.coverage_ratio == 1.0
        assert store.flushed == [3]  # the three records, flushed once, before the report
        assert store.queued == 0  # no row of progress of its own: the records carry it
        assert not store.behind
        saved = {c.key: c.value for c in await store.list("r")}
        assert {"record/task-0", "record/task-1", "record/task-2"} <= set(saved)
        assert "partials" not in saved
        assert all("progress" in saved[f"record/task-{i}"] for i in range(3))

    async def test_a_store_of_ones_own_without_it_gets_a_put_for_each_write(self) -> None:
        """No `WritesBehind` methods: the same run, each write an awaited `put`."""
        store = UserStore()
        assert not isinstance(store, WritesBehind)
        report = await Coordinator([notes], store=store).run(["a", "b", "c"], run_id="r")
        assert report.coverage_ratio == 1.0
        saved = {c.key for c in await store.list("r")}
        assert {"record/task-0", "record/task-1", "record/task-2", "partials"} <= saved
        assert store.puts == 1 + 3 + 3  # the plan, three records, three snapshots
