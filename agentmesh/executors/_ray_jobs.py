"""The worker pool's bookkeeping on the driver: a dispatch (`Job`) and what the driver
knows of each worker (`Worker`): its jobs and what is to go to it next."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentmesh.events import EventSink
    from agentmesh.executors._ray_spec import RunTerms, Spec

__all__ = ["Job", "Worker", "load"]


class Job:
    """One dispatch in the pool: awaited, it is the task's result (the worker's dict)."""

    __slots__ = ("again", "future", "over", "settled", "sink", "spec", "started", "worker")

    def __init__(self, spec: Spec, sink: EventSink | None, future: asyncio.Future[Any]) -> None:
        self.spec = spec
        self.sink = sink
        self.future = future
        self.worker: Worker | None = None  # None while in the pool's queue
        self.over = False
        self.started = False  # the worker said it started
        self.again = False  # sent once more after its worker died
        self.settled: asyncio.Future[None] | None = None  # made when a stop waits for it

    def __await__(self) -> Generator[Any, None, dict[str, Any]]:
        result: dict[str, Any] = yield from self.future.__await__()
        return result

    def end(self, kind: str, value: Any) -> None:
        """The worker ended the task (`"ok"`, `"error"`, `"cancelled"`) or was lost."""
        self.over = True
        future = self.future
        if not future.done():
            if kind == "ok":
                future.set_result(value)
            elif kind == "cancelled":
                future.cancel()
            else:
                future.set_exception(value)
        if self.settled is not None and not self.settled.done():
            self.settled.set_result(None)


class Worker:
    """What the driver knows of one worker of the pool, and what is to go to it."""

    __slots__ = (
        "actor",
        "cancels",
        "dead",
        "has",
        "jobs",
        "node",
        "out",
        "out_refs",
        "terms",
    )

    def __init__(self, actor: Any, node: str | None) -> None:
        self.actor = actor
        self.node = node
        self.jobs: dict[str, Job] = {}  # sent, not ended, by dispatch
        self.dead: asyncio.Future[None] | None = None
        self.has: set[str] = set()  # the shipments it was sent the refs of, by key
        self.terms: RunTerms | None = None  # the last spec's: their refs are sent
        # Specs (and refs) for a busy worker go with its next poll: one message, not two.
        self.out: dict[str, Spec] = {}
        self.out_refs: dict[str, Any] = {}
        self.cancels: list[str] = []  # dispatches to cancel there, sent once a turn


def load(worker: Worker) -> int:
    return len(worker.jobs)
