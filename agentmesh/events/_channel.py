"""Where a run's events go: `EventSink`, and the channel a stream reads.

The run scope carries the run's sink (`RunScope.events`); without a consumer it is None
and nothing is built. Emission is synchronous (a policy ruling, `ctx.record_partial`
happen in plain functions), so an event is never refused: back-pressure is applied at
the run's next await point instead (`await sink.room()`, before every dispatch and
every tool call), where the run waits while the consumer is `bound` events behind.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import deque
from typing import Any, TypeVar

from agentmesh._engine._partials import PartialRecorder
from agentmesh.envelope import PartialResults
from agentmesh.events._types import PartialRecorded, RunEvent

__all__ = ["DEFAULT_BUFFER", "EventChannel", "EventSink"]

E = TypeVar("E", bound=RunEvent)

DEFAULT_BUFFER = 1024
"""Events a stream holds for a consumer that is behind before the run waits for it."""


class EventSink:
    """Where a run's events go (`RunScope.events`): numbers each event of the run, in order.

    `emit` builds the run's next event, `forward` numbers one built elsewhere (a remote
    task's); a subclass decides where an event goes (`_put`), and may make the run wait
    at its next `room()` for a consumer that is behind. A `RunStream` reads its own sink.
    """

    __slots__ = ("_seq", "run_id")

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self._seq = 0

    def emit(self, kind: type[E], task_id: str | None, /, **fields: Any) -> None:
        """Build the next event of the run and pass it on."""
        self._seq += 1
        self._put(
            kind(
                run_id=self.run_id, task_id=task_id, seq=self._seq, timestamp=time.time(), **fields
            )
        )

    def forward(self, event: RunEvent) -> None:
        """Pass on an event built elsewhere (a remote task's), numbered in this run."""
        self._seq += 1
        self._put(dataclasses.replace(event, run_id=self.run_id, seq=self._seq))

    async def room(self) -> None:
        """Return once the consumer has room for more events (at once, by default)."""

    def partial(self, task_id: str) -> PartialResults | None:
        """The progress task `task_id` recorded, if this sink kept it (not by default)."""
        return None

    def _put(self, event: RunEvent) -> None:
        raise NotImplementedError


class EventChannel(EventSink):
    """The events of a streamed run, waiting for its consumer; at most about `bound`.

    The run waits at its next `room()` while `bound` events are unread; events emitted
    between two such points (a task's policy rulings, its partial results) are kept all
    the same, so the channel may hold a few more than `bound`, never fewer than emitted.
    """

    __slots__ = ("_closed", "_items", "_readable", "_writable", "bound", "partials")

    def __init__(self, run_id: str, bound: int = DEFAULT_BUFFER) -> None:
        super().__init__(run_id)
        self.bound = bound
        self._items: deque[RunEvent] = deque()
        self._readable = asyncio.Event()
        self._writable = asyncio.Event()
        self._writable.set()
        self._closed = False
        # Progress recorded per task, for the report of a run its consumer stopped: a
        # task cut in flight keeps what it had found.
        self.partials: dict[str, PartialRecorder] = {}

    def _put(self, event: RunEvent) -> None:
        if isinstance(event, PartialRecorded) and event.task_id is not None:
            recorder = self.partials.setdefault(event.task_id, PartialRecorder())
            recorder.record(event.findings, completed=event.completed, pending=event.pending)
        self._items.append(event)
        self._readable.set()
        if len(self._items) >= self.bound:
            self._writable.clear()

    @property
    def unread(self) -> int:
        return len(self._items)

    async def room(self) -> None:
        while len(self._items) >= self.bound and not self._closed:
            await self._writable.wait()

    async def next(self) -> RunEvent | None:
        """The next event in order; None once the run ended and every event was read."""
        while not self._items:
            if self._closed:
                return None
            self._readable.clear()
            await self._readable.wait()
        event = self._items.popleft()
        if len(self._items) < self.bound:
            self._writable.set()
        return event

    def close(self) -> None:
        """The run ended: no more events; a waiting consumer or producer goes on."""
        self._closed = True
        self._readable.set()
        self._writable.set()

    def partial(self, task_id: str) -> PartialResults | None:
        """The progress task `task_id` recorded so far, merged over its attempts."""
        recorder = self.partials.get(task_id)
        return None if recorder is None else recorder.snapshot()
