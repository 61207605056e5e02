"""The `Model` protocol and the typed response every model returns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Final, Literal, Protocol, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

__all__ = [
    "MAX_TOKEN_COUNT",
    "ContentBlock",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "OtherBlock",
    "TextBlock",
    "ToolUseBlock",
    "Usage",
]


class _Block(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    def to_param(self) -> dict[str, Any]:
        """The block as the Messages API expects it back in an assistant message."""
        return self.model_dump(mode="json", exclude_none=True)


class TextBlock(_Block):
    """Text the model wrote."""

    type: Literal["text"] = "text"
    text: str


class ToolUseBlock(_Block):
    """A tool call the model asks for: the tool's `name`, its `input` and the call's `id`."""

    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class OtherBlock(_Block):
    """A block agentmesh does not interpret (thinking, server tool use, ...), kept verbatim."""

    model_config = ConfigDict(frozen=True, extra="allow", defer_build=True)
    type: str

    def to_param(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


def _block_tag(value: Any) -> str:
    kind = value.get("type") if isinstance(value, Mapping) else getattr(value, "type", None)
    return kind if kind in ("text", "tool_use") else "other"


ContentBlock: TypeAlias = Annotated[
    Annotated[TextBlock, Tag("text")]
    | Annotated[ToolUseBlock, Tag("tool_use")]
    | Annotated[OtherBlock, Tag("other")],
    Discriminator(_block_tag),
]
"""One block of a model's reply: a `TextBlock`, a `ToolUseBlock` or an `OtherBlock`."""


MAX_TOKEN_COUNT: Final = 10**9
"""The largest token count one response may report: beyond it the count is unusable."""

_COUNTS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "reasoning_tokens",
)
# The API sends null for a request that used no prompt cache: that is 0, not unknown.
_NULL_IS_ZERO: Final = frozenset(_COUNTS[2:])


class Usage(BaseModel):
    """The tokens of one response, as the Messages API counts them.

    `input_tokens` excludes the prompt tokens written to or read from the prompt cache;
    those are `cache_creation_input_tokens` and `cache_read_input_tokens` (priced apart).
    `reasoning_tokens` are the part of `output_tokens` a reasoning model spent thinking
    (OpenAI's reasoning tokens, Gemini's thoughts): billed as output, already counted there,
    shown apart.

    A count that is no token count (negative, not a whole number, above
    `MAX_TOKEN_COUNT`) is unknown: it reads 0 here and is named in `unusable`
    (`"input_tokens=-5"`), so the call is still counted and the response still used.
    """

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    reasoning_tokens: int = 0
    unusable: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _usable_counts(cls, data: Any) -> Any:
        """Each count as a token count, or 0 and named in `unusable`: never a failure.

        A model's bookkeeping must not decide a task: an answer with absurd counts is
        still the answer.
        """
        if not isinstance(data, Mapping):
            return data
        counts = dict(data)
        named = counts.get("unusable")
        # Names read back (a list in JSON); anything else under that key is no list of names.
        unusable = (
            [n for n in named if isinstance(n, str)] if isinstance(named, list | tuple) else []
        )
        for name in _COUNTS:
            if name not in counts:
                continue
            value = counts[name]
            if value is None and name in _NULL_IS_ZERO:
                counts[name] = 0
                continue
            count = _token_count(value)
            if count is None:
                unusable.append(f"{name}={_shown(value)}")
                count = 0
            counts[name] = count
        counts["unusable"] = tuple(unusable)
        return counts

    @property
    def total_input_tokens(self) -> int:
        """Every prompt token of the call: uncached, written to the cache, and read from it."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens


def _token_count(value: object) -> int | None:
    """`value` as a token count, or None when it cannot be one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and 0 <= value <= MAX_TOKEN_COUNT:
        return value
    return None


def _shown(value: object) -> str:
    """A short form of a reported value: a 400-digit number is not repeated whole."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:12]}... ({len(text)} characters)"


class ModelResponse(BaseModel):
    """One model turn: content blocks, why it stopped, and what it cost."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    content: tuple[ContentBlock, ...]
    stop_reason: str | None = None
    # A factory, not `Usage()`: an instance here would build its schema at import.
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    id: str | None = None

    @field_validator("usage", mode="before")
    @classmethod
    def _usage_block(cls, value: Any) -> Any:
        # A usage block that is no object at all (null, a number): every count is unknown.
        if isinstance(value, Mapping | Usage):
            return value
        return Usage(unusable=(f"usage={_shown(value)}",))

    @property
    def text(self) -> str:
        return "".join(block.text for block in self.content if isinstance(block, TextBlock))

    @property
    def tool_uses(self) -> tuple[ToolUseBlock, ...]:
        return tuple(block for block in self.content if isinstance(block, ToolUseBlock))

    def to_message(self) -> dict[str, Any]:
        """The assistant message that replays this turn in the conversation."""
        return {"role": "assistant", "content": [block.to_param() for block in self.content]}

    @classmethod
    def of_text(cls, text: str, *, stop_reason: str = "end_turn") -> ModelResponse:
        """A reply that is plain text."""
        return cls(content=(TextBlock(text=text),), stop_reason=stop_reason)

    @classmethod
    def of_tool_calls(cls, *calls: tuple[str, Mapping[str, Any]], text: str = "") -> ModelResponse:
        """A reply asking for tool calls: `of_tool_calls(("search", {"query": "x"}), ...)`."""
        blocks: list[TextBlock | ToolUseBlock] = [TextBlock(text=text)] if text else []
        for index, (name, arguments) in enumerate(calls):
            blocks.append(
                ToolUseBlock(id=f"toolu_{index:02d}_{name}", name=name, input=dict(arguments))
            )
        return cls(content=tuple(blocks), stop_reason="tool_use")


class ModelRequest(BaseModel):
    """What was asked of a model in one call (recorded by `ScriptedModel`)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    messages: tuple[dict[str, Any], ...]
    system: str | None = None
    tools: tuple[dict[str, Any], ...] = ()
    tool_choice: dict[str, Any] | None = None
    max_tokens: int = 1024


class Model(Protocol):
    """One async call to a language model: a conversation in, one turn out.

    `messages`, `tools` and `tool_choice` use the Anthropic Messages API's shapes.
    Failures are raised as exceptions; the caller's retry policy and classifier turn
    them into envelopes, so a model never retries on its own.
    """

    name: str

    async def create(
        self,
        *,
        messages: Sequence[Mapping[str, Any]],
        system: str | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        tool_choice: Mapping[str, Any] | None = None,
        max_tokens: int = 1024,
    ) -> ModelResponse: ...
