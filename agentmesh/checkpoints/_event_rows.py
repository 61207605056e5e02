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
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import ClassVar, Final, NamedTuple, TypeAlias

__all__ = [
    "Appended",
    "EventTable",
    "LogHead",
    "LoggedRow",
    "Watch",
    "doomed",
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
    """Notifications about one run, registered before its caller looks at the store."""

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
    """A store's event logs, one per run (`store._event_table()`)."""

    @abc.abstractmethod
    async def append(self, items: Sequence[Appended]) -> Sequence[None]:
        """Append `items` (of any runs) in one transaction, trimming what is over bounds."""

    async def append_one(self, item: Appended) -> None:
        await self.append([item])

    @abc.abstractmethod
    async def read(
        self, run_id: str, after: int, limit: int
    ) -> tuple[LogHead | None, list[LoggedRow]]:
        """The log's head (None: the run has no log) and up to `limit` rows after `after`."""

    @abc.abstractmethod
    async def heads(self, run_ids: Sequence[str]) -> dict[str, LogHead]:
        """The heads of the logs of `run_ids` that have one."""

    @contextlib.asynccontextmanager
    async def watch(self, run_id: str) -> AsyncIterator[Watch]:
        """Notifications about `run_id` while the block runs; a look every `POLL` seconds
        where the store cannot notify."""
        yield _Polled()

    async def nudge(self, run_id: str) -> None:  # noqa: B027  # a store that cannot notify
        """Tell the watchers of `run_id` that something of it changed (a person answered)."""


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
