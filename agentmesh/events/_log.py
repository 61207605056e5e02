"""A run's events, written to its checkpoint store as they happen (the run's event log).

`EventLog` is how much of them a store keeps (`Coordinator(event_log=...)`); the sink
below writes them. Each event is encoded as the `--events FILE` lines are
(`event.to_json()`: camelCase, secrets masked) and queued for the store's next batch of
appends: one transaction per batch (group commit), never one per event, and the run
never waits for a write. The run's end waits until its events are committed. A store
keeps event logs when it implements `KeepsEventLogs` (`agentmesh.checkpoints`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from agentmesh._logging import get_logger
from agentmesh._numbers import whole
from agentmesh.checkpoints import EventTable, event_table_of
from agentmesh.events._channel import EventSink
from agentmesh.events._types import RunEvent

if TYPE_CHECKING:
    from agentmesh.envelope import PartialResults

__all__ = [
    "DEFAULT_EVENT_LOG_BYTES",
    "ESSENTIAL",
    "EventLog",
    "LoggedSink",
    "log_target",
    "opened",
]

DEFAULT_EVENT_LOG_BYTES: Final = 16 * 1024 * 1024
"""The most bytes of events a store keeps per run, by default (16 MiB)."""

ESSENTIAL: Final = frozenset(
    {"RunStarted", "TaskFinished", "EscalationPending", "ApprovalApplied", "RunFinished"}
)
"""The events a full log drops last: a run's start and end, each task's end, and what
waits for or came from a person. `RunFinished` is never dropped."""


@dataclass(frozen=True, slots=True)
class EventLog:
    """How much of a run's events its store keeps: `Coordinator(store=..., event_log=...)`.

    A coordinator with a store writes every event of its runs to the store (masked, as
    `event.to_json()` gives it), so that a console in another process can follow a run
    as it goes (`read_events`). Past `max_bytes` of JSON per run, the oldest events go,
    progress first (attempts, rulings, partial results, routes, usage, task starts),
    then the essential ones (`ESSENTIAL`); the log counts what it dropped, and always
    keeps `RunFinished`. `Coordinator(event_log=None)` writes no events.

    Attributes:
        max_bytes: the most bytes of event JSON kept per run (default 16 MiB).
    """

    max_bytes: int = DEFAULT_EVENT_LOG_BYTES

    def __post_init__(self) -> None:
        whole("EventLog(max_bytes=)", self.max_bytes, at_least=1)


def log_target(store: object, log: EventLog | None) -> tuple[object, EventTable, EventLog] | None:
    """`(store, its event logs, log)` when `store` keeps event logs (`KeepsEventLogs`) and
    `log` asks for one; else None."""
    if log is None or store is None:
        return None
    table = event_table_of(store)
    if table is None:
        return None  # a store that keeps checkpoints, not events
    return store, table, log


async def opened(store: object) -> None:
    """Open `store` if it opens (the built-in stores do; `CheckpointStore` has no `open`)."""
    opening = getattr(store, "open", None)
    if opening is not None:
        await opening()


class LoggedSink(EventSink):
    """Numbers a run's events, appends each to `table` (the store's event logs), and
    passes it on to `inner` (a stream's channel), if any."""

    __slots__ = ("_inner", "_max_bytes", "_store", "_table")

    def __init__(
        self, run_id: str, store: object, table: EventTable, log: EventLog, inner: EventSink | None
    ) -> None:
        super().__init__(run_id)
        self._store = store
        self._table = table
        self._max_bytes = log.max_bytes
        self._inner = inner

    def _put(self, event: RunEvent) -> None:
        kind = type(event).__name__
        item = (self.run_id, kind, kind in ESSENTIAL, event.to_json(), self._max_bytes)
        self._table.append_behind(item)
        if self._inner is not None:
            self._inner._put(event)

    async def room(self) -> None:
        if self._inner is not None:
            await self._inner.room()

    def partial(self, task_id: str) -> PartialResults | None:
        return None if self._inner is None else self._inner.partial(task_id)

    async def flush(self) -> None:
        """Wait until every event written so far is committed.

        A write that failed is logged, not raised: the run's report does not depend on
        its event log, which only a console reads.
        """
        try:
            await self._table.flush(self.run_id)
        except Exception as failed:
            get_logger(run_id=self.run_id).error(
                "event_log_write_failed", store=repr(self._store), error=repr(failed)
            )
