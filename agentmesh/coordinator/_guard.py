"""The router's guard: the rules no router may change, in one place.

A router (the default table or a user's) proposes a route for each outcome; these rules
come first (`fixed_route`: what the run's limits and the policies decided already) and
last (`guarded`: what a proposed route may not do). A custom router can change every
row of the table, never these.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentmesh._engine._model_calls import is_usage_refusal
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, ErrorType, Outcome, Success
from agentmesh.report import (
    Accept,
    AcceptEmpty,
    Escalate,
    RecordGap,
    RetryWithFeedback,
    Route,
    TryAlternative,
)

__all__ = ["Tried", "fixed_route", "guarded"]


@dataclass(frozen=True, slots=True)
class Tried:
    """What a task has tried so far, as the guard weighs a new attempt."""

    queries: tuple[str, ...]
    alternatives: tuple[str, ...]
    rewrites: int
    max_rounds: int
    alternative_names: frozenset[str]
    time_left: bool


def fixed_route(outcome: Outcome) -> Route | None:
    """The route the outcome itself fixes, whatever a router wants; None: ask the router."""
    ruling = outcome.policy
    if ruling is None and type(outcome) is Success:
        return None  # most outcomes: a success no policy ruled on fixes nothing
    if is_usage_refusal(outcome):
        # The run's limit stopped it: a gap that says so, not an escalation per task nor
        # a new attempt that the limit would stop again.
        return RecordGap(outcome.message)
    if ruling is None:
        return None
    if ruling.action == "ask":
        return Escalate(outcome.message if isinstance(outcome, ErrorEnvelope) else "")
    if isinstance(outcome, ErrorEnvelope) and outcome.error_type == ErrorType.REJECTED:
        return RecordGap(outcome.message)  # a person's no: never retried, never escalated
    if ruling.action == "escalate":
        return Escalate(f"policy {ruling.policy}: {ruling.reason}")
    if ruling.action == "forbid_retry":
        return RecordGap(f"retry forbidden by policy {ruling.policy}: {ruling.reason}")
    return None


def guarded(route: Route, outcome: Outcome, tried: Tried) -> Route:
    """`route` as the run may take it: a failure is never accepted, nothing tried twice."""
    if isinstance(route, Accept | AcceptEmpty) and isinstance(outcome, ErrorEnvelope):
        # "Covered" or "nothing found" for a failure would be silent suppression.
        return RecordGap(f"the router accepted a failure ({outcome.error_type}): {outcome.message}")
    if not isinstance(route, RetryWithFeedback | TryAlternative):
        return route
    if isinstance(outcome, Success):
        # Never retried: empty is an answer, and only the final outcome's data is
        # synthesized, so a retry that then failed would discard what was found.
        return AcceptEmpty() if outcome.is_empty else Accept()
    if outcome.error_category in (ErrorCategory.PERMISSION, ErrorCategory.BUSINESS):
        # Neither is ever retried nor worked around, whatever a custom router says.
        return Escalate(outcome.user_message or outcome.message)
    if not tried.time_left:
        return RecordGap("deadline reached; no new attempt started")
    if isinstance(route, RetryWithFeedback):
        if route.task.query in tried.queries:
            return RecordGap(f"query already tried: {route.task.query!r}")
        if tried.rewrites >= tried.max_rounds:
            return RecordGap(f"no rounds left after {tried.rewrites} rewrites")
    elif route.name not in tried.alternative_names:
        return RecordGap(f"no handler for alternative {route.name!r}")
    elif route.name in tried.alternatives:
        return RecordGap(f"alternative {route.name!r} already tried")
    return route
