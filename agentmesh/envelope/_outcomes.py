"""The two outcomes, `Success` and `ErrorEnvelope`, and `Outcome`, either of them."""

from __future__ import annotations

from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    ClassVar,
    Final,
    Generic,
    Literal,
    TypeAlias,
)

import pydantic_core
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    computed_field,
)

from agentmesh.envelope._ruling import CarriedRuling
from agentmesh.envelope._wire import (
    ErrorCategory,
    JSONQuery,
    MaskedQuery,
    PartialResults,
    RetryCount,
    T,
    ToolsLeftOut,
    _Wire,
)
from agentmesh.usage import UsageSummary


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
