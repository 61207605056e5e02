"""Rate and concurrency limits for tools and subagents: `Limiter`.

A `Limiter` is declared once, at definition time (``@tool(rate_limit=(5, 1.0),
max_concurrency=2)``), and used from whichever event loop runs the call::

    async with limiter.slot():
        ...  # at most `max_concurrency` of these at once, at most n starts per window

How waiting works, and why it costs no CPU:

* **Concurrency** is an `asyncio.Semaphore`: waiters park on a future, FIFO.
* **Rate** is a sliding log of start times (`_StartLog`). asyncio-throttle keeps the same
  log, but its `acquire` polls with `asyncio.sleep(retry_interval)` (10,000 waiters would
  wake 10,000 times per interval) and it has no public way to ask when the next slot is
  free, so the log is ours: a dozen lines. In front of it sits a FIFO gate (an
  `asyncio.Lock`): only the task holding the gate looks at the log, and it sleeps exactly
  until the oldest start leaves the window. Every other waiter parks on the lock's
  future. One wake-up per slot, and slots are handed out in arrival order.
* The concurrency slot is taken before the rate slot, so a start is recorded right before
  the body runs; the other order would let calls queued on the semaphore bunch up later
  and exceed the rate in some window.

asyncio primitives bind to the first loop that uses them, so the gate and the semaphore
live per running loop (created lazily, dropped once the loop is closed). The rate log is shared by
every loop of the process: the remote service counts our calls, not our loops, so two
`asyncio.run` calls in a row must not get twice the rate.

Time is `time.monotonic`, not injectable: tests use short real windows (e.g. 5 per
0.05 s) and assert on counts and order.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeAlias

from agentmesh._numbers import number, whole
from agentmesh.errors import UsageError

__all__ = ["Limiter", "RateLimitSpec", "RateReservations"]

RateLimitSpec: TypeAlias = tuple[int, float]
"""``(n, per_seconds)``: at most n starts in any window of `per_seconds` seconds."""


class RateReservations(Protocol):
    """Counts the starts of rate limits outside this process (e.g. for a whole cluster)."""

    async def reserve_start(self, name: str, n: int, per_seconds: float) -> float | None:
        """Reserve the next start of limiter `name`'s `(n, per_seconds)` limit.

        Returns the seconds to wait until it; None when it cannot, and the start is
        counted in this process after all.
        """
        ...


# One shared instance: entering a nullcontext costs two method calls, which is what the
# unlimited hot path (most tools) should pay.
_NO_LIMIT: Final[contextlib.nullcontext[None]] = contextlib.nullcontext()

# An early wake-up (asyncio may fire a timer up to one clock tick early) must not turn
# into a busy loop on a coarse clock, such as Windows' ~16 ms one.
_MIN_SLEEP: Final[float] = time.get_clock_info("monotonic").resolution


class _StartLog:
    """The starts of the last `period` seconds: at most `n` starts in any such window."""

    __slots__ = ("n", "period", "starts")

    def __init__(self, n: int, period: float) -> None:
        self.n = n
        self.period = period
        self.starts: deque[float] = deque()

    def reserve(self, now: float) -> float:
        """Record a start now and return 0 if a slot is free; else the seconds until one is."""
        starts = self.starts
        while starts and now - starts[0] > self.period:
            starts.popleft()
        if len(starts) < self.n:
            starts.append(now)
            return 0.0
        return starts[0] + self.period - now


@dataclass(slots=True)
class _LoopState:
    """The asyncio primitives of one limiter in one event loop."""

    gate: asyncio.Lock | None
    semaphore: asyncio.Semaphore | None


class Limiter:
    """Rate and concurrency limits of one tool or subagent.

    Args:
        name: the owner (tool or subagent) name, used in error messages and `repr`.
        rate_limit: ``(n, per_seconds)``: at most n starts in any window of
            `per_seconds` seconds; None for no rate limit.
        max_concurrency: at most this many calls in flight at once; None for no limit.

    Raises:
        UsageError: an argument is malformed; the message names it and the owner.
    """

    __slots__ = (
        "_accounting_lock",
        "_max_concurrency",
        "_name",
        "_rate_limit",
        "_start_log",
        "_states",
        "_states_lock",
    )

    def __init__(
        self,
        *,
        name: str,
        rate_limit: RateLimitSpec | None = None,
        max_concurrency: int | None = None,
    ) -> None:
        self._name = name
        self._rate_limit = _check_rate_limit(name, rate_limit)
        self._max_concurrency = _check_max_concurrency(name, max_concurrency)
        self._start_log: _StartLog | None = None
        if self._rate_limit is not None:
            self._start_log = _StartLog(*self._rate_limit)
        # Loops in different threads share the rate log: checking it and recording a start
        # must be one step, or two loops could both take the last slot.
        self._accounting_lock = threading.Lock()
        self._states: dict[asyncio.AbstractEventLoop, _LoopState] = {}
        self._states_lock = threading.Lock()

    @property
    def name(self) -> str:
        """The owner (tool or subagent) name."""
        return self._name

    @property
    def rate_limit(self) -> RateLimitSpec | None:
        """``(n, per_seconds)``, or None when starts are not rate-limited."""
        return self._rate_limit

    @property
    def max_concurrency(self) -> int | None:
        """The most calls in flight at once, or None when unbounded."""
        return self._max_concurrency

    @property
    def is_unlimited(self) -> bool:
        """True when there is neither a rate limit nor a concurrency limit."""
        return self._rate_limit is None and self._max_concurrency is None

    def slot(
        self, rates: RateReservations | None = None
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """Wait for a concurrency slot and a rate slot; hold the concurrency slot inside.

        `rates` (the run scope's, `ctx.scope.rates`) reserves the rate slot when the
        starts are counted outside this process; by default they are counted here.

        The concurrency slot is released on exit, also on an exception or cancellation.
        A task cancelled while waiting takes nothing: neither slot, nor a start in the
        rate window.

        Returns:
            An async context manager; a shared no-op one when the limiter is unlimited.
        """
        if self._rate_limit is None and self._max_concurrency is None:
            return _NO_LIMIT
        return self._limited_slot(rates)

    @contextlib.asynccontextmanager
    async def _limited_slot(self, rates: RateReservations | None) -> AsyncIterator[None]:
        state = self._loop_state()
        if state.semaphore is None:
            await self._start(state, rates)
            yield
            return
        async with state.semaphore:
            await self._start(state, rates)
            yield

    async def _start(self, state: _LoopState, rates: RateReservations | None) -> None:
        """Take a rate slot (a no-op without a rate limit), waiting FIFO behind the gate."""
        start_log = self._start_log
        if state.gate is None or start_log is None:
            return
        if rates is not None:
            # Reservations are handed out in order elsewhere: no gate, no polling here.
            delay = await rates.reserve_start(self._name, start_log.n, start_log.period)
            if delay is not None:
                if delay > 0:
                    await asyncio.sleep(delay)
                return
        async with state.gate:
            while True:
                with self._accounting_lock:
                    wait = start_log.reserve(time.monotonic())
                if wait <= 0:
                    return
                # Sleep exactly until the oldest start leaves the window, not a poll.
                await asyncio.sleep(max(wait, _MIN_SLEEP))

    def _loop_state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is None:
            with self._states_lock:
                state = self._states.get(loop)
                if state is None:
                    # The primitives reference their loop, so weak keys would never die;
                    # instead states of closed loops go when a new loop shows up.
                    for closed in [other for other in self._states if other.is_closed()]:
                        del self._states[closed]
                    state = _LoopState(
                        gate=None if self._rate_limit is None else asyncio.Lock(),
                        semaphore=(
                            None
                            if self._max_concurrency is None
                            else asyncio.Semaphore(self._max_concurrency)
                        ),
                    )
                    self._states[loop] = state
        return state

    def __reduce__(self) -> tuple[Any, tuple[str, RateLimitSpec | None, int | None]]:
        # Shipped to another process (a Ray worker), a limiter is rebuilt from its
        # declaration: locks and the rate log belong to the process that made them.
        return (_rebuild, (self._name, self._rate_limit, self._max_concurrency))

    def __repr__(self) -> str:
        return (
            f"Limiter(name={self._name!r}, rate_limit={self._rate_limit!r}, "
            f"max_concurrency={self._max_concurrency!r})"
        )


def _rebuild(name: str, rate_limit: RateLimitSpec | None, max_concurrency: int | None) -> Limiter:
    return Limiter(name=name, rate_limit=rate_limit, max_concurrency=max_concurrency)


def _check_rate_limit(name: str, rate_limit: object) -> RateLimitSpec | None:
    if rate_limit is None:
        return None
    if not isinstance(rate_limit, tuple | list) or len(rate_limit) != 2:
        raise UsageError(
            f"{name}: rate_limit= must be a tuple (n, per_seconds), got {rate_limit!r}"
        )
    n, per_seconds = rate_limit
    return (
        whole(f"{name}: rate_limit=(n, per_seconds): n", n, at_least=1),
        number(
            f"{name}: rate_limit=(n, per_seconds): per_seconds",
            per_seconds,
            above=True,
            unit="seconds",
        ),
    )


def _check_max_concurrency(name: str, max_concurrency: object) -> int | None:
    if max_concurrency is None:
        return None
    return whole(f"{name}: max_concurrency=", max_concurrency, at_least=1)
