"""A coordinator's run lists its saved progress once, not one read per task.

A task with `checkpoint=True` continues from the progress its run saved. A run knows
which of its tasks hold some (one listing of the run at its start, then what its tasks
save), so a fresh run of many tasks makes no read per task, and a task that saved
progress earlier in the run, or in an earlier run of the same id, still continues.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentmesh import Context, Coordinator, InvalidInput, RetryPolicy, Subagent, Task
from agentmesh.checkpoints import Checkpoint, MemoryStore, SQLiteStore
from agentmesh.coordinator import Accept, RetryWithFeedback, Route, RouteContext
from agentmesh.envelope import ErrorEnvelope


class CountingStore(MemoryStore):
    """A `MemoryStore` that counts the reads of saved progress and the listings."""

    def __init__(self) -> None:
        super().__init__()
        self.progress_reads = 0
        self.listings = 0

    async def get(self, run_id: str, stage: str, key: str, **kwargs: Any) -> Any:
        if key == "partials":
            self.progress_reads += 1
        return await super().get(run_id, stage, key, **kwargs)

    async def list(self, run_id: str, stage: str | None = None) -> Sequence[Checkpoint]:
        if stage is None:
            self.listings += 1
        return await super().list(run_id, stage)


class Sources(Subagent):
    """Reads three sources in turn, recording each as it completes."""

    def __init__(self, failing: set[str]) -> None:
        super().__init__("sources", retry=RetryPolicy.never(), checkpoint=True)
        self.failing = failing
        self.fetched: list[str] = []

    async def handle(self, task: Task, ctx: Context) -> Sequence[Any]:
        for source in ("s1", "s2", "s3"):
            if source in ctx.partials.completed:
                continue
            self.fetched.append(source)
            if source in self.failing:
                self.failing.discard(source)  # it answers the next time
                raise InvalidInput(f"{source} refused the query")
            ctx.record_partial([f"{task.query} from {source}"], completed=source)
        return ctx.partials.findings


class RetryOnce:
    """Sends a failed task back once, then accepts what comes."""

    async def route(self, ctx: RouteContext) -> Route:
        if isinstance(ctx.outcome, ErrorEnvelope) and ctx.rewrites == 0:
            return RetryWithFeedback(ctx.task.with_query("q2"))
        return Accept()


class TestSavedProgressListedOnce:
    async def test_a_fresh_run_reads_no_tasks_progress(self) -> None:
        """50 checkpointing tasks of a new run: one listing, no read of saved progress."""
        store = CountingStore()
        agent = Sources(failing=set())
        report = await Coordinator([agent], store=store).run(
            [f"q{index}" for index in range(50)], run_id="fresh"
        )
        assert report.coverage_ratio == 1.0
        assert store.listings == 1
        assert store.progress_reads == 0
        # Each task succeeded before its progress was queued: its record carries it.
        saved = await store.list("fresh")
        assert [c for c in saved if c.key == "partials"] == []
        carried = [c.value["progress"] for c in saved if c.key.startswith("record/")]
        assert len(carried) == 50
        assert all(p["completed"] == ["s1", "s2", "s3"] for p in carried)

    async def test_a_task_sent_back_in_the_run_continues_from_its_progress(self) -> None:
        """Progress saved by a task's first dispatch is restored by its second."""
        store = CountingStore()
        agent = Sources(failing={"s3"})
        report = await Coordinator([agent], router=RetryOnce(), store=store).run(
            ["q"], run_id="sent-back"
        )
        assert agent.fetched == ["s1", "s2", "s3", "s3"]
        found = [f.content for f in report.findings if not f.preliminary]
        assert found == ["q from s1", "q from s2", "q2 from s3"]
        assert store.progress_reads == 1  # the second dispatch only

    async def test_a_rerun_of_the_same_id_continues_from_the_saved_progress(self) -> None:
        """A new run under the id of one that failed reads what that one saved."""
        store = CountingStore()
        agent = Sources(failing={"s3"})  # q's s3 fails once
        await Coordinator([agent], store=store).run(["q", "r"], run_id="again")
        assert agent.fetched == ["s1", "s2", "s3", "s1", "s2", "s3"]
        agent.fetched.clear()
        report = await Coordinator([agent], store=store).run(["q", "r"], run_id="again")
        assert agent.fetched == ["s3"]  # q goes on from s3; r had every source already
        assert report.coverage_ratio == 1.0


class Slow(Subagent):
    """Records its first source, then waits for the test before it finishes."""

    def __init__(self, go_on: asyncio.Event, recorded: asyncio.Event) -> None:
        super().__init__("slow", retry=RetryPolicy.never(), checkpoint=True)
        self.go_on, self.recorded = go_on, recorded

    async def handle(self, task: Task, ctx: Context) -> str:
        ctx.record_partial(["first finding"], completed="s1", pending="s2")
        self.recorded.set()
        await self.go_on.wait()
        return "done"


