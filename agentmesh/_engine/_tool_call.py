"""The tool path of `ctx.call`, one call from its arguments to its data or envelope.

bind and validate -> pre-tool policies and forbidden calls (may deny)
-> ledger claim (a non-idempotent call: replayed, made, or asked about again)
-> attempts (limits, local retry, classification)
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

from agentmesh._engine._attempts import AttemptRules, attempt_call
from agentmesh._engine._human import MAY_HAVE_RUN, AskWithoutStore, Go, ask_person
from agentmesh._engine._rulings import apply_verdict, blocked
from agentmesh._limits import recorded
from agentmesh.checkpoints._codec import declared_output_type
from agentmesh.checkpoints._ledger import InFlight, Replay, ToolLedger
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

        def rule_again(edited: dict[str, Any], answered: frozenset[str]) -> PolicyVerdict | None:
            again = dataclasses.replace(event, arguments=MappingProxyType(edited))
            return ctx.policies.before(again, log, answered)

        went = await _ask(ctx, tool, arguments, validated, denied, rule_again, log)
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
    claimed: _Claim | None = None

    async def work(number: int) -> R:
        log.debug("tool_attempt", attempt=number)
        async with asyncio.timeout_at(ctx.deadline), tool.limiter.slot(ctx.scope.rates):
            if claimed is not None:
                claimed.started = True
            data = await tool.invoke(validated, idempotency_key=key, ctx=ctx)
        if claimed is not None:
            await claimed.record(tool.name, validated, data)
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

    def adjust(envelope: ErrorEnvelope, exc: BaseException) -> ErrorEnvelope:
        if claimed is not None:
            claimed.failed(key is None and ctx.classifier.may_have_taken_effect(exc))
        return _unless_repeat_is_safe(ctx, tool, call_id, envelope, exc, key)

    replayed = None
    if ledger is not None and call is not None:
        found = await _claim(ctx, ledger, call, tool, arguments, validated, attempted_query, log)
        if isinstance(found, Replay):
            replayed = found
        else:
            claimed = _Claim(ledger, found)
    if replayed is not None:
        # Policies rule on a replayed result as on a fresh one.
        replayed_outcome: Success[R] = Success(
            data=replayed.data, source=source, attempted_query=attempted_query, attempts=0
        )
        outcome = review(replayed_outcome, 0)
    else:
        try:
            outcome = await attempt_call(
                work,
                rules=AttemptRules(
                    tool.retry or ctx.retry, ctx.classifier, tool.breaker, user_code=True
                ),
                source=source,
                attempted_query=attempted_query,
                log=log,
                scope=ctx,
                adjust=adjust,
                review=review,
                deposit=ctx.deposit_for_call,
            )
        finally:
            if claimed is not None:
                await claimed.settle()
    if isinstance(outcome, Success):
        log.debug("tool_outcome", status="success", attempts=outcome.attempts)
        return outcome.data
    _remember_forbidden(ctx, call_id, outcome)
    raise _failure(outcome, log)


class _Claim:
    """A non-idempotent call this process claimed in the ledger before making it.

    Its result replaces the claim. A call given up before the tool could act (refused
    by a limit, failed before it started, or failed in a way that cannot have acted)
    gives the claim up, so the call may be made again. After the tool started and was
    cut in a way that may have acted (a timeout, a dropped connection, a cancellation),
    or when the process dies, the claim stays without a result, and the call is not
    made again without a person.
    """

    __slots__ = ("key", "ledger", "may_have_acted", "returned", "started")

    def __init__(self, ledger: ToolLedger, key: str) -> None:
        self.ledger = ledger
        self.key = key
        self.started = False
        self.returned = False
        self.may_have_acted = False

    async def record(self, tool: str, validated: dict[str, Any], data: Any) -> None:
        self.returned = True
        await self.ledger.record(self.key, tool, validated, data)

    def failed(self, ambiguous: bool) -> None:
        """An attempt failed; `ambiguous`: in a way that may have acted."""
        self.may_have_acted = self.may_have_acted or (self.started and ambiguous)
        self.started = False

    async def settle(self) -> None:
        """Give the claim up when the tool cannot have acted; else keep it."""
        if not (self.returned or self.started or self.may_have_acted):
            await self.ledger.release(self.key)


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


async def _claim(
    ctx: Context,
    ledger: ToolLedger,
    call: str,
    tool: Tool[Any, Any],
    arguments: dict[str, Any],
    validated: dict[str, Any],
    attempted_query: dict[str, Any],
    log: Any,
) -> Replay | str:
    """The recorded result of a call this run already made, or the ledger key under
    which this process claimed it and now makes it.

    A claim found without a result means the call may have run: it is made again only
    when a person approves, under a key of its own, so that an approval too is acted
    on once. Raises `ToolCallFailed` when it must not be made now.
    """
    source = f"{ctx.subagent}/{tool.name}"
    key, again = call, 0
    while True:
        try:
            found = await ledger.claim(key, tool.name, validated, declared_output_type(tool.fn))
        except Exception as exc:
            # Whether the call already happened is unknown: acting now could act twice.
            envelope = ctx.classifier.classify(
                exc, source=source, attempted_query=attempted_query, attempts=0
            )
            raise _failure(envelope, log) from None
        if not isinstance(found, InFlight):
            if found is not None:
                log.info("tool_replayed", call=key)
            return key if found is None else found
        log.warning("ledger_claim_without_result", call=key, claimed_at=str(found.claimed_at))
        await _ask_again(ctx, tool, arguments, validated, found, attempted_query, log)
        # Each approval to call again is claimed under a key of its own.
        again += 1
        key = f"{call}/again/{again}"


async def _ask_again(
    ctx: Context,
    tool: Tool[Any, Any],
    arguments: dict[str, Any],
    validated: dict[str, Any],
    found: InFlight,
    attempted_query: dict[str, Any],
    log: Any,
) -> None:
    """A person's approval to make again a call that may have run; raises without one."""
    source = f"{ctx.subagent}/{tool.name}"
    if ctx.scope.decisions is None:
        raise _failure(_may_have_run(tool, found, attempted_query, source), log)
    verdict = PolicyVerdict(action="ask", reason=_why_again(tool, found), policy=MAY_HAVE_RUN)
    # The policies ruled already; only this question is asked.
    await _ask(ctx, tool, arguments, validated, verdict, lambda _args, _answered: None, log)


def _why_again(tool: Tool[Any, Any], found: InFlight) -> str:
    return (
        f"the call of {tool.name} may have run: it was claimed at "
        f"{found.claimed_at:%Y-%m-%d %H:%M:%S} UTC and no result was recorded (it may be "
        "under way in another process, or a process or the call stopped between the claim "
        "and the result); approve to call it again"
    )


def _may_have_run(
    tool: Tool[Any, Any],
    found: InFlight,
    attempted_query: dict[str, Any],
    source: str,
) -> ErrorEnvelope:
    """The envelope of a call not made again, with nobody to ask whether to make it."""
    return ErrorEnvelope(
        error_category=ErrorCategory.PERMISSION,
        error_type="call_may_have_run",
        is_retryable=False,
        message=(
            f"{_why_again(tool, found).removesuffix('; approve to call it again')}; it is not "
            "made again without a person's approval (a Coordinator with store= asks for one)"
        ),
        attempted_query=attempted_query,
        source=source,
        attempts=0,
    )


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
    rule_again: Any,
    log: Any,
) -> Go:
    """A person's answer to an ask, or the failure that stops the call."""
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
