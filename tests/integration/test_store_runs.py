"""`store.runs()`: the runs a store holds, newest first, as the run console lists them."""

from __future__ import annotations

import asyncio

import pytest

from agentmesh import UsageError
from agentmesh.checkpoints import CheckpointStore, RunStamp
from agentmesh.checkpoints._store import StoreBase


async def test_runs_are_listed_newest_first_with_their_first_and_last_save(
    store: CheckpointStore,
) -> None:
    assert isinstance(store, StoreBase)
    for run_id, stage, key in [
        ("old", "agentmesh.run", "plan"),
        ("middle", "pipeline", "output"),
        ("new", "agentmesh.run", "plan"),
        ("old", "agentmesh.run", "record/task-0"),
    ]:
        await store.put(run_id, stage, key, [])
        await asyncio.sleep(0.002)  # distinct save times, whatever the clock's resolution

    runs = await store.runs()

    assert [run.run_id for run in runs] == ["new", "middle", "old"]
    assert all(isinstance(run, RunStamp) for run in runs)
    old = runs[2]
    assert old.first_saved < runs[0].first_saved <= old.last_saved


async def test_runs_page_and_filter_by_stage(store: CheckpointStore) -> None:
    assert isinstance(store, StoreBase)
    for number in range(5):
        await store.put(f"run-{number}", "agentmesh.run", "plan", [])
        await asyncio.sleep(0.002)
    await store.put("pipeline-run", "pipeline", "output", 1)

    first = await store.runs(stage="agentmesh.run", limit=2)
    second = await store.runs(stage="agentmesh.run", limit=2, offset=2)
    rest = await store.runs(stage="agentmesh.run", limit=10, offset=4)

    assert [r.run_id for r in (*first, *second, *rest)] == [f"run-{n}" for n in range(4, -1, -1)]
    assert await store.runs(stage="nothing") == ()


async def test_runs_refuses_a_negative_page(store: CheckpointStore) -> None:
    assert isinstance(store, StoreBase)
    with pytest.raises(UsageError, match="limit"):
        await store.runs(limit=-1)
