"""A person's answer read from the console's form: what is sent is what they meant."""

from __future__ import annotations

import pytest

from agentmesh import UsageError
from agentmesh.approvals import ApprovalKind, Approve, Edit, PendingApproval, Reject
from agentmesh.console._answer import answer_from_form

SCHEMA = {
    "type": "object",
    "properties": {
        "order": {"type": "string"},
        "amount": {"type": "integer", "maximum": 5000},
        "card_token": "[REDACTED]",  # a secret's property, masked at rest
    },
    "required": ["order", "amount"],
    "additionalProperties": False,
}
CALL = PendingApproval(
    id="a1",
    kind=ApprovalKind.TOOL_CALL,
    task_id="task-1",
    subagent="desk",
    topic="B-2",
    query="refund B-2",
    reason="over the limit",
    policy="refund_limit",
    tool="refund",
    arguments={"order": "B-2", "amount": 900, "card_token": "[REDACTED]"},
    input_schema=SCHEMA,
)
ESCALATION = PendingApproval(
    id="e1",
    kind=ApprovalKind.ESCALATION,
    task_id="task-2",
    subagent="desk",
    topic="C-3",
    query="refund C-3",
    reason="escalated",
    policy="router",
)


def test_approve_and_reject_with_a_reason() -> None:
    assert answer_from_form(CALL, {"action": "approve"}) == Approve()
    assert answer_from_form(CALL, {"action": "reject", "reason": " dup "}) == Reject("dup")
    with pytest.raises(UsageError, match="needs a reason"):
        answer_from_form(CALL, {"action": "reject", "reason": "  "})
    with pytest.raises(UsageError, match="approve, reject or edit"):
        answer_from_form(CALL, {"action": "delete"})


def test_an_edit_sends_only_what_changed_never_a_mask_shown_on_the_page() -> None:
    """The form shows the masked arguments; sent back as shown, the mask must not
    replace the secret the call was asked with."""
    shown = '{"order": "B-2", "amount": 200, "card_token": "[REDACTED]"}'
    edit = answer_from_form(CALL, {"action": "edit", "arguments": shown})
    assert edit == Edit(arguments={"order": "B-2", "amount": 200})
    with pytest.raises(UsageError, match="changes no argument"):
        answer_from_form(CALL, {"action": "edit", "arguments": '{"card_token": "[REDACTED]"}'})


def test_an_edit_that_the_tools_schema_refuses_is_never_sent() -> None:
    for arguments, said in [
        ('{"amount": "lots"}', "amount: 'lots' is not of type 'integer'"),
        ('{"amount": 9000}', "amount: 9000 is greater than the maximum of 5000"),
        ('{"colour": "red"}', "Additional properties are not allowed"),
        ("[1, 2]", "must be a JSON object"),
        ("{", "not JSON"),
    ]:
        with pytest.raises(UsageError, match=said.replace("(", r"\(")):
            answer_from_form(CALL, {"action": "edit", "arguments": arguments})


def test_an_escalated_task_is_edited_with_a_new_query() -> None:
    edit = answer_from_form(ESCALATION, {"action": "edit", "query": "refund C-3 in part"})
    assert edit == Edit(query="refund C-3 in part")
