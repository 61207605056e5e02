"""What a policy returns is a `Ruling`, the same type an outcome carries (issue 25).

A policy builds one with `Ruling.deny(reason)` and the like; the chain names the policy,
the engine the tool; outcomes, reports and events carry it with the JSON they always had.
`Decision` and `PolicyVerdict`, the two types it replaces, still import for one release.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

import pydantic
import pytest
import structlog

import agentmesh
from agentmesh import ErrorCategory, ErrorEnvelope, Success
from agentmesh.envelope import Ruling
from agentmesh.events import PolicyRuling, parse_event
from agentmesh.policies import (
    PolicyChain,
    ToolCallEvent,
    ToolPolicy,
    ToolResultEvent,
    post_tool_use,
    pre_tool_use,
)
from agentmesh.scope import RunScope

LOG = structlog.get_logger()


def call(tool: str = "refund") -> ToolCallEvent:
    return ToolCallEvent(
        tool=tool,
        arguments={"amount": 900},
        impact="financial",
        idempotent=False,
        subagent="desk",
        run_id="run",
        task_id="t1",
        state={},
        scope=RunScope("run"),
    )


def envelope(**fields: Any) -> ErrorEnvelope:
    return ErrorEnvelope(
        error_category=ErrorCategory.PERMISSION,
        error_type="policy_blocked",
        is_retryable=False,
        message="denied",
        attempted_query={"tool": "refund"},
        source="desk/refund",
        attempts=0,
        **fields,
    )


class TestOneType:
    def test_a_policy_returns_what_an_outcome_carries(self) -> None:
        """`agentmesh.Ruling`, `agentmesh.envelope.Ruling` and `agentmesh.policies.Ruling` are
        one class."""
        assert agentmesh.Ruling is Ruling
        assert importlib.import_module("agentmesh.policies").Ruling is Ruling

    def test_the_constructors_say_the_action_and_the_reason(self) -> None:
        """Each constructor gives its action and reason, no policy named yet."""
        for action in ("deny", "forbid_retry", "escalate", "ask"):
            ruling = getattr(Ruling, action)("why")
            assert (ruling.action, ruling.reason, ruling.policy, ruling.tool) == (
                action,
                "why",
                "",
                None,
            )

    def test_allow_is_one_shared_ruling(self) -> None:
        """A policy that allows every call builds nothing: `allow()` is one frozen object."""
        assert Ruling.allow() is Ruling.allow()
        assert Ruling.allow().action == "allow"
        with pytest.raises(pydantic.ValidationError, match="frozen"):
            Ruling.allow().action = "deny"  # type: ignore[misc]

    def test_the_chain_names_the_policy_that_ruled(self) -> None:
        """The ruling a chain returns names its policy, with the action as the reason when
        the policy gave none; whatever the policy named itself is replaced."""

        @pre_tool_use
        def allows(event: ToolCallEvent) -> Ruling:
            return Ruling.allow()

        @pre_tool_use
        def refund_limit(event: ToolCallEvent) -> Ruling:
            return Ruling(action="deny", policy="someone else")

        ruling = PolicyChain([allows, refund_limit]).before(call(), LOG)
        assert ruling == Ruling(action="deny", reason="deny", policy="refund_limit")

    def test_an_ask_after_the_call_is_an_escalation_of_that_policy(self) -> None:
        """After a call nothing is left to ask: the chain escalates, naming the policy."""

        @post_tool_use
        def look(event: ToolResultEvent) -> Ruling:
            return Ruling.ask("a person looks")

        event = call()
        result = ToolResultEvent(
            **{name: getattr(event, name) for name in event.__dataclass_fields__},
            outcome=envelope(),
            attempt=1,
        )
        ruling = PolicyChain([look]).after(result, LOG)
        assert ruling == Ruling(action="escalate", reason="a person looks", policy="look")

    def test_anything_else_from_a_policy_fails_closed(self) -> None:
        """A policy that returns something other than a Ruling or None denies the call."""

        class Sloppy(ToolPolicy):
            name = "sloppy"

            def before(self, event: ToolCallEvent) -> Any:
                return "allow"

        ruling = PolicyChain([Sloppy()]).before(call(), LOG)
        assert ruling is not None
        assert (ruling.action, ruling.policy) == ("deny", "sloppy")
        assert "not a Ruling or None" in ruling.reason


class TestCarried:
    @pytest.mark.parametrize("where", ["policy", "rulings"])
    def test_an_outcome_never_carries_an_allow(self, where: str) -> None:
        """An envelope or a success built with an `allow` ruling is refused, and says why."""
        allow = Ruling.allow()
        value: Any = allow if where == "policy" else (allow,)
        with pytest.raises(pydantic.ValidationError, match="never carries an allow"):
            envelope(**{where: value})
        with pytest.raises(pydantic.ValidationError, match="never carries an allow"):
            Success(data=1, source="s", attempted_query="q", **{where: value})

    def test_an_allow_read_from_json_is_refused(self) -> None:
        """Read back from JSON, an outcome or an event with an `allow` ruling is refused."""
        wire = envelope(policy=Ruling(action="deny", reason="why", policy="p")).to_dict()
        wire["policy"]["action"] = "allow"
        with pytest.raises(pydantic.ValidationError, match="never carries an allow"):
            ErrorEnvelope.model_validate(wire)
        line = PolicyRuling(
            run_id="r",
            task_id="t",
            seq=1,
            timestamp=1.0,
            subagent="s",
            ruling=Ruling(action="deny"),
        ).to_dict()
        line["verdict"]["action"] = "allow"
        with pytest.raises(pydantic.ValidationError, match="never carries an allow"):
            parse_event(line)

    def test_the_wire_form_is_the_one_outcomes_always_had(self) -> None:
        """`{action, reason, policy}` in `policy`, with `tool` in `rulings`: as before."""
        ruling = Ruling(action="deny", reason="too much", policy="refund_limit")
        wire = envelope(policy=ruling, rulings=(ruling.model_copy(update={"tool": "refund"}),))
        data = wire.to_dict()
        assert data["policy"] == {"action": "deny", "reason": "too much", "policy": "refund_limit"}
        assert data["rulings"] == [
            {"action": "deny", "reason": "too much", "policy": "refund_limit", "tool": "refund"}
        ]
        assert ErrorEnvelope.model_validate_json(wire.to_json()) == wire

    def test_the_schema_describes_a_carried_ruling(self) -> None:
        """An envelope's JSON schema requires action, reason and policy, and no allow."""
        schema = ErrorEnvelope.json_schema()["$defs"]["Ruling"]
        assert schema["required"] == ["action", "reason", "policy"]
        assert schema["properties"]["action"]["enum"] == ["deny", "forbid_retry", "escalate", "ask"]


