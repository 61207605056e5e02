"""Running an ordered chain of policies: the strictest ruling wins, and a policy that
raises fails closed (its call is denied or escalated, never silently allowed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentmesh.envelope import Ruling, RulingAction
from agentmesh.errors import UsageError
from agentmesh.policies._core import ToolCallEvent, ToolPolicy, ToolResultEvent

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
    ) -> Ruling | None:
        """The first deny, if any policy denies the call; else the first ask, if any.

        A deny wins over an ask: no person is asked about a call that is never made.
        `answered` names the policies whose question a person already answered for
        this call: they rule again, but do not ask again. The ruling returned names
        the policy that gave it.
        """
        asked: Ruling | None = None
        for policy in self.policies:
            try:
                ruling = _checked(policy.before(event), policy)
            except Exception as exc:
                ruling = Ruling.deny(f"policy raised {type(exc).__name__}: {exc}")
                log.error("policy_failed", policy=_name(policy), stage="pre", error=repr(exc))
            if ruling is None or ruling.action == "allow":
                continue
            ruling = _named(ruling, policy, ruling.action)
            if ruling.action == "deny":
                log.info("policy_decision", stage="pre", **_logged(ruling))
                return ruling
            if ruling.action == "ask":
                if asked is None and ruling.policy not in answered:
                    log.info("policy_decision", stage="pre", **_logged(ruling))
                    asked = ruling
                continue
            # forbid_retry / escalate before a call has nothing to stop yet: say so.
            log.warning("policy_decision_ignored", stage="pre", **_logged(ruling))
        return asked

    def after(self, event: ToolResultEvent, log: Any) -> Ruling | None:
        """The strictest ruling of all policies on one attempt's outcome, naming its policy."""
        strictest: Ruling | None = None
        for policy in self.policies:
            try:
                ruling = _checked(policy.after(event), policy)
            except Exception as exc:
                ruling = Ruling.escalate(f"policy raised {type(exc).__name__}: {exc}")
                log.error("policy_failed", policy=_name(policy), stage="post", error=repr(exc))
            if ruling is None or ruling.action == "allow":
                continue
            # The call happened already: nothing is left to ask about, a person looks.
            action = "escalate" if ruling.action == "ask" else ruling.action
            ruling = _named(ruling, policy, action)
            log.info("policy_decision", stage="post", attempt=event.attempt, **_logged(ruling))
            if strictest is None or _STRICTNESS[ruling.action] > _STRICTNESS[strictest.action]:
                strictest = ruling
        return strictest


def _checked(ruling: object, policy: ToolPolicy) -> Ruling | None:
    if ruling is None or isinstance(ruling, Ruling):
        return ruling
    # A policy must rule explicitly; anything else is a bug, and bugs fail closed.
    raise UsageError(f"policy {_name(policy)} returned {ruling!r}, not a Ruling or None")


def _name(policy: ToolPolicy) -> str:
    return getattr(policy, "name", None) or type(policy).__name__


def _named(ruling: Ruling, policy: ToolPolicy, action: RulingAction) -> Ruling:
    """The ruling as an outcome carries it: the policy that gave it named, a reason given.

    Whatever a policy put in `policy` or `tool` itself is replaced: the chain names the
    policy, the engine the tool.
    """
    return Ruling(action=action, reason=ruling.reason or action, policy=_name(policy))


def _logged(ruling: Ruling) -> dict[str, Any]:
    # The fields a log line has always had, without a pydantic dump per ruling.
    return {
        "action": ruling.action,
        "reason": ruling.reason,
        "policy": ruling.policy,
        "tool": ruling.tool,
    }
