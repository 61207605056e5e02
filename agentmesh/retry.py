"""Local retry: `RetryPolicy` (a frozen value that builds tenacity objects) and `RetryBudget`.

One logical call = one loop (`RetryPolicy.run`) over all its attempts, the first one
included; at its first retryable failure the call gets a tenacity `RetryCallState` of its
own, and tenacity's public `Retrying.iter` decides every retry (wait, stop, callbacks).
What is shared between calls holds no call's state: the stateless strategies and the one
`Retrying` that holds them.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar

from tenacity import DoSleep, RetryCallState, Retrying
from tenacity.retry import retry_base
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from agentmesh._numbers import number, whole
from agentmesh.envelope import ErrorEnvelope
from agentmesh.errors import UsageError

__all__ = ["Attempts", "RetryBudget", "RetryPolicy", "RetryResult", "Sleep"]

T = TypeVar("T")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

Sleep = Callable[[float], Awaitable[None]]
"""An async sleep; inject one in tests to record delays instead of waiting them out."""

Jitter = Literal["full", "equal", "none"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a subagent or tool retries its own transient failures, locally, before giving up.

    Only envelopes with `is_retryable` are retried. Delays grow exponentially from
    `initial_delay` by `multiplier`, capped at `max_delay`, with jitter so that clients
    failing together do not retry together. A server's `retry_after` is honoured: never
    retried earlier; and when the server asks for longer than `max_delay` or than the
    deadline leaves, the call gives up at once instead of sleeping.

    Args:
        max_attempts: attempts in all, the first included (1 means never retry).
        initial_delay: the backoff cap before the second attempt, in seconds.
        max_delay: the largest single wait, in seconds.
        multiplier: growth of the backoff cap per attempt.
        jitter: "full" waits uniform(0, cap); "equal" uniform(cap/2, cap); "none" cap.
        timeout: seconds for the whole call, attempts and waits together.
        sleep: the sleep function; tests inject one that records delays.
    """

    max_attempts: int = 3
    initial_delay: float = 0.5
    max_delay: float = 10.0
    multiplier: float = 2.0
    jitter: Jitter = "full"
    timeout: float | None = None
    sleep: Sleep = field(default=asyncio.sleep, compare=False, repr=False)

    def __post_init__(self) -> None:
        whole("RetryPolicy(max_attempts=)", self.max_attempts, at_least=1)
        number("RetryPolicy(initial_delay=)", self.initial_delay, unit="seconds")
        number("RetryPolicy(max_delay=)", self.max_delay, unit="seconds")
        number("RetryPolicy(multiplier=)", self.multiplier, at_least=1)
        if self.jitter not in ("full", "equal", "none"):
            raise UsageError(
                f"RetryPolicy(jitter=) must be 'full', 'equal' or 'none', got {self.jitter!r}"
            )
        if self.timeout is not None:
            number("RetryPolicy(timeout=)", self.timeout, above=True, unit="seconds")

    def deadline_within(self, deadline: float | None) -> float | None:
        """The earlier of `deadline` (absolute, loop time) and this policy's `timeout` from now."""
        if self.timeout is None:
            return deadline
        own = asyncio.get_running_loop().time() + self.timeout
        return own if deadline is None else min(deadline, own)

    @classmethod
    def never(cls) -> RetryPolicy:
        """A policy that makes exactly one attempt."""
        return cls(max_attempts=1)

    def backoff_cap(self, retry_number: int) -> float:
        """The largest wait before retry number `retry_number` (1 = the first retry)."""
        growth: float = self.multiplier ** (retry_number - 1)
        return float(min(self.max_delay, self.initial_delay * growth))

    def backoff(self, retry_number: int) -> float:
        """A jittered wait before retry number `retry_number`."""
        cap = self.backoff_cap(retry_number)
        if self.jitter == "full":
            return random.uniform(0, cap)
        if self.jitter == "equal":
            return random.uniform(cap / 2, cap)
        return cap

    async def run(
        self,
        attempt: Callable[[int], Awaitable[T | ErrorEnvelope]],
        *,
        retryable: Callable[[ErrorEnvelope], bool] = lambda envelope: envelope.is_retryable,
        budget: RetryBudget | None = None,
        deadline: float | None = None,
        on_retry: Callable[[ErrorEnvelope, int, float], None] | None = None,
        deposit: Callable[[], bool] | None = None,
    ) -> RetryResult[T]:
        """Run `attempt(1)`, `attempt(2)`, ... until a result, a final envelope or a stop.

        `attempt` never raises for a failure: it returns the classified envelope.
        `deadline` is absolute, in the running loop's clock; the policy's own `deadline`
        is counted from now, and the earlier of the two wins.
        `deposit`, when given, is asked before the first attempt whether this call counts
        as a first attempt for the budget (an inner call whose outer call deposited for
        it does not).
        """
        call: _Functions[T] = _Functions(attempt, retryable, on_retry)
        return await self.drive(call, budget=budget, deadline=deadline, deposit=deposit)

    async def drive(
        self,
        call: Attempts[R],
        *,
        budget: RetryBudget | None = None,
        deadline: float | None = None,
        deposit: Callable[[], bool] | None = None,
    ) -> R:
        """`run` for a call given as one object (`Attempts`): the one retry loop.

        Every attempt, the first one included, goes through the same steps: the work,
        its outcome (`succeeded` or `failed`), and for a retryable envelope tenacity's
        decision. Returns what `call.finish` makes of the last outcome.
        """
        if self.timeout is not None:  # most policies have none: no call for it
            deadline = self.deadline_within(deadline)
        # Deposit before the attempt: with many slow first attempts in flight, a fast
        # failure must already see their share of the budget.
        if budget is not None and (deposit is None or deposit()):
            budget.record_first_attempt()
        # The call's own tenacity state and the result it writes its stop reason to, made
        # at its first retryable failure: most calls succeed or fail for good at once and
        # never need one, and their result is made once, whole, at the end.
        state: RetryResult[Any] | None = None
        retry_state: _CallState | None = None
        number = 1
        try:
            while True:
                # The work awaited here, not in a coroutine per attempt: a call in flight
                # holds one frame for its whole loop.
                try:
                    data = await call.attempt(number)
                except BaseException as exc:
                    outcome = call.failed(exc, number)  # raises what must propagate
                else:
                    outcome = call.succeeded(data, number)
                if not (isinstance(outcome, ErrorEnvelope) and call.retryable(outcome)):
                    break  # a result, or a failure no retry can fix
                if retry_state is None:
                    # Not `RetryResult[Any](...)`: calling a subscripted generic costs ~1.5 us.
                    state = RetryResult(deadline)
                    retry_state = _CallState(self, call, budget, state)
                retry_state.record(outcome)
                # Tenacity decides (retry, wait, stop, callbacks) through its public
                # `iter`; this loop only awaits.
                action = retry_state.decide()
                if not isinstance(action, DoSleep):
                    break  # a stop: the last envelope is the call's result
                retry_state.prepare_for_next_attempt()
                await self.sleep(float(action))
                number = retry_state.attempt_number
        except BaseException:
            call.cut_short()
            raise
        if state is None:
            return call.finish(RetryResult(deadline, number, outcome))
        state.attempts, state.result = number, outcome
        return call.finish(state)


