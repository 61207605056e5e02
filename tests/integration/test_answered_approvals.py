"""Every answer a person gives is in the report and in the events: approvals and edits as
well as rejections, with the arguments before and after, masked (issue 24 item 2)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from agentmesh import Context, Coordinator, RetryPolicy, Task, subagent, tool
from agentmesh.approvals import (
    AnsweredApproval,
    Approval,
    ApprovalKind,
    Approve,
    Edit,
    PendingApproval,
    Reject,
)
from agentmesh.checkpoints import CheckpointStore
from agentmesh.coordinator import CoverageEntry, Escalate, Report, RouteContext, Router
from agentmesh.events import ApprovalApplied, Event, TaskFinished, parse_event
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use
from tests.integration.test_approvals import round_amounts

LIMIT = 150
SECRET = "tok-4242-secret"
REFUND = Task(query="refund order B-2", topic="B-2", metadata={"order": "B-2", "amount": 180})
OTHER = Task(query="refund order C-3", topic="C-3", metadata={"order": "C-3", "amount": 900})


@pre_tool_use(tool="refund", asks=True)
def refund_limit(event: ToolCallEvent) -> Ruling | None:
    amount = event.arguments["amount"]
    if amount > LIMIT:
        return Ruling.ask(f"refund of ${amount} is above the limit of ${LIMIT}")
    return None


class Desk:
    """A refund desk whose refunds are counted; the card token is a secret."""

    def __init__(self) -> None:
        self.refunds: list[tuple[str, int]] = []

        @tool(impact="financial")
        async def refund(order: str, amount: int, card_token: str = SECRET) -> str:
            self.refunds.append((order, amount))
            return f"refunded {amount} on {order}"

        @subagent(name="desk", retry=RetryPolicy.never())
        async def desk(task: Task, ctx: Context) -> str:
            return await ctx.call(
                refund, order=task.metadata["order"], amount=task.metadata["amount"]
            )

        self.subagent = desk

    def coordinator(self, store: CheckpointStore, *policies: Any) -> Coordinator:
        return Coordinator([self.subagent], policies=policies or [refund_limit], store=store)


def pending_of(report: Report, topic: str) -> PendingApproval:
    [pending] = [p for p in report.pending_approvals if p.topic == topic]
    return pending


def entry(report: Report, topic: str) -> CoverageEntry:
    return next(e for e in report.coverage if e.topic == topic)


async def answer_one(
    store: CheckpointStore, answer: Approval, desk: Desk | None = None
) -> tuple[Report, PendingApproval]:
    """Run the $180 refund, which waits for a person, then resume with `answer`."""
    desk = desk or Desk()
    first = await desk.coordinator(store).run([REFUND], run_id="r1")
    pending = pending_of(first, "B-2")
    report = await desk.coordinator(store).resume("r1", approvals={pending.id: answer})
    return report, pending


ASKED = {"order": "B-2", "amount": 180, "card_token": "[REDACTED]"}


class TestAnswersInTheReport:
    async def test_an_edit_is_kept_with_the_arguments_before_and_after(
        self, store: CheckpointStore
    ) -> None:
        """Edit: the answer, its id, the tool, the masked arguments asked and made, and why."""
        desk = Desk()
        report, pending = await answer_one(store, Edit(arguments={"amount": 100}), desk)
        assert desk.refunds == [("B-2", 100)]
        assert report.answered_approvals == (
            AnsweredApproval(
                id=pending.id,
                kind=ApprovalKind.TOOL_CALL,
                answer="edit",
                task_id="task-0",
                subagent="desk",
                topic="B-2",
                policy="refund_limit",
                reason="refund of $180 is above the limit of $150",
                query="refund order B-2",
                tool="refund",
                arguments=ASKED,
                edited_arguments={**ASKED, "amount": 100},
            ),
        )

    async def test_after_an_edit_the_reason_says_what_the_person_did(
        self, store: CheckpointStore
    ) -> None:
        """The entry no longer says the refund is above the limit: it was cut by a person."""
        report, pending = await answer_one(store, Edit(arguments={"amount": 100}))
        reason = entry(report, "B-2").reason or ""
        assert "above the limit" not in reason
        assert f"edited by a person (approval {pending.id})" in reason
        assert "refund with amount=100 (was 180)" in reason

    async def test_an_approval_is_kept_and_named_in_the_reason(
        self, store: CheckpointStore
    ) -> None:
        """Approve: in the report with the call as made; the reason says a person approved it."""
        report, pending = await answer_one(store, Approve())
        [answered] = report.answered_approvals
        assert (answered.id, answered.answer, answered.arguments) == (pending.id, "approve", ASKED)
        assert answered.edited_arguments is None
        reason = entry(report, "B-2").reason or ""
        assert "above the limit" not in reason
        assert f"approved by a person (approval {pending.id}): refund(" in reason
        assert 'amount=180, card_token="[REDACTED]")' in reason

    async def test_a_rejection_is_kept_with_the_reason_given(self, store: CheckpointStore) -> None:
        """Reject: in the report with the person's reason; the call was never made."""
        desk = Desk()
        report, _ = await answer_one(store, Reject("a voucher was sent"), desk)
        assert desk.refunds == []
        [answered] = report.answered_approvals
        assert (answered.answer, answered.answer_reason) == ("reject", "a voucher was sent")
        assert entry(report, "B-2").reason == "rejected by a person: a voucher was sent"

    async def test_markdown_json_and_html_list_every_answer_masked(
        self, store: CheckpointStore
    ) -> None:
        """A table in Markdown and HTML, `answeredApprovals` in JSON; the secret in none."""
        from examples.research_agent.rendering import answered_html

        report, pending = await answer_one(store, Edit(arguments={"amount": 100}))
        markdown = report.to_markdown()
        assert "## Answered approvals" in markdown
        assert (
            f'| `{pending.id}` | task-0 | edit | refund(order="B-2", amount=180, '
            'card_token="[REDACTED]") | refund(order="B-2", amount=100, '
            'card_token="[REDACTED]") | refund of $180 is above the limit of $150 '
            "(policy refund_limit) |  |"
        ) in markdown
        data = json.loads(report.to_json())
        [answered] = data["answeredApprovals"]
        assert answered["id"] == pending.id
        assert answered["answer"] == "edit"
        assert answered["editedArguments"]["amount"] == 100
        assert data["records"][0]["answers"] == [answered]
        page = "\n".join(answered_html(report))
        assert '<table id="answered">' in page
        assert f"<code>{pending.id}</code>" in page
        for text in (markdown, report.to_json(), page):
            assert SECRET not in text

    async def test_the_json_reads_back_with_its_answers(self, store: CheckpointStore) -> None:
        """`Report.model_validate(report.to_dict())` has the same answered decisions."""
        report, _ = await answer_one(store, Edit(arguments={"amount": 100}))
        again = Report.model_validate(report.to_dict())
        assert again.answered_approvals == report.answered_approvals

    async def test_a_run_nobody_answered_keeps_its_json_shape(self, store: CheckpointStore) -> None:
        """No `answeredApprovals` key, no `answers` per record, no Markdown section."""
        report = await Desk().coordinator(store).run([REFUND], run_id="r1")
        data = report.to_dict()
        assert "answeredApprovals" not in data
        assert all("answers" not in record for record in data["records"])
        assert "Answered approvals" not in report.to_markdown()

    async def test_answers_of_earlier_resumes_stay_in_the_report(
        self, store: CheckpointStore
    ) -> None:
        """Edited, asked again by another policy, approved: the last report has both answers,
        and a task answered in an earlier resume keeps its answer in later reports."""
        desk = Desk()
        coordinator = desk.coordinator(store, refund_limit, round_amounts)
        first = await coordinator.run([REFUND, OTHER], run_id="r1")
        edit = {pending_of(first, "B-2").id: Edit(arguments={"amount": 105})}
        second = await coordinator.resume("r1", approvals=edit)
        approve = {pending_of(second, "B-2").id: Approve()}
        third = await coordinator.resume("r1", approvals=approve)
        assert [(a.answer, a.policy) for a in third.answered_approvals] == [
            ("edit", "refund_limit"),
            ("approve", "round_amounts"),
        ]
        reject = {pending_of(third, "C-3").id: Reject("fraud")}
        fourth = await coordinator.resume("r1", approvals=reject)
        assert [(a.topic, a.answer) for a in fourth.answered_approvals] == [
            ("B-2", "edit"),
            ("B-2", "approve"),
            ("C-3", "reject"),
        ]
        assert desk.refunds == [("B-2", 105)]


