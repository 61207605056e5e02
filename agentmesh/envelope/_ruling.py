"""`Ruling`: what a policy returns about one call, and what an outcome carries of it."""

from __future__ import annotations

from typing import (
    Annotated,
    Any,
    Final,
    Literal,
    TypeAlias,
)

from pydantic import (
    AfterValidator,
    ConfigDict,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from agentmesh.envelope._wire import _Wire

RulingAction: TypeAlias = Literal["allow", "deny", "forbid_retry", "escalate", "ask"]


def _carried_schema(schema: dict[str, Any]) -> None:
    # Outcomes write a ruling whole, named, never an allow: the schema says that form.
    schema["required"] = ["action", "reason", "policy"]
    properties = schema["properties"]
    properties["action"]["enum"] = ["deny", "forbid_retry", "escalate", "ask"]
    for name in ("reason", "policy"):
        properties[name].pop("default", None)


class Ruling(_Wire):
    """A deterministic policy's ruling on a tool call, and what an outcome carries of it.

    A policy returns `Ruling.allow()` (no objection), `deny(reason)` (the tool is not run,
    or its result is withheld), `forbid_retry(reason)` (no new attempt, by anyone),
    `escalate(reason)` (a person looks; no new attempt) or `ask(reason)` (a person decides
    before the call). The chain names the `policy`, the engine the `tool`. Whatever a model
    or a router wants, an outcome carrying `forbid_retry` or `escalate` is never attempted
    again, and `deny` means the tool was never run. No outcome carries an `allow`.
    """

    model_config = ConfigDict(json_schema_extra=_carried_schema)

    action: RulingAction
    reason: str = ""
    policy: str = ""
    tool: str | None = None

    @classmethod
    def allow(cls) -> Ruling:
        """No objection: one shared ruling, so a policy that allows costs no allocation."""
        return _ALLOW

    @classmethod
    def deny(cls, reason: str) -> Ruling:
        return cls(action="deny", reason=reason)

    @classmethod
    def forbid_retry(cls, reason: str) -> Ruling:
        return cls(action="forbid_retry", reason=reason)

    @classmethod
    def escalate(cls, reason: str) -> Ruling:
        return cls(action="escalate", reason=reason)

    @classmethod
    def ask(cls, reason: str) -> Ruling:
        return cls(action="ask", reason=reason)

    @model_serializer(mode="wrap")
    def _without_absent_tool(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Nested in an envelope, a ruling is dumped whole: keep `{action, reason, policy}`
        # the shape it always had when no tool is named.
        data = handler(self)
        if self.tool is None and isinstance(data, dict):
            data.pop("tool", None)
        return data


# Built without validation: `import agentmesh` builds no schema (issue 18).
_ALLOW: Final = Ruling.model_construct(action="allow")


def _carried(ruling: Ruling) -> Ruling:
    if ruling.action == "allow":
        raise ValueError("an outcome, a report or an event never carries an allow ruling")
    return ruling


CarriedRuling: TypeAlias = Annotated[Ruling, AfterValidator(_carried)]
"""A `Ruling` as outcomes, reports and events carry it: never `allow`."""