class Attempts(Protocol[R_co]):
    """One logical call as `RetryPolicy.drive` runs it: one object, not a function per
    step, so that a call in flight holds no bound method or closure per step."""

    def attempt(self, number: int, /) -> Awaitable[Any]:
        """The work of attempt `number`; it may raise."""
        ...

    def succeeded(self, data: Any, number: int, /) -> Any:
        """The outcome of attempt `number`, which returned `data`."""
        ...

    def failed(self, exc: BaseException, number: int, /) -> Any:
        """The outcome of attempt `number`, which raised `exc`; raises what must propagate."""
        ...

    def retryable(self, envelope: ErrorEnvelope, /) -> bool:
        """Whether this envelope may be retried."""
        ...

    def on_retry(self, envelope: ErrorEnvelope, number: int, delay: float, /) -> None:
        """Attempt `number` failed with `envelope`; the next one comes after `delay`."""
        ...

    def cut_short(self) -> None:
        """The loop was left by an exception (a cancellation, an interrupt)."""
        ...

    def finish(self, result: RetryResult[Any], /) -> R_co:
        """What the call returns, from its last outcome, attempts and stop reason."""
        ...


class _Functions(Generic[T]):
    """`run`'s functions as one `Attempts`: an attempt returns its outcome, never raises."""

    __slots__ = ("_on_retry", "attempt", "retryable")

    def __init__(
        self,
        attempt: Callable[[int], Awaitable[T | ErrorEnvelope]],
        retryable: Callable[[ErrorEnvelope], bool],
        on_retry: Callable[[ErrorEnvelope, int, float], None] | None,
    ) -> None:
        self.attempt = attempt
        self.retryable = retryable
        self._on_retry = on_retry

    def succeeded(self, data: Any, number: int) -> Any:
        return data

    def failed(self, exc: BaseException, number: int) -> Any:
        raise exc

    def on_retry(self, envelope: ErrorEnvelope, number: int, delay: float) -> None:
        if self._on_retry is not None:
            self._on_retry(envelope, number, delay)

    def cut_short(self) -> None:
        pass

    def finish(self, result: RetryResult[Any]) -> RetryResult[T]:
        return result