class EscalatingRouter(Router):
    """Escalates every answer: a person signs each one off."""

    async def route(self, ctx: RouteContext) -> Any:
        return Escalate("answers are checked by a person")


class TestAnsweredEscalations:
    def build(self, store: CheckpointStore) -> Coordinator:
        @subagent(name="answers", retry=RetryPolicy.never())
        async def answers(task: Task, ctx: Context) -> str:
            return f"answer to {task.query}"

        return Coordinator([answers], router=EscalatingRouter(), store=store)

    async def test_an_approved_escalation_is_reported_and_says_so(
        self, store: CheckpointStore
    ) -> None:
        """The approval of an escalated task is an answered decision; its entry says approved."""
        coordinator = self.build(store)
        first = await coordinator.run([Task(query="q", topic="vip")], run_id="e")
        pending = pending_of(first, "vip")
        report = await coordinator.resume("e", approvals={pending.id: Approve()})
        [answered] = report.answered_approvals
        assert (answered.id, answered.kind, answered.answer, answered.tool) == (
            pending.id,
            ApprovalKind.ESCALATION,
            "approve",
            None,
        )
        assert entry(report, "vip").reason == "approved by a person"

    async def test_an_edited_query_is_reported_before_and_after(
        self, store: CheckpointStore
    ) -> None:
        """Edit(query=): the query asked about and the new one, in the record and the reason."""
        coordinator = self.build(store)
        first = await coordinator.run([Task(query="q", topic="vip")], run_id="e")
        pending = pending_of(first, "vip")
        report = await coordinator.resume("e", approvals={pending.id: Edit(query="q2")})
        [answered] = report.answered_approvals
        assert (answered.query, answered.edited_query) == ("q", "q2")
        reason = entry(report, "vip").reason or ""
        assert f'edited by a person (approval {pending.id}): query "q2" (was "q")' in reason


