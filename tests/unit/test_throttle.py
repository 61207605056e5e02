"""Tests of `agentmesh.throttle.Limiter`: concurrency, rate, fairness, cancellation, loops.

Windows are short and real (the limiter reads `time.monotonic` itself), so the tests
assert on counts and order, with wall-clock bounds only where a leak would double a wait.
"""

from __future__ import annotations

import asyncio
import gc
import math
import re
import time
import weakref

import pytest

from agentmesh.errors import UsageError
from agentmesh.throttle import Limiter

# Start times are taken just after the limiter records them, so a window measured on them
# looks shorter than the real one by however long the first task of the pair waited to be
# scheduled: microseconds on a quiet machine, a few milliseconds on a loaded 2-core CI
# runner (seen: 2.6 ms of 50). A tenth of the window allows for it; a limiter that let one
# start too many into a window would show a gap near 0.
SLACK = 0.1


def assert_windows_hold(starts: list[float], n: int, per_seconds: float) -> None:
    """Assert that no window of `per_seconds` contains more than `n` of `starts`."""
    starts = sorted(starts)
    for first, later in zip(starts, starts[n:], strict=False):
        assert later - first >= per_seconds * (1 - SLACK), (first, later)


class Gauge:
    """Counts the tasks inside a slot and remembers the peak."""

    def __init__(self) -> None:
        self.inside = 0
        self.peak = 0

    async def hold(self, limiter: Limiter, seconds: float) -> None:
        async with limiter.slot():
            self.inside += 1
            self.peak = max(self.peak, self.inside)
            await asyncio.sleep(seconds)
            self.inside -= 1


async def wait_until_blocked(task: asyncio.Task[None]) -> None:
    """Let `task` run until it is parked on the limiter."""
    for _ in range(5):
        await asyncio.sleep(0)
    assert not task.done()


class TestMaxConcurrency:
    async def test_peak_never_exceeds_the_limit(self) -> None:
        """Twenty tasks through a limit of three never have more than three inside."""
        limiter = Limiter(name="search", max_concurrency=3)
        gauge = Gauge()

        await asyncio.gather(*(gauge.hold(limiter, 0.005) for _ in range(20)))

        assert gauge.peak == 3
        assert gauge.inside == 0

    async def test_combined_with_a_rate_limit(self) -> None:
        """Both limits hold at once: peak within max_concurrency, starts within the rate."""
        limiter = Limiter(name="search", rate_limit=(4, 0.04), max_concurrency=2)
        gauge = Gauge()
        starts: list[float] = []

        async def call() -> None:
            async with limiter.slot():
                starts.append(time.monotonic())
                gauge.inside += 1
                gauge.peak = max(gauge.peak, gauge.inside)
                await asyncio.sleep(0.002)
                gauge.inside -= 1

        await asyncio.gather(*(call() for _ in range(12)))

        assert gauge.peak <= 2
        assert len(starts) == 12
        assert_windows_hold(starts, 4, 0.04)


class TestRelease:
    async def test_released_on_exception(self) -> None:
        """An exception in the body propagates and gives the slot back."""
        limiter = Limiter(name="search", max_concurrency=1)

        with pytest.raises(RuntimeError, match="boom"):
            async with limiter.slot():
                raise RuntimeError("boom")

        async with asyncio.timeout(1):
            async with limiter.slot():
                pass

    async def test_released_when_cancelled_while_holding(self) -> None:
        """A task cancelled inside its slot gives the slot back."""
        limiter = Limiter(name="search", max_concurrency=1)
        entered = asyncio.Event()

        async def holder() -> None:
            async with limiter.slot():
                entered.set()
                await asyncio.sleep(10)

        task = asyncio.create_task(holder())
        await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

        async with asyncio.timeout(1):
            async with limiter.slot():
                pass

    async def test_no_concurrency_slot_leaked_when_cancelled_while_waiting(self) -> None:
        """A waiter cancelled before it got a slot takes none: the limit stays exactly one."""
        limiter = Limiter(name="search", max_concurrency=1)
        release = asyncio.Event()

        async def holder() -> None:
            async with limiter.slot():
                await release.wait()

        holding = asyncio.create_task(holder())
        await asyncio.sleep(0)
        waiter = asyncio.create_task(holder())
        await wait_until_blocked(waiter)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        release.set()
        await holding

        gauge = Gauge()
        async with asyncio.timeout(1):
            await asyncio.gather(*(gauge.hold(limiter, 0.001) for _ in range(5)))
        assert gauge.peak == 1

    async def test_no_rate_slot_spent_when_cancelled_while_waiting(self) -> None:
        """A waiter cancelled while waiting for the rate window records no start."""
        period = 0.25
        limiter = Limiter(name="search", rate_limit=(1, period))
        starts: list[float] = []

        async def call() -> None:
            async with limiter.slot():
                starts.append(time.monotonic())

        await call()
        sleeping = asyncio.create_task(call())  # holds the gate, sleeping out the window
        await wait_until_blocked(sleeping)
        queued = asyncio.create_task(call())  # parked on the gate behind it
        await wait_until_blocked(queued)
        sleeping.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sleeping
        await queued

        assert len(starts) == 2
        # A leaked start would push the queued call a whole window later (>= 2 * period).
        assert period * (1 - SLACK) <= starts[1] - starts[0] < 1.8 * period


