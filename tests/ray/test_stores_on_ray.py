"""Which store a Ray run may use, and a person's approvals through one (local instance).

A store travels to the workers as what it was built from (a PostgreSQL connection
string, a SQLite file's path), each worker opening its own; a store the workers cannot
share is refused by the coordinator before anything of the run starts. (Approvals on
two nodes with PostgreSQL: `test_two_nodes.py`.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentmesh import (
    Context,
    Coordinator,
    RetryPolicy,
    Task,
    TransientError,
    UsageError,
    subagent,
    tool,
)
from agentmesh.approvals import ApprovalKind, Approve, Edit
from agentmesh.checkpoints import CheckpointStore, MemoryStore, SQLiteStore
from agentmesh.coordinator import CoverageStatus, Escalate, Route, RouteContext, Router
from agentmesh.events import ApprovalApplied, EscalationPending, RunFinished
from agentmesh.executors import RayExecutor, _ray_shipping
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use
from agentmesh.subagents import Subagent

BIG = Task(id="B-2", query="refund B-2", metadata={"order": "B-2", "amount": 900})


@pre_tool_use(tool="refund", asks=True)
def over_100(event: ToolCallEvent) -> Ruling | None:
    return Ruling.ask("over 100") if event.arguments["amount"] > 100 else None


def refund_desk(refunds: Path) -> Subagent:
    """A desk whose refunds append a line to `refunds` (seen by every worker)."""

    @tool(impact="financial")
    async def refund(order: str, amount: int) -> str:
        with refunds.open("a") as file:
            file.write(f"{order} {amount}\n")
        return f"refunded {amount} on {order}"

    @subagent(name="desk", retry=RetryPolicy.never())
    async def desk(task: Task, ctx: Context) -> str:
        return await ctx.call(refund, **task.metadata)

    return desk


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


class TestApprovalsWithASQLiteFile:
    async def test_an_ask_pends_and_the_resumed_run_makes_the_call_once(
        self, ray_executor: RayExecutor, tmp_path: Path
    ) -> None:
        """On one host a SQLite file is shared: it travels as its path (opened already by
        the run's plan), the ask pends (its stream names the approval to answer), and the
        approved refund is made once on resume, streamed as applied."""
        refunds = tmp_path / "refunds"
        path = tmp_path / "runs.sqlite"
        async with SQLiteStore(path) as store:
            coordinator = Coordinator(
                [refund_desk(refunds)], policies=[over_100], store=store, executor=ray_executor
            )
            events = [e async for e in coordinator.stream([BIG], run_id="desk")]
        asked = events[-1].report if isinstance(events[-1], RunFinished) else None
        assert asked is not None
        [waiting] = asked.pending_approvals
        named = [e.approval_id for e in events if isinstance(e, EscalationPending)]
        assert named == [waiting.id]
        assert (waiting.task_id, waiting.tool, waiting.reason) == ("B-2", "refund", "over 100")
        assert [e.status for e in asked.coverage] == [CoverageStatus.ESCALATED]
        assert lines(refunds) == []

        async with SQLiteStore(path) as store:
            again = Coordinator(
                [refund_desk(refunds)], policies=[over_100], store=store, executor=ray_executor
            )
            stream = again.resume_stream("desk", approvals={waiting.id: Approve()})
            events = [e async for e in stream]
            assert (await again.resume("desk")).findings == stream.report.findings  # no new
        resumed = stream.report
        applied = [e.approval.id for e in events if isinstance(e, ApprovalApplied)]
        assert applied == [waiting.id]

        assert [e.status for e in resumed.coverage] == [CoverageStatus.COVERED]
        assert lines(refunds) == ["B-2 900"]


class EscalateTheFirstAnswer(Router):
    """Sends a first answer to a person; an answer to an edited query is accepted."""

    async def route(self, ctx: RouteContext) -> Route:
        if "edited" in ctx.task.query:
            return await super().route(ctx)
        return Escalate("checked by a person")


class TestEscalationsWithASQLiteFile:
    async def test_an_edited_query_runs_the_task_again_on_a_worker(
        self, ray_executor: RayExecutor, tmp_path: Path
    ) -> None:
        """The router's escalation waits for a person as locally; `Edit(query=)` runs the
        task again, on the cluster, with the person's query."""
        asked = tmp_path / "asked"

        @subagent(name="answers", retry=RetryPolicy.never())
        async def answers(task: Task, ctx: Context) -> str:
            with asked.open("a") as file:
                file.write(task.query + "\n")
            return f"answer to {task.query}"

        async with SQLiteStore(tmp_path / "runs.sqlite") as store:
            coordinator = Coordinator(
                [answers], router=EscalateTheFirstAnswer(), store=store, executor=ray_executor
            )
            first = await coordinator.run([Task(query="q", topic="vip")], run_id="e")
            [waiting] = first.pending_approvals
            edited = Edit(query="q, edited")
            report = await coordinator.resume("e", approvals={waiting.id: edited})

        assert (waiting.kind, waiting.reason) == (ApprovalKind.ESCALATION, "checked by a person")
        assert lines(asked) == ["q", "q, edited"]
        assert [f.content for f in report.findings] == ["answer to q, edited"]
        assert [e.status for e in report.coverage] == [CoverageStatus.COVERED]


class TestCheckpointsWithASQLiteFile:
    async def test_a_rerun_keeps_progress_and_never_repeats_a_side_effect(
        self, ray_executor: RayExecutor, tmp_path: Path
    ) -> None:
        """As locally: the second run of a run id skips the sources its first recorded
        (saved by the worker, read by another) and makes the charge once."""
        charges, fetched, down = tmp_path / "charges", tmp_path / "fetched", tmp_path / "down"
        down.touch()

        @tool
        async def charge(amount: int) -> str:
            with charges.open("a") as file:
                file.write(f"{amount}\n")
            return f"charged {amount}"

        @tool(idempotent=True)
        async def fetch(source: str) -> str:
            with fetched.open("a") as file:
                file.write(f"{source}\n")
            if source == "s3" and down.exists():
                raise TransientError(f"{source} is down")
            return f"finding from {source}"

        @subagent(name="research", checkpoint=True, retry=RetryPolicy.never())
        async def research(task: Task, ctx: Context) -> list[str]:
            await ctx.call(charge, amount=5)
            ctx.record_partial(pending=["s1", "s2", "s3"])
            for source in ("s1", "s2", "s3"):
                if source not in ctx.partials.completed:
                    ctx.record_partial([await ctx.call(fetch, source=source)], completed=source)
            return list(ctx.partials.findings)

        async with SQLiteStore(tmp_path / "runs.sqlite") as store:
            coordinator = Coordinator([research], store=store, executor=ray_executor)
            first = await coordinator.run([Task(query="q", topic="t")], run_id="run-1")
            down.unlink()
            second = await coordinator.run([Task(query="q", topic="t")], run_id="run-1")

        assert first.coverage[0].status is CoverageStatus.PARTIAL
        assert second.coverage[0].status is CoverageStatus.COVERED
        assert [f.content for f in second.findings] == [f"finding from s{i}" for i in (1, 2, 3)]
        assert lines(charges) == ["5"]
        assert lines(fetched) == ["s1", "s2", "s3", "s3"]


class TestUnsharedStores:
    async def test_a_memory_store_is_refused_before_the_run_starts(
        self, ray_executor: RayExecutor, tmp_path: Path
    ) -> None:
        """The run raises at once, saying what to use; no task ran, nothing was saved."""
        refunds = tmp_path / "refunds"
        store = MemoryStore()
        coordinator = Coordinator([refund_desk(refunds)], store=store, executor=ray_executor)

        with pytest.raises(UsageError, match="not storage the workers share") as caught:
            await coordinator.run([BIG], run_id="r")

        assert "PostgresStore(dsn)" in str(caught.value)
        assert lines(refunds) == []
        assert list(await store.list("r")) == []  # not even the run's plan

    async def test_a_sqlite_file_is_refused_on_a_cluster_of_several_hosts(
        self, ray_executor: RayExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A resume is refused before any answer is claimed: the answer can be given again."""
        hosts = {"10.0.0.1", "10.0.0.2"}
        monkeypatch.setattr(_ray_shipping, "_cluster_hosts", lambda: hosts)
        store: CheckpointStore = SQLiteStore(tmp_path / "runs.sqlite")
        coordinator = Coordinator(
            [refund_desk(tmp_path / "refunds")],
            policies=[over_100],
            store=store,
            executor=ray_executor,
        )

        with pytest.raises(UsageError, match=r"a SQLite file .* of one host"):
            await coordinator.run([BIG])
        with pytest.raises(UsageError, match=r"a SQLite file .* of one host"):
            await coordinator.resume("desk", approvals={"any": Approve()})

        assert not (tmp_path / "runs.sqlite").exists()  # nothing was written