@dataclass(slots=True)
class RetryResult(Generic[T]):
    """What one retried call ended with: its last result, attempts, and why it stopped."""

    deadline: float | None = None
    attempts: int = 0
    result: T | ErrorEnvelope | None = None
    stop_reason: str | None = None


class _CallState(RetryCallState):
    """Tenacity's state of one retried call, and what this call's strategies need.

    The attempt number, outcome and times are this object's; the shared `_RETRYING` only
    decides. Nothing of the call is left in a cycle: it is freed by reference counting.
    """

    def __init__(
        self,
        policy: RetryPolicy,
        call: Attempts[Any],
        budget: RetryBudget | None,
        result: RetryResult[Any],
    ) -> None:
        super().__init__(_RETRYING, fn=None, args=(), kwargs={})
        # Tenacity's statistics (per thread, shared, never read by us) must exist in this
        # thread before `iter` updates them.
        _RETRYING.begin()
        self.policy = policy
        self.call = call
        self.budget = budget
        self.result = result
        # The last attempt's envelope (None for a result), as the strategies read it: the
        # same as `outcome.result()`, without a lock taken for every look.
        self.envelope: ErrorEnvelope | None = None

    def record(self, outcome: object) -> None:
        """The outcome of the attempt just made (attempts return envelopes, never raise)."""
        self.set_result(outcome)
        self.envelope = outcome if isinstance(outcome, ErrorEnvelope) else None

    def decide(self) -> object:
        """Tenacity's next action for this call: a `DoSleep` to retry, else the result."""
        return self.retry_object.iter(self)


def _call_state(retry_state: RetryCallState) -> _CallState:
    if not isinstance(retry_state, _CallState):
        raise TypeError(f"agentmesh's retry strategies need a _CallState, got {retry_state!r}")
    return retry_state


class _Retry(retry_base):
    """Retry an envelope that the call's `retryable` accepts."""

    def __call__(self, retry_state: RetryCallState) -> bool:
        call = _call_state(retry_state)
        return call.envelope is not None and call.call.retryable(call.envelope)


class _Backoff(wait_base):
    """Jittered exponential backoff that never undercuts the server's retry-after."""

    def __call__(self, retry_state: RetryCallState) -> float:
        call = _call_state(retry_state)
        delay = call.policy.backoff(retry_state.attempt_number)
        retry_after = None if call.envelope is None else call.envelope.retry_after
        return delay if retry_after is None else max(delay, retry_after)


