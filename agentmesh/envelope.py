"""The outcome model: every run of a subagent or a tool ends in exactly one `Outcome`.

An `Outcome` is a `Success` (which may be a valid, empty result) or an `ErrorEnvelope`
that says what failed, why, what was tried, what was already found and what else could
work. Both are frozen pydantic models: snake_case in Python, camelCase on the wire
(`to_dict()` / `model_dump(by_alias=True)`), so the JSON matches the literature.
"""

from __future__ import annotations

import enum
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    ClassVar,
    Final,
    Generic,
    Literal,
    TypeAlias,
    TypeVar,
)

import pydantic_core
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    Tag,
    computed_field,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

from agentmesh._limits import recorded
from agentmesh._signatures import kept_for_one_release
from agentmesh.usage import UsageSummary

__all__ = [
    "ErrorCategory",
    "ErrorEnvelope",
    "ErrorType",
    "Outcome",
    "PartialResults",
    "RetryCount",
    "Ruling",
    "Success",
    "ToolsLeftOut",
]

T = TypeVar("T")

MAX_PARTIAL_JSON_BYTES: Final = 1 << 20
"""Bytes of JSON of `partialResults.findings` kept; the rest is cut with a marker."""

JSONQuery: TypeAlias = str | dict[str, Any]

# What an envelope records of a query travels into logs, reports and model prompts: every
# envelope built with validation masks its secrets and bounds its size here, in one place,
# whoever built it (the framework from a task's raw query, or a model's report). A
# success is built on the hot path from queries the framework has already recorded
# (masked once, where the call is made), so it does not pay for it again.
MaskedQuery: TypeAlias = Annotated[JSONQuery, AfterValidator(recorded)]


class ErrorCategory(enum.StrEnum):
    """Why a call failed; the category decides the recovery strategy."""

    TRANSIENT = "transient"
    VALIDATION = "validation"
    BUSINESS = "business"
    PERMISSION = "permission"
    OTHER = "other"

    @property
    def retryable_by_default(self) -> bool:
        """Only transient failures can succeed when tried again unchanged."""
        return self is ErrorCategory.TRANSIENT


class ErrorType(enum.StrEnum):
    """The error types the framework itself gives and decides on.

    `errorType` stays an open set of strings on the wire (a tool or an SDK mapping may
    name its own); these are the ones agentmesh's own control flow compares against.
    """

    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    UNAVAILABLE = "unavailable"
    POLICY_BLOCKED = "policy_blocked"
    INVALID_INPUT = "invalid_input"
    TOOL_NOT_CALLED = "tool_not_called"
    USAGE_LIMIT_EXCEEDED = "usage_limit_exceeded"
    # A policy asked a person (`Ruling.ask`) and the answer is not given yet.
    DECISION_PENDING = "decision_pending"
    # A person answered `Reject(reason)`: the call was not made.
    REJECTED = "rejected"
    # A quota or usage limit whose reset is far away (`business`, not retryable;
    # `retryAfter` is the seconds until the reset, `details` says `resumeAt`): the model
    # is left out until then, and a `FallbackModel` goes on without it.
    QUOTA_EXHAUSTED = "quota_exhausted"


