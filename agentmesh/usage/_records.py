"""What model calls used: the `usage` an outcome carries and the report sums.

`UsageSummary` is the wire value (`usage` in an outcome's JSON, absent when no model
was called): tokens by kind, model calls, the cost where every price is known, one
`ModelUsage` per model and the fail-overs of a `FallbackModel` on the way.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer
from pydantic.alias_generators import to_camel

__all__ = ["ModelFailover", "ModelUsage", "UsageSummary"]

# The envelope's wire convention (camelCase keys), without importing the envelope: it
# imports this module for its `usage` field.
# Schemas built at first use: most runs never call a model, and import stays cheap.
_WIRE = ConfigDict(
    frozen=True,
    alias_generator=to_camel,
    populate_by_name=True,
    extra="forbid",
    defer_build=True,
)


def _without_unknown_count(data: Any, known: bool, reasoning: int) -> Any:
    # Usage whose counts are all known, of a model that did not reason, keeps the shape it
    # always had in JSON.
    if isinstance(data, dict):
        if known:
            data.pop("unknownTokenCalls", None)
            data.pop("unknown_token_calls", None)
        if not reasoning:
            data.pop("reasoningTokens", None)
            data.pop("reasoning_tokens", None)
    return data


class ModelUsage(BaseModel):
    """What one model used: tokens by kind, calls made, and their cost if its price is known.

    `model_calls` counts every request started, failed ones included (a 529 uses no
    tokens, but it is a call). `cost_usd` is None when tokens were used at a price
    nobody told agentmesh, or in numbers nobody can tell: never a guess.
    `unknown_token_calls` counts the calls whose answer reported unusable token counts
    (negative, absurd): those counts are not in the token totals. `reasoning_tokens`:
    the part of `output_tokens` spent thinking (shown in JSON only when not 0).
    """

    model_config = _WIRE

    model: str
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cache_creation_tokens: int = Field(default=0, ge=0)
    cache_read_tokens: int = Field(default=0, ge=0)
    reasoning_tokens: int = Field(default=0, ge=0)
    model_calls: int = Field(default=0, ge=0)
    cost_usd: float | None = Field(default=0.0, ge=0, allow_inf_nan=False)
    unknown_token_calls: int = Field(default=0, ge=0)

    @model_serializer(mode="wrap")
    def _shape(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _without_unknown_count(
            handler(self), not self.unknown_token_calls, self.reasoning_tokens
        )

    @property
    def total_tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_creation_tokens
            + self.cache_read_tokens
        )

    def __add__(self, other: ModelUsage) -> ModelUsage:
        cost = (
            None
            if self.cost_usd is None or other.cost_usd is None
            else (self.cost_usd + other.cost_usd)
        )
        return ModelUsage(
            model=self.model,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_creation_tokens=self.cache_creation_tokens + other.cache_creation_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            model_calls=self.model_calls + other.model_calls,
            cost_usd=cost,
            unknown_token_calls=self.unknown_token_calls + other.unknown_token_calls,
        )


class ModelFailover(BaseModel):
    """A model of a fallback chain that failed for good, and the model asked next.

    A model the run knew to be out (its breaker open, its quota exhausted) is skipped,
    not called: `attempts` is 0 and `out_since` says since when it has been out
    (`out_until`: until when, where its quota's reset is known). Both are absent from
    the JSON of a model that was called.
    """

    model_config = _WIRE

    model: str
    error_type: str
    attempts: int = Field(ge=0)
    fallback: str
    out_since: datetime.datetime | None = None
    out_until: datetime.datetime | None = None

    @model_serializer(mode="wrap")
    def _shape(self, handler: SerializerFunctionWrapHandler) -> Any:
        # A fail-over of a model that was called keeps the shape its JSON always had.
        data = handler(self)
        if isinstance(data, dict):
            for key in ("outSince", "out_since", "outUntil", "out_until"):
                if key in data and data[key] is None:
                    del data[key]
        return data

    @property
    def skipped(self) -> bool:
        """Whether the model was not called at all: the run knew it was out."""
        return self.out_since is not None


class UsageSummary(BaseModel):
    """Model usage of a task, a subagent or a run: totals, by model, and fail-overs.

    `cost_usd` is the sum of the models' costs, or None when any model's is unknown
    (`by_model` still shows what each known one cost).
    """

    model_config = _WIRE

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0
    reasoning_tokens: int = 0
    model_calls: int = 0
    cost_usd: float | None = 0.0
    by_model: tuple[ModelUsage, ...] = ()
    failovers: tuple[ModelFailover, ...] = ()
    unknown_token_calls: int = 0

    @model_serializer(mode="wrap")
    def _shape(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _without_unknown_count(
            handler(self), not self.unknown_token_calls, self.reasoning_tokens
        )

    @property
    def total_tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_creation_tokens
            + self.cache_read_tokens
        )

    @property
    def answered_by(self) -> tuple[str, ...]:
        """The models that answered (used tokens), in the order first used."""
        return tuple(item.model for item in self.by_model if item.total_tokens)

    @classmethod
    def of(
        cls, models: Iterable[ModelUsage], failovers: Iterable[ModelFailover] = ()
    ) -> UsageSummary:
        """The summary of these per-model lines (one line per model, in order)."""
        merged: dict[str, ModelUsage] = {}
        for item in models:
            known = merged.get(item.model)
            merged[item.model] = item if known is None else known + item
        lines = tuple(merged.values())
        costs = [item.cost_usd for item in lines]
        return cls(
            input_tokens=sum(item.input_tokens for item in lines),
            output_tokens=sum(item.output_tokens for item in lines),
            cache_creation_tokens=sum(item.cache_creation_tokens for item in lines),
            cache_read_tokens=sum(item.cache_read_tokens for item in lines),
            reasoning_tokens=sum(item.reasoning_tokens for item in lines),
            model_calls=sum(item.model_calls for item in lines),
            cost_usd=None if None in costs else sum(c for c in costs if c is not None),
            by_model=lines,
            failovers=tuple(failovers),
            unknown_token_calls=sum(item.unknown_token_calls for item in lines),
        )

    def __add__(self, other: UsageSummary) -> UsageSummary:
        return UsageSummary.of(
            (*self.by_model, *other.by_model), (*self.failovers, *other.failovers)
        )
