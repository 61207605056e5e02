"""`ModelHealth`: what the tasks of a run know about each model's health, together.

One per run (`RunScope.model_health`), or one shared by several runs when you pass the
same object to each (`Coordinator(model_health=...)`). A model is known by its endpoint
and its name (a model's `endpoint`, its base URL, when it has one, and its `name`):
two `AnthropicModel("claude-sonnet-4-5")` objects are one model, the same name behind
two endpoints two models. Per model it keeps:

* a `CircuitBreaker`: opened by overload or unavailability (`overloaded`, `unavailable`;
  never by a validation, permission or business error), half-open after `reset_after`
  seconds to let exactly one call probe; while it is open, and while another task
  probes, the model is *out*: a `FallbackModel` goes to its next model at once;
* a quota: a model that answered `quota_exhausted` is out until its quota resets (the
  envelope's `retry_after`), or for as long as this object lives when nobody said;
* a `CallWindow`: how many of its calls may be in flight, adapted to 429/529 answers;
* a `RateGate`: its rate limits (requests, input and output tokens per minute) as its
  answers' `anthropic-ratelimit-*` headers report them; a call waits until it fits.

Each decision is one step with no `await` inside (`claim`), so of 64 tasks asking at
once exactly one gets the probe and exactly `window` get a slot. The engine drives it
(`claim`, `wait`, `release`); you read it (`state`, `concurrency`).
"""

from __future__ import annotations

import datetime
import functools
import itertools
import math
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Final

from agentmesh._logging import get_logger
from agentmesh._numbers import number, whole
from agentmesh.breaker import BreakerState, CircuitBreaker
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, ErrorType, Success
from agentmesh.errors import UsageError
from agentmesh.models._base import Model
from agentmesh.models._rates import RateGate, heard_headers
from agentmesh.models._window import CallWindow

__all__ = ["ModelHealth"]

QUOTA_EXHAUSTED: Final = ErrorType.QUOTA_EXHAUSTED

# What says the model itself is down: these open its breaker.
_DOWN: Final = frozenset({"overloaded", "unavailable"})
# What says too many calls are in flight: these shrink its window.
_TOO_MANY: Final = frozenset({"overloaded", "rate_limited"})


@functools.cache
def _answered() -> Success[None]:
    """What the breaker counts as an answer: one value, made at the first answer (a
    `Success` at import would build its schema for every program that imports us)."""
    return Success(data=None, source="model", attempted_query="")


def health_key(model: Model) -> str:
    """The name a model's health is kept under: its endpoint and its model name."""
    # A provider's model says where it calls (`AnthropicModel.endpoint`); a model without
    # one (a scripted model, a user's own) is known by its name alone.
    endpoint = getattr(model, "endpoint", None)
    return f"{endpoint}#{model.name}" if isinstance(endpoint, str) else model.name


@dataclass(slots=True)
class _Model:
    """One model's breaker, quota and window, and its calls in flight."""

    name: str
    breaker: CircuitBreaker
    window: CallWindow
    log: Any
    # Why the model is out and since when (wall clock, for the report); None: it is not.
    reason: str | None = None
    since: datetime.datetime | None = None
    quota_until: float | None = None  # monotonic; inf: for as long as this object lives
    quota_until_wall: datetime.datetime | None = None
    # ticket -> (the window's epoch when it started, whether it is the breaker's probe)
    tickets: dict[int, tuple[int, bool]] = field(default_factory=dict)
    rates: RateGate = field(default_factory=RateGate)


