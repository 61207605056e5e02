"""Group commit: the calls a store receives while it is busy, made together in one go.

A fan-out of tasks each saving a record would otherwise pay one transaction (one fsync,
one hop to the store's thread or one round trip to the server) per record. A `Batcher`
queues each call; while one batch is being made, the calls that arrive queue for the
next. Each caller still waits for its own call to be done, so a `put` is exactly as
durable on return as alone: only the cost is shared.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["Batcher"]

T = TypeVar("T")
R = TypeVar("R")


Many = Callable[[Sequence[T]], Awaitable[Sequence[R]]]
One = Callable[[T], Awaitable[R]]


class Batcher(Generic[T, R]):
    """Makes queued calls `many(items)` at a time (one transaction); `one(item)` alone
    when a batch fails, so that each caller gets its own outcome.

    The store's methods are passed with each item, not kept: a store holding a batcher
    that held its bound methods would be a reference cycle, freed only by the GC.
    """

    __slots__ = ("_finished", "_queued", "_submitted", "_wakers", "_worker", "failed")

    def __init__(self) -> None:
        self._queued: list[tuple[T, asyncio.Future[R] | str]] = []
        self._worker: asyncio.Task[None] | None = None
        # Counted so that `drained` waits for what was queued before it, not for a queue
        # that other callers keep filling.
        self._submitted = self._finished = 0
        self._wakers: list[asyncio.Future[None]] = []
        # The first failure of a call nobody waits for (`behind`), by its owner (a run
        # id), until that owner takes it: one run's lost write is never another's news.
        self.failed: dict[str, Exception] = {}

    def submit(self, item: T, many: Many[T, R], one: One[T, R]) -> asyncio.Future[R]:
        """Queue `item` for the next batch; its result when that batch is done."""
        done: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._queue(item, done, many, one)
        return done

    def behind(self, item: T, owner: str, many: Many[T, R], one: One[T, R]) -> None:
        """Queue `item` for the next batch, nobody waiting: a failure is kept in
        `failed[owner]`."""
        self._queue(item, owner, many, one)

    def _queue(
        self, item: T, done: asyncio.Future[R] | str, many: Many[T, R], one: One[T, R]
    ) -> None:
        self._queued.append((item, done))
        self._submitted += 1
        worker = self._worker
        loop = asyncio.get_running_loop()
        if worker is None or worker.done() or worker.get_loop() is not loop:
            self._worker = loop.create_task(self._work(many, one))

    async def drained(self) -> None:
        """Wait until every call queued so far is done."""
        target = self._submitted
        loop = asyncio.get_running_loop()
        while self._finished < target:
            worker = self._worker
            if worker is None or worker.done() or worker.get_loop() is not loop:
                return  # nothing is writing in this loop: nothing left to wait for
            waker: asyncio.Future[None] = loop.create_future()
            self._wakers.append(waker)
            await waker

    async def _work(self, many: Many[T, R], one: One[T, R]) -> None:
        try:
            await self._batches(many, one)
        finally:
            self._wake()  # a worker cancelled (its loop closing) leaves nobody waiting

    async def _batches(self, many: Many[T, R], one: One[T, R]) -> None:
        while self._queued:
            batch, self._queued = self._queued, []
            try:
                results = await many([item for item, _done in batch])
            except Exception:
                await self._each(batch, one)
            except BaseException:
                for _item, done in batch:
                    if isinstance(done, str):
                        lost = RuntimeError("a write was cancelled before its commit")
                        self.failed.setdefault(done, lost)
                    else:
                        done.cancel()
                raise
            else:
                for (_item, done), result in zip(batch, results, strict=True):
                    if not isinstance(done, str) and not done.done():
                        done.set_result(result)
            self._finished += len(batch)
            self._wake()

    def _wake(self) -> None:
        wakers, self._wakers = self._wakers, []
        for waker in wakers:
            if not waker.done():
                waker.set_result(None)

    async def _each(self, batch: list[tuple[T, asyncio.Future[R] | str]], one: One[T, R]) -> None:
        for item, done in batch:
            try:
                result = await one(item)
            except Exception as exc:
                if isinstance(done, str):
                    self.failed.setdefault(done, exc)
                elif not done.done():
                    done.set_exception(exc)
            else:
                if not isinstance(done, str) and not done.done():
                    done.set_result(result)
