"""`FallbackModel`: a chain of models, each asked in turn when the one before is down.

Under `ctx.call_model` (and so in an `LLMSubagent`), each model of the chain gets the
caller's local retries first; when they end in one of the `on` error types (overloaded,
rate limited, unavailable, timed out, by default), the next model gets the same request
at once. A retry-after longer than the deadline allows ends a model's retries at once
too, so the chain fails over instead of waiting. A validation, permission or business
error is the request's or the caller's problem, not the model's: never failed over,
except `quota_exhausted` (a business error too): one model's quota says nothing of
another's.

The run shares what it learns of each model (`ModelHealth`): a model whose breaker is
open, or whose quota ended, is skipped at once (no local retries, no usage), and later
turns and tasks go on with the next model until a probe finds it back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from agentmesh.classify import Classifier, default_classifier
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, ErrorType
from agentmesh.errors import UsageError
from agentmesh.models._base import Model, ModelResponse
from agentmesh.models._shorthand import resolve_model

__all__ = ["DEFAULT_FAILOVER_ON", "FallbackModel"]

DEFAULT_FAILOVER_ON: Final = frozenset(
    {"overloaded", "rate_limited", "unavailable", "timeout", ErrorType.QUOTA_EXHAUSTED.value}
)
"""The error types a `FallbackModel` fails over on by default."""

# Whatever `on` says: another model would be refused, or given bad input, the same way.
_NEVER: Final = frozenset(
    {ErrorCategory.VALIDATION, ErrorCategory.PERMISSION, ErrorCategory.BUSINESS}
)


def _where(index: int) -> str:
    return "primary" if index == 0 else f"fallbacks[{index - 1}]"


def _resolved(index: int, model: Model | str) -> Model:
    """A model string ("openai:gpt-5-mini") becomes its model here, at the boundary."""
    if not isinstance(model, str):
        return model
    try:
        return resolve_model(model)
    except UsageError as exc:
        raise UsageError(f"FallbackModel({_where(index)}=): {exc}") from None


class FallbackModel:
    """`primary`, then each of `fallbacks` in order, for a request the one before failed.

    Args:
        primary: the model asked first (a `Model`, or a string for `resolve_model`,
            e.g. `"anthropic:claude-sonnet-4-5"`).
        *fallbacks: the models asked next, in order (each a `Model` or a string).
        on: the error types that fail over (see `DEFAULT_FAILOVER_ON`).
        classifier: turns a model's exception into an envelope when the chain is called
            directly (`create`); under `ctx.call_model` the subagent's classifier does.
    """

    def __init__(
        self,
        primary: Model | str,
        *fallbacks: Model | str,
        on: Iterable[str] = DEFAULT_FAILOVER_ON,
        classifier: Classifier | None = None,
    ) -> None:
        models = tuple(_resolved(index, model) for index, model in enumerate((primary, *fallbacks)))
        for index, model in enumerate(models):
            if not callable(getattr(model, "create", None)) or not isinstance(
                getattr(model, "name", None), str
            ):
                raise UsageError(f"FallbackModel({_where(index)}=) takes a Model, got {model!r}")
        if not fallbacks:
            raise UsageError("FallbackModel(*fallbacks) needs at least one fallback model")
        if isinstance(on, str):
            raise UsageError(f"FallbackModel(on=) takes a set of error types, got {on!r}")
        error_types = frozenset(on)
        if not error_types or not all(isinstance(kind, str) for kind in error_types):
            raise UsageError(f"FallbackModel(on=) takes error type names, got {on!r}")
        self.models: tuple[Model, ...] = models
        self.on = error_types
        self.classifier = classifier or default_classifier
        self.name = "fallback:" + ",".join(model.name for model in models)

    def fails_over(self, envelope: ErrorEnvelope) -> bool:
        """Whether a model's final envelope sends the request to the next model."""
        if envelope.error_type not in self.on:
            return False
        return (
            envelope.error_type == ErrorType.QUOTA_EXHAUSTED
            or envelope.error_category not in _NEVER
        )

    async def create(
        self,
        *,
        messages: Sequence[Mapping[str, Any]],
        system: str | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        tool_choice: Mapping[str, Any] | None = None,
        max_tokens: int = 1024,
    ) -> ModelResponse:
        """Each model once, in order, until one answers (called directly, without retries).

        Raises the last model's exception, or the first one that does not fail over.
        """
        last = len(self.models) - 1
        for index, model in enumerate(self.models):
            try:
                return await model.create(
                    messages=messages,
                    system=system,
                    tools=tools,
                    tool_choice=tool_choice,
                    max_tokens=max_tokens,
                )
            except Exception as exc:
                envelope = self.classifier.classify(
                    exc, source=model.name, attempted_query={"model": model.name}, attempts=1
                )
                if index == last or not self.fails_over(envelope):
                    raise
        raise AssertionError("unreachable: the last model returns or raises")

    def __repr__(self) -> str:
        names = ", ".join(repr(model.name) for model in self.models)
        return f"FallbackModel({names}, on={sorted(self.on)})"
