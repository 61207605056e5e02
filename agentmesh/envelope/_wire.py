"""The wire values of an outcome: its categories and types, partial results, retry
counts and the tools left out, on one camelCase base."""

from __future__ import annotations

import enum
from typing import (
    Annotated,
    Any,
    Final,
    TypeAlias,
    TypeVar,
)

import pydantic_core
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

from agentmesh._limits import recorded

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
