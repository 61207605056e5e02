"""The event logs of a `PostgresStore`: two tables beside its checkpoints, and NOTIFY.

The tables (`agentmesh_event_logs`, one head row per run, and `agentmesh_events`) are
created on first use in the store's schema. An append locks its run's head row
(`FOR UPDATE`) until it commits, so the writers of one run, in any processes, take its
positions in turn and a reader never sees position 7 before position 6. Every append
and every nudge sends `NOTIFY` on the schema's channel with the run id; a watcher
listens on a connection of its own (one per store, shared by its watchers, opened
while one watches), so a console sees an event as it is committed, without polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

from agentmesh._logging import get_logger
from agentmesh.checkpoints._batch import Batcher
from agentmesh.checkpoints._event_rows import (
    POLL,
    Appended,
    EventTable,
    LoggedRow,
    LogHead,
    Watch,
    doomed,
    finished_after,
    grouped,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.rows import TupleRow
    from psycopg.sql import Composed

__all__ = ["PostgresEventTable"]

R = TypeVar("R")
Run = Callable[[Callable[["AsyncConnection[TupleRow]"], Awaitable[Any]]], Awaitable[Any]]

HEADS: Final = "agentmesh_event_logs"
ROWS: Final = "agentmesh_events"
# Serialises creating the tables across every process that appends at once.
_SETUP_LOCK: Final = int.from_bytes(b"AgMsEvnt", "big") - (1 << 63)


def channel_of(schema: str) -> str:
    """The NOTIFY channel of the event logs in `schema` (a name of at most 63 bytes)."""
    return "agentmesh_events_" + hashlib.sha256(schema.encode()).hexdigest()[:16]


class PostgresEventTable(EventTable):
    """The event logs in `schema`, reached through `run(work)` (the store's pool);
    `conninfo` opens the listening connection; `owner` is the store (its listener's key);
    `writes` is the store's queue of appends."""

    def __init__(
        self,
        run: Run,
        schema: str,
        conninfo: str,
        owner: object,
        writes: Batcher[Appended, None],
    ) -> None:
        self._run = run
        self.schema = schema
        self.conninfo = conninfo
        self.owner = owner
        self._writes = writes

    def _sql(self, text: str) -> Composed:
        from psycopg.sql import SQL, Identifier

        return SQL(text).format(
            heads=SQL("{}.{}").format(Identifier(self.schema), Identifier(HEADS)),
            rows=SQL("{}.{}").format(Identifier(self.schema), Identifier(ROWS)),
        )

    async def _tables(self, work: Callable[[AsyncConnection[TupleRow]], Awaitable[R]]) -> R:
        """`work` on a pooled connection, creating the tables first where there are none."""
        from psycopg.errors import UndefinedTable

        async def create_then(connection: AsyncConnection[TupleRow]) -> R:
            try:
                return await work(connection)
            except UndefinedTable:
                pass
            async with connection.transaction():
                await connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))
                await connection.execute(
                    self._sql(
                        "CREATE TABLE IF NOT EXISTS {heads} (run_id text PRIMARY KEY, "
                        "position bigint NOT NULL, size bigint NOT NULL, dropped bigint NOT NULL, "
                        "last_at double precision NOT NULL, finished boolean NOT NULL)"
                    )
                )
                await connection.execute(
                    self._sql(
                        "CREATE TABLE IF NOT EXISTS {rows} (run_id text NOT NULL, "
                        "position bigint NOT NULL, kind text NOT NULL, essential boolean NOT NULL, "
                        "size integer NOT NULL, body text NOT NULL, "
                        "saved_at double precision NOT NULL, PRIMARY KEY (run_id, position))"
                    )
                )
            return await work(connection)

        result: R = await self._run(create_then)
        return result

    async def append(self, items: Sequence[Appended]) -> Sequence[None]:
        runs = grouped(items)

        async def append(connection: AsyncConnection[TupleRow]) -> None:
            async with connection.transaction():
                # Heads locked in one order by every writer: two batches never deadlock.
                for run_id in sorted(runs):
                    await self._append_run(connection, run_id, runs[run_id])
                for run_id in sorted(runs):
                    await connection.execute(
                        "SELECT pg_notify(%s, %s)", (channel_of(self.schema), run_id)
                    )

        await self._tables(append)
        return [None] * len(items)

    async def _append_run(
        self, connection: AsyncConnection[TupleRow], run_id: str, batch: list[Appended]
    ) -> None:
        now = time.time()
        await connection.execute(
            self._sql("INSERT INTO {heads} VALUES (%s, 0, 0, 0, %s, false) ON CONFLICT DO NOTHING"),
            (run_id, now),
        )
        cursor = await connection.execute(
            self._sql(
                "SELECT position, size, dropped, finished FROM {heads} WHERE run_id = %s FOR UPDATE"
            ),
            (run_id,),
        )
        found = await cursor.fetchone()
        assert found is not None  # inserted above, or there already
        position, size, dropped, finished = found
        rows = []
        for _run, kind, essential, text, _bound in batch:
            position += 1
            size += len(text)
            rows.append((run_id, position, kind, essential, len(text), text, now))
        async with connection.cursor() as many:
            await many.executemany(
                self._sql("INSERT INTO {rows} VALUES (%s, %s, %s, %s, %s, %s, %s)"), rows
            )
        max_bytes = batch[-1][4]
        if size > max_bytes:
            cursor = await connection.execute(
                self._sql(
                    "SELECT position, size, essential, kind FROM {rows} "
                    "WHERE run_id = %s ORDER BY position"
                ),
                (run_id,),
            )
            chosen, freed = doomed(await cursor.fetchall(), size, max_bytes)
            await connection.execute(
                self._sql("DELETE FROM {rows} WHERE run_id = %s AND position = ANY(%s)"),
                (run_id, chosen),
            )
            size, dropped = size - freed, dropped + len(chosen)
        done = finished_after(finished, (item[1] for item in batch))
        await connection.execute(
            self._sql(
                "UPDATE {heads} SET position = %s, size = %s, dropped = %s, "
                "last_at = %s, finished = %s WHERE run_id = %s"
            ),
            (position, size, dropped, now, done, run_id),
        )

    async def read(
        self, run_id: str, after: int, limit: int
    ) -> tuple[LogHead | None, list[LoggedRow]]:
        head_sql = self._sql(
            "SELECT position, size, dropped, last_at, finished FROM {heads} WHERE run_id = %s"
        )
        rows_sql = self._sql(
            "SELECT position, kind, body, saved_at FROM {rows} "
            "WHERE run_id = %s AND position > %s ORDER BY position LIMIT %s"
        )

        async def read(
            connection: AsyncConnection[TupleRow],
        ) -> tuple[LogHead | None, list[LoggedRow]]:
            # One snapshot: the head and the rows agree.
            async with connection.transaction():
                await connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                cursor = await connection.execute(head_sql, (run_id,))
                found = await cursor.fetchone()
                cursor = await connection.execute(rows_sql, (run_id, after, limit))
                rows = await cursor.fetchall()
            head = None if found is None else LogHead(*found)
            return head, [LoggedRow(*row) for row in rows]

        return await self._tables(read)

    async def heads(self, run_ids: Sequence[str]) -> dict[str, LogHead]:
        statement = self._sql(
            "SELECT run_id, position, size, dropped, last_at, finished FROM {heads} "
            "WHERE run_id = ANY(%s)"
        )

        async def heads(connection: AsyncConnection[TupleRow]) -> dict[str, LogHead]:
            cursor = await connection.execute(statement, (list(run_ids),))
            return {row[0]: LogHead(*row[1:]) for row in await cursor.fetchall()}

        return await self._tables(heads)

    @contextlib.asynccontextmanager
    async def watch(self, run_id: str) -> AsyncIterator[Watch]:
        loop = asyncio.get_running_loop()
        listener = _LISTENERS.get(self.owner)
        if listener is None or listener.loop is not loop:
            # A listener lives in one event loop: a store used in another gets its own.
            listener = _Listener(self.conninfo, channel_of(self.schema), loop)
            _LISTENERS[self.owner] = listener
        waker = asyncio.Event()
        await listener.add(run_id, waker)
        try:
            yield _Notified(waker, listener)
        finally:
            await listener.remove(run_id, waker)

    async def nudge(self, run_id: str) -> None:
        async def notify(connection: AsyncConnection[TupleRow]) -> None:
            await connection.execute("SELECT pg_notify(%s, %s)", (channel_of(self.schema), run_id))

        await self._run(notify)


