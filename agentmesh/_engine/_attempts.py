"""One logical call, attempted under a RetryPolicy: the loop every layer shares.

A tool call, a subagent run and a model turn all go the same way: run the work, turn an
exception into an envelope (a `CallFailed` passes its envelope on as final), let the
caller review the outcome (policies), retry what is retryable, and say in the final
envelope why retrying stopped.

What is not a failure of the work passes through untouched: the task's own cancellation,
`KeyboardInterrupt`, `SystemExit`, `GeneratorExit` (a group holding one of them too),
and, in strict mode, a programming error in user code. Any other exception, a stray
`CancelledError` or another `BaseException` included, is the work's failure: an envelope.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from agentmesh._tracing import record_outcome, span, tracing
from agentmesh.breaker import CircuitBreaker
from agentmesh.classify import Classifier, is_strict
from agentmesh.envelope import ErrorEnvelope, RetryCount, Success
from agentmesh.errors import CallFailed
from agentmesh.retry import RetryBudget, RetryPolicy, RetryResult

if TYPE_CHECKING:
    from agentmesh._engine._events import TaskEvents

__all__ = ["AttemptRules", "AttemptScope", "RetryTally", "attempt_call", "propagates"]

T = TypeVar("T")


class RetryTally:
    """The local retries of one task, counted by source, error type and how the call ended.

    One per task (its `Context`); the counts exist only once a retry happened, so a call
    that succeeds at once pays for nothing here. A call's retries are counted when it
    ends, recovered or not (`gave_up`).
    """

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str, bool], int] | None = None

    def add(self, source: str, error_type: str, count: int = 1, *, gave_up: bool = False) -> None:
        if self._counts is None:
            self._counts = {}
        key = (source, error_type, gave_up)
        self._counts[key] = self._counts.get(key, 0) + count

    def __bool__(self) -> bool:
        """Whether any retry was counted (without building the counts)."""
        return self._counts is not None

    def merge(self, retries: tuple[RetryCount, ...] | None) -> None:
        """Add counts already on an outcome (a nested subagent's, a tool's)."""
        for item in retries or ():
            self.add(item.source, item.error_type, item.count, gave_up=item.gave_up)

    def counts(self) -> tuple[RetryCount, ...] | None:
        """The retries so far, in the order first seen; None when there was none."""
        if self._counts is None:
            return None
        return tuple(
            RetryCount(source=source, error_type=error_type, count=count, gave_up=gave_up)
            for (source, error_type, gave_up), count in self._counts.items()
        )


@dataclasses.dataclass(frozen=True, slots=True)
class AttemptRules:
    """How one source's attempts are judged: made once per source where it can be.

    Args:
        policy: the retry policy.
        classifier: turns the work's exceptions into envelopes.
        breaker: fails attempts fast while the source is known to be down.
        user_code: the work runs the user's body or tool function, so strict mode applies.
    """

    policy: RetryPolicy
    classifier: Classifier
    breaker: CircuitBreaker | None = None
    user_code: bool = False


class AttemptScope(Protocol):
    """What a call shares with its task (a `Context` is one): where its retries count.

    `budget` is the run's retry budget, `deadline` the task's (absolute, in the loop's
    clock), `retries` counts each retry by source and error type, and `events` gets an
    `AttemptFailed` for every failed attempt (None when nobody streams the run).
    """

    @property
    def budget(self) -> RetryBudget | None: ...
    @property
    def deadline(self) -> float | None: ...
    @property
    def retries(self) -> RetryTally: ...
    @property
    def events(self) -> TaskEvents | None: ...


def attempt_call(
    work: Callable[[int], Awaitable[T]],
    *,
    rules: AttemptRules,
    source: str,
    attempted_query: str | dict[str, Any],
    log: Any,
    scope: AttemptScope | None = None,
    adjust: Callable[[ErrorEnvelope, BaseException], ErrorEnvelope] | None = None,
    review: Callable[[Success[T] | ErrorEnvelope, int], Success[T] | ErrorEnvelope] | None = None,
    deposit: Callable[[], bool] | None = None,
) -> Coroutine[Any, Any, Success[T] | ErrorEnvelope]:
    """Attempt `work(attempt_number)` until it succeeds, fails for good, or must stop.

    Returns the policy's retry loop (`RetryPolicy.drive`) for this call, to await: no
    coroutine of its own around it.

    Args:
        rules: the source's retry policy, classifier, breaker and strictness.
        source, attempted_query: what an envelope says was tried, and by whom.
        scope: the task's budget, deadline, retry tally and events; None for a call of
            no task (no budget, no deadline). With the policy's own `timeout` the earlier
            deadline bounds the waits and every attempt in flight.
        adjust: refines the classified envelope of an exception (e.g. not retryable for a
            non-idempotent tool whose failure may have taken effect).
        review: sees every attempt's outcome and may replace it (post-tool policies).
        deposit: asked before the first attempt whether this call deposits into the
            retry budget (see `RetryPolicy.run`); by default it does.
    """
    policy = rules.policy
    if scope is None:
        budget = deadline = tally = events = None
    else:
        budget, deadline, tally, events = scope.budget, scope.deadline, scope.retries, scope.events
    if policy.timeout is not None:
        deadline = policy.deadline_within(deadline)
        assert deadline is not None  # the policy's own timeout gives one
        work = _bounded(work, deadline)
    call = _Call(work, rules, source, attempted_query, log, adjust, review, tally, events)
    return policy.drive(call, budget=budget, deadline=deadline, deposit=deposit)


class _Call(Generic[T]):
    """One logical call's attempts, as `RetryPolicy.drive` runs them (`Attempts`): one
    small object, not a closure per step.

    A suspended call keeps what it needs here; closures would keep a cell per variable
    and a function per step for every call in flight. Without a breaker or a tracer the
    loop awaits the work itself; with one, each attempt is a `guarded` coroutine that
    returns its outcome made.
    """

    __slots__ = (
        "adjust",
        "attempt",
        "attempted_query",
        "breaker",
        "classifier",
        "events",
        "final",
        "guarded",
        "log",
        "retried",
        "review",
        "source",
        "tally",
        "user_code",
        "work",
    )

    def __init__(
        self,
        work: Callable[[int], Awaitable[T]],
        rules: AttemptRules,
        source: str,
        attempted_query: str | dict[str, Any],
        log: Any,
        adjust: Callable[[ErrorEnvelope, BaseException], ErrorEnvelope] | None,
        review: Callable[[Success[T] | ErrorEnvelope, int], Success[T] | ErrorEnvelope] | None,
        tally: RetryTally | None,
        events: TaskEvents | None,
    ) -> None:
        self.work = work
        # The rules' parts, held directly: each attempt reads them without a hop.
        self.classifier = rules.classifier
        self.breaker = rules.breaker
        self.user_code = rules.user_code
        self.source = source
        self.attempted_query = attempted_query
        self.log = log
        self.adjust = adjust
        self.review = review
        self.tally = tally
        # The error types retried, in order: tallied once the call has ended.
        self.retried: list[str] | None = None
        self.events = events
        self.final = False  # a CallFailed was retried where it happened: never again here
        # Asked once per call: with neither a breaker nor a tracer there is nothing to
        # enter around an attempt.
        self.guarded = guarded = self.breaker is not None or tracing()
        # The work of attempt `number` (its outcome made already when `guarded`): the
        # work itself when unguarded, no method of ours between the loop and it.
        self.attempt: Callable[[int], Awaitable[Any]] = self.attempt_guarded if guarded else work

    def retryable(self, envelope: ErrorEnvelope) -> bool:
        return envelope.is_retryable and not self.final

    def succeeded(self, data: Any, number: int) -> Success[T] | ErrorEnvelope:
        if self.guarded:
            outcome: Success[T] | ErrorEnvelope = data  # made by `attempt_guarded`
            return outcome
        # `success` written out: unguarded means no breaker to tell, and most calls end here.
        outcome = Success(
            data=data, source=self.source, attempted_query=self.attempted_query, attempts=number
        )
        return self.review(outcome, number) if self.review is not None else outcome

    def failed(self, exc: BaseException, number: int) -> ErrorEnvelope | Success[T]:
        if self.guarded:
            raise exc  # `attempt_guarded` let only what must propagate through
        outcome = self.envelope(exc, number)
        return self.review(outcome, number) if self.review is not None else outcome

    async def attempt_guarded(self, number: int) -> Success[T] | ErrorEnvelope:
        """Attempt `number` behind the breaker and in a span, its outcome reviewed."""
        breaker = self.breaker
        outcome: Success[T] | ErrorEnvelope
        if breaker is not None and not breaker.try_acquire():
            self.log.debug(
                "breaker_rejected", attempt=number, probe_in=round(breaker.probe_in(), 3)
            )
            outcome = breaker.rejection(
                source=self.source, attempted_query=self.attempted_query, attempts=number
            )
        else:
            with span("attempt", source=self.source, attempt=number) as current:
                try:
                    data = await self.work(number)
                except BaseException as exc:
                    outcome = self.envelope(exc, number)
                else:
                    outcome = self.success(data, number)
                record_outcome(current, outcome)
        return self.review(outcome, number) if self.review is not None else outcome

    def success(self, data: T, number: int) -> Success[T]:
        """The outcome of attempt `number`, which returned `data`."""
        # Validated: with `data: Any` that is cheaper than `model_construct`'s loop.
        outcome: Success[T] = Success(
            data=data, source=self.source, attempted_query=self.attempted_query, attempts=number
        )
        if self.breaker is not None:
            self.breaker.record(outcome)
        return outcome

    def envelope(self, exc: BaseException, number: int) -> ErrorEnvelope:
        """The envelope of attempt `number`, which raised `exc` (called while handling it).

        What must not become an envelope is raised again, as it was.
        """
        if isinstance(exc, CallFailed):
            self.final = True
            outcome = exc.envelope
        else:
            classifier = self.classifier
            if propagates(exc, classifier, user_code=self.user_code):
                if self.breaker is not None:
                    self.breaker.release()  # says nothing of the source's health
                raise exc
            outcome = classifier.classify(
                exc, source=self.source, attempted_query=self.attempted_query, attempts=number
            )
            if self.adjust is not None:
                outcome = self.adjust(outcome, exc)
            # Per-attempt events are DEBUG: the caller logs one INFO outcome per call.
            self.log.debug(
                "error_classified",
                attempt=number,
                category=outcome.error_category.value,
                error_type=outcome.error_type,
                retryable=outcome.is_retryable,
            )
        if self.breaker is not None:
            self.breaker.record(outcome)
        return outcome

    def on_retry(self, envelope: ErrorEnvelope, number: int, delay: float) -> None:
        if self.tally is not None:
            if self.retried is None:
                self.retried = []
            self.retried.append(envelope.error_type)
        if self.events is not None:
            self.events.attempt_failed(self.source, envelope, number, delay)
        self.log.debug(
            "retry_scheduled", attempt=number, delay=round(delay, 4), error_type=envelope.error_type
        )

    def cut_short(self) -> None:
        if self.retried is not None:
            self.tally_retries(gave_up=True)  # its retries did not bring it back

    def finish(self, result: RetryResult[Any]) -> Success[T] | ErrorEnvelope:
        """The call's outcome: its retries tallied, a stop reason said, a failure told."""
        outcome: Success[T] | ErrorEnvelope | None = result.result
        assert outcome is not None  # the loop always makes at least one attempt
        if self.retried is not None:  # most calls succeed at once: nothing to tally
            self.tally_retries(gave_up=isinstance(outcome, ErrorEnvelope))
        if type(outcome) is Success:
            return outcome
        if isinstance(outcome, ErrorEnvelope) and result.stop_reason and outcome.is_retryable:
            details = "; ".join(filter(None, [outcome.details, result.stop_reason]))
            outcome = outcome.model_copy(update={"details": details})
        if self.events is not None and isinstance(outcome, ErrorEnvelope):
            self.events.attempt_failed(self.source, outcome, outcome.attempts, None)
        return outcome

    def tally_retries(self, *, gave_up: bool) -> None:
        """Count the call's retries in the task's tally, saying whether the call recovered."""
        if self.tally is None or self.retried is None:
            return
        for error_type in self.retried:
            self.tally.add(self.source, error_type, gave_up=gave_up)
        self.retried = None


def propagates(exc: BaseException, classifier: Classifier, *, user_code: bool) -> bool:
    """Whether `exc` must reach the caller as is instead of becoming an envelope."""
    if isinstance(exc, Exception):
        return user_code and classifier.is_programming_error(exc) and is_strict()
    return _interrupts(exc)


def _interrupts(exc: BaseException) -> bool:
    """The process or the task is being stopped: never a failure of the work."""
    if isinstance(exc, KeyboardInterrupt | SystemExit | GeneratorExit):
        return True
    if isinstance(exc, asyncio.CancelledError):
        # Structure, not text: a real cancellation is counted on the task until it is
        # handled (asyncio.timeout uncancels its own); one a body raised is not.
        task = asyncio.current_task()
        return task is None or task.cancelling() > 0
    if isinstance(exc, BaseExceptionGroup):
        return any(_interrupts(leaf) for leaf in exc.exceptions)
    return False


def _bounded(work: Callable[[int], Awaitable[T]], deadline: float) -> Callable[[int], Awaitable[T]]:
    async def bounded(number: int) -> T:
        async with asyncio.timeout_at(deadline):
            return await work(number)

    return bounded
