"""`MemoryStore`: the checkpoint store in this process's memory."""

from __future__ import annotations

from collections.abc import Sequence

from agentmesh.checkpoints._event_rows import EventTable
from agentmesh.checkpoints._events_memory import MemoryEvents, MemoryEventTable
from agentmesh.checkpoints._store import Row, RunSpan, StoreBase

__all__ = ["MemoryStore"]


class MemoryStore(StoreBase):
    """Checkpoints in this process's memory: for tests, and runs that need no durability.

    Values are kept as JSON text, exactly as `SQLiteStore` keeps them, so a test against
    a `MemoryStore` sees what a durable store would give back.
    """

    def __init__(self) -> None:
        super().__init__()
        self._rows: dict[tuple[str, str, str], Row] = {}
        self._events = MemoryEvents()

    def event_table(self) -> EventTable:
        """The runs' event logs (`KeepsEventLogs`: `agentmesh.events.read_events`)."""
        return MemoryEventTable(self._events, self._event_writes)

    async def _open(self) -> None:
        pass

    async def _close(self) -> None:
        self._rows.clear()
        self._events.logs.clear()

    async def _put(self, row: Row) -> None:
        self._rows[row[:3]] = row

    async def _claim(self, row: Row) -> Row | None:
        # No await between the look and the write: atomic within the event loop.
        existing = self._rows.get(row[:3])
        if existing is None:
            self._rows[row[:3]] = row
        return existing

    async def _get(self, run_id: str, stage: str, key: str) -> Row | None:
        return self._rows.get((run_id, stage, key))

    async def _list(self, run_id: str, stage: str | None) -> Sequence[Row]:
        return [
            row
            for row in self._rows.values()
            if row[0] == run_id and (stage is None or row[1] == stage)
        ]

    async def _delete(self, run_id: str, stage: str | None, key: str | None) -> int:
        doomed = [
            address
            for address in self._rows
            if address[0] == run_id
            and (stage is None or address[1] == stage)
            and (key is None or address[2] == key)
        ]
        for address in doomed:
            del self._rows[address]
        return len(doomed)

    async def _runs(self, stage: str | None, limit: int, offset: int) -> Sequence[RunSpan]:
        spans: dict[str, tuple[float, float]] = {}
        for run_id, _stage, _key, _version, _text, saved_at in self._rows.values():
            first, last = spans.get(run_id, (saved_at, saved_at))
            spans[run_id] = (min(first, saved_at), max(last, saved_at))
        wanted = {row[0] for row in self._rows.values() if stage is None or row[1] == stage}
        found = sorted(
            ((run_id, *span) for run_id, span in spans.items() if run_id in wanted),
            key=lambda span: (-span[1], span[0]),
        )
        return found[offset : offset + limit]

    def __repr__(self) -> str:
        # Its identity, not its size: an error that names the store names the same one
        # before and after a write.
        return f"<MemoryStore at {id(self):#x}>"
