"""Running an ordered chain of policies: the strictest decision wins, and a policy that
raises fails closed (its call is denied or escalated, never silently allowed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentmesh.envelope import PolicyVerdict
from agentmesh.errors import UsageError
from agentmesh.policies._core import Decision, ToolCallEvent, ToolPolicy, ToolResultEvent

__all__ = ["PolicyChain"]

# Higher is stricter; `allow` never overrides anything. (`ask` after a call is an escalate.)
_STRICTNESS = {"allow": 0, "forbid_retry": 1, "escalate": 2, "ask": 2, "deny": 3}


class PolicyChain:
    """The policies that apply to one subagent's tool calls, in order."""

    __slots__ = ("policies",)

    def __init__(self, policies: Sequence[ToolPolicy] = ()) -> None:
        self.policies = tuple(policies)

    def __add__(self, other: Sequence[ToolPolicy]) -> PolicyChain:
        return PolicyChain(self.policies + tuple(other))

    def __bool__(self) -> bool:
        return bool(self.policies)

    def before(
        self, event: ToolCallEvent, log: Any, answered: frozenset[str] = frozenset()
    ) -> PolicyVerdict | None:
        """The first deny, if any policy denies the call; else the first ask, if any.

        A deny wins over an ask: no person is asked about a call that is never made.
        `answered` names the policies whose question a person already answered for
        this call: they rule again, but do not ask again.
        """
        asked: PolicyVerdict | None = None
        for policy in self.policies:
            try:
                decision = _checked(policy.before(event), policy)
            except Exception as exc:
                decision = Decision.deny(f"policy raised {type(exc).__name__}: {exc}")
                log.error("policy_failed", policy=_name(policy), stage="pre", error=repr(exc))
            if decision is None or decision.action == "allow":
                continue
            verdict = _verdict(policy, decision)
            if decision.action == "deny":
                log.info("policy_decision", stage="pre", **verdict.model_dump())
                return verdict
            if decision.action == "ask":
                if asked is None and verdict.policy not in answered:
                    log.info("policy_decision", stage="pre", **verdict.model_dump())
                    asked = verdict
                continue
            # forbid_retry / escalate before a call has nothing to stop yet: say so.
            log.warning("policy_decision_ignored", stage="pre", **verdict.model_dump())
        return asked

    def after(self, event: ToolResultEvent, log: Any) -> PolicyVerdict | None:
        """The strictest decision of all policies on one attempt's outcome."""
        strictest: PolicyVerdict | None = None
        for policy in self.policies:
            try:
                decision = _checked(policy.after(event), policy)
            except Exception as exc:
                decision = Decision.escalate(f"policy raised {type(exc).__name__}: {exc}")
                log.error("policy_failed", policy=_name(policy), stage="post", error=repr(exc))
            if decision is None or decision.action == "allow":
                continue
            if decision.action == "ask":
                # The call happened already: nothing is left to ask about, a person looks.
                decision = Decision.escalate(decision.reason)
            verdict = _verdict(policy, decision)
            log.info("policy_decision", stage="post", attempt=event.attempt, **verdict.model_dump())
            if strictest is None or _STRICTNESS[verdict.action] > _STRICTNESS[strictest.action]:
                strictest = verdict
        return strictest


def _checked(decision: object, policy: ToolPolicy) -> Decision | None:
    if decision is None or isinstance(decision, Decision):
        return decision
    # A policy must decide explicitly; anything else is a bug, and bugs fail closed.
    raise UsageError(f"policy {_name(policy)} returned {decision!r}, not a Decision or None")


def _name(policy: ToolPolicy) -> str:
    return getattr(policy, "name", None) or type(policy).__name__


def _verdict(policy: ToolPolicy, decision: Decision) -> PolicyVerdict:
    action = decision.action
    assert action != "allow"  # filtered by the callers
    return PolicyVerdict(action=action, reason=decision.reason or action, policy=_name(policy))