class TestRateLimit:
    async def test_no_window_holds_more_than_n(self) -> None:
        """Twenty-three calls at 5 per 0.05 s: every 0.05 s window sees at most five starts."""
        limiter = Limiter(name="search", rate_limit=(5, 0.05))
        starts: list[float] = []

        async def call() -> None:
            async with limiter.slot():
                starts.append(time.monotonic())

        await asyncio.gather(*(call() for _ in range(23)))

        assert len(starts) == 23
        assert_windows_hold(starts, 5, 0.05)

    async def test_the_first_n_start_at_once(self) -> None:
        """Within budget there is no wait: the first n calls all start in the first window."""
        limiter = Limiter(name="search", rate_limit=(5, 0.5))
        starts: list[float] = []

        async def call() -> None:
            async with limiter.slot():
                starts.append(time.monotonic())

        await asyncio.gather(*(call() for _ in range(5)))

        assert max(starts) - min(starts) < 0.5


class TestWaitersDoNotPoll:
    async def test_one_timer_per_window_not_per_waiter(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Fifty waiters at 10 per window sleep about once per window, not once per poll each."""
        sleeps: list[float] = []
        real_sleep = asyncio.sleep

        async def counting_sleep(delay: float) -> None:
            sleeps.append(delay)
            await real_sleep(delay)

        monkeypatch.setattr(asyncio, "sleep", counting_sleep)
        limiter = Limiter(name="search", rate_limit=(10, 0.02))
        started = 0

        async def call() -> None:
            nonlocal started
            async with limiter.slot():
                started += 1

        await asyncio.gather(*(call() for _ in range(50)))

        assert started == 50
        # Five batches need four waits; a polling waiter would sleep dozens of times.
        assert 4 <= len(sleeps) <= 12, sleeps


class TestFifo:
    async def test_concurrency_waiters_served_in_arrival_order(self) -> None:
        """Tasks queued on max_concurrency enter in the order they arrived."""
        limiter = Limiter(name="search", max_concurrency=1)
        order: list[int] = []

        async def call(i: int) -> None:
            async with limiter.slot():
                order.append(i)
                await asyncio.sleep(0)

        await asyncio.gather(*(call(i) for i in range(15)))

        assert order == list(range(15))

    async def test_rate_waiters_served_in_arrival_order(self) -> None:
        """Tasks queued on the rate limit start in the order they arrived."""
        limiter = Limiter(name="search", rate_limit=(3, 0.03))
        order: list[int] = []

        async def call(i: int) -> None:
            async with limiter.slot():
                order.append(i)

        await asyncio.gather(*(call(i) for i in range(15)))

        assert order == list(range(15))


class TestEventLoops:
    def test_works_across_two_event_loops(self) -> None:
        """One limiter serves two `asyncio.run` calls, and the rate log spans both."""
        limiter = Limiter(name="search", rate_limit=(4, 0.05), max_concurrency=2)
        starts: list[float] = []
        peaks: list[int] = []

        async def run_once() -> None:
            gauge = Gauge()

            async def call() -> None:
                async with limiter.slot():
                    starts.append(time.monotonic())
                    gauge.inside += 1
                    gauge.peak = max(gauge.peak, gauge.inside)
                    await asyncio.sleep(0.001)
                    gauge.inside -= 1

            await asyncio.gather(*(call() for _ in range(6)))
            peaks.append(gauge.peak)

        asyncio.run(run_once())
        asyncio.run(run_once())

        assert len(starts) == 12
        assert all(peak <= 2 for peak in peaks)
        assert_windows_hold(starts, 4, 0.05)

    def test_closed_loops_are_not_kept_alive(self) -> None:
        """A limiter used in a loop that has since closed does not keep that loop alive."""
        limiter = Limiter(name="search", rate_limit=(100, 1.0), max_concurrency=2)

        async def call() -> None:
            async with limiter.slot():
                pass

        loop = asyncio.new_event_loop()
        loop.run_until_complete(call())
        loop.close()
        gone = weakref.ref(loop)
        del loop
        asyncio.run(call())
        gc.collect()

        assert gone() is None


class TestArguments:
    @pytest.mark.parametrize(
        ("rate_limit", "complaint"),
        [
            ((0, 1.0), "n must be "),
            ((-3, 1.0), "n must be "),
            ((1.5, 1.0), "n must be "),
            ((True, 1.0), "n must be "),
            (("5", 1.0), "n must be "),
            ((5, 0), "per_seconds must be "),
            ((5, -1.0), "per_seconds must be "),
            ((5, math.nan), "per_seconds must be "),
            ((5, math.inf), "per_seconds must be "),
            ((5, "1"), "per_seconds must be "),
            ((5,), "must be a tuple"),
            ((5, 1.0, 2), "must be a tuple"),
            (5, "must be a tuple"),
        ],
    )
    def test_bad_rate_limit(self, rate_limit: object, complaint: str) -> None:
        """A malformed rate_limit raises UsageError naming the argument and the owner."""
        with pytest.raises(
            UsageError, match=rf"^search_docs: rate_limit=.*{re.escape(complaint)}.*, got "
        ):
            Limiter(name="search_docs", rate_limit=rate_limit)  # type: ignore[arg-type]

    @pytest.mark.parametrize("max_concurrency", [0, -1, 1.5, True, "2"])
    def test_bad_max_concurrency(self, max_concurrency: object) -> None:
        """A malformed max_concurrency raises UsageError naming the argument and the owner."""
        with pytest.raises(UsageError, match=r"^search_docs: max_concurrency="):
            Limiter(name="search_docs", max_concurrency=max_concurrency)  # type: ignore[arg-type]

    def test_good_values_are_normalised(self) -> None:
        """An int window is accepted and kept as seconds in a float."""
        limiter = Limiter(name="search", rate_limit=(5, 1), max_concurrency=2)

        assert limiter.rate_limit == (5, 1.0)
        assert isinstance(limiter.rate_limit[1], float)
        assert limiter.max_concurrency == 2
        assert repr(limiter) == "Limiter(name='search', rate_limit=(5, 1.0), max_concurrency=2)"


class TestUnlimited:
    async def test_slot_is_a_shared_no_op(self) -> None:
        """Without limits, every slot() is the same no-op context manager."""
        first = Limiter(name="a")
        second = Limiter(name="b", rate_limit=None, max_concurrency=None)

        assert first.is_unlimited
        assert first.slot() is first.slot() is second.slot()
        async with first.slot():
            pass

    async def test_unlimited_does_not_wait(self) -> None:
        """A thousand unlimited slots are all held at once."""
        limiter = Limiter(name="a")
        gauge = Gauge()

        await asyncio.gather(*(gauge.hold(limiter, 0.001) for _ in range(1000)))

        assert gauge.peak == 1000

    def test_any_limit_makes_it_limited(self) -> None:
        """A rate limit or a concurrency limit alone makes the limiter limited."""
        assert not Limiter(name="a", rate_limit=(1, 1.0)).is_unlimited
        assert not Limiter(name="a", max_concurrency=1).is_unlimited
