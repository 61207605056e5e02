"""One model turn through the framework: usage limits, local retries, fail-over, usage.

`ctx.call_model(model, ...)` is to a model what `ctx.call(tool, ...)` is to a tool; an
`LLMSubagent` makes every turn this way. For each model of the chain (a `FallbackModel`'s,
or the one model given):

    claim the model (the run's `ModelHealth`: skipped at once while it is out, else a
    slot of its window of calls in flight) -> admit (the run's and the subagent's usage
    limits) -> model.create -> count its usage (a `UsageUpdated` event when the run is
    streamed) -> retried locally while transient -> fail over on the chain's error types

It returns the response, or raises `CallFailed` with the final envelope: that is final
where it is raised (no layer above retries it again).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from agentmesh._engine._attempts import AttemptRules, attempt_call
from agentmesh._engine._model_gate import ModelGate
from agentmesh._engine._task import TaskEngine
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, ErrorType, Success
from agentmesh.errors import CallFailed, UsageError
from agentmesh.models import FallbackModel, Model, ModelResponse
from agentmesh.retry import RetryPolicy
from agentmesh.usage import ModelFailover, UsageLimits

__all__ = ["call_model", "is_usage_refusal", "marked_usage_refusal", "usage_limit_envelope"]


async def call_model(
    ctx: TaskEngine,
    model: Model,
    *,
    messages: Sequence[Mapping[str, Any]],
    system: str | None = None,
    tools: Sequence[Mapping[str, Any]] = (),
    tool_choice: Mapping[str, Any] | None = None,
    max_tokens: int = 1024,
    retry: RetryPolicy | None = None,
    usage_limits: UsageLimits | None = None,
    attempted_query: Mapping[str, Any] | None = None,
) -> ModelResponse:
    """One model turn for the task whose engine is `ctx`; raises `CallFailed` when it
    failed for good.

    Args:
        retry: each model's local retries; the subagent's policy by default.
        usage_limits: the calling subagent's own limits, on top of the run's.
        attempted_query: what the envelope says was tried, besides the model's name.
    """
    if usage_limits is not None and not isinstance(usage_limits, UsageLimits):
        raise UsageError(f"call_model(usage_limits=) takes UsageLimits, got {usage_limits!r}")
    request: dict[str, Any] = {
        "messages": messages,
        "system": system,
        "tools": tools,
        "tool_choice": tool_choice,
        "max_tokens": max_tokens,
    }
    chain = model.models if isinstance(model, FallbackModel) else (model,)
    tried: list[tuple[str, ErrorEnvelope]] = []
    rules = AttemptRules(retry or ctx.retry, ctx.classifier)
    source = f"{ctx.subagent}/model"
    for index, member in enumerate(chain):
        turn = _Turn(ctx, member, request, usage_limits)
        query = {"model": member.name, **(attempted_query or {})}
        outcome, skipped = await _attempts(ctx, turn, rules, source, query)
        if isinstance(outcome, Success):
            if tried:
                turn.log.info("model_answered", after_failover=[name for name, _ in tried])
            return outcome.data
        tried.append((member.name, outcome))
        if index == len(chain) - 1 or not (
            isinstance(model, FallbackModel) and model.fails_over(outcome)
        ):
            raise CallFailed(_with_models_tried(outcome, tried))
        _fail_over(ctx, turn, outcome, chain[index + 1].name, skipped=skipped)
    raise AssertionError("unreachable: the last model returns or raises")


async def _attempts(
    ctx: TaskEngine, turn: _Turn, rules: AttemptRules, source: str, query: dict[str, Any]
) -> tuple[Success[ModelResponse] | ErrorEnvelope, bool]:
    """One model's attempts for the turn, behind the run's model health; its outcome, and
    whether the model was skipped (out) rather than failed."""
    gate = ModelGate(
        ctx.scope.model_health,
        turn.model,
        turn.attempt,
        classifier=ctx.classifier,
        deadline=ctx.deadline,
        source=source,
        attempted_query=query,
        log=turn.log,
        needs=turn.rate_needs,
        sleep=rules.policy.sleep,
    )
    outcome = await attempt_call(
        gate.attempt,
        rules=rules,
        source=source,
        attempted_query=query,
        log=turn.log,
        scope=ctx,
        deposit=ctx.deposit_for_call,
    )
    return outcome, gate.skipped


def _fail_over(
    ctx: TaskEngine, turn: _Turn, outcome: ErrorEnvelope, fallback: str, *, skipped: bool
) -> None:
    """Count and log that the turn goes on with the chain's next model, `fallback`.

    `skipped`: the model was out (the run's `ModelHealth` said so) and not called.
    """
    outage = ctx.scope.model_health.outage(turn.model) if skipped else None
    since, until = (None, None) if outage is None else outage
    ctx.usage.failed_over(
        ModelFailover(
            model=turn.model.name,
            error_type=outcome.error_type,
            attempts=outcome.attempts,
            fallback=fallback,
            out_since=since,
            out_until=until,
        )
    )
    if skipped:
        # Per call: the model going out was logged once, at info, where it happened.
        turn.log.debug(
            "model_failover", error_type=outcome.error_type, skipped=True, fallback=fallback
        )
        return
    turn.log.info(
        "model_failover",
        error_type=outcome.error_type,
        attempts=outcome.attempts,
        fallback=fallback,
    )


class _Turn:
    """The attempts of one model for one turn: admitted, made, counted."""

    __slots__ = ("ctx", "limits", "log", "model", "request")

    def __init__(
        self, ctx: TaskEngine, model: Model, request: dict[str, Any], limits: UsageLimits | None
    ) -> None:
        self.ctx, self.model, self.request, self.limits = ctx, model, request, limits
        self.log = ctx.log.bind(model=model.name)

    def rate_needs(self) -> dict[str, int]:
        """What one call of this turn takes of its model's rate limits."""
        request = self.request
        return {
            "requests": 1,
            "input-tokens": self.ctx.scope.usage.estimated_input_tokens(request),
            "output-tokens": int(request["max_tokens"]),
        }

    async def attempt(self, number: int) -> ModelResponse:
        ctx, name = self.ctx, self.model.name
        meter = ctx.scope.usage
        admitted = await meter.admit(
            name, ctx.subagent, self.limits, self.request, deadline=ctx.deadline
        )
        if isinstance(admitted, str):
            refused = admitted
            self.log.info("usage_limit_refused", attempt=number, reason=refused)
            raise CallFailed(
                usage_limit_envelope(refused, source=f"{ctx.subagent}/model", model=name)
            )
        self.log.debug("model_call", attempt=number)
        response: ModelResponse | None = None
        try:
            async with asyncio.timeout_at(ctx.deadline):
                response = await self.model.create(**self.request)
        finally:
            # Counted whatever happened: a failed or cut call was a call, and its
            # tokens (when an answer came) were spent.
            line = meter.settle(name, ctx.subagent, reserved=admitted, **_tokens(response))
            if line.unknown_token_calls:
                assert response is not None  # only an answer reports counts
                self.log.warning("model_usage_unusable", counts=list(response.usage.unusable))
            ctx.usage.add(line)
            if ctx.events is not None:
                ctx.events.usage_updated(line, meter.total())
        return response


def _tokens(response: ModelResponse | None) -> dict[str, Any]:
    if response is None:
        return {}
    usage = response.usage
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_creation_tokens": usage.cache_creation_input_tokens,
        "cache_read_tokens": usage.cache_read_input_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "unknown_tokens": bool(usage.unusable),
    }