class _Stop(stop_base):
    """Stops on attempts, on a retry-after or a wait past the deadline, or on an empty budget.

    Tenacity computes the upcoming wait before asking whether to stop, so the deadline
    check sees the real sleep. The budget is asked last, so a token is spent only for a
    retry that will really happen.
    """

    def __call__(self, retry_state: RetryCallState) -> bool:
        call = _call_state(retry_state)
        reason = self._reason(retry_state, call)
        call.result.stop_reason = reason
        return reason is not None

    def _reason(self, retry_state: RetryCallState, call: _CallState) -> str | None:
        policy = call.policy
        if retry_state.attempt_number >= policy.max_attempts:
            return f"gave up after {retry_state.attempt_number} attempts"
        retry_after = None if call.envelope is None else call.envelope.retry_after
        if retry_after is not None and retry_after > policy.max_delay:
            return (
                f"gave up at once: the server asked to retry after {retry_after:g}s, "
                f"more than max_delay {policy.max_delay:g}s"
            )
        deadline = call.result.deadline
        if deadline is not None:
            remaining = deadline - asyncio.get_running_loop().time()
            if retry_state.upcoming_sleep >= remaining:
                return (
                    f"gave up: waiting {retry_state.upcoming_sleep:.3g}s would pass the "
                    f"deadline ({max(remaining, 0):.3g}s left)"
                )
        if call.budget is not None and not call.budget.try_spend():
            return "gave up: the run's retry budget is spent"
        return None


def _announce(retry_state: RetryCallState) -> None:
    """Before a retry's wait: tell the caller (its `on_retry`)."""
    call = _call_state(retry_state)
    if call.envelope is not None:
        call.call.on_retry(call.envelope, retry_state.attempt_number, retry_state.upcoming_sleep)


def _last_result(retry_state: RetryCallState) -> Any:
    """On a stop: the last attempt's envelope is the call's result (no `RetryError`)."""
    assert retry_state.outcome is not None  # tenacity sets it before calling back
    return retry_state.outcome.result()


# The strategies, stateless (each reads its call's `_CallState`): one of each serves
# every call, and so does the `Retrying` that holds them. Tenacity keeps only scratch on
# it (a round's actions and statistics, per thread, which we never read), and `iter`
# runs a round to its end without awaiting: two calls of one event loop never share a
# round. A `Retrying` per call would form a cycle with its own round's actions, and only
# tenacity's internal `iter_state` could break it.
_STOP = _Stop()
_BACKOFF = _Backoff()
_RETRY = _Retry()
_RETRYING = Retrying(
    stop=_STOP,
    wait=_BACKOFF,
    retry=_RETRY,
    before_sleep=_announce,
    retry_error_callback=_last_result,
)


class RetryBudget:
    """A token bucket shared by every subagent of a run, so an outage cannot multiply load.

    In the spirit of gRPC retry throttling and Finagle's retry budgets: the bucket starts
    with `reserve` tokens, every first attempt deposits `ratio` of a token, every retry
    spends one. With the defaults a run makes at most 20% more retries than first
    attempts, plus 100: against a source that is down for good, 1,000 calls cost at most
    1,300 attempts instead of `max_attempts` x 1,000.
    """

    __slots__ = ("denied", "first_attempts", "ratio", "reserve", "retries")

    def __init__(self, ratio: float = 0.2, reserve: float = 100) -> None:
        self.ratio = number("RetryBudget(ratio=)", ratio)
        # An infinite reserve is `RetryBudget.unlimited()`: it never refuses a retry.
        self.reserve = number("RetryBudget(reserve=)", reserve, infinite=True)
        self.first_attempts = 0
        self.retries = 0
        self.denied = 0

    @property
    def tokens(self) -> float:
        """Retries still allowed now (computed, not accumulated, so floats do not drift)."""
        return self.reserve + self.ratio * self.first_attempts - self.retries

    @classmethod
    def unlimited(cls) -> RetryBudget:
        """A budget that never refuses a retry (each call's RetryPolicy still bounds it)."""
        return cls(ratio=0, reserve=float("inf"))

    def record_first_attempt(self) -> None:
        self.first_attempts += 1

    def try_spend(self) -> bool:
        """Take one token for a retry; False when the budget is spent."""
        if self.tokens >= 1 - 1e-9:
            self.retries += 1
            return True
        self.denied += 1
        return False

    def __repr__(self) -> str:
        return (
            f"RetryBudget(ratio={self.ratio}, reserve={self.reserve}, tokens={self.tokens:.1f}, "
            f"first_attempts={self.first_attempts}, retries={self.retries}, denied={self.denied})"
        )
