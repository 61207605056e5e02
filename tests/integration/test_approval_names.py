"""A person's answers are approvals; the names that called them decisions still work, warning."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest

from agentmesh import Context, Coordinator, RetryPolicy, Task, UsageError, subagent, tool
from agentmesh.approvals import (
    AnsweredApproval,
    Approval,
    ApprovalKind,
    Approve,
    Edit,
    PendingApproval,
    Reject,
)
from agentmesh.checkpoints import MemoryStore
from agentmesh.coordinator import CoverageStatus, Report
from agentmesh.events import (
    ApprovalApplied,
    EscalationPending,
    Event,
    parse_event,
)
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use

REFUND = Task(query="refund order B-2", topic="B-2", metadata={"order": "B-2", "amount": 900})


@pre_tool_use(tool="refund", asks=True)
def over_the_limit(event: ToolCallEvent) -> Ruling | None:
    if event.arguments["amount"] > 100:
        return Ruling.ask("over the limit")
    return None


def desk(refunds: list[int]) -> Coordinator:
    """A desk whose refunds over 100 wait for a person; each refund made is counted."""

    @tool(impact="financial")
    async def refund(order: str, amount: int) -> str:
        refunds.append(amount)
        return f"refunded {amount} on {order}"

    @subagent(name="desk", retry=RetryPolicy.never())
    async def answer(task: Task, ctx: Context) -> str:
        return await ctx.call(refund, order=task.metadata["order"], amount=task.metadata["amount"])

    return Coordinator([answer], policies=[over_the_limit], store=MemoryStore())


async def waiting() -> tuple[Coordinator, list[int], PendingApproval]:
    """A run stopped before its refund, and the approval it waits for."""
    refunds: list[int] = []
    coordinator = desk(refunds)
    report = await coordinator.run([REFUND], run_id="r1")
    [pending] = report.pending_approvals
    return coordinator, refunds, pending


async def approved() -> tuple[Report, list[Event]]:
    """A run approved in a resume: its report and the resume's events."""
    coordinator, _refunds, pending = await waiting()
    stream = coordinator.resume_stream("r1", approvals={pending.id: Approve()})
    events = [event async for event in stream]
    assert stream.report is not None
    return stream.report, events


OLD_NAMES = {
    "PendingDecision": PendingApproval,
    "HumanDecision": Approval,
    "DecisionKind": ApprovalKind,
    "AnsweredDecision": AnsweredApproval,
    "Approve": Approve,
    "Reject": Reject,
    "Edit": Edit,
}


class TestOldModule:
    @pytest.mark.parametrize("name", sorted(OLD_NAMES))
    def test_each_old_name_is_the_new_one_with_a_warning(self, name: str) -> None:
        """`agentmesh.decisions.<name>` gives the approvals' type and says what it is now."""
        module = importlib.import_module("agentmesh.decisions")
        with pytest.warns(DeprecationWarning, match=rf"decisions\.{name} is now .*approvals"):
            old = getattr(module, name)
        assert old is OLD_NAMES[name]

    def test_an_old_import_statement_still_works(self) -> None:
        """`from agentmesh.decisions import PendingDecision` imports, warning once."""
        with pytest.warns(DeprecationWarning, match="PendingApproval"):
            from agentmesh.decisions import PendingDecision  # type: ignore[attr-defined]
        assert PendingDecision is PendingApproval

    def test_a_name_the_module_never_had_is_an_attribute_error(self) -> None:
        """A typo is not mistaken for a renamed name."""
        module = importlib.import_module("agentmesh.decisions")
        with pytest.raises(AttributeError, match="PendingDecisions"):
            _ = module.PendingDecisions

    def test_the_old_event_name_is_the_new_one_with_a_warning(self) -> None:
        """`agentmesh.events.DecisionApplied` is `ApprovalApplied`, with a DeprecationWarning."""
        module = importlib.import_module("agentmesh.events")
        with pytest.warns(DeprecationWarning, match="DecisionApplied is now ApprovalApplied"):
            assert module.DecisionApplied is ApprovalApplied