class Explicit(Subagent):
    """Records progress and waits for it to be saved (`ctx.save_partials()`)."""

    def __init__(self, saved: list[list[str]], path: Path) -> None:
        super().__init__("explicit", retry=RetryPolicy.never(), checkpoint=True)
        self.saved, self.path = saved, path

    async def handle(self, task: Task, ctx: Context) -> str:
        ctx.record_partial(["before the long step"], completed="s1")
        await ctx.save_partials()
        self.saved.append(await _completed_elsewhere(self.path, task.id or "task-0", "explicit"))
        return "done"


async def _completed_elsewhere(path: Path, task_id: str, subagent: str) -> list[str]:
    """The progress another connection to the SQLite file sees committed now."""
    async with SQLiteStore(path) as other:
        saved = await other.get("run", f"{subagent}/{task_id}", "partials")
        return [] if saved is None else list(saved.value["completed"])


class TestProgressWrittenBehind:
    """In a coordinator's run, progress is written behind and committed while the task
    runs; a task that succeeds first has its record carry it."""

    async def test_a_running_task_s_progress_is_committed_while_it_runs(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "checkpoints.sqlite"
        go_on, recorded = asyncio.Event(), asyncio.Event()
        async with SQLiteStore(path) as store:
            run = asyncio.create_task(
                Coordinator([Slow(go_on, recorded)], store=store).run(["q"], run_id="run")
            )
            await recorded.wait()
            seen: list[str] = []
            for _ in range(200):  # the batch commits within a few turns of the loop
                seen = await _completed_elsewhere(path, "task-0", "slow")
                if seen:
                    break
                await asyncio.sleep(0.01)
            assert seen == ["s1"]  # committed, seen by another connection, task still running
            assert not run.done()
            go_on.set()
            report = await run
        assert report.coverage_ratio == 1.0

    async def test_save_partials_commits_before_it_returns(self, tmp_path: Path) -> None:
        path = tmp_path / "checkpoints.sqlite"
        saved: list[list[str]] = []
        async with SQLiteStore(path) as store:
            await Coordinator([Explicit(saved, path)], store=store).run(["q"], run_id="run")
        assert saved == [["s1"]]

    async def test_a_record_carries_the_progress_of_a_task_that_succeeded_first(
        self, tmp_path: Path
    ) -> None:
        """One row for the task, not two; a run under the same id reads it back."""
        path = tmp_path / "checkpoints.sqlite"
        agent = Sources(failing=set())
        async with SQLiteStore(path) as store:
            await Coordinator([agent], store=store).run(["q"], run_id="run")
            rows = {(c.stage, c.key): c.value for c in await store.list("run")}
            assert ("sources/task-0", "partials") not in rows
            carried = rows["agentmesh.run", "record/task-0"]["progress"]
            assert carried["completed"] == ["s1", "s2", "s3"]
            agent.fetched.clear()
            report = await Coordinator([agent], store=store).run(["q"], run_id="run")
        assert agent.fetched == []  # every source done, as the record says
        assert report.coverage_ratio == 1.0

    async def test_the_progress_a_record_carries_is_masked(self, tmp_path: Path) -> None:
        """A secret in a finding is masked at rest, in the record as in a row of its own."""

        class Leaky(Subagent):
            async def handle(self, task: Task, ctx: Context) -> str:
                ctx.record_partial(["token=abcdef0123456789"], completed="s1")
                return "done"

        agent = Leaky("leaky", checkpoint=True)
        async with SQLiteStore(tmp_path / "checkpoints.sqlite") as store:
            await Coordinator([agent], store=store).run(["q"], run_id="run")
            rows = {(c.stage, c.key): c.value for c in await store.list("run")}
        carried = rows["agentmesh.run", "record/task-0"]["progress"]
        assert carried["findings"] == ["token=[REDACTED]"]
        assert "abcdef0123456789" not in str(rows)

    async def test_progress_a_store_could_not_queue_is_committed_before_the_report(
        self,
    ) -> None:
        """A store without group commit takes each snapshot by a `put` of its own: the
        run waits for it before it reports, as for the records."""

        class SlowPuts(MemoryStore):
            async def put(self, run_id: str, stage: str, key: str, value: object) -> None:
                if key == "partials":
                    for _ in range(20):  # a put that takes a few turns of the loop
                        await asyncio.sleep(0)
                await super().put(run_id, stage, key, value)

        store = SlowPuts()
        agent = Sources(failing={"s3"})  # fails after two sources: its progress has a row
        report = await Coordinator([agent], store=store).run(["q"], run_id="slow")
        assert report.coverage_ratio == 0.0
        saved = await store.get("slow", "sources/task-0", "partials")
        assert saved is not None
        assert saved.value["completed"] == ["s1", "s2"]
