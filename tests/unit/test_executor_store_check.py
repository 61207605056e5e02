"""An executor may refuse the coordinator's store (`check_store`): before a run starts."""

from __future__ import annotations

import pytest

from agentmesh import Context, Coordinator, Task, UsageError, subagent
from agentmesh.approvals import Approve
from agentmesh.checkpoints import CheckpointStore, MemoryStore
from agentmesh.executors import LocalExecutor


class Picky(LocalExecutor):
    """Runs tasks here, but refuses every store, as one whose workers share none would."""

    def check_store(self, store: CheckpointStore) -> None:
        raise UsageError(f"{store!r} is not shared")


class TestCheckStore:
    async def test_a_refused_store_stops_run_and_resume_before_anything_runs(self) -> None:
        ran: list[str] = []

        @subagent(name="s")
        async def s(task: Task, ctx: Context) -> str:
            ran.append(task.query)
            return task.query

        store = MemoryStore()
        coordinator = Coordinator([s], store=store, executor=Picky())

        with pytest.raises(UsageError, match="is not shared"):
            await coordinator.run(["q"], run_id="r")
        with pytest.raises(UsageError, match="is not shared"):
            await coordinator.resume("r", approvals={"a": Approve()})
        with pytest.raises(UsageError, match="is not shared"):
            await coordinator.resume_when_answered("r")

        assert ran == []
        assert list(await store.list("r")) == []

    async def test_without_a_store_nothing_is_asked(self) -> None:
        @subagent(name="s")
        async def s(task: Task, ctx: Context) -> str:
            return task.query

        report = await Coordinator([s], executor=Picky()).run(["q"])
        assert [f.content for f in report.findings] == ["q"]
