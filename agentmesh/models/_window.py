"""`CallWindow`: how many calls of one model may be in flight, adapted as TCP adapts.

    slow start: the window starts small and grows by one per answered call (it doubles
    per round trip) until the first overload; then by 1/window per answer (one per
    round trip: additive increase). A 429 or 529 halves it (multiplicative decrease),
    once per round: the calls that were already in flight when it shrank say nothing new.

It never exceeds the user's bound (`ModelHealth(max_concurrency=)`) and never goes
below one call. It grows only while it is full: a window of 40 that 3 calls use says
nothing about 40, and the report shows what the run really needed and was allowed.

Waiters park on a future each (FIFO), woken one per freed slot, or all at once when the
model goes out (its breaker opened, its quota ended) so that they skip it at once.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from typing import Any

__all__ = ["CallWindow"]


class CallWindow:
    """The calls of one model in flight, and how many may be (see the module docstring)."""

    __slots__ = ("ceiling", "epoch", "in_flight", "initial", "limit", "threshold", "waiters")

    def __init__(self, initial: int, ceiling: int | None) -> None:
        self.initial = initial if ceiling is None else min(initial, ceiling)
        self.ceiling = ceiling
        self.limit = float(self.initial)
        self.threshold = math.inf  # slow start ends at the first overload
        self.in_flight = 0
        # Bumped at each decrease: a call started before it cannot shrink the window again.
        self.epoch = 0
        self.waiters: deque[asyncio.Future[None]] = deque()

    @property
    def size(self) -> int:
        """The calls that may be in flight now (at least one)."""
        return max(1, int(self.limit))

    def try_take(self) -> bool:
        """Take a slot if one is free, in one step (no await between check and take)."""
        if self.in_flight < self.size:
            self.in_flight += 1
            return True
        return False

    def take(self) -> None:
        """Take a slot whatever the window says (a breaker's probe)."""
        self.in_flight += 1

    def park(self, *, first: bool = False) -> asyncio.Future[None]:
        """A future to await until a slot may be free (`first`: at the head of the queue)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if first:
            self.waiters.appendleft(waiter)
        else:
            self.waiters.append(waiter)
        return waiter

    def leave(self, waiter: asyncio.Future[Any]) -> None:
        """A waiter that stopped waiting (cancelled): out of the queue, its wake-up passed on."""
        try:
            self.waiters.remove(waiter)
        except ValueError:
            if waiter.done() and not waiter.cancelled():
                self.wake(1)  # it was woken for a slot it will not take

    def give_back(self) -> None:
        """A call ended: its slot is free for the next waiter."""
        self.in_flight -= 1
        self.wake(self.size - self.in_flight)

    def wake(self, count: int) -> None:
        while count > 0 and self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                count -= 1

    def wake_all(self) -> None:
        self.wake(len(self.waiters))

    def answered(self) -> bool:
        """A call was answered: grow if the window was full. Whether its size changed."""
        if self.ceiling is not None and self.limit >= self.ceiling:
            return False
        if self.in_flight + 1 < self.size:
            return False  # not full: this answer says nothing about a larger window
        before = self.size
        self.limit += 1.0 if self.limit < self.threshold else 1.0 / self.limit
        if self.ceiling is not None:
            self.limit = min(self.limit, float(self.ceiling))
        return self.size != before

    def overloaded(self, epoch: int) -> bool:
        """A call started at `epoch` was told 429/529: halve, once per round. Whether it did."""
        if epoch != self.epoch:
            return False
        self.limit = max(1.0, self.limit / 2)
        self.threshold = self.limit
        self.epoch += 1
        return True

    def restart(self) -> None:
        """Back from an outage: slow start again from the initial window."""
        self.limit = float(self.initial)
        self.threshold = math.inf
        self.epoch += 1
