"""Built-in policies: forbid retries, escalate, and deny a tool after a permission error."""

from __future__ import annotations

from collections.abc import Iterable

from agentmesh.envelope import ErrorType, Ruling
from agentmesh.policies._core import (
    CategorySelector,
    Match,
    ToolCallEvent,
    ToolPolicy,
    ToolResultEvent,
    ToolSelector,
)
from agentmesh.tools import Impact

__all__ = ["deny_after_permission_error", "escalate_on", "forbid_retry"]


class _OnFailure(ToolPolicy):
    """Rules on failed attempts that match tool, category and impact."""

    __slots__ = ("action", "match", "name")

    def __init__(self, action: str, match: Match) -> None:
        self.action = action
        self.match = match
        self.name = f"{action}({_describe(match)})"

    def after(self, event: ToolResultEvent) -> Ruling | None:
        envelope = event.envelope
        if envelope is None or not self.match.result(event):
            return None
        reason = f"{envelope.error_category.value} {envelope.error_type} from {event.tool}"
        if self.action == "escalate":
            return Ruling.escalate(f"{reason}: escalation required by policy")
        return Ruling.forbid_retry(f"{reason}: retry forbidden by policy")


def forbid_retry(
    tools: ToolSelector = None,
    categories: CategorySelector = None,
    impact: Impact | Iterable[Impact] | None = None,
) -> ToolPolicy:
    """No new attempt of a failed call of these tools / categories / impacts, by anyone."""
    return _OnFailure("forbid_retry", Match.of(tools, impact, categories))


def escalate_on(
    tools: ToolSelector = None,
    categories: CategorySelector = None,
    impact: Impact | Iterable[Impact] | None = None,
) -> ToolPolicy:
    """Escalate (and never retry) a failed call of these tools / categories / impacts."""
    return _OnFailure("escalate", Match.of(tools, impact, categories))


class _DenyAfterPermissionError(ToolPolicy):
    """Once a tool answers with a permission error, deny it for the rest of the run."""

    __slots__ = ("match", "name")

    def __init__(self, match: Match) -> None:
        self.match = match
        self.name = "deny_after_permission_error"

    def before(self, event: ToolCallEvent) -> Ruling | None:
        denied: dict[str, str] = event.scope.memory_for(self)
        if event.tool in denied:
            return Ruling.deny(
                f"{event.tool} refused permission earlier in this run: {denied[event.tool]}"
            )
        return None

    def after(self, event: ToolResultEvent) -> Ruling | None:
        envelope = event.envelope
        if (
            envelope is None
            or envelope.error_type == ErrorType.POLICY_BLOCKED
            or not self.match.result(event)
        ):
            return None
        event.scope.memory_for(self)[event.tool] = envelope.message
        return Ruling.forbid_retry(f"{event.tool} refused permission; not retried in this run")


def deny_after_permission_error(tools: ToolSelector = None) -> ToolPolicy:
    """After a permission error from a tool, deny every later call of it in the same run."""
    return _DenyAfterPermissionError(Match.of(tools, None, "permission"))


def _describe(match: Match) -> str:
    parts = []
    for label, values in (
        ("tools", match.tools),
        ("categories", match.categories),
        ("impact", match.impacts),
    ):
        if values is not None:
            parts.append(f"{label}={sorted(str(v) for v in values)}")
    return ", ".join(parts) or "all"