class _Wire(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        # Schemas are built at first use, not by `import agentmesh` (issue 18).
        defer_build=True,
    )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, camelCase keys, absent optional fields left out."""
        return self.model_dump(mode="json", by_alias=True, exclude=self._absent())

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude=self._absent())

    def _absent(self) -> set[str]:
        # Only optional fields (default None) are left out when None: a required field
        # such as a success's `data` is always written, even when its value is null.
        fields = type(self).model_fields
        return {
            name
            for name, info in fields.items()
            if info.default is None and getattr(self, name) is None
        }


class PartialResults(_Wire):
    """Work done before a failure: it survives the failure and reaches the coordinator."""

    completed: tuple[str, ...] = ()
    pending: tuple[str, ...] = ()
    findings: tuple[Any, ...] = ()

    @model_validator(mode="after")
    def _bounded(self) -> PartialResults:
        """Findings beyond MAX_PARTIAL_JSON_BYTES of JSON are cut, and the cut is said.

        Partial results travel into every tool result, report and log line; a block
        received from outside must not grow them without bound, nor vanish silently.
        """
        if len(self.findings) < 2:
            return self
        encoded = [pydantic_core.to_json(item, fallback=repr) for item in self.findings]
        if sum(len(item) + 1 for item in encoded) <= MAX_PARTIAL_JSON_BYTES:
            return self
        budget = MAX_PARTIAL_JSON_BYTES - 1024  # room for the marker and the brackets
        kept = 0
        for item in encoded:
            budget -= len(item) + 1
            if budget < 0:
                break
            kept += 1
        dropped = len(self.findings) - kept
        marker = (
            f"[truncated: {dropped} of {len(self.findings)} findings dropped; partial "
            f"results are kept up to {MAX_PARTIAL_JSON_BYTES} bytes of JSON]"
        )
        # Frozen model, still being built: set the field directly, once.
        object.__setattr__(self, "findings", (*self.findings[:kept], marker))
        return self

    @property
    def is_empty(self) -> bool:
        return not (self.completed or self.pending or self.findings)


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


class RetryCount(_Wire):
    """Local retries of one source for one error type: recovery seen without DEBUG logs.

    `gave_up` marks the retries of calls that still failed in the end (written as
    `gaveUp: true`); without it the retried calls recovered. Retrying that gave up and
    retrying that worked must not read alike.
    """

    source: str
    error_type: str
    count: int = Field(ge=1)
    gave_up: bool = False

    @model_serializer(mode="wrap")
    def _without_recovered_flag(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Retries that recovered keep the shape a count always had: `gaveUp` only when true.
        data = handler(self)
        if not self.gave_up and isinstance(data, dict):
            data.pop("gaveUp", None)
            data.pop("gave_up", None)
        return data


class ToolsLeftOut(_Wire):
    """A source of tools (an MCP server) that could not be listed for a task: the model
    worked without its tools, and the report says so."""

    source: str
    error_type: str
    reason: str


class ErrorEnvelope(_Wire):
    """A failure as data: enough context for the coordinator to decide what to do next."""

    # Only fields that are always present are required in the JSON schema: a schema that
    # required partialResults would invite a model to invent some.
    ALWAYS_PRESENT: ClassVar[tuple[str, ...]] = (
        "isError",
        "errorCategory",
        "errorType",
        "isRetryable",
        "message",
        "attemptedQuery",
        "source",
        "attempts",
    )

    is_error: Literal[True] = True
    error_category: ErrorCategory
    error_type: str
    is_retryable: bool
    message: str
    attempted_query: MaskedQuery
    source: str
    attempts: int = Field(ge=0)
    partial_results: PartialResults | None = None
    alternative_approaches: tuple[str, ...] | None = None
    details: str | None = None
    user_message: str | None = None
    retry_after: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    policy: CarriedRuling | None = None
    # Every policy ruling on the task's tool calls, and the local retries made, by source
    # and error type: what happened on the way, not only how it ended.
    rulings: tuple[CarriedRuling, ...] | None = None
    retries: tuple[RetryCount, ...] | None = None
    # What the task's model calls used (retried and failed-over ones included); absent
    # when no model was called.
    usage: UsageSummary | None = None
    # Optional sources of tools the task went on without (`LLMSubagent(tools=[...])`).
    tools_left_out: tuple[ToolsLeftOut, ...] | None = None
    # Set only by `usage_limit_envelope` (agentmesh._engine._model_calls): the framework's own
    # refusal, which no wire form carries, so a tool's business error named
    # "usage_limit_exceeded" is not mistaken for it.
    _usage_refusal: bool = PrivateAttr(default=False)

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON schema of the wire form, requiring exactly the always-present fields."""
        schema = cls.model_json_schema(by_alias=True)
        schema["required"] = list(cls.ALWAYS_PRESENT)
        return schema

    @property
    def category(self) -> ErrorCategory:
        return self.error_category

    def to_tool_result(self, tool_use_id: str) -> dict[str, Any]:
        """An Anthropic `tool_result` block: `is_error: true`, the envelope JSON as content."""
        return {
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "is_error": True,
            "content": self.to_json(),
        }

    def to_mcp_result(self) -> dict[str, Any]:
        """An MCP `CallToolResult`-shaped dict: `isError: true`, the envelope's JSON whole in
        `structuredContent`, one line of text for clients that read only text."""
        retry = "retryable" if self.is_retryable else "not retryable"
        attempts = "1 attempt" if self.attempts == 1 else f"{self.attempts} attempts"
        text = (
            f"{self.source} failed ({self.error_category.value}/{self.error_type}, "
            f"{retry}, {attempts}): {self.message}"
        )
        return {
            "isError": True,
            "content": [{"type": "text", "text": text}],
            "structuredContent": self.to_dict(),
        }


_SIZED: Final = (str, list, tuple, dict, set, frozenset)
# Longer results are cut in an MCP result's text block only; `structuredContent` has them whole.
MCP_TEXT_LIMIT: Final = 2_000
_SIZED_TYPES: Final = frozenset(_SIZED)