async def resumed_events(
    coordinator: Coordinator, run_id: str, decisions: Mapping[str, Approval]
) -> tuple[list[Event], Report]:
    stream = coordinator.resume_stream(run_id, approvals=decisions)
    async with stream:
        events = [event async for event in stream]
    assert stream.report is not None
    return events, stream.report


class TestApprovalAppliedEvent:
    @pytest.mark.parametrize(
        "answer", [Approve(), Reject("no"), Edit(arguments={"amount": 100})], ids=repr
    )
    async def test_each_answer_is_one_event_before_its_task_finishes(
        self, store: CheckpointStore, answer: Approval
    ) -> None:
        """One ApprovalApplied per answer, holding what the report holds, before TaskFinished."""
        desk = Desk()
        first = await desk.coordinator(store).run([REFUND], run_id="r1")
        pending = pending_of(first, "B-2")
        events, report = await resumed_events(desk.coordinator(store), "r1", {pending.id: answer})
        applied = [e for e in events if isinstance(e, ApprovalApplied)]
        assert [(e.task_id, e.subagent, e.approval) for e in applied] == [
            ("task-0", "desk", report.answered_approvals[0])
        ]
        finished = next(e for e in events if isinstance(e, TaskFinished))
        assert applied[0].seq < finished.seq

    async def test_the_event_round_trips_through_json_masked(self, store: CheckpointStore) -> None:
        """`parse_event(event.to_json())` gives the same event; the secret is not in the JSON."""
        desk = Desk()
        first = await desk.coordinator(store).run([REFUND], run_id="r1")
        pending = pending_of(first, "B-2")
        edit = {pending.id: Edit(arguments={"amount": 100})}
        events, _ = await resumed_events(desk.coordinator(store), "r1", edit)
        [event] = [e for e in events if isinstance(e, ApprovalApplied)]
        text = event.to_json()
        assert SECRET not in text
        assert json.loads(text)["approval"]["editedArguments"]["amount"] == 100
        assert parse_event(text) == event

    async def test_a_settled_escalation_streams_its_answer(self, store: CheckpointStore) -> None:
        """An escalation approved in a resume (not run again) is applied, and says so."""
        coordinator = TestAnsweredEscalations().build(store)
        first = await coordinator.run([Task(query="q", topic="vip")], run_id="e")
        pending = pending_of(first, "vip")
        events, _ = await resumed_events(coordinator, "e", {pending.id: Reject("wrong tone")})
        applied = [e.approval for e in events if isinstance(e, ApprovalApplied)]
        assert [(a.id, a.answer, a.answer_reason) for a in applied] == [
            (pending.id, "reject", "wrong tone")
        ]

    async def test_an_answer_is_applied_once_not_again_in_later_resumes(
        self, store: CheckpointStore
    ) -> None:
        """A later resume that answers another task streams only that task's answer."""
        desk = Desk()
        first = await desk.coordinator(store).run([REFUND, OTHER], run_id="r1")
        one = {pending_of(first, "B-2").id: Approve()}
        await desk.coordinator(store).resume("r1", approvals=one)
        other = {pending_of(first, "C-3").id: Reject("fraud")}
        events, report = await resumed_events(desk.coordinator(store), "r1", other)
        applied = [e.approval.topic for e in events if isinstance(e, ApprovalApplied)]
        assert applied == ["C-3"]
        assert [a.topic for a in report.answered_approvals] == ["B-2", "C-3"]
