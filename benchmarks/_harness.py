"""Shared machinery: alternating rounds, medians, GC accounting, machine facts, tables."""

from __future__ import annotations

import asyncio
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Runner = Callable[[], Awaitable[Any]]
"""One measured call: everything it does counts, its setup does not."""


@dataclass
class Samples:
    """Repeated measurements of one quantity; reported as median and min-max."""

    values: list[float] = field(default_factory=list)

    def add(self, value: float) -> None:
        self.values.append(value)

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    @property
    def low(self) -> float:
        return min(self.values) if self.values else float("nan")

    @property
    def high(self) -> float:
        return max(self.values) if self.values else float("nan")

    def to_json(self) -> dict[str, Any]:
        return {"median": self.median, "min": self.low, "max": self.high, "samples": self.values}


class GCTimer:
    """Wall time spent in the cyclic garbage collector while it is installed."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full_collections = 0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.full_collections += info["generation"] == 2

    def __enter__(self) -> GCTimer:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


@dataclass
class Timing:
    """One timed call: wall seconds, of which in the cyclic GC, and what it returned."""

    wall: float
    gc: float
    full_collections: int
    result: Any = field(repr=False)  # asyncio may repr the finished task: not a whole Report


def time_call(runner: Runner) -> Timing:
    """Run `runner()` once in a fresh event loop, garbage of earlier runs collected first.

    The loop is created and closed outside the timed span; the collector stays enabled
    during it, as in any real program, and the time it takes is reported apart.
    """
    gc.collect()

    async def timed() -> Timing:
        with GCTimer() as collector:
            started = time.perf_counter()
            result = await runner()
            wall = time.perf_counter() - started
        return Timing(wall, collector.seconds, collector.full_collections, result)

    return asyncio.run(timed())


def rotated(items: Sequence[Any], round_number: int) -> list[Any]:
    """The contenders in a different order every round, so none always runs first."""
    shift = round_number % len(items) if items else 0
    return [*items[shift:], *items[:shift]]


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


def rss_bytes() -> int | None:
    """The resident set size of this process now (Linux), else None."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    """The peak resident set size of this process so far.

    Linux's VmHWM, which starts again at `exec`: `ru_maxrss` would still count the
    parent's memory that a benchmark subprocess was forked from.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # macOS reports bytes


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], title: str) -> str:
    """A plain-text table with right-aligned columns after the first."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = [title, ""]

    def line(cells: Sequence[str]) -> str:
        first, *rest = cells
        parts = [str(first).ljust(widths[0])]
        parts += [str(cell).rjust(width) for cell, width in zip(rest, widths[1:], strict=True)]
        return "  ".join(parts).rstrip()

    lines.append(line(headers))
    lines.append("  ".join("-" * width for width in widths))
    lines += [line(row) for row in rows]
    return "\n".join(lines)


def spread(samples: Samples, fmt: str = "{:.1f}") -> str:
    """`median (min-max)`."""
    return f"{fmt.format(samples.median)} ({fmt.format(samples.low)}-{fmt.format(samples.high)})"
