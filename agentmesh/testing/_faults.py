"""Recording sleep and scripted failures, so tests assert delays and never wait them out."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["FailTimes", "RecordingSleep"]


class RecordingSleep:
    """An async sleep that records each delay and returns at once (after one loop turn).

    `advance`, when given, is called with each delay: pass a fake clock's, such as
    `FakeMessagesAPI.advance`, and the time the test did not wait has passed for it.
    """

    def __init__(self, advance: Callable[[float], object] | None = None) -> None:
        self.delays: list[float] = []
        self._advance = advance

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        if self._advance is not None:
            self._advance(delay)
        # Yield to the loop as a real sleep would, so concurrent tasks interleave.
        await asyncio.sleep(0)

    @property
    def total(self) -> float:
        return sum(self.delays)


class FailTimes:
    """Raise `make_error()` on the first `times` calls, then succeed.

    `calls` counts every call, so a test can assert how often a tool was really invoked.
    """

    def __init__(self, times: int, make_error: Callable[[], BaseException]) -> None:
        self.times = times
        self.make_error = make_error
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        if self.calls <= self.times:
            raise self.make_error()
