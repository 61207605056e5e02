"""Checkpoint stores of a user's own, as the protocol asks and nothing more, over a
`MemoryStore`: `PlainStore` was written before `claim` existed (put, get, list, delete,
close); `UserStore` has `claim` too and counts its `put`s. Tests subclass them to add a
seam (writes behind, event logs) and check what the framework does with it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentmesh.checkpoints import Checkpoint, MemoryStore


class PlainStore:
    """A user's store written before `claim` existed: put, get, list, delete, close."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.puts = 0

    async def put(self, run_id: str, stage: str, key: str, value: object) -> None:
        self.puts += 1
        await self.inner.put(run_id, stage, key, value)

    async def get(self, run_id: str, stage: str, key: str, **kwargs: Any) -> Any:
        return await self.inner.get(run_id, stage, key, **kwargs)

    async def list(self, run_id: str, stage: str | None = None) -> Sequence[Checkpoint]:
        return await self.inner.list(run_id, stage)

    async def delete(self, run_id: str, stage: str | None = None, key: str | None = None) -> int:
        return await self.inner.delete(run_id, stage, key)

    async def close(self) -> None:
        await self.inner.close()


class UserStore(PlainStore):
    """A user's store: put, claim, get, list, delete, close; no optional seam."""

    async def claim(self, run_id: str, stage: str, key: str, value: object) -> Any:
        return await self.inner.claim(run_id, stage, key, value)
