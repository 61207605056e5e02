"""The `CheckpointStore` protocol, the `Checkpoint` record, and the in-memory store.

A checkpoint is one JSON value under `(run_id, stage, key)`. Values go in as pydantic
models or plain JSON data and come out as JSON (`Checkpoint.value`) or, on request, as a
typed value again (`get(..., model=M)`, `Checkpoint.value_as(M)`). Every record carries
the schema version it was written with.
"""

from __future__ import annotations

import abc
import asyncio
import enum
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import (
    Any,
    ClassVar,
    NamedTuple,
    Protocol,
    Self,
    TypeAlias,
    TypeVar,
    overload,
    runtime_checkable,
)

from pydantic import BaseModel, ConfigDict, JsonValue

from agentmesh._codec import SCHEMA_VERSION, damaged, decode, encode, read_as, revive
from agentmesh.checkpoints._batch import Batcher
from agentmesh.checkpoints._event_rows import Appended
from agentmesh.errors import UsageError

__all__ = [
    "Address",
    "Checkpoint",
    "CheckpointStore",
    "Row",
    "RunStamp",
    "StoreBase",
    "WritesBehind",
]

T = TypeVar("T")

Row: TypeAlias = tuple[str, str, str, int, str, float]
"""`(run_id, stage, key, schema_version, json_text, saved_at)`, as a store keeps it."""
Address: TypeAlias = tuple[str, str, str]
"""`(run_id, stage, key)`: where a row is."""