class TestResumeKeyword:
    async def test_approvals_answer_the_pending_approval(self) -> None:
        """`resume(run_id, approvals=...)` makes the approved call, once."""
        coordinator, refunds, pending = await waiting()
        report = await coordinator.resume("r1", approvals={pending.id: Approve()})
        assert refunds == [900]
        assert [e.status for e in report.coverage] == [CoverageStatus.COVERED]
        assert [a.answer for a in report.answered_approvals] == ["approve"]

    async def test_the_old_keyword_still_answers_with_a_warning(self) -> None:
        """`resume(decisions=...)` works as `approvals=` for one release, warning."""
        coordinator, refunds, pending = await waiting()
        with pytest.warns(DeprecationWarning, match=r"resume\(decisions=\) is now"):
            report = await coordinator.resume(
                "r1",
                decisions={pending.id: Reject("no")},  # type: ignore[call-arg]
            )
        assert refunds == []
        assert [a.answer for a in report.answered_approvals] == ["reject"]

    async def test_the_old_keyword_of_resume_stream_still_answers(self) -> None:
        """`resume_stream(decisions=...)` works too, warning at the call."""
        coordinator, refunds, pending = await waiting()
        with pytest.warns(DeprecationWarning, match=r"resume_stream\(decisions=\)"):
            stream = coordinator.resume_stream(
                "r1",
                decisions={pending.id: Approve()},  # type: ignore[call-arg]
            )
        assert [e async for e in stream if isinstance(e, ApprovalApplied)]
        assert refunds == [900]

    async def test_both_keywords_at_once_are_refused(self) -> None:
        """Given both names, resume names them both rather than pick one."""
        coordinator, refunds, pending = await waiting()
        answer = {pending.id: Approve()}
        with pytest.raises(UsageError, match="approvals= or its old name decisions="):
            await coordinator.resume("r1", approvals=answer, decisions=answer)  # type: ignore[call-arg]
        assert refunds == []


class TestReportNames:
    async def test_the_old_attributes_warn_and_give_the_same(self) -> None:
        """`pending_decisions` and `answered_decisions` are the approvals' tuples, warning."""
        coordinator, _refunds, pending = await waiting()
        stopped = await coordinator.resume("r1")
        with pytest.warns(DeprecationWarning, match="pending_decisions is now"):
            assert stopped.pending_decisions == (pending,)  # type: ignore[attr-defined]
        report, _events = await approved()
        with pytest.warns(DeprecationWarning, match="answered_decisions is now"):
            old = report.answered_decisions  # type: ignore[attr-defined]
        assert old == report.answered_approvals != ()

    async def test_the_json_names_approvals(self) -> None:
        """`pendingApprovals` and `answeredApprovals` in the JSON; no key says decisions."""
        coordinator, _refunds, _pending = await waiting()
        stopped = await coordinator.resume("r1")
        assert "pendingApprovals" in stopped.to_dict()
        report, _events = await approved()
        text = report.to_json()
        assert "answeredApprovals" in json.loads(text)
        assert "ecisions" not in text

    async def test_a_report_written_with_the_old_keys_reads_back(self) -> None:
        """JSON with `pendingDecisions` (written before the rename) gives its approvals."""
        coordinator, _refunds, pending = await waiting()
        data = (await coordinator.resume("r1")).to_dict()
        data["pendingDecisions"] = data.pop("pendingApprovals")
        assert Report.model_validate(data).pending_approvals == (pending,)


def renamed(data: dict[str, Any], old: dict[str, str]) -> dict[str, Any]:
    """`data` with its keys named as before the rename."""
    return {old.get(key, key): value for key, value in data.items()}


class TestEventNames:
    async def test_the_answer_event_is_approval_applied(self) -> None:
        """The event's field is `approval`, its JSON `"event": "ApprovalApplied"`."""
        report, events = await approved()
        [event] = [e for e in events if isinstance(e, ApprovalApplied)]
        assert event.approval == report.answered_approvals[0]
        data = event.to_dict()
        assert (data["event"], data["approval"]["answer"]) == ("ApprovalApplied", "approve")

    async def test_old_json_of_the_answer_event_reads_back(self) -> None:
        """`{"event": "DecisionApplied", "decision": ...}` parses as the same ApprovalApplied."""
        _report, events = await approved()
        [event] = [e for e in events if isinstance(e, ApprovalApplied)]
        old = renamed(event.to_dict(), {"approval": "decision"})
        assert parse_event({**old, "event": "DecisionApplied"}) == event

    async def test_the_old_field_warns_and_gives_the_approval(self) -> None:
        """`ApprovalApplied.decision` is `approval`, with a DeprecationWarning."""
        _report, events = await approved()
        [event] = [e for e in events if isinstance(e, ApprovalApplied)]
        with pytest.warns(DeprecationWarning, match=r"ApprovalApplied\.decision is now"):
            assert event.decision == event.approval  # type: ignore[attr-defined]

    async def test_an_escalation_names_its_approval_id_and_reads_old_json(self) -> None:
        """`approval_id` (JSON `approvalId`); the old `decisionId` still parses, the field warns."""
        _coordinator, _refunds, pending = await waiting()
        event = EscalationPending(
            run_id="r1",
            task_id="task-0",
            seq=1,
            timestamp=0.0,
            subagent="desk",
            task=REFUND,
            reason="a person must look",
            approval_id=pending.id,
        )
        data = event.to_dict()
        assert data["approvalId"] == pending.id
        assert parse_event(renamed(data, {"approvalId": "decisionId"})) == event
        with pytest.warns(DeprecationWarning, match=r"decision_id is now"):
            assert event.decision_id == pending.id  # type: ignore[attr-defined]
