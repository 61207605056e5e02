"""The terminal while a run goes on (stderr): live progress, then the coverage grid.

Progress is read from agentmesh's own structlog events: every attempt, scheduled retry
(with its delay), routing decision and outcome is one, bound with the run, the task
and the subagent. `Progress` is a structlog processor that shows them and drops them.
On a terminal the grid itself is live; elsewhere (a pipe, CI) one plain line per event.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import structlog
from rich.columns import Columns
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text
from structlog.typing import EventDict, WrappedLogger

from agentmesh import Report
from agentmesh.coordinator import CoverageStatus

__all__ = ["STYLES", "Progress", "coverage_grid", "note"]

STYLES: dict[str, str] = {
    CoverageStatus.COVERED: "bold white on green4",
    CoverageStatus.EMPTY: "bold white on dodger_blue3",
    CoverageStatus.PARTIAL: "bold black on gold1",
    CoverageStatus.GAP: "bold white on red3",
    CoverageStatus.ESCALATED: "bold white on magenta",
}
LEGEND: dict[str, str] = {
    CoverageStatus.COVERED: "passages found",
    CoverageStatus.EMPTY: "searched, nothing relevant",
    CoverageStatus.PARTIAL: "failed, some documents read",
    CoverageStatus.GAP: "failed, nothing read",
    CoverageStatus.ESCALATED: "needs a person (not retried)",
}


class Progress:
    """Shows a run's agentmesh events on stderr: a live grid on a terminal, else lines.

    Args:
        console: rich's console on stderr.
        cells: task id -> (subtopic, source), as the tasks were given to the coordinator.
        topics: the subtopics, in order.
        sources: the sources, in order.
        started: the `time.perf_counter()` the timestamps count from (default: now).
    """

    def __init__(
        self,
        console: Console,
        cells: dict[str, tuple[str, str]],
        topics: Sequence[str],
        sources: Sequence[str],
        started: float | None = None,
    ) -> None:
        self.console = console
        self.cells = cells
        self.topics = list(topics)
        self.sources = list(sources)
        self.state: dict[tuple[str, str], str] = dict.fromkeys(cells.values(), "waiting")
        self.started = time.perf_counter() if started is None else started
        self._live: Live | None = None

    def install(self) -> None:
        """Route agentmesh's events to this display (structlog's global configuration)."""
        structlog.configure(
            processors=[self],
            wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
            # Every event is dropped once shown: nothing reaches a logger.
            logger_factory=structlog.ReturnLoggerFactory(),
            cache_logger_on_first_use=False,
        )
        if self.console.is_terminal:
            self._live = Live(self._table(), console=self.console, transient=True)
            self._live.start()

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def note(self, message: str) -> None:
        """A line about the run itself, timed like the events."""
        note(self.console, self.started, message)

    def __call__(self, logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
        cell = self.cells.get(str(event.get("task_id")))
        text = _describe(event)
        if method in ("warning", "error", "critical") and text is None:
            text = f"{method}: {event.get('event')}"
        if text is not None and cell is not None:
            self.state[cell] = text
            if self._live is not None:
                self._live.update(self._table())
            else:
                self.note(f"{cell[0]} × {cell[1]}: {text}")
        elif text is not None and (method != "debug" or self._live is None):
            self.note(text)
        raise structlog.DropEvent

    def _table(self) -> Table:
        table = Table(title="Research in progress", expand=False)
        table.add_column("subtopic")
        for source in self.sources:
            table.add_column(source)
        for topic in self.topics:
            table.add_row(topic, *(self.state.get((topic, s), "") for s in self.sources))
        return table


def note(console: Console, started: float, message: str) -> None:
    """One plain line on the console, stamped with the seconds since `started`."""
    elapsed = time.perf_counter() - started
    console.print(f"[{elapsed:6.2f}s] {message}", highlight=False, markup=False, soft_wrap=True)


def _describe(event: EventDict) -> str | None:
    """One short line for the events a person follows; None for the others."""
    name = event.get("event")
    if name == "subagent_attempt":
        attempt = int(event.get("attempt", 1))
        return "running" if attempt == 1 else f"running (attempt {attempt})"
    if name == "retry_scheduled":
        what = event.get("tool", "attempt")
        return (
            f"{what} #{event.get('attempt')} failed ({event.get('error_type')}); "
            f"retrying in {float(event.get('delay', 0)):.2f}s"
        )
    if name == "route_decision":
        reason = f": {event['reason']}" if event.get("reason") else ""
        return f"decision {event.get('decision')}{reason}"
    if name == "partials_restored":
        # A resumed run (or a rewritten query) starts from the task's saved progress.
        read, left = len(event.get("completed", ())), len(event.get("pending", ()))
        return f"resumed: {read} documents read before, {left} to read"
    if name == "run_started":
        return f"run {event.get('run_id')}: {event.get('tasks')} tasks"
    return None


def coverage_grid(report: Report, topics: Sequence[str], sources: Sequence[str]) -> Group:
    """Subtopics x sources, one coloured cell per status, and the legend."""
    status = {(e.topic, e.source): e.status for e in report.coverage}
    table = Table(title="Coverage", title_justify="left")
    table.add_column("subtopic")
    for source in sources:
        table.add_column(source, justify="center")
    for topic in topics:
        cells: list[Any] = []
        for source in sources:
            value = status.get((topic, source))
            cells.append(Text(f" {value} ", style=STYLES[value]) if value else Text("-"))
        table.add_row(topic, *cells)
    # Columns wraps between entries, never inside one.
    legend = Columns(
        [Text.assemble((f" {v} ", STYLES[v]), f" {meaning}") for v, meaning in LEGEND.items()],
        padding=(0, 2),
    )
    answered = f"{report.coverage_ratio:.0%} of {len(report.coverage)} entries answered"
    return Group(table, legend, Text(answered))
