"""Reading a run's event log from its store: from a position on, and waiting for more.

    page = await read_events(store, "r1")                       # what is there
    page = await read_events(store, "r1", after=page.position, wait=15)  # and what comes
    async for logged in follow_events(store, "r1"): ...         # until RunFinished

A PostgreSQL store notifies the reader as soon as an event is committed (LISTEN/NOTIFY);
a SQLite store is looked at every quarter of a second; a `MemoryStore` wakes its
readers in the process.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import ValidationError

from agentmesh._numbers import number, whole
from agentmesh.checkpoints import CheckpointStore, EventTable, LoggedRow, event_table_of
from agentmesh.errors import CheckpointError, UsageError
from agentmesh.events._log import opened
from agentmesh.events._types import Event, RunFinished, parse_event

__all__ = ["EventLogPage", "LoggedEvent", "follow_events", "read_events"]


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """One event of a run's log: where it is in the log, the event, and when it was saved.

    `position` counts the run's events as the store committed them (1, 2, ...), across
    a run and its resumes; the event's own `seq` starts again at each resume.
    """

    position: int
    event: Event
    saved_at: datetime


@dataclass(frozen=True, slots=True)
class EventLogPage:
    """What `read_events` found: events after a position, and where the log stands.

    Attributes:
        events: the events found, oldest first.
        position: where to read on from (`after=`): the last event's position, or the
            position asked for when none was found.
        dropped: events this run's log dropped so far to stay within its size
            (`EventLog.max_bytes`).
        last_position: the position of the log's last event (0: the log is empty).
        finished: whether the run's last start has its `RunFinished` in the log.
        last_event_at: when the last event was saved; None for a run with no log.
    """

    events: tuple[LoggedEvent, ...]
    position: int
    dropped: int
    last_position: int
    finished: bool
    last_event_at: datetime | None


def _logs_of(store: CheckpointStore) -> EventTable:
    """The store's event logs; a `UsageError` for a store that keeps none."""
    table = event_table_of(store)
    if table is None:
        raise UsageError(
            f"{store!r} keeps no event log: use SQLiteStore, PostgresStore or MemoryStore, "
            "or give the store an event_table() (agentmesh.checkpoints.KeepsEventLogs)"
        )
    return table


async def read_events(
    store: CheckpointStore,
    run_id: str,
    *,
    after: int = 0,
    limit: int = 256,
    wait: float = 0.0,
) -> EventLogPage:
    """The events of run `run_id` after position `after` in its store's event log, at most
    `limit` of them (0: only where the log stands).

    With `wait` (seconds), a page that would be empty waits until an event comes or
    `wait` passes. A run the store has no log of gives an empty page.

    Raises:
        UsageError: the store keeps no event log, or an argument is out of range.
        CheckpointError: the store cannot be read, or holds an event that is not one.
    """
    if not isinstance(run_id, str) or not run_id:
        raise UsageError(f"read_events(run_id=) takes a non-empty str, got {run_id!r}")
    after = whole("read_events(after=)", after, at_least=0)
    limit = whole("read_events(limit=)", limit, at_least=0)
    wait = number("read_events(wait=)", wait, unit="seconds")
    table = _logs_of(store)
    await opened(store)
    if wait <= 0 or limit == 0:
        head, rows = await table.read(run_id, after, limit)
    else:
        async with table.watch(run_id) as watch:
            loop = asyncio.get_running_loop()
            until = loop.time() + wait
            while True:
                head, rows = await table.read(run_id, after, limit)
                left = until - loop.time()
                if rows or left <= 0:
                    break
                await watch.changed(left)
    events = tuple(_logged(store, run_id, row) for row in rows)
    return EventLogPage(
        events=events,
        position=events[-1].position if events else after,
        dropped=0 if head is None else head.dropped,
        last_position=0 if head is None else head.position,
        finished=head is not None and head.finished,
        last_event_at=None if head is None else datetime.fromtimestamp(head.last_at, UTC),
    )


async def follow_events(
    store: CheckpointStore, run_id: str, *, after: int = 0, wait: float = 15.0
) -> AsyncIterator[LoggedEvent]:
    """Every event of run `run_id` after `after`, as the store gets them, until its
    `RunFinished`. A run that stopped without one is followed until the caller leaves
    (or bounds it with `asyncio.timeout`); `wait` is how long each look may wait."""
    while True:
        page = await read_events(store, run_id, after=after, wait=wait)
        for logged in page.events:
            yield logged
            if isinstance(logged.event, RunFinished):
                return
        after = page.position


def _logged(store: CheckpointStore, run_id: str, row: LoggedRow) -> LoggedEvent:
    position, _kind, text, saved_at = row
    try:
        event = parse_event(text)
    except (UsageError, ValidationError) as exc:
        raise CheckpointError(
            f"checkpoint store {store!r}: event {position} of run {run_id}'s log is not an "
            f"event ({type(exc).__name__}); it was written outside agentmesh or damaged"
        ) from None
    return LoggedEvent(position, event, datetime.fromtimestamp(saved_at, UTC))