class _Notified(Watch):
    def __init__(self, waker: asyncio.Event, listener: _Listener) -> None:
        self.waker = waker
        self.listener = listener

    async def changed(self, within: float) -> bool:
        if self.listener.broken:
            await asyncio.sleep(min(within, POLL))  # no notifications: look again
            return True
        try:
            async with asyncio.timeout(within):
                await self.waker.wait()
        except TimeoutError:
            return False
        self.waker.clear()
        return True


class _Listener:
    """One listening connection for a store's watchers, open while anybody watches."""

    def __init__(self, conninfo: str, channel: str, loop: asyncio.AbstractEventLoop) -> None:
        self.conninfo = conninfo
        self.channel = channel
        self.loop = loop
        self.watchers: dict[str, set[asyncio.Event]] = {}
        self.broken = False
        self._lock = asyncio.Lock()
        self._connection: AsyncConnection[TupleRow] | None = None
        self._task: asyncio.Task[None] | None = None

    async def add(self, run_id: str, waker: asyncio.Event) -> None:
        async with self._lock:
            self.watchers.setdefault(run_id, set()).add(waker)
            if self._connection is None:
                await self._start()

    async def remove(self, run_id: str, waker: asyncio.Event) -> None:
        async with self._lock:
            watchers = self.watchers.get(run_id, set())
            watchers.discard(waker)
            if not watchers:
                self.watchers.pop(run_id, None)
            if not self.watchers:
                await self._stop()

    async def _start(self) -> None:
        from psycopg import AsyncConnection, Error
        from psycopg.sql import SQL, Identifier

        try:
            connection = await AsyncConnection.connect(self.conninfo, autocommit=True)
            # Listening before `watch` returns: a change committed after it is notified.
            await connection.execute(SQL("LISTEN {}").format(Identifier(self.channel)))
        except Error as exc:
            # Watchers look at the store every POLL seconds instead; the next one retries.
            get_logger(component="event_log").warning("event_log_listen_failed", error=str(exc))
            self.broken = True
            return
        self._connection, self.broken = connection, False
        self._task = asyncio.get_running_loop().create_task(self._hear(connection))

    async def _hear(self, connection: AsyncConnection[TupleRow]) -> None:
        from psycopg import Error

        try:
            async for notice in connection.notifies():
                for waker in self.watchers.get(notice.payload, ()):
                    waker.set()
        except Error as exc:
            # Watchers fall back to looking at the store every POLL seconds.
            get_logger(component="event_log").warning("event_log_listener_lost", error=str(exc))
            self.broken = True
            # Forgotten, so that the next watcher to come listens on a new connection.
            if self._connection is connection:
                self._connection, self._task = None, None
            with contextlib.suppress(Error):
                await connection.close()
            for wakers in self.watchers.values():
                for waker in wakers:
                    waker.set()

    async def _stop(self) -> None:
        task, self._task = self._task, None
        connection, self._connection = self._connection, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if connection is not None:
            await connection.close()


_LISTENERS: weakref.WeakKeyDictionary[object, _Listener] = weakref.WeakKeyDictionary()
