"""A coordinator run with a checkpoint store resumes instead of redoing work."""

from __future__ import annotations

from agentmesh import Context, Coordinator, RetryPolicy, Task, TransientError, subagent, tool
from agentmesh.checkpoints import MemoryStore
from agentmesh.coordinator import CoverageStatus


class TestCoordinatorResume:
    async def test_a_rerun_keeps_progress_and_never_repeats_a_side_effect(self) -> None:
        """Same run id: completed sources are skipped and the charge happens once."""
        charges: list[int] = []
        fetched: list[str] = []
        down = {"s3"}

        @tool
        async def charge(amount: int) -> str:
            charges.append(amount)
            return f"charged {amount}"

        @tool(idempotent=True)
        async def fetch(source: str) -> str:
            fetched.append(source)
            if source in down:
                raise TransientError(f"{source} is down")
            return f"finding from {source}"

        @subagent(name="research", checkpoint=True, retry=RetryPolicy.never())
        async def research(task: Task, ctx: Context) -> list[str]:
            await ctx.call(charge, amount=5)
            ctx.record_partial(pending=["s1", "s2", "s3"])
            for source in ("s1", "s2", "s3"):
                if source in ctx.partials.completed:
                    continue
                ctx.record_partial([await ctx.call(fetch, source=source)], completed=source)
            return list(ctx.partials.findings)

        async with MemoryStore() as store:
            coordinator = Coordinator([research], store=store)
            first = await coordinator.run([Task(query="q", topic="t")], run_id="run-1")
            assert first.coverage[0].status is CoverageStatus.PARTIAL
            down.clear()
            second = await coordinator.run([Task(query="q", topic="t")], run_id="run-1")
        assert second.coverage[0].status is CoverageStatus.COVERED
        assert [f.content for f in second.findings] == [
            "finding from s1",
            "finding from s2",
            "finding from s3",
        ]
        assert charges == [5]
        assert fetched == ["s1", "s2", "s3", "s3"]