class Checkpoint(BaseModel):
    """One stored value and where it belongs."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    run_id: str
    stage: str
    key: str
    value: JsonValue
    schema_version: int
    saved_at: datetime

    def value_as(self, model: type[T]) -> T:
        """The value validated as `model` (a pydantic model or any type pydantic knows)."""
        typed: T = revive(self.value, model, what=f"checkpoint {self.address}")
        return typed

    @property
    def address(self) -> str:
        return f"{self.run_id}/{self.stage}/{self.key}"


@runtime_checkable
class CheckpointStore(Protocol):
    """Durable JSON values namespaced by run id, stage and key.

    `put` replaces a value in one transaction (which built-in stores share among the
    puts made at once), committed when `put` returns, so a crash leaves either the old
    value or the new one. `claim` saves a value only where there is none, atomically: of any
    number of callers at once, in any number of processes, exactly one wins. Whatever
    two processes or two people may do at once (answer a decision, make a
    non-idempotent call) is claimed this way, never checked and then done.
    Implementations: `SQLiteStore` (the default), `PostgresStore` and `MemoryStore`.

    A store written before `claim` existed still works for everything else; a person's
    answer given through it raises `UsageError` (it cannot be claimed), and its ledger
    of side effects records results without claiming calls first.
    """

    async def put(self, run_id: str, stage: str, key: str, value: object) -> None:
        """Save `value` (a pydantic model or JSON data) as JSON."""
        ...

    async def claim(self, run_id: str, stage: str, key: str, value: object) -> Checkpoint | None:
        """Save `value` only if the key holds nothing, atomically (compare-and-set).

        Returns None when this call saved it (it won), else the checkpoint that was
        already there (the winner's), which stays untouched.
        """
        ...

    @overload
    async def get(self, run_id: str, stage: str, key: str) -> Checkpoint | None: ...
    @overload
    async def get(self, run_id: str, stage: str, key: str, *, model: type[T]) -> T | None: ...

    async def list(self, run_id: str, stage: str | None = None) -> Sequence[Checkpoint]:
        """The run's checkpoints (of one stage, if given), oldest first."""
        ...

    async def delete(self, run_id: str, stage: str | None = None, key: str | None = None) -> int:
        """Delete a run's checkpoints, or one stage's, or one key; returns how many."""
        ...

    async def close(self) -> None:
        """Release the store; using it afterwards is an error."""
        ...


@runtime_checkable
class WritesBehind(Protocol):
    """What a `CheckpointStore` may add to take writes its writer does not wait for.

    A coordinator writes each finished task's record with `put_behind` and calls
    `flush` before it reports the run; a task with `checkpoint=True` hands each snapshot
    of its progress to `put_queued` and waits for it at its end. The built-in stores
    implement it with group commit (the writes queued meanwhile share one transaction).
    A store without these methods gets an awaited `put` for each write instead: a
    store of one's own needs none of them.
    """

    def put_behind(self, run_id: str, stage: str, key: str, value: object) -> bool:
        """Queue a put without waiting for it; False when the store cannot now (then the
        caller `put`s it). The value is checked now; the write is durable once `flush`
        returns, which raises its failure."""
        ...

    def put_queued(
        self, run_id: str, stage: str, key: str, value: object
    ) -> asyncio.Future[None] | None:
        """Queue a put: a future done (or failed) once it is committed, which goes ahead
        whether or not anyone awaits it; None when the store cannot now (then the caller
        `put`s it)."""
        ...

    async def flush(self, run_id: str) -> None:
        """Wait until every put queued so far is committed; raise the first failure of a
        put `run_id` wrote behind (`put_behind`) since its last flush."""
        ...


class _State(enum.Enum):
    UNOPENED = "unopened"
    OPEN = "open"
    CLOSED = "closed"


class StoreBase(abc.ABC):
    """What every built-in store shares: validation, encoding, and an explicit lifecycle.

    A store opens on first use (or `await store.open()`, or `async with`); after
    `close()` it refuses every call with a `UsageError`.
    """

    # Whether `put` and `get` join a batch (`_put_many`, `_get_many`: one transaction, one
    # hop to the store) with the calls made meanwhile, rather than each making its own.
    _group_commit: ClassVar[bool] = False

    def __init__(self) -> None:
        self._state = _State.UNOPENED
        self._opening = asyncio.Lock()
        self._writes: Batcher[Row, None] = Batcher()
        self._reads: Batcher[Address, Row | None] = Batcher()
        # The runs' events, appended in batches of their own (`agentmesh.events.EventLog`):
        # shared by the tables a store hands out (`event_table()`, `EventTable.append_behind`).
        self._event_writes: Batcher[Appended, None] = Batcher()

    # -- lifecycle -----------------------------------------------------------------------

    async def open(self) -> Self:
        """Open the store now rather than on first use; a no-op when already open."""
        if self._state is _State.OPEN:
            return self
        async with self._opening:
            if self._state is _State.CLOSED:
                raise UsageError(f"{self!r} is closed; create a new store")
            if self._state is _State.UNOPENED:
                await self._open()
                self._state = _State.OPEN
        return self

    async def close(self) -> None:
        """Release the store (a no-op when already closed)."""
        async with self._opening:
            if self._state is _State.OPEN:
                await self._writes.drained()
                await self._reads.drained()
                await self._event_writes.drained()
                await self._close()
            self._state = _State.CLOSED

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self._state is _State.CLOSED

    # -- the protocol --------------------------------------------------------------------

    async def put(self, run_id: str, stage: str, key: str, value: object) -> None:
        """Save `value` (a pydantic model or JSON data) as JSON, in one transaction."""
        _check_address(run_id, stage, key)
        text = encode(value, what=f"checkpoint {run_id}/{stage}/{key}")
        await self.open()
        row = (run_id, stage, key, SCHEMA_VERSION, text, time.time())
        # In a batch, still done on return: only the transaction is shared.
        if self._group_commit:
            await self._writes.submit(row, self._put_many, self._put)
        else:
            await self._put(row)

    # -- written behind (`WritesBehind`: the coordinator's task records, saved progress) --

    def put_behind(self, run_id: str, stage: str, key: str, value: object) -> bool:
        """Queue a put for the next batch without waiting for it; False when this store
        cannot (no group commit, or not open yet): then `put` it.

        The value is checked and encoded now. The put is durable once `flush()` returns,
        which raises its failure: a caller must flush before it reports anything saved.
        """
        row = self._row_now(run_id, stage, key, value)
        if row is None:
            return False
        self._writes.behind(row, run_id, self._put_many, self._put)
        return True

    def put_queued(
        self, run_id: str, stage: str, key: str, value: object
    ) -> asyncio.Future[None] | None:
        """Queue a put for the next batch: done (or failed) once that batch is; None when
        this store cannot (no group commit, or not open yet)."""
        row = self._row_now(run_id, stage, key, value)
        return None if row is None else self._writes.submit(row, self._put_many, self._put)

    def _row_now(self, run_id: str, stage: str, key: str, value: object) -> Row | None:
        if not self._group_commit or self._state is not _State.OPEN:
            return None
        _check_address(run_id, stage, key)
        text = encode(value, what=f"checkpoint {run_id}/{stage}/{key}")
        return (run_id, stage, key, SCHEMA_VERSION, text, time.time())

    async def flush(self, run_id: str) -> None:
        """Wait until every queued put is committed; raise the first failure of a put
        `run_id` wrote behind (`put_behind`) since its last flush."""
        await self._writes.drained()
        failed = self._writes.failed.pop(run_id, None)
        if failed is not None:
            raise failed

    async def claim(self, run_id: str, stage: str, key: str, value: object) -> Checkpoint | None:
        """Save `value` only if the key holds nothing, in one atomic step.

        Returns None when this call saved it, else the checkpoint already there (the
        winner's, untouched): of concurrent callers in any process, exactly one gets None.
        """
        _check_address(run_id, stage, key)
        text = encode(value, what=f"checkpoint {run_id}/{stage}/{key}")
        await self.open()
        row = await self._claim((run_id, stage, key, SCHEMA_VERSION, text, time.time()))
        return None if row is None else self._record(row)

    @overload
    async def get(self, run_id: str, stage: str, key: str) -> Checkpoint | None: ...
    @overload
    async def get(self, run_id: str, stage: str, key: str, *, model: type[T]) -> T | None: ...
    async def get(
        self, run_id: str, stage: str, key: str, *, model: type[T] | None = None
    ) -> Checkpoint | T | None:
        """The checkpoint under `(run_id, stage, key)`, or None when there is none.

        With `model`, its value validated as that type (None still means "not found").
        """
        _check_address(run_id, stage, key)
        await self.open()
        address = (run_id, stage, key)
        if self._group_commit:
            row = await self._reads.submit(address, self._get_many, self._get_one)
        else:
            row = await self._get(*address)
        if row is None:
            return None
        checkpoint = self._record(row)
        return checkpoint if model is None else read_as(self, checkpoint, model)

    async def list(self, run_id: str, stage: str | None = None) -> Sequence[Checkpoint]:
        """The run's checkpoints (of one stage, if given), in the order first saved."""
        _check_names(run_id=run_id, stage=stage)
        await self.open()
        return tuple(self._record(row) for row in await self._list(run_id, stage))

    async def delete(self, run_id: str, stage: str | None = None, key: str | None = None) -> int:
        """Delete a run's checkpoints, or one stage's, or one key; returns how many."""
        if key is not None and stage is None:
            raise UsageError("delete(key=) needs stage= too")
        _check_names(run_id=run_id, stage=stage, key=key)
        await self.open()
        return await self._delete(run_id, stage, key)

    def _record(self, row: Row) -> Checkpoint:
        run_id, stage, key, version, text, saved_at = row
        if version != SCHEMA_VERSION:
            raise damaged(
                self,
                run_id,
                stage,
                key,
                f"it has schema version {version}; this agentmesh reads version {SCHEMA_VERSION}",
            )
        # Written by `encode` as JSON with a float time: anything else was damaged outside.
        try:
            value = decode(text)
        except (TypeError, ValueError, RecursionError) as exc:
            raise damaged(self, run_id, stage, key, f"it is not JSON ({exc})") from None
        try:
            saved = datetime.fromtimestamp(saved_at, UTC)
        except (TypeError, ValueError, OverflowError, OSError):
            raise damaged(self, run_id, stage, key, f"its time {saved_at!r} is not one") from None
        # JSON already: no need to validate it again.
        return Checkpoint.model_construct(
            run_id=run_id,
            stage=stage,
            key=key,
            value=value,
            schema_version=version,
            saved_at=saved,
        )

    # -- what a store implements ---------------------------------------------------------

    @abc.abstractmethod
    async def _open(self) -> None: ...
    @abc.abstractmethod
    async def _close(self) -> None: ...
    @abc.abstractmethod
    async def _put(self, row: Row) -> None: ...
    async def _put_many(self, rows: Sequence[Row]) -> Sequence[None]:
        """Write `rows` in order, in one transaction (a store with `_group_commit`)."""
        for row in rows:
            await self._put(row)
        return [None] * len(rows)

    async def _get_many(self, addresses: Sequence[Address]) -> Sequence[Row | None]:
        """The rows at `addresses`, read together (a store with `_group_commit`)."""
        return [await self._get(*address) for address in addresses]

    async def _get_one(self, address: Address) -> Row | None:
        return await self._get(*address)

    @abc.abstractmethod
    async def _claim(self, row: Row) -> Row | None:
        """Insert `row` unless its key exists, atomically: None, or the existing row."""

    @abc.abstractmethod
    async def _get(self, run_id: str, stage: str, key: str) -> Row | None: ...
    @abc.abstractmethod
    async def _list(self, run_id: str, stage: str | None) -> Sequence[Row]: ...
    @abc.abstractmethod
    async def _delete(self, run_id: str, stage: str | None, key: str | None) -> int: ...

    # -- reading for a console (kept apart from the write path above) --------------------

    async def runs(
        self, *, stage: str | None = None, limit: int = 50, offset: int = 0
    ) -> Sequence[RunStamp]:
        """The runs the store holds (those with a checkpoint of `stage`, if given),
        newest first by their first save: `limit` of them after skipping `offset`."""
        _check_names(run_id="-", stage=stage)
        for name, count in (("limit", limit), ("offset", offset)):
            if type(count) is not int or count < 0:
                raise UsageError(f"runs({name}=) takes an int >= 0, got {count!r}")
        await self.open()
        return tuple(
            RunStamp(run_id, datetime.fromtimestamp(first, UTC), datetime.fromtimestamp(last, UTC))
            for run_id, first, last in await self._runs(stage, limit, offset)
        )

    async def _runs(self, stage: str | None, limit: int, offset: int) -> Sequence[RunSpan]:
        """`(run_id, first saved_at, last saved_at)`, newest first; a store may not list."""
        raise UsageError(f"{self!r} cannot list the runs it holds")


def _check_address(run_id: str, stage: str, key: str) -> None:
    # Called for every put and get: three non-empty strings pass without the loop below.
    strings = type(run_id) is str and type(stage) is str and type(key) is str
    if not (strings and run_id and stage and key):
        _check_names(run_id=run_id, stage=stage, key=key)


def _check_names(**names: Any) -> None:
    for argument, value in names.items():
        if value is None and argument != "run_id":
            continue
        if not isinstance(value, str) or not value:
            raise UsageError(f"checkpoint {argument}= must be a non-empty string, got {value!r}")


RunSpan: TypeAlias = tuple[str, float, float]
"""`(run_id, first saved_at, last saved_at)`, as a store lists its runs."""


class RunStamp(NamedTuple):
    """One run a store holds (`StoreBase.runs`): its id, its first and its last save."""

    run_id: str
    first_saved: datetime
    last_saved: datetime