def _is_empty_value(data: object) -> bool:
    """True for the values that mean "searched, nothing found": `[]`, `{}`, `None`, `""`."""
    if data is None:
        return True
    # Exact-type lookup first: this runs for every outcome; subclasses take the slow path.
    if type(data) in _SIZED_TYPES or isinstance(data, _SIZED):
        return len(data) == 0  # type: ignore[arg-type]  # one of the sized builtins above
    return False


class Success(_Wire, Generic[T]):
    """A result. An empty one is a valid answer: never retried, never reported as a gap."""

    # `isEmpty` is written to JSON for readers; it is derived, so reading it back ignores it.
    model_config = ConfigDict(extra="ignore")

    is_error: Literal[False] = False
    data: T
    source: str
    attempted_query: JSONQuery
    attempts: int = Field(default=1, ge=0)
    # A policy's `escalate` on a result that was obtained: the data stands, and a human
    # must still look at it.
    policy: CarriedRuling | None = None
    # As on an envelope: a result obtained after a denied call or after retries says so.
    rulings: tuple[CarriedRuling, ...] | None = None
    retries: tuple[RetryCount, ...] | None = None
    # What the task's model calls used (retried and failed-over ones included); absent
    # when no model was called.
    usage: UsageSummary | None = None
    # Optional sources of tools the task went on without (`LLMSubagent(tools=[...])`).
    tools_left_out: tuple[ToolsLeftOut, ...] | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def is_empty(self) -> bool:
        return _is_empty_value(self.data)

    def data_json(self) -> str:
        return pydantic_core.to_json(self.data, fallback=str).decode()

    def data_text(self) -> str:
        """The data as a reader is given it: text as it is, anything else as JSON.

        A blank string stays JSON (`""`): the Messages API refuses an empty text block,
        and the model must still see that the result was empty.
        """
        data = self.data
        return data if isinstance(data, str) and data.strip() else self.data_json()

    def to_tool_result(self, tool_use_id: str) -> dict[str, Any]:
        """An Anthropic `tool_result` block without `is_error`, even when empty.

        Text reaches the model as text (its quotes and line breaks unescaped),
        structured data as JSON.
        """
        return {"type": "tool_result", "tool_use_id": tool_use_id, "content": self.data_text()}

    def to_mcp_result(self) -> dict[str, Any]:
        """An MCP `CallToolResult`-shaped dict: `isError: false`, the success's JSON whole in
        `structuredContent` (with `isEmpty`: "searched, nothing found" is not a failure), and
        its data as text (`data_text`), cut at `MCP_TEXT_LIMIT` characters."""
        # Any data a subagent returns crosses, as the model's tool results do (`str` fallback).
        data = pydantic_core.to_jsonable_python(self.data, fallback=str)
        if self.is_empty:
            text = f"{self.source} searched and found nothing (an empty result, not a failure)."
        else:
            text = self.data_text()
            if len(text) > MCP_TEXT_LIMIT:
                text = text[:MCP_TEXT_LIMIT] + "… (cut here; structuredContent has it whole)"
        return {
            "isError": False,
            "content": [{"type": "text", "text": text}],
            "structuredContent": self.model_copy(update={"data": data}).to_dict(),
        }


def _outcome_tag(value: Any) -> str:
    if isinstance(value, BaseModel):
        return "error" if getattr(value, "is_error", False) else "success"
    if isinstance(value, dict):
        flag = value.get("isError", value.get("is_error", False))
        return "error" if flag else "success"
    return "success"


if TYPE_CHECKING:
    _AnySuccess: TypeAlias = Success[Any]
else:
    # At run time the plain class, which validates as `Success[Any]` does (an unbound
    # `T` is `Any`). Subscripting it would build its schema at once: pydantic rebuilds
    # a generic's origin in `__class_getitem__`, here at import (issue 18).
    _AnySuccess = Success

Outcome: TypeAlias = Annotated[
    Annotated[_AnySuccess, Tag("success")] | Annotated[ErrorEnvelope, Tag("error")],
    Discriminator(_outcome_tag),
]
"""`Success | ErrorEnvelope`, discriminated by `isError` when read from JSON."""


# Exported before issue 25: `Success.is_empty` is the API.
__getattr__ = kept_for_one_release(
    __name__,
    {
        "is_empty_value": (
            "is internal to agentmesh (use Success.is_empty)",
            lambda: _is_empty_value,
        ),
        # Until issue 25 a policy returned a `Decision` and an outcome carried a
        # `PolicyVerdict`: one thing, two types; both are `Ruling` now.
        "PolicyVerdict": ("is now Ruling (a policy's ruling)", lambda: Ruling),
    },
)
