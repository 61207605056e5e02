"""The tool path of `ctx.call`, one call from its arguments to its data or envelope.

bind and validate -> pre-tool policies and forbidden calls (may deny)
-> ledger replay or attempts (limits, local retry, classification)
-> post-tool policies (may forbid retry / escalate / withhold) -> forbidden-call memory
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import uuid
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

import pydantic
import pydantic_core

from agentmesh._attempts import AttemptRules, attempt_call
from agentmesh._human import AskWithoutStore, Go, ask_person
from agentmesh._limits import recorded
from agentmesh._rulings import apply_verdict, blocked
from agentmesh.checkpoints._codec import declared_output_type
from agentmesh.checkpoints._ledger import Replay, ToolLedger
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, ErrorType, PolicyVerdict, Success
from agentmesh.errors import ToolCallFailed, UsageError
from agentmesh.policies import ToolCallEvent, ToolResultEvent
from agentmesh.tools import Tool

if TYPE_CHECKING:
    from agentmesh.context import Context

__all__ = ["call_tool"]

R = TypeVar("R")


async def call_tool(
    ctx: Context, tool: Tool[..., R], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> R:
    """The tool's data, or `ToolCallFailed` carrying the final envelope."""
    if not isinstance(tool, Tool):
        raise UsageError(f"ctx.call() takes a @tool, got {tool!r}; decorate it with @tool")
    if ctx.events is not None:
        await ctx.events.room()  # a stream's consumer that is behind holds the run here
    log = ctx.log.bind(tool=tool.name)
    source = f"{ctx.subagent}/{tool.name}"
    try:
        arguments = tool.bind(args, kwargs)
    except TypeError as exc:
        arguments = {"args": list(args), **kwargs}
        raise _failure(_invalid(tool, arguments, source, str(exc)), log) from None
    # What was tried, as sent, with secrets masked: it travels into envelopes and reports.
    attempted_query: dict[str, Any] = {"tool": tool.name, "arguments": recorded(arguments)}
    try:
        validated = await tool.avalidate(arguments)
    except pydantic.ValidationError as exc:
        envelope = ctx.classifier.classify(
            exc, source=source, attempted_query=attempted_query, attempts=0
        )
        raise _failure(envelope, log) from None
    # Policies rule on the values the tool will really get (coerced, read-only): a
    # rule on `amount > 500` must not be dodged by sending "900" as a string.
    event = ToolCallEvent(
        tool=tool.name,
        arguments=MappingProxyType(validated),
        impact=tool.impact,
        idempotent=tool.idempotent,
        subagent=ctx.subagent,
        run_id=ctx.run_id,
        task_id=ctx.task_id,
        state=ctx.state,
        scope=ctx.scope,
    )
    call_id = _call_id(tool.name, validated)
    denied = ctx.policies.before(event, log) if ctx.policies else None
    if denied is not None and denied.action == "ask":
        went = await _ask(ctx, tool, arguments, validated, denied, event, log)
        arguments, validated, denied = went.arguments, went.validated, went.verdict
        attempted_query = {"tool": tool.name, "arguments": recorded(arguments)}
        event = dataclasses.replace(event, arguments=MappingProxyType(validated))
        call_id = _call_id(tool.name, validated)
    if denied is None:
        denied = ctx.scope.forbidden(call_id)
    if denied is not None:
        ruling = ctx._verdicts.rule(denied, tool.name)
        if ctx.events is not None:
            ctx.events.ruling(ruling)
        raise _failure(blocked(denied, attempted_query, source), log)

    # A non-idempotent call that completed earlier in this run is not made again.
    ledger = None if tool.idempotent else ctx.ledger
    call = None if ledger is None else ledger.call_key(tool.name, validated)
    # One key for every attempt of this logical call (and, with a ledger, of every
    # resumed run), so the repeat is harmless.
    key = None
    if tool.accepts_idempotency_key:
        key = uuid.uuid4().hex if ledger is None or call is None else ledger.idempotency_key(call)

    async def work(number: int) -> R:
        log.debug("tool_attempt", attempt=number)
        async with asyncio.timeout_at(ctx.deadline), tool.limiter.slot(ctx.scope.rates):
            data = await tool.invoke(validated, idempotency_key=key, ctx=ctx)
        if ledger is not None and call is not None:
            await ledger.record(call, tool.name, validated, data)
        return data

    def review(outcome: Success[R] | ErrorEnvelope, number: int) -> Success[R] | ErrorEnvelope:
        if not ctx.policies:
            return outcome
        verdict = ctx.policies.after(
            ToolResultEvent(**_fields(event), outcome=outcome, attempt=number), log
        )
        if verdict is None:
            return outcome
        ruling = ctx._verdicts.rule(verdict, tool.name)
        if ctx.events is not None:
            ctx.events.ruling(ruling)
        if verdict.action == "escalate":
            ctx.escalations.append(verdict)
        return apply_verdict(outcome, verdict)

    replayed = None
    if ledger is not None and call is not None:
        replayed = await _replay(ctx, ledger, call, tool, source, attempted_query, log)
    if replayed is not None:
        # Policies rule on a replayed result as on a fresh one.
        replayed_outcome: Success[R] = Success(
            data=replayed.data, source=source, attempted_query=attempted_query, attempts=0
        )
        outcome = review(replayed_outcome, 0)
    else:
        outcome = await attempt_call(
            work,
            rules=AttemptRules(
                tool.retry or ctx.retry, ctx.classifier, tool.breaker, user_code=True
            ),
            source=source,
            attempted_query=attempted_query,
            log=log,
            scope=ctx,
            adjust=lambda envelope, exc: _unless_repeat_is_safe(
                ctx, tool, call_id, envelope, exc, key
            ),
            review=review,
            deposit=ctx.deposit_for_call,
        )
    if isinstance(outcome, Success):
        log.debug("tool_outcome", status="success", attempts=outcome.attempts)
        return outcome.data
    _remember_forbidden(ctx, call_id, outcome)
    raise _failure(outcome, log)


