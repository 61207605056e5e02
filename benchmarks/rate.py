"""Rate limiting: 10,000 tasks waiting on one limit, `Limiter` against bare asyncio-throttle.

The contenders and the measurement are `benchmarks.throttle_waiters`'; this adds
alternating rounds and the figures the targets are stated in: CPU per acquisition and
the achieved rate. After the first window's batch, a limit of `rate` per `per` seconds
can start the remaining `waiters - rate` tasks no sooner than `ceil(waiters / rate) - 1`
windows later; the achieved rate is those starts over the time they really took.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from benchmarks._harness import Samples, rotated
from benchmarks.throttle_waiters import limiter_slot, measure, throttler_slot


@dataclass
class RateRow:
    """One contender's samples over the rounds."""

    name: str
    cpu_seconds: Samples = field(default_factory=Samples)
    cpu_per_acquisition_us: Samples = field(default_factory=Samples)
    idle_cpu_share: Samples = field(default_factory=Samples)
    achieved_share: Samples = field(default_factory=Samples)  # achieved / configured rate
    max_in_window: int = 0
    fifo: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "cpu_seconds": self.cpu_seconds.to_json(),
            "cpu_per_acquisition_us": self.cpu_per_acquisition_us.to_json(),
            "idle_cpu_share": self.idle_cpu_share.to_json(),
            "achieved_rate_share": self.achieved_share.to_json(),
            "max_starts_in_any_window": self.max_in_window,
            "fifo": self.fifo,
        }


def run(waiters: int, rate: int, per: float, rounds: int) -> list[RateRow]:
    """Alternate the two contenders for `rounds` rounds."""
    contenders = [
        ("agentmesh Limiter", lambda: limiter_slot(rate, per)),
        ("bare asyncio-throttle", lambda: throttler_slot(rate, per)),
    ]
    rows = {name: RateRow(name) for name, _ in contenders}
    windows = math.ceil(waiters / rate) - 1
    for round_number in range(rounds):
        for name, make_slot in rotated(contenders, round_number):
            result = measure(name, make_slot, waiters, per)
            row = rows[name]
            row.cpu_seconds.add(result.cpu)
            row.cpu_per_acquisition_us.add(1e6 * result.cpu / waiters)
            row.idle_cpu_share.add(result.idle_cpu)
            if windows > 0:
                achieved = (waiters - rate) / result.last_start
                row.achieved_share.add(achieved / (rate / per))
            row.max_in_window = max(row.max_in_window, result.max_in_window)
            row.fifo = row.fifo and result.in_order
    return list(rows.values())
