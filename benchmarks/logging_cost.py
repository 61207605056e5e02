"""Logging: what structlog costs per task, at the default level and with JSON lines.

The dispatch workload (10% first-attempt failures) through `Coordinator.run` three ways:
nothing configured (agentmesh's quiet default: WARNING and above), and
`configure_logging("INFO"/"DEBUG", json=True)` writing to a stream that counts lines and
drops them. The difference to the default is the cost of emitting; lines per task show
how many events a task emits at that level. Two micro-measurements give the price of
what the default level still pays: binding a logger and one filtered-out call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import structlog

from agentmesh import configure_logging
from agentmesh._logging import get_logger
from benchmarks._harness import Samples, rotated, time_call
from benchmarks.dispatch import Workload, agentmesh_coordinator


class LineCounter:
    """A text stream that counts the lines written to it and keeps none."""

    def __init__(self) -> None:
        self.lines = 0

    def write(self, text: str) -> int:
        self.lines += text.count("\n")
        return len(text)

    def flush(self) -> None:
        pass


@dataclass
class LoggingRow:
    """One configuration's samples over the rounds."""

    name: str
    us_per_task: Samples = field(default_factory=Samples)
    lines_per_task: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"us_per_task": self.us_per_task.to_json(), "lines_per_task": self.lines_per_task}


MODES = {
    "default": "default (nothing configured: WARNING+)",
    "info": 'configure_logging("INFO", json=True)',
    "debug": 'configure_logging("DEBUG", json=True)',
}


def run(n: int, rounds: int, failure_rate: float) -> list[LoggingRow]:
    """Alternate the three configurations for `rounds` rounds of `n` tasks."""
    rows = {key: LoggingRow(name) for key, name in MODES.items()}
    try:
        for round_number in range(rounds):
            for key in rotated(list(MODES), round_number):
                structlog.reset_defaults()
                stream = LineCounter()
                if key != "default":
                    configure_logging(key.upper(), json=True, stream=stream)  # type: ignore[arg-type]  # a minimal TextIO
                runner = agentmesh_coordinator(Workload(n, failure_rate))
                timing = time_call(runner)
                rows[key].us_per_task.add(1e6 * timing.wall / n)
                rows[key].lines_per_task = stream.lines / n
    finally:
        structlog.reset_defaults()
    return list(rows.values())


def micro(repeat: int = 200_000) -> dict[str, float]:
    """µs per `get_logger(...)` and per filtered-out call, at the default level."""
    structlog.reset_defaults()
    started = time.perf_counter()
    for _ in range(repeat):
        get_logger(run_id="r", task_id="t", subagent="s")
    bind = (time.perf_counter() - started) / repeat
    log = get_logger(run_id="r", task_id="t", subagent="s")
    started = time.perf_counter()
    for _ in range(repeat):
        log.debug("tool_attempt", attempt=1)
    filtered = (time.perf_counter() - started) / repeat
    return {"get_logger_us": 1e6 * bind, "filtered_call_us": 1e6 * filtered}