def _call_id(tool: str, arguments: dict[str, Any]) -> str:
    """One identity for "the same call": the tool and its validated arguments."""
    encoded = pydantic_core.to_json(arguments, fallback=repr)
    return f"{tool}:{hashlib.sha256(encoded).hexdigest()[:32]}"


def _remember_forbidden(ctx: Context, call_id: str, envelope: ErrorEnvelope) -> None:
    """Make a policy's "no new attempt" hold for the rest of the run, whoever asks again.

    A model that gets the envelope may simply call the same tool with the same
    arguments again; the local retry loop is not the only way a call gets repeated.
    (An ambiguous failure of a non-idempotent tool is remembered where it is found,
    in `_unless_repeat_is_safe`.)
    """
    verdict = envelope.policy
    if verdict is None:
        return
    if verdict.action == "deny" and envelope.attempts == 0:
        return  # a pre-tool deny: the same policy will deny it again by itself
    ctx.scope.forbid(call_id, verdict)


async def _replay(
    ctx: Context,
    ledger: ToolLedger,
    call: str,
    tool: Tool[Any, Any],
    source: str,
    attempted_query: dict[str, Any],
    log: Any,
) -> Replay | None:
    """The recorded result of a call this run already made, or None."""
    try:
        replayed = await ledger.replay(call, declared_output_type(tool.fn))
    except Exception as exc:
        # Whether the call already happened is unknown: acting now could act twice.
        envelope = ctx.classifier.classify(
            exc, source=source, attempted_query=attempted_query, attempts=0
        )
        raise _failure(envelope, log) from None
    if replayed is not None:
        log.info("tool_replayed", call=call)
    return replayed


def _unless_repeat_is_safe(
    ctx: Context,
    tool: Tool[Any, Any],
    call_id: str,
    envelope: ErrorEnvelope,
    exc: BaseException,
    key: str | None,
) -> ErrorEnvelope:
    """Not retryable when a non-idempotent tool's failure may already have taken effect.

    The call is then forbidden for the rest of the run, here where the ambiguity is
    known (a post-tool policy's verdict on the same call, if any, replaces it).
    """
    if not (
        envelope.is_retryable
        and not tool.idempotent
        and key is None
        and ctx.classifier.may_have_taken_effect(exc)
    ):
        return envelope
    note = (
        f"not retried automatically: {tool.name} is not idempotent and this failure "
        "may have taken effect (declare idempotent=True or accept an idempotency_key)"
    )
    details = f"{envelope.details}; {note}" if envelope.details else note
    ctx.scope.forbid(
        call_id,
        PolicyVerdict(
            action="forbid_retry",
            reason=f"{tool.name} is not idempotent and an earlier identical call "
            "may have taken effect",
            policy="agentmesh.idempotency",
        ),
    )
    return envelope.model_copy(update={"is_retryable": False, "details": details})


def _invalid(
    tool: Tool[Any, Any], arguments: dict[str, Any], source: str, reason: str
) -> ErrorEnvelope:
    return ErrorEnvelope(
        error_category=ErrorCategory.VALIDATION,
        error_type=ErrorType.INVALID_INPUT,
        is_retryable=False,
        message=f"invalid arguments for {tool.name}: {reason}",
        attempted_query={"tool": tool.name, "arguments": recorded(arguments)},
        source=source,
        attempts=0,
    )


def _failure(envelope: ErrorEnvelope, log: Any) -> ToolCallFailed:
    log.info(
        "tool_outcome",
        status="error",
        category=envelope.error_category.value,
        error_type=envelope.error_type,
        retryable=envelope.is_retryable,
        attempts=envelope.attempts,
    )
    return ToolCallFailed(envelope)


def _fields(event: ToolCallEvent) -> dict[str, Any]:
    return {field.name: getattr(event, field.name) for field in dataclasses.fields(event)}


async def _ask(
    ctx: Context,
    tool: Tool[Any, Any],
    arguments: dict[str, Any],
    validated: dict[str, Any],
    verdict: PolicyVerdict,
    event: ToolCallEvent,
    log: Any,
) -> Go:
    """A person's answer to a policy's ask, or the failure that stops the call."""

    def rule_again(edited: dict[str, Any], answered: frozenset[str]) -> PolicyVerdict | None:
        again = dataclasses.replace(event, arguments=MappingProxyType(edited))
        return ctx.policies.before(again, log, answered)

    try:
        went = await ask_person(ctx, tool, arguments, validated, verdict, rule_again)
    except AskWithoutStore as exc:
        ctx.misuse = exc  # re-raised by Subagent.run even if the body catches it
        raise
    if isinstance(went, ErrorEnvelope):
        if went.policy is not None:
            ctx._verdicts.rule(went.policy, tool.name)
        raise _failure(went, log)
    return went
