"""A run's event log as a store keeps it: rows of JSON text, appended, bounded, read on.

The stores know nothing of events: a row is a kind (the event's class name), whether
it is essential, and its JSON text (masked by whoever built it). The typed side is
`agentmesh.events` (its `EventLog` writes, `read_events` reads).

Each run has one log: its rows, numbered by the store from 1 in the order they were
committed (two writers of one run, a run and its resume, take positions in turn), and
a head row with the last position, the bytes kept, the events dropped, when the last
one came and whether the run's last `RunStarted` has its `RunFinished`. Past the run's
`max_bytes` the oldest non-essential rows go first, then the oldest essential ones; a
`RunFinished` is never dropped. A log is trimmed to `TRIM_TO` of its bound at once, so
that a full log is trimmed once per many appends, not at every one.

The seam: a store keeps event logs when it has `event_table()` (`KeepsEventLogs`), and
`event_table_of(store)` is the one way agentmesh asks a store for them. A store of
one's own implements `EventTable.append` and `EventTable.read` and keeps logs too.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import ClassVar, Final, NamedTuple, Protocol, TypeAlias, runtime_checkable

from agentmesh.checkpoints._batch import Batcher
from agentmesh.errors import UsageError

__all__ = [
    "Appended",
    "EventTable",
    "KeepsEventLogs",
    "LogHead",
    "LoggedRow",
    "Watch",
    "doomed",
    "event_table_of",
]

FINISHED: Final = "RunFinished"
STARTED: Final = "RunStarted"
TRIM_TO: Final = 0.75
POLL: Final = 0.25
"""Seconds between two looks at a store that cannot notify (SQLite, another process)."""

Appended: TypeAlias = tuple[str, str, bool, str, int]
"""`(run_id, kind, essential, json_text, max_bytes)`: one event to append."""


class LoggedRow(NamedTuple):
    """One row of a run's log: its position, the event's kind, its JSON text, when saved."""

    position: int
    kind: str
    text: str
    saved_at: float


class LogHead(NamedTuple):
    """Where a run's log stands: the last position, bytes kept, events dropped, when the
    last event came (seconds since the epoch), and whether the run's last start ended."""

    position: int
    size: int
    dropped: int
    last_at: float
    finished: bool


class Watch(abc.ABC):
    """Notifications about one run, registered before its caller looks at the store.

    `EventTable.watch` yields one while its block runs; a table that can wake its
    readers (`PostgresStore`: LISTEN/NOTIFY) overrides it with a `Watch` of its own.
    """

    # Whether a change wakes the watcher (else `changed` only waits a little).
    notifies: ClassVar[bool] = True

    @abc.abstractmethod
    async def changed(self, within: float) -> bool:
        """Wait until the run's log may have changed (True) or `within` seconds passed."""


class _Polled(Watch):
    notifies = False

    async def changed(self, within: float) -> bool:
        await asyncio.sleep(min(within, POLL))
        return True  # maybe: the caller looks again


