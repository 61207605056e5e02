"""The tool path of `ctx.call` (`ToolCall`), one call from its arguments to its data or envelope.

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
from typing import Any, Generic, TypeVar

import pydantic
import pydantic_core

from agentmesh._codec import declared_output_type
from agentmesh._engine._attempts import AttemptRules, attempt_call
from agentmesh._engine._human import MAY_HAVE_RUN, AskWithoutStore, Go, RuleAgain, ask_person
from agentmesh._engine._ledger import InFlight, Replay, ToolLedger
from agentmesh._engine._rulings import apply_ruling, blocked
from agentmesh._engine._task import TaskEngine
from agentmesh._limits import recorded
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, ErrorType, Ruling, Success
from agentmesh.errors import ToolCallFailed, UsageError
from agentmesh.policies import ToolCallEvent, ToolResultEvent
from agentmesh.tools import Tool

__all__ = ["ToolCall"]

R = TypeVar("R")


class ToolCall(Generic[R]):
    """One call of `ctx.call`, from its arguments to its data or a `ToolCallFailed`.

    Its steps, in order: `bind` and `validate` the arguments, `rule_before` (pre-tool
    policies, a person's answer, forbidden calls), `claim` in the ledger (a
    non-idempotent call), `attempt` under the retry policy with `review` (post-tool
    policies) and `adjust` (an ambiguous failure), then `finish`. The rulings go to the
    task engine's own `TaskRulings`, handed in with the engine.
    """

    __slots__ = (
        "arguments",
        "attempted_query",
        "call_id",
        "claimed",
        "ctx",
        "engine",
        "event",
        "key",
        "log",
        "rulings",
        "source",
        "tool",
        "validated",
    )

    def __init__(self, engine: TaskEngine, ctx: object, tool: Tool[..., R]) -> None:
        self.engine = engine
        self.rulings = engine.rulings
        self.ctx = ctx  # what the tool gets as its `ctx` parameter
        self.tool = tool
        self.key: str | None = None
        self.claimed: _Claim | None = None

    async def run(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> R:
        """The tool's data, or `ToolCallFailed` carrying the final envelope."""
        engine, tool = self.engine, self.tool
        if not isinstance(tool, Tool):
            raise UsageError(f"ctx.call() takes a @tool, got {tool!r}; decorate it with @tool")
        if engine.events is not None:
            await engine.events.room()  # a stream's consumer that is behind holds the run here
        self.log = engine.log.bind(tool=tool.name)
        self.source = f"{engine.subagent}/{tool.name}"
        self.bind(args, kwargs)
        await self.validate()
        await self.rule_before()
        # A non-idempotent call that completed earlier in this run is not made again.
        ledger = None if tool.idempotent else engine.ledger
        call = None if ledger is None else ledger.call_key(tool.name, self.validated)
        # One key for every attempt of this logical call (and, with a ledger, of every
        # resumed run), so the repeat is harmless.
        if tool.accepts_idempotency_key:
            self.key = (
                uuid.uuid4().hex if ledger is None or call is None else ledger.idempotency_key(call)
            )
        if ledger is not None and call is not None:
            found = await self.claim(ledger, call)
            if isinstance(found, Replay):
                # Policies rule on a replayed result as on a fresh one.
                replayed: Success[R] = Success(
                    data=found.data,
                    source=self.source,
                    attempted_query=self.attempted_query,
                    attempts=0,
                )
                return self.finish(self.review(replayed, 0))
            self.claimed = _Claim(ledger, found)
        try:
            outcome = await attempt_call(
                self.attempt,
                rules=AttemptRules(
                    tool.retry or engine.retry, engine.classifier, tool.breaker, user_code=True
                ),
                source=self.source,
                attempted_query=self.attempted_query,
                log=self.log,
                scope=engine,
                adjust=self.adjust,
                review=self.review,
                deposit=engine.deposit_for_call,
            )
        finally:
            if self.claimed is not None:
                await self.claimed.settle()
        return self.finish(outcome)

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """The arguments by parameter name; a call that does not fit fails here."""
        tool = self.tool
        try:
            self.arguments = tool.bind(args, kwargs)
        except TypeError as exc:
            arguments = {"args": list(args), **kwargs}
            raise _failure(_invalid(tool, arguments, self.source, str(exc)), self.log) from None
        # What was tried, as sent, with secrets masked: it travels into envelopes and reports.
        self.attempted_query = {"tool": tool.name, "arguments": recorded(self.arguments)}

    async def validate(self) -> None:
        """The arguments as the tool's schema coerces them; a mismatch fails here."""
        engine, tool = self.engine, self.tool
        try:
            self.validated = await tool.avalidate(self.arguments)
        except pydantic.ValidationError as exc:
            envelope = engine.classifier.classify(
                exc, source=self.source, attempted_query=self.attempted_query, attempts=0
            )
            raise _failure(envelope, self.log) from None
        # Policies rule on the values the tool will really get (coerced, read-only): a
        # rule on `amount > 500` must not be dodged by sending "900" as a string.
        self.event = ToolCallEvent(
            tool=tool.name,
            arguments=MappingProxyType(self.validated),
            impact=tool.impact,
            idempotent=tool.idempotent,
            subagent=engine.subagent,
            run_id=engine.run_id,
            task_id=engine.task_id,
            state=engine.state,
            scope=engine.scope,
        )
        self.call_id = _call_id(tool.name, self.validated)

    async def rule_before(self) -> None:
        """Pre-tool policies (a person asked where one says so) and forbidden calls."""
        engine, tool = self.engine, self.tool
        denied = engine.policies.before(self.event, self.log) if engine.policies else None
        if denied is not None and denied.action == "ask":
            went = await self.ask(denied, self.rule_again)
            self.arguments, self.validated, denied = went.arguments, went.validated, went.ruling
            self.attempted_query = {"tool": tool.name, "arguments": recorded(self.arguments)}
            self.event = dataclasses.replace(self.event, arguments=MappingProxyType(self.validated))
            self.call_id = _call_id(tool.name, self.validated)
        if denied is None:
            denied = engine.scope.forbidden(self.call_id)
        if denied is not None:
            self.rule(denied)
            raise _failure(blocked(denied, self.attempted_query, self.source), self.log)

    def rule_again(self, edited: dict[str, Any], answered: frozenset[str]) -> Ruling | None:
        """The pre-tool policies on edited arguments, the answered ones not asking again."""
        again = dataclasses.replace(self.event, arguments=MappingProxyType(edited))
        return self.engine.policies.before(again, self.log, answered)

    def rule(self, ruling: Ruling) -> None:
        """Keep a ruling on this call in the task's rulings, and tell a stream."""
        kept = self.rulings.rule(ruling, self.tool.name)
        if self.engine.events is not None:
            self.engine.events.ruling(kept)

    async def claim(self, ledger: ToolLedger, call: str) -> Replay | str:
        """The recorded result of a call this run already made, or the ledger key under
        which this process claimed it and now makes it.

        A claim found without a result means the call may have run: it is made again only
        when a person approves, under a key of its own, so that an approval too is acted
        on once. Raises `ToolCallFailed` when it must not be made now.
        """
        tool, log = self.tool, self.log
        key, again = call, 0
        while True:
            try:
                found = await ledger.claim(
                    key, tool.name, self.validated, declared_output_type(tool.fn)
                )
            except Exception as exc:
                # Whether the call already happened is unknown: acting now could act twice.
                envelope = self.engine.classifier.classify(
                    exc, source=self.source, attempted_query=self.attempted_query, attempts=0
                )
                raise _failure(envelope, log) from None
            if not isinstance(found, InFlight):
                if found is not None:
                    log.info("tool_replayed", call=key)
                return key if found is None else found
            log.warning("ledger_claim_without_result", call=key, claimed_at=str(found.claimed_at))
            await self.ask_again(found)
            # Each approval to call again is claimed under a key of its own.
            again += 1
            key = f"{call}/again/{again}"

    async def ask_again(self, found: InFlight) -> None:
        """A person's approval to make again a call that may have run; raises without one."""
        tool = self.tool
        if self.engine.scope.decisions is None:
            raise _failure(_may_have_run(tool, found, self.attempted_query, self.source), self.log)
        asked = Ruling(action="ask", reason=_why_again(tool, found), policy=MAY_HAVE_RUN)
        # The policies ruled already; only this question is asked.
        await self.ask(asked, _no_rules)

    async def ask(self, asked: Ruling, rule_again: RuleAgain) -> Go:
        """A person's answer to an ask, or the failure that stops the call."""
        engine = self.engine
        try:
            went = await ask_person(
                engine,
                engine.scope.decisions,
                self.tool,
                self.arguments,
                self.validated,
                asked,
                rule_again,
            )
        except AskWithoutStore as exc:
            engine.misuse = exc  # re-raised by Subagent.run even if the body catches it
            raise
        if isinstance(went, ErrorEnvelope):
            if went.policy is not None:
                self.rulings.rule(went.policy, self.tool.name)
            raise _failure(went, self.log)
        return went

    async def attempt(self, number: int) -> R:
        """One attempt: the tool's limits and the task's deadline around its function."""
        engine, tool, claimed = self.engine, self.tool, self.claimed
        self.log.debug("tool_attempt", attempt=number)
        async with asyncio.timeout_at(engine.deadline), tool.limiter.slot(engine.scope.rates):
            if claimed is not None:
                claimed.started = True
            data = await tool.invoke(self.validated, idempotency_key=self.key, ctx=self.ctx)
        if claimed is not None:
            await claimed.record(tool.name, self.validated, data)
        return data

    def review(
        self, outcome: Success[R] | ErrorEnvelope, number: int
    ) -> Success[R] | ErrorEnvelope:
        """Post-tool policies on an attempt's outcome (may forbid retry, escalate, withhold)."""
        policies = self.engine.policies
        if not policies:
            return outcome
        fields = {f.name: getattr(self.event, f.name) for f in dataclasses.fields(self.event)}
        ruling = policies.after(
            ToolResultEvent(**fields, outcome=outcome, attempt=number), self.log
        )
        if ruling is None:
            return outcome
        self.rule(ruling)
        if ruling.action == "escalate":
            self.rulings.escalations.append(ruling)
        return apply_ruling(outcome, ruling)

    def adjust(self, envelope: ErrorEnvelope, exc: BaseException) -> ErrorEnvelope:
        """A failed attempt's envelope, not retryable when a repeat may act twice."""
        engine = self.engine
        if self.claimed is not None:
            self.claimed.failed(self.key is None and engine.classifier.may_have_taken_effect(exc))
        return _unless_repeat_is_safe(engine, self.tool, self.call_id, envelope, exc, self.key)

    def finish(self, outcome: Success[R] | ErrorEnvelope) -> R:
        """The data of a success; a failure's "no new attempt" is kept for the run."""
        if self.engine.events is not None:
            self.engine.events.tool_called(self.attempted_query, outcome)
        if isinstance(outcome, Success):
            self.log.debug("tool_outcome", status="success", attempts=outcome.attempts)
            return outcome.data
        _remember_forbidden(self.engine, self.call_id, outcome)
        raise _failure(outcome, self.log)