def usage_limit_envelope(reason: str, *, source: str, model: str | None = None) -> ErrorEnvelope:
    """The envelope of a call or task a usage limit stopped: business, never retried.

    Marked as the framework's refusal (`is_usage_refusal`): only this function marks it.
    """
    envelope = ErrorEnvelope(
        error_category=ErrorCategory.BUSINESS,
        error_type=ErrorType.USAGE_LIMIT_EXCEEDED,
        is_retryable=False,
        message=f"usage limit reached, no model call started: {reason}",
        attempted_query={"model": model} if model is not None else reason,
        source=source,
        attempts=0,
        user_message="The usage limit of this run was reached before the task was done.",
    )
    return marked_usage_refusal(envelope)


def marked_usage_refusal(envelope: ErrorEnvelope) -> ErrorEnvelope:
    """`envelope` marked as the framework's usage refusal: for the framework's own
    transports only (a Ray worker's outcome, rebuilt on the driver), never outside input."""
    envelope._usage_refusal = True
    return envelope


def is_usage_refusal(outcome: object) -> TypeGuard[ErrorEnvelope]:
    """Whether `outcome` is a usage limit's refusal made here, not an error of that name.

    `errorType` is an open string: a tool's own business error may be called
    "usage_limit_exceeded" too, and it is routed as any other.
    """
    return isinstance(outcome, ErrorEnvelope) and outcome._usage_refusal


def _with_models_tried(
    envelope: ErrorEnvelope, tried: list[tuple[str, ErrorEnvelope]]
) -> ErrorEnvelope:
    """The final envelope, saying which models of a chain failed and why."""
    if len(tried) < 2:
        return envelope
    shown = ", ".join(
        f"{name} ({failed.error_type}, not called: it was out)"
        if failed.attempts == 0
        else f"{name} ({failed.error_type} after {failed.attempts} attempt"
        f"{'' if failed.attempts == 1 else 's'})"
        for name, failed in tried
    )
    note = f"models tried: {shown}"
    details = f"{envelope.details}; {note}" if envelope.details else note
    return envelope.model_copy(update={"details": details})
