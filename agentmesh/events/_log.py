"""A run's events, written to its checkpoint store as they happen (the run's event log).

`EventLog` is how much of them a store keeps (`Coordinator(event_log=...)`); the sink
below writes them. Each event is encoded as the `--events FILE` lines are
(`event.to_json()`: camelCase, secrets masked) and queued for the store's next batch of
appends: one transaction per batch (group commit), never one per event, and the run
never waits for a write. The run's end waits until its events are committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from agentmesh._logging import get_logger
from agentmesh._numbers import whole
from agentmesh.events._channel import EventSink
from agentmesh.events._types import RunEvent

if TYPE_CHECKING:
    from agentmesh.envelope import PartialResults

__all__ = ["DEFAULT_EVENT_LOG_BYTES", "ESSENTIAL", "EventLog", "LoggedSink", "log_target"]

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


def log_target(store: object, log: EventLog | None) -> tuple[Any, EventLog] | None:
    """`(store, log)` when `store` keeps event logs and `log` asks for one; else None."""
    if log is None or store is None:
        return None
    keeps = getattr(store, "_event_table", None) and getattr(store, "_event_writes", None)
    if keeps is None:
        return None  # a store of the user's own: it keeps checkpoints, not events
    return store, log


class LoggedSink(EventSink):
    """Numbers a run's events, writes each to the store's event log, and passes it on
    to `inner` (a stream's channel), if any."""

    __slots__ = ("_inner", "_max_bytes", "_store", "_table")

    def __init__(self, run_id: str, store: Any, log: EventLog, inner: EventSink | None) -> None:
        super().__init__(run_id)
        self._store = store
        self._table = store._event_table()
        self._max_bytes = log.max_bytes
        self._inner = inner

    def _put(self, event: RunEvent) -> None:
        kind = type(event).__name__
        item = (self.run_id, kind, kind in ESSENTIAL, event.to_json(), self._max_bytes)
        table = self._table
        self._store._event_writes.behind(item, self.run_id, table.append, table.append_one)
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
        writes = self._store._event_writes
        await writes.drained()
        failed = writes.failed.pop(self.run_id, None)
        if failed is not None:
            get_logger(run_id=self.run_id).error(
                "event_log_write_failed", store=repr(self._store), error=repr(failed)
            )
