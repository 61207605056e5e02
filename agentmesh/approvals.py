"""Approvals: what a person answers to a call or an escalation that waits for them.

A policy that returns `Ruling.ask(reason)` stops the task before the call; a router's
`Escalate` stops the task too. With a checkpoint store, each becomes a `PendingApproval`
in the store and in `Report.pending_approvals`. A person answers with an `Approval`:

* `Approve()`: make the call as it was asked (or, for an escalation, accept what the
  task ended with: its result, or its failure as a gap, without running it again);
* `Reject(reason)`: do not make it; the task becomes a gap that says who and why;
* `Edit(arguments=...)`: make the call with these arguments instead (policies rule on
  them again), or `Edit(query=...)` for an escalated task: run it again with this query.

`await coordinator.resume(run_id, approvals={pending.id: Approve(), ...})` goes on.
Every answer used is kept as an `AnsweredApproval`: in the task's record, in
`Report.answered_approvals` and in an `ApprovalApplied` event.

This module was `agentmesh.decisions` until 0.2 (`PendingDecision`, `HumanDecision`,
`DecisionKind`, `AnsweredDecision`); the old module and names still import, with a
`DeprecationWarning`, for one release.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Literal, TypeAlias

from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

from agentmesh.errors import UsageError

__all__ = [
    "AnsweredApproval",
    "Approval",
    "ApprovalKind",
    "Approve",
    "Edit",
    "PendingApproval",
    "Reject",
]

# Schemas are built at first use (a run that asks a person), not by `import agentmesh`.
_CAMEL: Final = ConfigDict(alias_generator=to_camel, populate_by_name=True, defer_build=True)


class ApprovalKind(enum.StrEnum):
    """What waits for a person: one tool call, or a whole escalated task."""

    TOOL_CALL = "tool_call"
    ESCALATION = "escalation"


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A question for a person, kept as data in the run's checkpoint store.

    `arguments` are the call's, with secrets masked (None for an escalation); `policy`
    names the policy that asked (or `router` for a router's escalation); `input_schema`
    the tool's JSON schema, so that edited arguments can be checked where a person
    answers (the run console) before they are sent.
    """

    __pydantic_config__: ClassVar[ConfigDict] = _CAMEL

    id: str
    kind: ApprovalKind
    task_id: str
    subagent: str
    topic: str
    query: str
    reason: str
    policy: str
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    input_schema: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Approve:
    """Go ahead: make the call as asked; for an escalation, accept or run the task again."""


@dataclass(frozen=True, slots=True)
class Reject:
    """Do not make the call: the task becomes a gap whose reason says a person rejected it."""

    reason: str

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str) or not self.reason.strip():
            raise UsageError("Reject(reason=) needs a reason: it goes into the report")


@dataclass(frozen=True, slots=True)
class Edit:
    """Make the call with other arguments (merged over the asked ones), or run an
    escalated task with another query; exactly one of the two."""

    arguments: dict[str, Any] | None = field(default=None)
    query: str | None = None

    def __post_init__(self) -> None:
        if (self.arguments is None) == (self.query is None):
            raise UsageError("Edit takes exactly one of arguments= (a call) or query= (a task)")
        if self.arguments is not None and not isinstance(self.arguments, dict):
            raise UsageError(f"Edit(arguments=) takes a dict, got {self.arguments!r}")
        if self.query is not None and (not isinstance(self.query, str) or not self.query):
            raise UsageError(f"Edit(query=) takes a non-empty str, got {self.query!r}")


Approval: TypeAlias = Approve | Reject | Edit
"""A person's answer to one `PendingApproval`: `Approve()`, `Reject(reason)` or `Edit(...)`."""


@dataclass(frozen=True, slots=True)
class AnsweredApproval:
    """A person's answer, as it was used: what was asked, the answer, and what it changed.

    `id`, `kind`, `task_id`, `subagent`, `topic`, `policy`, `tool` and `reason` (why a
    person was asked) are the `PendingApproval`'s; `arguments` the call's as asked and
    `edited_arguments` the ones it was made with after an `Edit` (secrets masked in
    both); `query` the task's query and `edited_query` an escalation's new one;
    `answer_reason` the reason the person gave to `Reject`. `call_text()` and `note()`
    say it in words, as the report does.
    """

    __pydantic_config__: ClassVar[ConfigDict] = _CAMEL

    id: str
    kind: ApprovalKind
    answer: Literal["approve", "reject", "edit"]
    task_id: str
    subagent: str
    topic: str
    policy: str
    reason: str
    query: str
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    edited_arguments: dict[str, Any] | None = None
    edited_query: str | None = None
    answer_reason: str | None = None

    def call_text(self, *, as_made: bool = False) -> str:
        """The call asked about as a reader writes it: `refund(order="B-2", amount=100)`.

        `as_made=True`: with the arguments it was made with (after an `Edit`, the edited ones).
        """
        arguments = (self.edited_arguments or self.arguments) if as_made else self.arguments
        shown = ", ".join(f"{key}={_json(value)}" for key, value in (arguments or {}).items())
        return f"{self.tool}({shown})"

    def note(self) -> str | None:
        """What this answer let its task do, in words, for the task's coverage reason.

        None for a rejection and an approved escalation: they end the task, and its
        reason says so already.
        """
        where = f"by a person (approval {self.id})"
        if self.answer == "reject":
            return None
        if self.kind is ApprovalKind.ESCALATION:
            if self.answer != "edit":
                return None
            return f"edited {where}: query {_json(self.edited_query)} (was {_json(self.query)})"
        if self.answer == "approve":
            return f"approved {where}: {self.call_text()}"
        return f"edited {where}: {self.tool} with {self._changes()}"

    def _changes(self) -> str:
        before, after = self.arguments or {}, self.edited_arguments or {}
        changed = [
            f"{key}={_json(value)}" + (f" (was {_json(before[key])})" if key in before else "")
            for key, value in after.items()
            if key not in before or before[key] != value
        ]
        return ", ".join(changed) or "the arguments asked about"


def _json(value: Any) -> str:
    """A value as JSON, as a reader of a call or a query sees it."""
    return json.dumps(value, default=str, ensure_ascii=False)
