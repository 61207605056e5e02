"""The event logs of a `SQLiteStore`: two tables beside its checkpoints, read by polling.

The tables are created on first use (`IF NOT EXISTS`), so a file written before the
event log existed gains them and keeps its schema version. Every statement runs on the
store's worker thread, on its one connection; a batch of appends is one transaction
(`BEGIN IMMEDIATE`: the write lock of every process on the file), so two processes
appending to one run's log take its positions in turn.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar

from agentmesh.checkpoints._batch import Batcher
from agentmesh.checkpoints._event_rows import (
    Appended,
    EventTable,
    LoggedRow,
    LogHead,
    doomed,
    finished_after,
    grouped,
)

__all__ = ["SQLiteEventTable"]

R = TypeVar("R")

_TABLES: Final = (
    "CREATE TABLE IF NOT EXISTS event_logs (run_id TEXT PRIMARY KEY, position INTEGER NOT NULL, "
    "size INTEGER NOT NULL, dropped INTEGER NOT NULL, last_at REAL NOT NULL, "
    "finished INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS events (run_id TEXT NOT NULL, position INTEGER NOT NULL, "
    "kind TEXT NOT NULL, essential INTEGER NOT NULL, size INTEGER NOT NULL, "
    "body TEXT NOT NULL, saved_at REAL NOT NULL, PRIMARY KEY (run_id, position)) WITHOUT ROWID",
)
_HEAD: Final = "SELECT position, size, dropped, last_at, finished FROM event_logs WHERE run_id = ?"
_INSERT: Final = "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)"
_SAVE_HEAD: Final = (
    "INSERT INTO event_logs VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET "
    "position = excluded.position, size = excluded.size, dropped = excluded.dropped, "
    "last_at = excluded.last_at, finished = excluded.finished"
)

Run = Callable[[Callable[[sqlite3.Connection], Any]], Awaitable[Any]]


class SQLiteEventTable(EventTable):
    """The event logs of the SQLite file that `run(work)` runs `work(connection)` on."""

    __slots__ = ("_run", "_writes")

    def __init__(self, run: Run, writes: Batcher[Appended, None]) -> None:
        self._run = run
        self._writes = writes

    async def append(self, items: Sequence[Appended]) -> Sequence[None]:
        def append(connection: sqlite3.Connection) -> None:
            connection.execute("BEGIN IMMEDIATE")
            try:
                for run_id, batch in grouped(items).items():
                    _append_run(connection, run_id, batch)
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise

        await self._run(_tables(append))
        return [None] * len(items)

    async def read(
        self, run_id: str, after: int, limit: int
    ) -> tuple[LogHead | None, list[LoggedRow]]:
        def read(connection: sqlite3.Connection) -> tuple[LogHead | None, list[LoggedRow]]:
            # One read transaction: the head and the rows agree.
            connection.execute("BEGIN")
            try:
                found = connection.execute(_HEAD, (run_id,)).fetchone()
                rows = connection.execute(
                    "SELECT position, kind, body, saved_at FROM events "
                    "WHERE run_id = ? AND position > ? ORDER BY position LIMIT ?",
                    (run_id, after, limit),
                ).fetchall()
            finally:
                connection.execute("COMMIT")
            head = None if found is None else _head(found)
            return head, [LoggedRow(*row) for row in rows]

        result: tuple[LogHead | None, list[LoggedRow]] = await self._run(_tables(read))
        return result

    async def heads(self, run_ids: Sequence[str]) -> dict[str, LogHead]:
        def heads(connection: sqlite3.Connection) -> dict[str, LogHead]:
            found = {}
            for run_id in run_ids:
                row = connection.execute(_HEAD, (run_id,)).fetchone()
                if row is not None:
                    found[run_id] = _head(row)
            return found

        result: dict[str, LogHead] = await self._run(_tables(heads))
        return result


def _append_run(connection: sqlite3.Connection, run_id: str, batch: list[Appended]) -> None:
    now = time.time()
    found = connection.execute(_HEAD, (run_id,)).fetchone()
    position, size, dropped, _last, finished = (0, 0, 0, now, False) if found is None else found
    rows = []
    for _run, kind, essential, text, _bound in batch:
        position += 1
        size += len(text)
        rows.append((run_id, position, kind, essential, len(text), text, now))
    connection.executemany(_INSERT, rows)
    max_bytes = batch[-1][4]
    if size > max_bytes:
        kept = connection.execute(
            "SELECT position, size, essential, kind FROM events WHERE run_id = ? ORDER BY position",
            (run_id,),
        ).fetchall()
        chosen, freed = doomed(kept, size, max_bytes)
        connection.executemany(
            "DELETE FROM events WHERE run_id = ? AND position = ?",
            [(run_id, gone) for gone in chosen],
        )
        size, dropped = size - freed, dropped + len(chosen)
    done = finished_after(bool(finished), (item[1] for item in batch))
    connection.execute(_SAVE_HEAD, (run_id, position, size, dropped, now, int(done)))


def _head(row: tuple[Any, ...]) -> LogHead:
    position, size, dropped, last_at, finished = row
    return LogHead(int(position), int(size), int(dropped), float(last_at), bool(finished))


def _tables(work: Callable[[sqlite3.Connection], R]) -> Callable[[sqlite3.Connection], R]:
    """`work`, creating the tables first where the file has none yet (once: the first
    statement that finds no table)."""

    def run(connection: sqlite3.Connection) -> R:
        try:
            return work(connection)
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
        for statement in _TABLES:
            connection.execute(statement)
        return work(connection)

    return run
