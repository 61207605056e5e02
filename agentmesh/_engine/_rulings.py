"""Policy rulings applied: to one outcome, and collected over one task's calls."""

from __future__ import annotations

from typing import Any

from agentmesh._engine._attempts import RetryTally
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, ErrorType, Ruling, Success

__all__ = ["TaskRulings", "apply_ruling", "blocked"]


def apply_ruling(
    outcome: Success[Any] | ErrorEnvelope, ruling: Ruling
) -> Success[Any] | ErrorEnvelope:
    """The outcome as a policy ruled it: never retryable again, the policy named in it.

    On a result, only `deny` withholds it; `escalate` keeps the data (the side effect
    happened: dropping its evidence would help no one) and flags it; `forbid_retry` has
    nothing to stop.
    """
    note = f"{ruling.action} by policy {ruling.policy}: {ruling.reason}"
    if isinstance(outcome, Success) and ruling.action == "forbid_retry":
        return outcome
    if isinstance(outcome, Success) and ruling.action == "escalate":
        return outcome.model_copy(update={"policy": ruling})
    if isinstance(outcome, Success):
        # A withheld result: the caller must not see the data the policy blocked.
        return ErrorEnvelope(
            error_category=ErrorCategory.PERMISSION,
            error_type=ErrorType.POLICY_BLOCKED,
            is_retryable=False,
            message=f"result withheld by policy {ruling.policy}: {ruling.reason}",
            attempted_query=outcome.attempted_query,
            source=outcome.source,
            attempts=outcome.attempts,
            details=note,
            policy=ruling,
        )
    details = f"{outcome.details}; {note}" if outcome.details else note
    return outcome.model_copy(update={"is_retryable": False, "details": details, "policy": ruling})


def blocked(ruling: Ruling, attempted_query: dict[str, Any], source: str) -> ErrorEnvelope:
    """The envelope of a call a ruling stopped before it was made."""
    return ErrorEnvelope(
        error_category=ErrorCategory.PERMISSION,
        error_type=ErrorType.POLICY_BLOCKED,
        is_retryable=False,
        message=f"call denied by policy {ruling.policy}: {ruling.reason}",
        attempted_query=attempted_query,
        source=source,
        attempts=0,
        policy=ruling,
    )


class TaskRulings:
    """What one task's outcome must carry even when its body recovers or says "Done.".

    Every policy ruling on the task's calls (in order, each once), the escalations a
    post-tool policy called for, and every local retry.
    """

    __slots__ = ("_rulings", "escalations", "retries")

    def __init__(self) -> None:
        self._rulings: dict[Ruling, None] | None = None
        self.escalations: list[Ruling] = []
        self.retries = RetryTally()

    @property
    def rulings(self) -> tuple[Ruling, ...]:
        return tuple(self._rulings or ())

    def rule(self, ruling: Ruling, tool: str) -> Ruling:
        """Remember a ruling on a call of `tool`; the ruling as kept, naming the tool."""
        if self._rulings is None:
            self._rulings = {}
        kept = ruling.model_copy(update={"tool": tool})
        self._rulings[kept] = None
        return kept

    def annotate(self, outcome: Success[Any] | ErrorEnvelope) -> Success[Any] | ErrorEnvelope:
        """The outcome carrying the rulings and local retries.

        Counts already on the outcome (a nested subagent's, passed on) are kept and added.
        """
        if self._rulings is None and not self.retries:
            return outcome
        update: dict[str, Any] = {}
        if self._rulings is not None:
            update["rulings"] = tuple(dict.fromkeys((*(outcome.rulings or ()), *self._rulings)))
        if outcome.retries:
            self.retries.merge(outcome.retries)
        retries = self.retries.counts()
        if retries is not None:
            update["retries"] = retries
        return outcome.model_copy(update=update)

    def adopt(self, outcome: Success[Any] | ErrorEnvelope) -> None:
        """Take in what a nested run reported: its rulings, its retries, an escalation."""
        for ruling in outcome.rulings or ():
            if self._rulings is None:
                self._rulings = {}
            self._rulings[ruling] = None
        if outcome.retries:
            self.retries.merge(outcome.retries)
        if isinstance(outcome, Success) and outcome.policy is not None:
            self.escalations.append(outcome.policy)
