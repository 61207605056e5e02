"""What a resume may and may not do: use only the records of the plan it resumes, never
run a task on masked values, end an approved failure, and stream its events."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentmesh import (
    Context,
    Coordinator,
    PermissionDenied,
    RetryPolicy,
    Task,
    UsageError,
    subagent,
    tool,
)
from agentmesh.approvals import Approve, Edit, Reject
from agentmesh.checkpoints import CheckpointStore
from agentmesh.coordinator import CoverageStatus
from agentmesh.events import (
    EscalationPending,
    Event,
    RunFinished,
    RunStarted,
    RunStream,
    TaskFinished,
    TaskStarted,
)
from agentmesh.subagents import Subagent
from tests.integration.test_approvals import (
    BIG,
    SMALL,
    Desk,
    EscalatingRouter,
    only,
    refund_limit,
    status,
)


def answering(seen: list[Task], gate: asyncio.Event | None = None) -> Subagent:
    """A subagent that answers every query and notes each task it was given; with a
    `gate`, the query "beta" waits until the gate opens."""

    @subagent(name="answers", retry=RetryPolicy.never())
    async def answers(task: Task, ctx: Context) -> str:
        seen.append(task)
        if gate is not None and task.query == "beta":
            await gate.wait()
        return f"answer to {task.query}"

    return answers


async def read_all(stream: RunStream) -> list[Event]:
    async with stream:
        return [event async for event in stream]


class TestResumeUsesItsOwnPlan:
    async def test_a_new_plan_under_the_same_run_id_drops_the_old_records(
        self, store: CheckpointStore
    ) -> None:
        """The run started again with other tasks is resumed with its own, never the old ones."""
        seen: list[Task] = []
        gate = asyncio.Event()
        coordinator = Coordinator([answering(seen, gate)], store=store)
        await coordinator.run([Task(query="alpha", topic="alpha")], run_id="X")
        stream = coordinator.stream([Task(query="beta", topic="beta")], run_id="X")
        async with stream:
            async for event in stream:
                if isinstance(event, RunStarted):
                    break  # beta cannot have finished: it waits for the gate
        gate.set()
        report = await coordinator.resume("X")
        assert [e.topic for e in report.coverage] == ["beta"]
        assert [f.content for f in report.findings] == ["answer to beta"]
        # beta may have started before the stream was closed; alpha never runs again.
        assert [t.query for t in seen].count("alpha") == 1

    async def test_a_new_plan_drops_the_old_plans_pending_approvals(
        self, store: CheckpointStore
    ) -> None:
        """A question of the old plan is neither listed nor answerable in the new one."""
        desk = Desk()
        first = await desk.coordinator(store).run([BIG], run_id="X")
        again = await desk.coordinator(store).run([SMALL], run_id="X")
        assert again.pending_approvals == ()
        with pytest.raises(UsageError, match="no pending approval"):
            await desk.coordinator(store).resume("X", approvals={only(first).id: Approve()})
        assert desk.refunds == [("A-1", 40)]


SECRET = Task(query="q", topic="vip", metadata={"api_token": "sk-live-123"})


class TestMaskedTasks:
    async def test_a_masked_task_is_refused_rather_than_run_on_masked_values(
        self, store: CheckpointStore
    ) -> None:
        """A task stored masked that must run again needs its original: a UsageError says so."""
        seen: list[Task] = []
        coordinator = Coordinator([answering(seen)], router=EscalatingRouter(), store=store)
        first = await coordinator.run([SECRET], run_id="m")
        with pytest.raises(UsageError, match=r"task-0.*masked.*tasks="):
            await coordinator.resume("m", approvals={only(first).id: Edit(query="q2")})
        assert [t.metadata for t in seen] == [{"api_token": "sk-live-123"}]

    async def test_the_original_tasks_given_again_run_with_their_values(
        self, store: CheckpointStore
    ) -> None:
        """resume(tasks=) supplies the originals: the task runs on the real values."""
        seen: list[Task] = []
        coordinator = Coordinator([answering(seen)], router=EscalatingRouter(), store=store)
        first = await coordinator.run([SECRET], run_id="m")
        decisions: dict[str, Any] = {only(first).id: Edit(query="q2")}
        await coordinator.resume("m", approvals=decisions, tasks=[SECRET])
        assert [(t.query, t.metadata) for t in seen] == [
            ("q", {"api_token": "sk-live-123"}),
            ("q2", {"api_token": "sk-live-123"}),
        ]

    async def test_tasks_that_are_not_the_runs_are_refused(self, store: CheckpointStore) -> None:
        """tasks= must be the run's own tasks: another list is a UsageError naming tasks=."""
        coordinator = Coordinator([answering([])], router=EscalatingRouter(), store=store)
        first = await coordinator.run([SECRET], run_id="m")
        other = SECRET.model_copy(update={"query": "other"})
        with pytest.raises(UsageError, match=r"tasks=.*task-0"):
            await coordinator.resume(
                "m", approvals={only(first).id: Edit(query="q2")}, tasks=[other]
            )

    async def test_a_masked_task_that_needs_no_rerun_is_settled_without_the_originals(
        self, store: CheckpointStore
    ) -> None:
        """Approving an escalated answer runs nothing, so the masked plan is enough."""
        coordinator = Coordinator([answering([])], router=EscalatingRouter(), store=store)
        first = await coordinator.run([SECRET], run_id="m")
        report = await coordinator.resume("m", approvals={only(first).id: Approve()})
        assert status(report, "vip")[0] is CoverageStatus.COVERED

    async def test_an_approved_call_goes_on_with_the_original_query_and_values(
        self, store: CheckpointStore
    ) -> None:
        """Without tasks= the masked call's task is refused; with them it runs on the originals."""
        seen: list[tuple[str, dict[str, Any]]] = []

        @tool(impact="financial")
        async def refund(order: str, amount: int) -> str:
            return f"refunded {amount} on {order}"

        @subagent(name="desk", retry=RetryPolicy.never())
        async def desk(task: Task, ctx: Context) -> str:
            seen.append((task.query, dict(task.metadata)))
            return await ctx.call(refund, order="B-2", amount=900)

        task = Task(query="refund B-2 token=sk-live-123", metadata={"api_token": "sk-live-9"})
        coordinator = Coordinator([desk], policies=[refund_limit], store=store)
        first = await coordinator.run([task], run_id="m")
        decisions: dict[str, Any] = {only(first).id: Approve()}
        with pytest.raises(UsageError, match=r"task-0.*masked.*claimed and stand"):
            await coordinator.resume("m", approvals=decisions)
        report = await coordinator.resume("m", tasks=[task])
        assert status(report, task.label)[0] is CoverageStatus.COVERED
        assert seen == [(task.query, {"api_token": "sk-live-9"})] * 2