def _no_rules(_edited: dict[str, Any], _answered: frozenset[str]) -> Ruling | None:
    return None


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


def _remember_forbidden(engine: TaskEngine, call_id: str, envelope: ErrorEnvelope) -> None:
    """Make a policy's "no new attempt" hold for the rest of the run, whoever asks again.

    A model that gets the envelope may simply call the same tool with the same
    arguments again; the local retry loop is not the only way a call gets repeated.
    (An ambiguous failure of a non-idempotent tool is remembered where it is found,
    in `_unless_repeat_is_safe`.)
    """
    ruling = envelope.policy
    if ruling is None:
        return
    if ruling.action == "deny" and envelope.attempts == 0:
        return  # a pre-tool deny: the same policy will deny it again by itself
    engine.scope.forbid(call_id, ruling)


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
    engine: TaskEngine,
    tool: Tool[Any, Any],
    call_id: str,
    envelope: ErrorEnvelope,
    exc: BaseException,
    key: str | None,
) -> ErrorEnvelope:
    """Not retryable when a non-idempotent tool's failure may already have taken effect.

    The call is then forbidden for the rest of the run, here where the ambiguity is
    known (a post-tool policy's ruling on the same call, if any, replaces it).
    """
    if not (
        envelope.is_retryable
        and not tool.idempotent
        and key is None
        and engine.classifier.may_have_taken_effect(exc)
    ):
        return envelope
    note = (
        f"not retried automatically: {tool.name} is not idempotent and this failure "
        "may have taken effect (declare idempotent=True or accept an idempotency_key)"
    )
    details = f"{envelope.details}; {note}" if envelope.details else note
    engine.scope.forbid(
        call_id,
        Ruling(
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
