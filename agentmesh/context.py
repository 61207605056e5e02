"""`Context`: what a subagent gets to do its work — tool calls, progress, deadline, logger.

`ctx.call(tool, **args)` is the tool path of the design:

    pre-tool policies (may deny) -> input validation -> limits -> local retry
    -> classification -> post-tool policies (may forbid retry / escalate / withhold)

It returns the tool's data, or raises `ToolCallFailed` carrying the final envelope.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import uuid
from collections.abc import Iterable
from types import MappingProxyType
from typing import Any, ParamSpec, TypeVar

import pydantic
import pydantic_core

from agentmesh._attempts import RetryTally, attempt_call
from agentmesh._limits import recorded
from agentmesh._tracing import outcome_attributes, span
from agentmesh.checkpoints._codec import declared_output_type
from agentmesh.checkpoints._ledger import ProgressSaver, Replay, ToolLedger
from agentmesh.checkpoints._store import CheckpointStore
from agentmesh.classify import Classifier
from agentmesh.envelope import (
    MAX_PARTIAL_JSON_BYTES,
    ErrorCategory,
    ErrorEnvelope,
    ErrorType,
    PartialResults,
    PolicyVerdict,
    Success,
)
from agentmesh.errors import ToolCallFailed, UsageError
from agentmesh.policies import PolicyChain, ToolCallEvent, ToolResultEvent
from agentmesh.retry import RetryPolicy
from agentmesh.scope import RunScope
from agentmesh.task import Task
from agentmesh.tools import Tool

__all__ = ["Context", "PartialRecorder", "apply_verdict", "merge_partials"]

P = ParamSpec("P")
R = TypeVar("R")


class PartialRecorder:
    """Progress of one task across all its attempts, without duplicates."""

    __slots__ = ("_completed", "_findings", "_json_bytes", "_pending")

    def __init__(self) -> None:
        self._completed: dict[str, None] = {}
        self._pending: dict[str, None] = {}
        # By dedup key, in the order recorded: one container, not a list and a set (an
        # empty set alone is 216 bytes, kept by every task in flight).
        self._findings: dict[bytes, Any] = {}
        self._json_bytes = 0  # of the findings, known from their dedup keys

    def record(
        self,
        findings: Iterable[Any] | Any = (),
        *,
        completed: str | Iterable[str] | None = None,
        pending: str | Iterable[str] | None = None,
    ) -> None:
        # A dict or a string is one finding; iterating it would record keys or characters.
        items = [findings] if isinstance(findings, dict | str | bytes) else findings
        if not isinstance(items, Iterable):
            items = [items]
        for item in items:
            try:
                key = pydantic_core.to_json(item, fallback=repr)
            except pydantic_core.PydanticSerializationError:
                key = repr(item).encode()
            if key not in self._findings:
                self._findings[key] = item
                self._json_bytes += len(key) + 1
        for name in _as_names(pending, "pending"):
            if name not in self._completed:
                self._pending[name] = None
        for name in _as_names(completed, "completed"):
            self._completed[name] = None
            self._pending.pop(name, None)

    @property
    def completed(self) -> tuple[str, ...]:
        """The sources done so far, including those restored from a checkpoint."""
        return tuple(self._completed)

    @property
    def pending(self) -> tuple[str, ...]:
        return tuple(self._pending)

    @property
    def findings(self) -> tuple[Any, ...]:
        return tuple(self._findings.values())

    def snapshot(self) -> PartialResults | None:
        """The progress so far, or None when nothing was recorded."""
        if not (self._completed or self._pending or self._findings):
            return None
        completed, pending = tuple(self._completed), tuple(self._pending)
        findings = tuple(self._findings.values())
        if self._json_bytes <= MAX_PARTIAL_JSON_BYTES:
            # Within the bound, which the dedup keys already measured: validating would
            # serialise every finding again, on every snapshot (quadratic over a run).
            return PartialResults.model_construct(
                completed=completed, pending=pending, findings=findings
            )
        # Over it: the validator cuts the findings and says so.
        return PartialResults(completed=completed, pending=pending, findings=findings)


def merge_partials(*blocks: PartialResults | None) -> PartialResults | None:
    """One block from several, in order, without duplicates; None when all are None."""
    merged = PartialRecorder()
    for block in blocks:
        if block is not None:
            merged.record(block.findings, completed=block.completed, pending=block.pending)
    return merged.snapshot()


def _as_names(value: str | Iterable[str] | None, argument: str) -> Iterable[str]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    names = tuple(value)
    if not all(isinstance(name, str) for name in names):
        raise UsageError(f"record_partial({argument}=) takes source names (str), got {names!r}")
    return names


def apply_verdict(
    outcome: Success[Any] | ErrorEnvelope, verdict: PolicyVerdict
) -> Success[Any] | ErrorEnvelope:
    """The outcome as a policy ruled it: never retryable again, the policy named in it.

    On a result, only `deny` withholds it; `escalate` keeps the data (the side effect
    happened: dropping its evidence would help no one) and flags it; `forbid_retry` has
    nothing to stop.
    """
    note = f"{verdict.action} by policy {verdict.policy}: {verdict.reason}"
    if isinstance(outcome, Success) and verdict.action == "forbid_retry":
        return outcome
    if isinstance(outcome, Success) and verdict.action == "escalate":
        return outcome.model_copy(update={"policy": verdict})
    if isinstance(outcome, Success):
        # A withheld result: the caller must not see the data the policy blocked.
        return ErrorEnvelope(
            error_category=ErrorCategory.PERMISSION,
            error_type=ErrorType.POLICY_BLOCKED,
            is_retryable=False,
            message=f"result withheld by policy {verdict.policy}: {verdict.reason}",
            attempted_query=outcome.attempted_query,
            source=outcome.source,
            attempts=outcome.attempts,
            details=note,
            policy=verdict,
        )
    details = f"{outcome.details}; {note}" if outcome.details else note
    return outcome.model_copy(update={"is_retryable": False, "details": details, "policy": verdict})


def _call_id(tool: str, arguments: dict[str, Any]) -> str:
    """One identity for "the same call": the tool and its validated arguments."""
    encoded = pydantic_core.to_json(arguments, fallback=repr)
    return f"{tool}:{hashlib.sha256(encoded).hexdigest()[:32]}"


class Context:
    """Everything a subagent's body needs for one task: tools, progress, time, identity.

    Created by `Subagent.run` (one per task run); subagents never build one themselves.
    `scope` is the run's `RunScope`: what every task of the run shares.
    """

    def __init__(
        self,
        *,
        task: Task,
        subagent: str,
        scope: RunScope,
        task_id: str,
        retry: RetryPolicy,
        policies: PolicyChain,
        classifier: Classifier,
        deadline: float | None,
        state: dict[str, Any],
        log: Any,
        store: CheckpointStore | None = None,
        checkpoint: bool = False,
    ) -> None:
        self.task = task
        self.subagent = subagent
        self.scope = scope
        self.run_id = scope.run_id
        self.task_id = task_id
        self.retry = retry
        self.policies = policies
        self.classifier = classifier
        self.budget = scope.budget
        self.deadline = deadline
        self.state = state
        self.log = log
        self.attempt = 0
        # The subagent's run deposited one first attempt into the retry budget; its first
        # source call (tool or model turn) is that attempt, later ones deposit their own.
        # One deposit per task, not one per layer: a storm stays at 1.3x, not 1.5x.
        self._deposit_covered = True
        self.partials = PartialRecorder()
        # Escalations a post-tool policy called for: they reach the outcome even when
        # the body goes on and returns a result.
        self.escalations: list[PolicyVerdict] = []
        # Every policy ruling on this task's calls (in order, each once) and every local
        # retry: they reach the outcome even when the body recovers or says "Done.".
        self._rulings: dict[PolicyVerdict, None] | None = None
        self.retries = RetryTally()
        self.store = store
        # Checkpoints of this task live under "<subagent>/<task id>" in the run.
        namespace = f"{subagent}/{task_id}"
        run_id = scope.run_id
        self.ledger = None if store is None else ToolLedger(store, run_id, namespace, log)
        self._progress = (
            ProgressSaver(store, run_id, namespace, log)
            if store is not None and checkpoint
            else None
        )

    @property
    def checkpointing(self) -> bool:
        """Whether recorded progress is saved to a store (`checkpoint=True` and a store)."""
        return self._progress is not None

    def start_attempt(self, number: int) -> None:
        """Called by `Subagent.run` before each attempt of the task."""
        self.attempt = number
        if self.ledger is not None:
            self.ledger.new_attempt()

    async def restore_partials(self) -> bool:
        """Load the progress a previous run of this task saved; True when there was some.

        Called by `Subagent.run` for a subagent with `checkpoint=True`. A store that cannot
        be read is logged and the task starts over: redoing work is safe, the ledger
        still refuses to repeat a side effect it cannot rule out.
        """
        if self._progress is None:
            return False
        try:
            saved = await self._progress.load()
        except Exception as exc:
            self.log.warning("partials_not_restored", error=f"{type(exc).__name__}: {exc}")
            return False
        if saved is None:
            return False
        self.partials.record(saved.findings, completed=saved.completed, pending=saved.pending)
        self.log.info("partials_restored", completed=saved.completed, pending=saved.pending)
        return True

    async def save_partials(self) -> None:
        """Wait until the recorded progress is saved (a no-op without `checkpoint=True`).

        Saving starts by itself at every `record_partial`; await this before a long step
        that does not go through `ctx.call` to be sure the progress is durable first.
        """
        if self._progress is not None:
            await self._progress.flush()

    @property
    def rulings(self) -> tuple[PolicyVerdict, ...]:
        """The policy rulings on this task's tool calls so far, each with its tool."""
        return tuple(self._rulings or ())

    def annotate(self, outcome: Success[Any] | ErrorEnvelope) -> Success[Any] | ErrorEnvelope:
        """The task's outcome carrying its rulings and local retries (called by `Subagent.run`).

        Counts already on the outcome (a nested subagent's, passed on) are kept and added.
        """
        if self._rulings is None and self.retries.counts() is None:
            return outcome
        update: dict[str, Any] = {}
        if self._rulings is not None:
            update["rulings"] = tuple(dict.fromkeys((*(outcome.rulings or ()), *self._rulings)))
        if outcome.retries:
            self.retries.merge(outcome.retries)
        retries = self.retries.counts()
        if retries is not None:
            update["retries"] = retries
        return outcome.model_copy(update=update)

    def adopt(self, outcome: Success[Any] | ErrorEnvelope) -> None:
        """Take in what a nested run reported: its rulings, its retries, an escalation.

        A subagent used as a tool runs in a context of its own; without this, a lead that
        recovers (or simply answers "Done.") would drop what the nested run was told.
        """
        for verdict in outcome.rulings or ():
            if self._rulings is None:
                self._rulings = {}
            self._rulings[verdict] = None
        if outcome.retries:
            self.retries.merge(outcome.retries)
        if isinstance(outcome, Success) and outcome.policy is not None:
            self.escalations.append(outcome.policy)

    def _rule(self, verdict: PolicyVerdict, tool: str) -> None:
        if self._rulings is None:
            self._rulings = {}
        self._rulings[verdict.model_copy(update={"tool": tool})] = None

    def deposit_for_call(self) -> bool:
        """Whether a source call now deposits into the retry budget (see `__init__`)."""
        if self._deposit_covered:
            self._deposit_covered = False
            return False
        return True

    def remaining(self) -> float | None:
        """Seconds left before the deadline, or None when there is none."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - asyncio.get_running_loop().time())

    def record_partial(
        self,
        findings: Iterable[Any] | Any = (),
        *,
        completed: str | Iterable[str] | None = None,
        pending: str | Iterable[str] | None = None,
    ) -> None:
        """Record progress that must survive a later failure.

        Args:
            findings: results found so far (a list; a single dict or string is one finding).
            completed: the source(s) now done; they leave `pending`.
            pending: the source(s) still to do.
        """
        self.partials.record(findings, completed=completed, pending=pending)
        self.log.debug("partial_recorded", completed=completed, pending=pending)
        if self._progress is not None:
            self._progress.schedule(self.partials.snapshot())

    async def call(self, tool: Tool[..., R], /, *args: Any, **kwargs: Any) -> R:
        """Call `tool` through policies, validation, limits and local retry.

        The arguments are checked against the tool's schema when the call is made (a
        mismatch is a validation envelope); statically only the result type is, since
        the tool's injected parameters (`ctx`, `idempotency_key`) are not the caller's.

        Returns the tool's data. Raises `ToolCallFailed` (carrying the envelope) when the
        call failed for good; catch it to go on with other sources, or let it propagate to
        make it the subagent's outcome.
        """
        with span(
            "tool",
            tool=getattr(tool, "name", None),
            subagent=self.subagent,
            run_id=self.run_id,
            task_id=self.task_id,
        ) as current:
            try:
                data = await self._call(tool, args, kwargs)
            except ToolCallFailed as failed:
                if current is not None:
                    current.set_attributes(outcome_attributes(failed.envelope))
                raise
            if current is not None:
                current.set_attributes({"agentmesh.outcome": "success"})
            return data

    async def _call(self, tool: Tool[..., R], args: tuple[Any, ...], kwargs: dict[str, Any]) -> R:
        if not isinstance(tool, Tool):
            raise UsageError(f"ctx.call() takes a @tool, got {tool!r}; decorate it with @tool")
        log = self.log.bind(tool=tool.name)
        source = f"{self.subagent}/{tool.name}"
        try:
            arguments = tool.bind(args, kwargs)
        except TypeError as exc:
            arguments = {"args": list(args), **kwargs}
            raise self._failure(self._invalid(tool, arguments, source, str(exc)), log) from None
        # What was tried, as sent, with secrets masked: it travels into envelopes and reports.
        attempted_query: dict[str, Any] = {"tool": tool.name, "arguments": recorded(arguments)}
        try:
            validated = tool.validate(arguments)
        except pydantic.ValidationError as exc:
            envelope = self.classifier.classify(
                exc, source=source, attempted_query=attempted_query, attempts=0
            )
            raise self._failure(envelope, log) from None
        # Policies rule on the values the tool will really get (coerced, read-only): a
        # rule on `amount > 500` must not be dodged by sending "900" as a string.
        event = ToolCallEvent(
            tool=tool.name,
            arguments=MappingProxyType(validated),
            impact=tool.impact,
            idempotent=tool.idempotent,
            subagent=self.subagent,
            run_id=self.run_id,
            task_id=self.task_id,
            state=self.state,
            scope=self.scope,
        )
        call_id = _call_id(tool.name, validated)
        denied = self.policies.before(event, log) if self.policies else None
        if denied is None:
            denied = self.scope.forbidden(call_id)
        if denied is not None:
            self._rule(denied, tool.name)
            raise self._failure(self._blocked(denied, attempted_query, source), log)

        # A non-idempotent call that completed earlier in this run is not made again.
        ledger = None if tool.idempotent else self.ledger
        call = None if ledger is None else ledger.call_key(tool.name, validated)
        # One key for every attempt of this logical call (and, with a ledger, of every
        # resumed run), so the repeat is harmless.
        key = None
        if tool.accepts_idempotency_key:
            key = (
                uuid.uuid4().hex if ledger is None or call is None else ledger.idempotency_key(call)
            )

        async def work(number: int) -> R:
            log.debug("tool_attempt", attempt=number)
            async with asyncio.timeout_at(self.deadline), tool.limiter.slot(self.scope.rates):
                data = await tool.invoke(validated, idempotency_key=key, ctx=self)
            if ledger is not None and call is not None:
                await ledger.record(call, tool.name, validated, data)
            return data

        def review(outcome: Success[R] | ErrorEnvelope, number: int) -> Success[R] | ErrorEnvelope:
            if not self.policies:
                return outcome
            verdict = self.policies.after(
                ToolResultEvent(**_fields(event), outcome=outcome, attempt=number), log
            )
            if verdict is None:
                return outcome
            self._rule(verdict, tool.name)
            if verdict.action == "escalate":
                self.escalations.append(verdict)
            return apply_verdict(outcome, verdict)

        replayed = None
        if ledger is not None and call is not None:
            replayed = await self._replay(ledger, call, tool, source, attempted_query, log)
        if replayed is not None:
            # Policies rule on a replayed result as on a fresh one.
            replayed_outcome: Success[R] = Success(
                data=replayed.data, source=source, attempted_query=attempted_query, attempts=0
            )
            outcome = review(replayed_outcome, 0)
        else:
            outcome = await attempt_call(
                work,
                policy=tool.retry or self.retry,
                classifier=self.classifier,
                source=source,
                attempted_query=attempted_query,
                budget=self.budget,
                deadline=self.deadline,
                log=log,
                adjust=lambda envelope, exc: self._unless_repeat_is_safe(
                    tool, call_id, envelope, exc, key
                ),
                review=review,
                breaker=tool.breaker,
                deposit=self.deposit_for_call,
                user_code=True,
                tally=self.retries,
            )
        if isinstance(outcome, Success):
            log.debug("tool_outcome", status="success", attempts=outcome.attempts)
            return outcome.data
        self._remember_forbidden(call_id, outcome)
        raise self._failure(outcome, log)

    def _remember_forbidden(self, call_id: str, envelope: ErrorEnvelope) -> None:
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
        self.scope.forbid(call_id, verdict)

    async def _replay(
        self,
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
            envelope = self.classifier.classify(
                exc, source=source, attempted_query=attempted_query, attempts=0
            )
            raise self._failure(envelope, log) from None
        if replayed is not None:
            log.info("tool_replayed", call=call)
        return replayed

    def _unless_repeat_is_safe(
        self,
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
            and self.classifier.may_have_taken_effect(exc)
        ):
            return envelope
        note = (
            f"not retried automatically: {tool.name} is not idempotent and this failure "
            "may have taken effect (declare idempotent=True or accept an idempotency_key)"
        )
        details = f"{envelope.details}; {note}" if envelope.details else note
        self.scope.forbid(
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
        self, tool: Tool[Any, Any], arguments: dict[str, Any], source: str, reason: str
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

    def _blocked(
        self, verdict: PolicyVerdict, attempted_query: dict[str, Any], source: str
    ) -> ErrorEnvelope:
        return ErrorEnvelope(
            error_category=ErrorCategory.PERMISSION,
            error_type=ErrorType.POLICY_BLOCKED,
            is_retryable=False,
            message=f"call denied by policy {verdict.policy}: {verdict.reason}",
            attempted_query=attempted_query,
            source=source,
            attempts=0,
            policy=verdict,
        )

    def _failure(self, envelope: ErrorEnvelope, log: Any) -> ToolCallFailed:
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