class ModelHealth:
    """The health of the models a run calls, shared by all of its tasks.

    Pass one to `Coordinator(model_health=...)` to share it with every run of that
    coordinator (and of any other coordinator given the same object); by default each
    run has its own.

    Args:
        failure_threshold: consecutive overload or unavailable answers that open a
            model's breaker.
        reset_after: seconds a model stays out before one call probes it.
        initial_concurrency: calls of one model in flight at first (slow start).
        max_concurrency: calls of one model in flight at most; None: no bound but the
            window's.
        clock: a monotonic clock in seconds; tests inject one.
    """

    __slots__ = (
        "_clock",
        "_models",
        "_tickets",
        "failure_threshold",
        "initial_concurrency",
        "max_concurrency",
        "reset_after",
    )

    def __init__(
        self,
        *,
        failure_threshold: int = 3,
        reset_after: float = 30.0,
        initial_concurrency: int = 4,
        max_concurrency: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.failure_threshold = whole(
            "ModelHealth(failure_threshold=)", failure_threshold, at_least=1
        )
        self.reset_after = number(
            "ModelHealth(reset_after=)", reset_after, above=True, unit="seconds"
        )
        self.initial_concurrency = whole(
            "ModelHealth(initial_concurrency=)", initial_concurrency, at_least=1
        )
        self.max_concurrency = (
            None
            if max_concurrency is None
            else whole("ModelHealth(max_concurrency=)", max_concurrency, at_least=1)
        )
        if not callable(clock):
            raise UsageError(f"ModelHealth(clock=) takes a function, got {clock!r}")
        self._clock = clock
        self._models: dict[str, _Model] = {}
        self._tickets = itertools.count()

    def _of(self, model: Model) -> _Model:
        key = health_key(model)
        known = self._models.get(key)
        if known is None:
            known = self._models[key] = _Model(
                name=model.name,
                breaker=CircuitBreaker(
                    failure_threshold=self.failure_threshold,
                    reset_after=self.reset_after,
                    name=model.name,
                    clock=self._clock,
                ),
                window=CallWindow(self.initial_concurrency, self.max_concurrency),
                log=get_logger(model=model.name, endpoint=key),
            )
        return known

    # --- what you read -------------------------------------------------------------------

    @staticmethod
    def key_of(model: Model) -> str:
        """The name `model`'s health is kept under: its endpoint and its model name
        (its `name` alone for a model that is not an `AnthropicModel`)."""
        return health_key(model)

    def state(self, model: Model) -> BreakerState:
        """The model's breaker state now (closed for a model never called)."""
        known = self._models.get(health_key(model))
        return BreakerState.CLOSED if known is None else known.breaker.state

    def concurrency(self) -> dict[str, int]:
        """Each called model's window: the calls it may have in flight now, by name."""
        return {known.name: known.window.size for known in self._models.values()}

    def outage(self, model: Model) -> tuple[datetime.datetime, datetime.datetime | None] | None:
        """Since when the model has been out and until when (None: unknown); None if up."""
        known = self._models.get(health_key(model))
        if known is None or known.since is None:
            return None
        return known.since, known.quota_until_wall

    def back_in(self, model: Model) -> float | None:
        """Seconds until the model may be called again (0: now); None: not known."""
        known = self._models.get(health_key(model))
        if known is None:
            return 0.0
        if known.quota_until is not None:
            left = known.quota_until - self._clock()
            if left > 0:
                return None if math.isinf(left) else left
        return known.breaker.probe_in()

    # --- what the engine does, each in one step -----------------------------------------

    def claim(self, model: Model) -> int | str | None:
        """May a call of `model` start now? Decided and taken in one step.

        Returns a ticket (an int: the call may start; give it back to `release`), the
        error type that keeps the model out (a str: do not call it), or None (its
        window is full: `wait`, then claim again).
        """
        known = self._of(model)
        if known.quota_until is not None:
            if self._clock() < known.quota_until:
                return QUOTA_EXHAUSTED
            known.quota_until = known.quota_until_wall = None
            known.log.info("model_quota_reset")
            if known.breaker.state is BreakerState.CLOSED:
                known.reason = known.since = None
        state = known.breaker.state
        if state is BreakerState.OPEN:
            return known.reason or "unavailable"
        if state is BreakerState.HALF_OPEN:
            if not known.breaker.try_acquire():
                return known.reason or "unavailable"  # another task probes: keep away
            known.window.take()
            known.log.info("model_probe_claimed", reason=known.reason)
            return self._ticket(known, probe=True)
        if known.window.try_take():
            return self._ticket(known, probe=False)
        return None

    def _ticket(self, known: _Model, *, probe: bool) -> int:
        ticket = next(self._tickets)
        known.tickets[ticket] = (known.window.epoch, probe)
        return ticket

    async def wait(self, model: Model, *, first: bool = False) -> None:
        """Until a slot of the model's window may be free, or the model goes out."""
        window = self._of(model).window
        waiter = window.park(first=first)
        try:
            await waiter
        except BaseException:
            window.leave(waiter)
            raise

    def rate_headers(self) -> AbstractContextManager[dict[str, str]]:
        """The rate-limit headers the model call made inside reports (`AnthropicModel`
        reports every answer's, a failed one's too): {} when none."""
        return heard_headers()

    def admit_rates(
        self, model: Model, needs: Callable[[], Mapping[str, int]]
    ) -> float | Mapping[str, int] | None:
        """Take one call's `needs` (per rate-limit family: `requests`, `input-tokens`,
        `output-tokens`) from the model's reported limits, in one step: what was taken,
        the seconds until they fit, or None when no limit is known (admitted)."""
        rates = self._of(model).rates
        return rates.admit(needs, self._clock() + rates.skew)

    def settle_rates(
        self,
        model: Model,
        headers: Mapping[str, str],
        *,
        unspent: Mapping[str, int] | None = None,
    ) -> None:
        """What a call's answer (or failure: a 429's headers say what is left and when it
        returns) said of the model's rate limits, and what it took and did not spend."""
        rates = self._of(model).rates
        now = self._clock() + rates.skew
        if headers:
            rates.report(headers, now, time.time())
        if unspent:
            rates.settle(unspent, now)

    def rates_slept(self, model: Model, unslept: float) -> None:
        """A wait for the model's rate limits returned `unslept` seconds early (a test's
        recorded sleep): its limits' clock moves on as far."""
        if unslept > 0:
            self._of(model).rates.skew += unslept

    def release(self, model: Model, ticket: int, failure: ErrorEnvelope | None) -> None:
        """The call of `ticket` ended: answered (`failure` None) or failed with `failure`."""
        known = self._of(model)
        epoch, probe = known.tickets.pop(ticket)
        if failure is None:
            self._answered(known, probe)
        elif failure.error_type == QUOTA_EXHAUSTED:
            self._take_out(known, failure.retry_after, probe)
        else:
            self._failed(known, failure, epoch, probe)
        known.window.give_back()

    def cancel(self, model: Model, ticket: int) -> None:
        """The call of `ticket` ended without a word on the model (cancelled)."""
        known = self._of(model)
        _, probe = known.tickets.pop(ticket)
        if probe:
            known.breaker.release()  # another task may probe
        known.window.give_back()

    def _answered(self, known: _Model, probe: bool) -> None:
        was_out = known.breaker.state is not BreakerState.CLOSED
        known.breaker.record(_answered())
        if was_out and known.breaker.state is BreakerState.CLOSED:
            known.log.info("model_back", probe=probe, out_since=_shown(known.since))
            known.reason = known.since = None
            known.window.restart()
            return
        if known.window.answered():
            known.log.info("model_window_grown", window=known.window.size)

    def _failed(self, known: _Model, failure: ErrorEnvelope, epoch: int, probe: bool) -> None:
        kind = failure.error_type
        if kind in _TOO_MANY and known.window.overloaded(epoch):
            known.log.info("model_window_shrunk", window=known.window.size, error_type=kind)
        if kind not in _DOWN or failure.error_category is not ErrorCategory.TRANSIENT:
            if probe:
                known.breaker.release()  # no word on the model's health: probe again
            known.log.debug("model_call_failed", error_type=kind, probe=probe)
            return
        if not probe and known.breaker.state is not BreakerState.CLOSED:
            # A call started before the model went out: the outage is known already,
            # and counting it again would put the probe off or take another's probe.
            return
        known.breaker.record(failure)
        if known.breaker.state is not BreakerState.OPEN:
            return
        if known.since is None:
            known.since, known.reason = _now(), kind
        known.log.info(
            "model_out",
            reason=known.reason,
            since=_shown(known.since),
            probe_failed=probe,
            probe_in=known.breaker.reset_after,
        )
        known.window.wake_all()  # the waiters skip it now instead of waiting

    def _take_out(self, known: _Model, retry_after: float | None, probe: bool) -> None:
        if probe:
            known.breaker.release()
        seconds = math.inf if retry_after is None else max(0.0, retry_after)
        until = self._clock() + seconds
        if known.quota_until is not None and known.quota_until >= until:
            return  # already out for as long
        known.quota_until = until
        known.since = known.since or _now()
        known.reason = QUOTA_EXHAUSTED
        known.quota_until_wall = (
            None if math.isinf(seconds) else _now() + datetime.timedelta(seconds=seconds)
        )
        known.log.info(
            "model_out",
            reason=QUOTA_EXHAUSTED,
            since=_shown(known.since),
            until=_shown(known.quota_until_wall),
        )
        known.window.wake_all()

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{known.name}: {known.breaker.state.value}, window {known.window.size}"
            for known in self._models.values()
        )
        return f"<ModelHealth {shown or 'no model called'}>"


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _shown(moment: datetime.datetime | None) -> str | None:
    return None if moment is None else moment.isoformat(timespec="seconds")
