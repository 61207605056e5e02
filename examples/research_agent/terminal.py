"""The terminal while a run goes on (stderr): live progress, then the coverage grid.

Progress is read from the run's event stream (`Coordinator.stream`): every task
started, failed attempt (with the delay before the next), policy ruling, routing
decision and final coverage entry is one typed event. `Progress` shows each one; no
logging is reconfigured for it. On a terminal the grid itself is live, each cell
taking its coverage colour when its task finishes; elsewhere (a pipe, CI) one plain
line per event. `EventLog` writes the events as JSON lines (`--events FILE`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import IO, Any

from rich.columns import Columns
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from agentmesh import Report
from agentmesh.events import (
    AttemptFailed,
    EscalationPending,
    Event,
    PartialRecorded,
    PolicyRuling,
    Routed,
    RunStarted,
    TaskFinished,
    TaskStarted,
)
from agentmesh.report import CoverageEntry, CoverageStatus

from .rendering import is_unsure, searched

__all__ = ["STYLES", "EventLog", "Progress", "coverage_grid", "note"]

# A partial entry unsure of its passages (`rendering.is_unsure`) did not fail: "unsure",
# in its own colour, not the failures' gold.
STYLES: dict[str, str] = {
    CoverageStatus.COVERED: "bold white on green4",
    "unsure": "bold white on #827717",  # the HTML page's olive
    CoverageStatus.EMPTY: "bold white on dodger_blue3",
    CoverageStatus.PARTIAL: "bold black on gold1",
    CoverageStatus.GAP: "bold white on red3",
    CoverageStatus.ESCALATED: "bold white on magenta",
}
LEGEND: dict[str, str] = {
    CoverageStatus.COVERED: "passages found",
    "unsure": "passages found that may not answer (partial, not a failure)",
    CoverageStatus.EMPTY: "searched, nothing relevant",
    CoverageStatus.PARTIAL: "failed, some documents read",
    CoverageStatus.GAP: "failed, nothing read",
    CoverageStatus.ESCALATED: "needs a person (not retried)",
}


class Progress:
    """Shows a run's events on stderr: a live grid on a terminal, else one line each.

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
        self.state: dict[tuple[str, str], str | Text] = dict.fromkeys(cells.values(), "waiting")
        self.started = time.perf_counter() if started is None else started
        self._live: Live | None = None

    def start(self) -> None:
        """Start the live grid (on a terminal only)."""
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

    def __call__(self, event: Event) -> None:
        """Show one event of the run."""
        text = _describe(event)
        if text is None:
            return
        cell = None if event.task_id is None else self.cells.get(event.task_id)
        if cell is None:
            self.note(str(text))
            return
        self.state[cell] = text
        if self._live is not None:
            self._live.update(self._table())
        else:
            self.note(f"{cell[0]} × {cell[1]}: {text}")

    def _table(self) -> Table:
        table = Table(title="Research in progress", expand=False)
        table.add_column("subtopic")
        for source in self.sources:
            table.add_column(source)
        for topic in self.topics:
            table.add_row(topic, *(self.state.get((topic, s), "") for s in self.sources))
        return table


class EventLog:
    """Writes every event of the run to `file`, one JSON object per line (secrets masked)."""

    def __init__(self, file: IO[str]) -> None:
        self.file = file

    def __call__(self, event: Event) -> None:
        self.file.write(event.to_json() + "\n")


def note(console: Console, started: float, message: str) -> None:
    """One plain line on the console, stamped with the seconds since `started`."""
    elapsed = time.perf_counter() - started
    console.print(f"[{elapsed:6.2f}s] {message}", highlight=False, markup=False, soft_wrap=True)


def _describe(event: Event) -> str | Text | None:
    """One short line (or coloured cell) for the events a person follows; None for others."""
    match event:
        case RunStarted(tasks=tasks):
            return f"run {event.run_id}: {tasks} tasks"
        case TaskStarted():
            return "running"
        case AttemptFailed(source=source, attempt=attempt, envelope=envelope, retry_in=delay):
            if delay is None:
                return None  # the call failed for good: its decision follows
            what = source.split("/", 1)[1] if "/" in source else "attempt"
            return f"{what} #{attempt} failed ({envelope.error_type}); retrying in {delay:.2f}s"
        case PartialRecorded(restored=True, completed=read, pending=left):
            # A resumed run (or a rewritten query) starts from the task's saved progress.
            return f"resumed: {len(read)} documents read before, {len(left)} to read"
        case PolicyRuling(ruling=ruling):
            return f"{ruling.action} by policy {ruling.policy} on {ruling.tool}"
        case Routed(decision=decision, reason=reason):
            return f"decision {type(decision).__name__}{f': {reason}' if reason else ''}"
        case EscalationPending(reason=reason):
            return f"waiting for a person: {reason}"
        case TaskFinished(entry=entry):
            return _cell(entry)
    return None


def _cell(entry: CoverageEntry) -> Text:
    label = "unsure" if is_unsure(entry) else str(entry.status.value)
    return Text(f" {label} ", style=STYLES[label])


def coverage_grid(report: Report, topics: Sequence[str], sources: Sequence[str]) -> Group:
    """Subtopics x sources, one coloured cell per status, and the legend."""
    status = {(e.topic, e.source): e for e in report.coverage}
    table = Table(title="Coverage", title_justify="left")
    table.add_column("subtopic")
    columns = searched(report, sources)
    for source in columns:
        table.add_column(source, justify="center")
    for topic in topics:
        cells: list[Any] = []
        for source in columns:
            value = status.get((topic, source))
            cells.append(Text("-") if value is None else _cell(value))
        table.add_row(topic, *cells)
    # Columns wraps between entries, never inside one.
    legend = Columns(
        [Text.assemble((f" {v} ", STYLES[v]), f" {meaning}") for v, meaning in LEGEND.items()],
        padding=(0, 2),
    )
    answered = f"{report.coverage_ratio:.0%} of {len(report.coverage)} entries answered"
    return Group(table, legend, Text(answered))
