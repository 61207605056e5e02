"""`CircuitBreaker`: stop calling a source that keeps failing, probe it now and then.

    closed ──(threshold consecutive transient failures)──► open
    open ──(reset_after elapsed)──► half-open: one probe call is let through
    half-open ──probe succeeds──► closed        half-open ──probe fails──► open

While open, calls fail fast with a transient `unavailable` envelope that says the breaker
is open and when it will probe (`retryAfter`), so the local retry loop gives up at once
instead of hammering the source. Validation, business and permission errors say nothing
about the source's health: they never trip a breaker (nor reset its count).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from typing import Any

from agentmesh._logging import get_logger
from agentmesh._numbers import number, whole
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, Success

__all__ = ["BreakerState", "CircuitBreaker"]


class BreakerState(enum.StrEnum):
    """Where a breaker stands: closed (calls pass), open (fail fast), half open (one probe)."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    """Fails fast while a source is down. Share one per source (tool or subagent).

    Args:
        failure_threshold: consecutive transient failures that open the breaker.
        reset_after: seconds the breaker stays open before it lets one probe through.
        name: shown in envelopes and logs (default: the tool's or subagent's name).
        clock: a monotonic clock in seconds; tests inject one.
    """

    def __init__(
        self,
        *,
        failure_threshold: int = 5,
        reset_after: float = 30.0,
        name: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.failure_threshold = whole(
            "CircuitBreaker(failure_threshold=)", failure_threshold, at_least=1
        )
        self.reset_after = number(
            "CircuitBreaker(reset_after=)", reset_after, above=True, unit="seconds"
        )
        self.name = name
        self._clock = clock
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._opened_at = 0.0
        self._probing = False

    @property
    def _log(self) -> Any:
        # Looked up when an event happens: breakers are made at import time, before the
        # application has configured logging.
        return get_logger(breaker=self.name)

    @property
    def state(self) -> BreakerState:
        """The state now (an open breaker whose cool-down passed reads as half-open)."""
        if self._state is BreakerState.OPEN and self._clock() - self._opened_at >= self.reset_after:
            return BreakerState.HALF_OPEN
        return self._state

    @property
    def consecutive_failures(self) -> int:
        return self._failures

    def probe_in(self) -> float:
        """Seconds until the breaker lets a probe through (0 when it would now)."""
        if self._state is BreakerState.CLOSED:
            return 0.0
        return max(0.0, self._opened_at + self.reset_after - self._clock())

    def try_acquire(self) -> bool:
        """May a call go through now? In half-open, only one probe at a time may."""
        state = self.state
        if state is BreakerState.CLOSED:
            return True
        if state is BreakerState.HALF_OPEN and not self._probing:
            self._state = BreakerState.HALF_OPEN
            self._probing = True
            self._log.info("breaker_half_open", probe=True)
            return True
        return False

    def record(self, outcome: Success[Any] | ErrorEnvelope) -> None:
        """Count an attempt's outcome; only transient failures count against the source."""
        probing, self._probing = self._probing, False
        if isinstance(outcome, Success):
            if self._state is not BreakerState.CLOSED:
                self._log.info("breaker_closed", after_probe=probing)
            self._state = BreakerState.CLOSED
            self._failures = 0
            return
        if outcome.error_category is not ErrorCategory.TRANSIENT:
            return
        self._failures += 1
        if probing or self._failures >= self.failure_threshold:
            self._state = BreakerState.OPEN
            self._opened_at = self._clock()
            self._log.warning(
                "breaker_opened",
                failures=self._failures,
                probe_failed=probing,
                reset_after=self.reset_after,
            )

    def release(self) -> None:
        """Give back a probe slot whose call ended without an outcome (cancelled)."""
        self._probing = False

    def rejection(
        self, *, source: str, attempted_query: str | dict[str, object], attempts: int
    ) -> ErrorEnvelope:
        """The fast failure for a call the open breaker did not let through."""
        wait = self.probe_in()
        what = self.name or source
        return ErrorEnvelope(
            error_category=ErrorCategory.TRANSIENT,
            error_type="unavailable",
            is_retryable=True,
            message=(
                f"circuit breaker for {what} is open after {self._failures} consecutive "
                f"transient failures; not called. It will let a probe through in {wait:.1f}s"
            ),
            attempted_query=attempted_query,
            source=source,
            attempts=attempts,
            retry_after=wait,
            details=f"circuit breaker open; probe in {wait:.3f}s",
        )

    def __repr__(self) -> str:
        return (
            f"CircuitBreaker(name={self.name!r}, state={self.state.value}, "
            f"failures={self._failures}/{self.failure_threshold}, reset_after={self.reset_after})"
        )