class TestApprovedFailure:
    def build(self, store: CheckpointStore, calls: list[str]) -> Coordinator:
        @subagent(name="billing", retry=RetryPolicy.never())
        async def billing(task: Task, ctx: Context) -> str:
            calls.append(task.query)
            raise PermissionDenied("the billing API refused this account")

        return Coordinator([billing], store=store)

    async def test_approving_an_escalated_failure_ends_the_task_without_running_it(
        self, store: CheckpointStore
    ) -> None:
        """Approve accepts the failure: a gap saying a person accepted it and why it escalated."""
        calls: list[str] = []
        coordinator = self.build(store, calls)
        first = await coordinator.run([Task(query="invoice 7", topic="billing")], run_id="f")
        pending = only(first)
        report = await coordinator.resume("f", approvals={pending.id: Approve()})
        assert calls == ["invoice 7"]
        state, reason = status(report, "billing")
        assert state is CoverageStatus.GAP
        assert reason == f"failure accepted by a person (escalated: {pending.reason})"
        assert report.pending_approvals == ()

    async def test_rejecting_an_escalated_failure_is_a_gap_too(
        self, store: CheckpointStore
    ) -> None:
        """Reject also ends it without a new attempt, with the person's reason."""
        calls: list[str] = []
        coordinator = self.build(store, calls)
        first = await coordinator.run([Task(query="invoice 7", topic="billing")], run_id="f")
        report = await coordinator.resume("f", approvals={only(first).id: Reject("known issue")})
        assert calls == ["invoice 7"]
        assert status(report, "billing") == (
            CoverageStatus.GAP,
            "rejected by a person: known issue",
        )


class TestResumeStream:
    async def test_a_resume_streams_the_events_of_the_tasks_that_go_on(
        self, store: CheckpointStore
    ) -> None:
        """Only the task that waited starts again; the last event carries resume()'s report."""
        desk = Desk()
        first = await desk.coordinator(store).run([SMALL, BIG], run_id="s")
        stream = desk.coordinator(store).resume_stream("s", approvals={only(first).id: Approve()})
        async with stream:
            events = [e async for e in stream]
        kinds = [(type(e).__name__, e.task_id) for e in events]
        started = [e.task_id for e in events if isinstance(e, TaskStarted)]
        finished = [e.entry.status for e in events if isinstance(e, TaskFinished)]
        assert isinstance(events[0], RunStarted), kinds
        assert started == ["task-1"]
        assert finished == [CoverageStatus.COVERED]
        assert not any(isinstance(e, EscalationPending) for e in events)
        last = events[-1]
        assert isinstance(last, RunFinished)
        assert last.report == stream.report
        assert status(last.report, "A-1")[0] is CoverageStatus.COVERED
        assert desk.refunds == [("A-1", 40), ("B-2", 900)]

    async def test_a_rejection_streams_to_a_gap(self, store: CheckpointStore) -> None:
        """The stream of a resume ends with the report of the person's answer."""
        desk = Desk()
        first = await desk.coordinator(store).run([BIG], run_id="s")
        decisions: dict[str, Any] = {only(first).id: Reject("voucher")}
        stream = desk.coordinator(store).resume_stream("s", approvals=decisions)
        async with stream:
            [*_, last] = [e async for e in stream]
        assert isinstance(last, RunFinished)
        state, reason = status(last.report, "B-2")
        assert state in {CoverageStatus.GAP, CoverageStatus.PARTIAL}
        assert (reason or "").startswith("rejected by a person: voucher")
        assert desk.refunds == []

    async def test_bad_approvals_are_refused_at_the_first_iteration(
        self, store: CheckpointStore
    ) -> None:
        """The stream of a resume checks its decisions before anything runs."""
        desk = Desk()
        await desk.coordinator(store).run([BIG], run_id="s")
        stream = desk.coordinator(store).resume_stream("s", approvals={"nope": Approve()})
        with pytest.raises(UsageError, match="no pending approval 'nope'"):
            await read_all(stream)
        assert desk.refunds == []
