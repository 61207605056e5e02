"""Type-checked, never run: a streamed run's events as a user sees them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from agentmesh import Coordinator, Report, Task, subagent
from agentmesh.checkpoints import (
    EventTable,
    KeepsEventLogs,
    LoggedRow,
    LogHead,
    SQLiteStore,
    Watch,
    event_table_of,
)
from agentmesh.context import Context
from agentmesh.coordinator import CoverageEntry
from agentmesh.events import (
    AttemptFailed,
    Event,
    EventLog,
    EventLogPage,
    LoggedEvent,
    Routed,
    RunFinished,
    RunStream,
    TaskFinished,
    UsageUpdated,
    follow_events,
    parse_event,
    read_events,
)


@subagent(name="docs")
async def docs(task: Task, ctx: Context) -> list[str]:
    return [task.query]


async def follow(tasks: list[Task]) -> Report | None:
    entries: list[CoverageEntry] = []
    lines: list[str] = []
    stream: RunStream = Coordinator([docs]).stream(tasks, run_id="r1", buffer=64)
    async with stream as events:
        async for event in events:
            lines.append(event.to_json())
            match event:
                case AttemptFailed(retry_in=delay) if delay is not None:
                    assert delay >= 0
                case Routed(decision=decision):
                    assert decision is not None
                case UsageUpdated(usage=call, total=total):
                    assert total.model_calls >= call.model_calls
                case TaskFinished(entry=entry):
                    entries.append(entry)
                case RunFinished(report=report):
                    assert report.run_id == event.run_id
    again: Event = parse_event(lines[0])
    assert again.seq == 1
    return events.report


async def watch_from_another_process(store: SQLiteStore, run_id: str) -> Report | None:
    """A run's events read back from its store's event log, as a console does."""
    Coordinator([docs], store=store, event_log=EventLog(max_bytes=4 * 2**20))
    page: EventLogPage = await read_events(store, run_id, after=0, limit=100, wait=1.5)
    seen: int = page.position + page.dropped + page.last_position
    when: datetime | None = page.last_event_at
    assert seen >= 0 or when is None
    async for logged in follow_events(store, run_id, after=page.position):
        found: LoggedEvent = logged
        if isinstance(found.event, RunFinished):
            return found.event.report
    return None


class OwnEvents(EventTable):
    """A user's event logs: `append` and `read` are all a table of one's own needs."""

    async def append(self, items: Sequence[tuple[str, str, bool, str, int]]) -> Sequence[None]:
        return [None] * len(items)

    async def read(
        self, run_id: str, after: int, limit: int
    ) -> tuple[LogHead | None, list[LoggedRow]]:
        return LogHead(0, 0, 0, 0.0, False), [LoggedRow(1, "RunStarted", "{}", 0.0)][:limit]


class OwnStore:
    def event_table(self) -> EventTable:
        return OwnEvents()


async def seam(store: SQLiteStore) -> None:
    keeps: KeepsEventLogs = OwnStore()
    table: EventTable | None = event_table_of(keeps)
    built_in: EventTable | None = event_table_of(store)
    if table is not None and built_in is not None:
        head, rows = await table.read("r1", 0, 10)
        positions: list[int] = [row.position for row in rows]
        finished: bool = head is not None and head.finished
        async with built_in.watch("r1") as watch:
            changed: bool = await watch.changed(1.0)
        print(positions, finished, changed, isinstance(watch, Watch))