class EventTable(abc.ABC):
    """A store's event logs, one per run: what `KeepsEventLogs.event_table()` gives.

    A table of one's own implements `append` and `read`; the rest has defaults: `heads`
    reads each run's head, `watch` looks again every 0.25 s, `nudge` does nothing, and
    `append_behind` / `flush` queue the run's events for `append` in batches (group
    commit: the events that come while a batch is written share the next one).
    """

    # The queue of appends nobody waits for; a built-in store shares its own among the
    # tables it hands out, so that its runs' events share batches.
    _writes: Batcher[Appended, None] | None = None

    @abc.abstractmethod
    async def append(self, items: Sequence[Appended]) -> Sequence[None]:
        """Append `items` (of any runs) in one transaction, each run's in the order given,
        and return one None per item.

        Each item is `(run_id, kind, essential, json_text, max_bytes)`: the event's class
        name, whether a full log should keep it longest (`EventLog`), its JSON text, and
        the most bytes of text its run's log should keep. Number each run's rows from 1
        in the order committed; the built-in stores then drop the oldest non-essential
        rows past `max_bytes` (never a `RunFinished`) and count them in the head.
        """

    async def append_one(self, item: Appended) -> None:
        """Append one item alone (what a failed batch falls back to, item by item)."""
        await self.append([item])

    @abc.abstractmethod
    async def read(
        self, run_id: str, after: int, limit: int
    ) -> tuple[LogHead | None, list[LoggedRow]]:
        """The log's head (None: the run has no log) and up to `limit` rows after `after`."""

    async def heads(self, run_ids: Sequence[str]) -> dict[str, LogHead]:
        """The heads of the logs of `run_ids` that have one."""
        found: dict[str, LogHead] = {}
        for run_id in run_ids:
            head, _rows = await self.read(run_id, 0, 0)
            if head is not None:
                found[run_id] = head
        return found

    @contextlib.asynccontextmanager
    async def watch(self, run_id: str) -> AsyncIterator[Watch]:
        """Notifications about `run_id` while the block runs; a look every `POLL` seconds
        where the store cannot notify."""
        yield _Polled()

    async def nudge(self, run_id: str) -> None:  # noqa: B027  # a store that cannot notify
        """Tell the watchers of `run_id` that something of it changed (a person answered)."""

    def append_behind(self, item: Appended) -> None:
        """Queue `item` for the next batch of `append`s without waiting for it; `flush`
        of its run raises its failure. Needs a running event loop."""
        writes = self._writes
        if writes is None:
            writes = self._writes = Batcher()
        writes.behind(item, item[0], self.append, self.append_one)

    async def flush(self, run_id: str) -> None:
        """Wait until every item queued so far is appended; raise the first failure of an
        item of `run_id` queued (`append_behind`) since its last flush."""
        writes = self._writes
        if writes is None:
            return
        await writes.drained()
        failed = writes.failed.pop(run_id, None)
        if failed is not None:
            raise failed


@runtime_checkable
class KeepsEventLogs(Protocol):
    """What a `CheckpointStore` adds to keep its runs' event logs (`EventLog`).

    A coordinator with such a store (and `event_log=`) appends each event of its runs to
    `store.event_table()`, and `read_events`, `follow_events` and the run console read
    them back from it. The built-in stores implement it; a store of one's own can too,
    with an `EventTable` subclass. A store without it keeps checkpoints and no events.
    """

    def event_table(self) -> EventTable:
        """The store's event logs, ready once the store is open (a new handle each call
        is fine: the logs are in the store)."""
        ...


def event_table_of(store: object) -> EventTable | None:
    """The event logs `store` keeps (`store.event_table()`), or None for a store that
    keeps none (it has no `event_table`).

    Raises:
        UsageError: `store.event_table()` gave something other than an `EventTable`.
    """
    if not isinstance(store, KeepsEventLogs):
        return None
    table = store.event_table()
    if not isinstance(table, EventTable):
        raise UsageError(
            f"{store!r}.event_table() gave {type(table).__name__}, not an "
            "agentmesh.checkpoints.EventTable"
        )
    return table


def doomed(
    rows: Iterable[tuple[int, int, bool, str]], size: int, max_bytes: int
) -> tuple[list[int], int]:
    """The positions to drop from a log of `size` bytes over `max_bytes`, and the bytes
    that frees: the oldest non-essential first, then the oldest essential; never a
    `RunFinished`. `rows` are `(position, bytes, essential, kind)`, oldest first."""
    target = size - int(max_bytes * TRIM_TO)
    ordered = sorted(rows, key=lambda row: (row[2], row[0]))
    chosen: list[int] = []
    freed = 0
    for position, length, _essential, kind in ordered:
        if freed >= target:
            break
        if kind == FINISHED:
            continue
        chosen.append(position)
        freed += length
    return chosen, freed


def grouped(items: Sequence[Appended]) -> dict[str, list[Appended]]:
    """`items` by run, each run's in the order given."""
    runs: dict[str, list[Appended]] = {}
    for item in items:
        runs.setdefault(item[0], []).append(item)
    return runs


def finished_after(finished: bool, kinds: Iterable[str]) -> bool:
    """Whether the run's last start has ended, once `kinds` are appended to a log that was
    `finished` before: a resume starts it again."""
    for kind in kinds:
        if kind == FINISHED:
            finished = True
        elif kind == STARTED:
            finished = False
    return finished
