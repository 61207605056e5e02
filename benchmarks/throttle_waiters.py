"""What do 10,000 tasks waiting on a rate limit cost? `Limiter` vs a bare asyncio-throttle.

Run from the repository root::

    python -m benchmarks.throttle_waiters                  # 10,000 waiters, 2000 per 1 s
    python -m benchmarks.throttle_waiters --waiters 10000 --rate 1000 --per 1

Every waiter is started at once and enters its slot when the rate allows. For each
contender the table gives process CPU time against wall time (CPU % of one core), the
CPU share in the middle of the first window (when all but the first batch just wait),
CPU per start, the most starts seen in any window of `per` seconds (must be <= rate),
how late the last start came after the first compared with a perfect limiter, and
whether starts kept arrival order.

asyncio-throttle's `Throttler.acquire` polls every `retry_interval` (0.01 s by default),
so each of its waiters wakes 100 times a second; `Limiter` lets one waiter at a time look
at the throttler and parks the rest on a future.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from asyncio_throttle.throttler import Throttler

from agentmesh.throttle import Limiter

SlotFactory = Callable[[], AbstractAsyncContextManager[object]]


@dataclass(frozen=True)
class Result:
    """One contender's measurements."""

    name: str
    wall: float
    cpu: float
    max_in_window: int
    last_start: float  # seconds after the first start
    in_order: bool
    idle_cpu: float


# Starts are timed in the body, a few microseconds (a GC pause: milliseconds) after the
# throttler recorded them, so two starts exactly one window apart in its log can look a
# hair closer here. Windows are counted that much shorter.
SLACK = 1e-3


def max_in_window(starts: list[float], per: float) -> int:
    """The most starts inside any window of `per` seconds (less `SLACK`)."""
    starts = sorted(starts)
    best, lo = 0, 0
    for hi, t in enumerate(starts):
        while t - starts[lo] >= per - SLACK:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


async def _idle_cpu(per: float) -> float:
    """CPU share of one core in the middle of the first window, when everyone just waits."""
    await asyncio.sleep(0.25 * per)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.sleep(0.5 * per)
    return (time.process_time() - cpu0) / (time.perf_counter() - wall0)


async def _run(
    make_slot: Callable[[], SlotFactory], waiters: int, per: float
) -> tuple[list[float], list[int], float]:
    slot = make_slot()
    starts: list[float] = []
    order: list[int] = []

    async def waiter(i: int) -> None:
        async with slot():
            starts.append(time.monotonic())
            order.append(i)

    idle = asyncio.create_task(_idle_cpu(per))
    await asyncio.gather(*(waiter(i) for i in range(waiters)))
    return starts, order, await idle


def measure(name: str, make_slot: Callable[[], SlotFactory], waiters: int, per: float) -> Result:
    """Run one contender in a fresh event loop and take its measurements."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    starts, order, idle_cpu = asyncio.run(_run(make_slot, waiters, per))
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return Result(
        name=name,
        wall=wall,
        cpu=cpu,
        max_in_window=max_in_window(starts, per),
        last_start=max(starts) - min(starts),
        in_order=order == sorted(order),
        idle_cpu=idle_cpu,
    )


def limiter_slot(rate: int, per: float) -> SlotFactory:
    """agentmesh's Limiter: a FIFO gate in front of its own start log."""
    return Limiter(name="benchmark", rate_limit=(rate, per)).slot


def throttler_slot(rate: int, per: float) -> SlotFactory:
    """A bare asyncio-throttle Throttler with its default retry_interval (0.01 s)."""
    throttler = Throttler(rate_limit=rate, period=per)
    # The Throttler is its own async context manager: entering it acquires.
    return lambda: throttler


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments, run both contenders and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--waiters", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=2000, help="starts per window")
    parser.add_argument("--per", type=float, default=1.0, help="window, in seconds")
    args = parser.parse_args(argv)
    waiters, rate, per = args.waiters, args.rate, args.per
    # The last batch starts once the previous ones have all left their windows.
    ideal = (math.ceil(waiters / rate) - 1) * per

    print(
        f"{waiters:,} waiters, rate limit {rate} per {per:g} s; "
        f"a perfect limiter starts the last {ideal:.2f} s after the first"
    )
    contenders = [
        ("agentmesh Limiter", lambda: limiter_slot(rate, per)),
        ("bare asyncio-throttle", lambda: throttler_slot(rate, per)),
    ]
    header = (
        f"{'contender':<24}{'wall s':>8}{'CPU s':>8}{'CPU %':>8}{'idle CPU %':>12}{'CPU/start':>11}"
        f"{'max/window':>12}{'late s':>8}{'starts/s':>10}{'FIFO':>6}"
    )
    print(header)
    print("-" * len(header))
    for name, make_slot in contenders:
        r = measure(name, make_slot, waiters, per)
        print(
            f"{r.name:<24}{r.wall:>8.2f}{r.cpu:>8.2f}{100 * r.cpu / r.wall:>7.1f}%"
            f"{100 * r.idle_cpu:>11.1f}%"
            f"{1e6 * r.cpu / waiters:>8.0f} us{r.max_in_window:>12}"
            f"{r.last_start - ideal:>8.3f}{waiters / r.wall:>10.0f}"
            f"{'yes' if r.in_order else 'no':>6}"
        )


if __name__ == "__main__":
    main()