class TestTheEvent:
    def test_the_event_keeps_its_json_key(self) -> None:
        """`PolicyRuling.ruling` is written under "verdict", as events always were, and an
        old line reads back as the same event."""
        ruling = Ruling(action="deny", reason="why", policy="p", tool="refund")
        event = PolicyRuling(
            run_id="r", task_id="t", seq=1, timestamp=1.0, subagent="s", ruling=ruling
        )
        old = {
            "event": "PolicyRuling",
            "runId": "r",
            "taskId": "t",
            "seq": 1,
            "timestamp": 1.0,
            "subagent": "s",
            "verdict": {"action": "deny", "reason": "why", "policy": "p", "tool": "refund"},
        }
        assert event.to_dict() == old
        assert parse_event(json.dumps(old)) == event

    def test_the_old_attribute_still_reads_with_a_warning(self) -> None:
        """`event.verdict` is `event.ruling` for one more release, with a DeprecationWarning."""
        event = PolicyRuling(
            run_id="r",
            task_id="t",
            seq=1,
            timestamp=1.0,
            subagent="s",
            ruling=Ruling(action="deny"),
        )
        with pytest.warns(DeprecationWarning, match="PolicyRuling.verdict is now"):
            assert event.verdict is event.ruling


class TestOldNames:
    @pytest.mark.parametrize(
        ("module", "name"),
        [
            ("agentmesh.policies", "Decision"),
            ("agentmesh.envelope", "PolicyVerdict"),
            ("agentmesh", "PolicyVerdict"),
        ],
    )
    def test_the_old_name_is_ruling_with_a_warning(self, module: str, name: str) -> None:
        """`Decision` and `PolicyVerdict` still import for one release: the same class, with a
        DeprecationWarning naming `Ruling`."""
        with pytest.warns(DeprecationWarning, match=f"{module}.{name} is now Ruling"):
            old = getattr(importlib.import_module(module), name)
        assert old is Ruling

    @pytest.mark.parametrize("module", ["agentmesh.policies", "agentmesh.envelope", "agentmesh"])
    def test_the_old_names_are_no_longer_exported(self, module: str) -> None:
        """`__all__` names `Ruling`, not the old names."""
        exported = importlib.import_module(module).__all__
        assert "Ruling" in exported
        assert not {"Decision", "PolicyVerdict"} & set(exported)

    def test_an_unknown_name_is_still_an_attribute_error(self) -> None:
        """The root answers only the old names, never anything else."""
        with pytest.raises(AttributeError, match="PolicyVerdicts"):
            _ = agentmesh.PolicyVerdicts
