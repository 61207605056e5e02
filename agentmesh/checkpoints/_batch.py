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


class Batcher(Generic[T, R]):
    """Makes queued calls `many(items)` at a time (one transaction); `one(item)` alone
    when a batch fails, so that each caller gets its own outcome."""

    __slots__ = ("_many", "_one", "_queued", "_worker")

    def __init__(
        self,
        many: Callable[[Sequence[T]], Awaitable[Sequence[R]]],
        one: Callable[[T], Awaitable[R]],
    ) -> None:
        self._many = many
        self._one = one
        self._queued: list[tuple[T, asyncio.Future[R]]] = []
        self._worker: asyncio.Task[None] | None = None

    async def call(self, item: T) -> R:
        """`item`'s result, once the batch that holds it is done."""
        return await self.submit(item)

    def submit(self, item: T) -> asyncio.Future[R]:
        """Queue `item` for the next batch; its result when that batch is done."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[R] = loop.create_future()
        self._queued.append((item, done))
        worker = self._worker
        if worker is None or worker.done() or worker.get_loop() is not loop:
            self._worker = loop.create_task(self._work())
        return done

    async def drained(self) -> None:
        """Wait until every queued call is done (before the store closes)."""
        worker = self._worker
        loop = asyncio.get_running_loop()
        if worker is not None and not worker.done() and worker.get_loop() is loop:
            await asyncio.shield(worker)

    async def _work(self) -> None:
        while self._queued:
            batch, self._queued = self._queued, []
            try:
                results = await self._many([item for item, _done in batch])
            except Exception:
                await self._each(batch)
            except BaseException:
                for _item, done in batch:
                    done.cancel()
                raise
            else:
                for (_item, done), result in zip(batch, results, strict=True):
                    if not done.done():
                        done.set_result(result)

    async def _each(self, batch: list[tuple[T, asyncio.Future[R]]]) -> None:
        for item, done in batch:
            try:
                result = await self._one(item)
            except Exception as exc:
                if not done.done():
                    done.set_exception(exc)
            else:
                if not done.done():
                    done.set_result(result)
