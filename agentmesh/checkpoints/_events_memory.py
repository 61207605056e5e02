"""The event logs of a `MemoryStore`: in this process's memory, watched without polling."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from agentmesh.checkpoints._batch import Batcher
from agentmesh.checkpoints._event_rows import (
    Appended,
    EventTable,
    LoggedRow,
    LogHead,
    Watch,
    doomed,
    finished_after,
    grouped,
)

__all__ = ["MemoryEventTable", "MemoryEvents"]


@dataclass(slots=True)
class _Log:
    rows: dict[int, tuple[LoggedRow, bool]] = field(default_factory=dict)
    head: LogHead = field(default_factory=lambda: LogHead(0, 0, 0, 0.0, False))


@dataclass(slots=True)
class MemoryEvents:
    """What a `MemoryStore` holds of its runs' events, and who watches which run."""

    logs: dict[str, _Log] = field(default_factory=dict)
    watchers: dict[str, set[asyncio.Event]] = field(default_factory=dict)

    def wake(self, run_id: str) -> None:
        for waker in self.watchers.get(run_id, ()):
            waker.set()


class _Woken(Watch):
    def __init__(self, waker: asyncio.Event) -> None:
        self.waker = waker

    async def changed(self, within: float) -> bool:
        try:
            async with asyncio.timeout(within):
                await self.waker.wait()
        except TimeoutError:
            return False
        self.waker.clear()
        return True


class MemoryEventTable(EventTable):
    """The event logs in `data` (no await between a look and a write: one step each)."""

    def __init__(self, data: MemoryEvents, writes: Batcher[Appended, None]) -> None:
        self.data = data
        self._writes = writes

    async def append(self, items: Sequence[Appended]) -> Sequence[None]:
        now = time.time()
        for run_id, batch in grouped(items).items():
            log = self.data.logs.setdefault(run_id, _Log())
            position, size, dropped, _last, finished = log.head
            for _run, kind, essential, text, _bound in batch:
                position += 1
                size += len(text)
                log.rows[position] = (LoggedRow(position, kind, text, now), essential)
            finished = finished_after(finished, (item[1] for item in batch))
            max_bytes = batch[-1][4]
            if size > max_bytes:
                chosen, freed = doomed(
                    ((p, len(r.text), ess, r.kind) for p, (r, ess) in log.rows.items()),
                    size,
                    max_bytes,
                )
                for gone in chosen:
                    del log.rows[gone]
                size, dropped = size - freed, dropped + len(chosen)
            log.head = LogHead(position, size, dropped, now, finished)
            self.data.wake(run_id)
        return [None] * len(items)

    async def read(
        self, run_id: str, after: int, limit: int
    ) -> tuple[LogHead | None, list[LoggedRow]]:
        log = self.data.logs.get(run_id)
        if log is None:
            return None, []
        rows = [row for position, (row, _e) in log.rows.items() if position > after]
        return log.head, rows[:limit]

    async def heads(self, run_ids: Sequence[str]) -> dict[str, LogHead]:
        logs = self.data.logs
        return {run_id: logs[run_id].head for run_id in run_ids if run_id in logs}

    @contextlib.asynccontextmanager
    async def watch(self, run_id: str) -> AsyncIterator[Watch]:
        waker = asyncio.Event()
        watchers = self.data.watchers.setdefault(run_id, set())
        watchers.add(waker)
        try:
            yield _Woken(waker)
        finally:
            watchers.discard(waker)
            if not watchers:
                self.data.watchers.pop(run_id, None)

    async def nudge(self, run_id: str) -> None:
        self.data.wake(run_id)
