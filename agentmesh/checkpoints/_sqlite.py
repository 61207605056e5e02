"""`SQLiteStore`: durable checkpoints in one SQLite file, the embedded default.

Every call runs on the store's single worker thread, which owns the one connection: the
event loop never blocks on disk, and the writes of any number of concurrent tasks are
serialised in the process instead of contending for SQLite's lock. Other processes on the
same file are handled by WAL mode and `busy_timeout`.

The store only ever writes to a file that is empty, new, or already one of its own at
its schema version; anything else raises `CheckpointError` naming the file.

A store pickles as its path and options, never its connection: a copy sent to another
process on this host (a Ray worker) opens a connection of its own on the same file.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

from agentmesh._codec import SCHEMA_VERSION
from agentmesh._numbers import number
from agentmesh.checkpoints._event_rows import EventTable
from agentmesh.checkpoints._events_sqlite import SQLiteEventTable
from agentmesh.checkpoints._store import Address, Row, RunSpan, StoreBase
from agentmesh.errors import CheckpointError, UsageError

__all__ = ["DEFAULT_PATH", "SQLiteStore"]

R = TypeVar("R")

DEFAULT_PATH: Final = Path(".agentmesh") / "checkpoints.sqlite"
"""Where checkpoints go when no path is given: relative to the working directory."""

_HEADER: Final = b"SQLite format 3\x00"
# Written into the file's header, so a SQLite file of another application is recognised.
_APPLICATION_ID: Final = int.from_bytes(b"AgMs", "big")

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS checkpoints (
    run_id TEXT NOT NULL,
    stage TEXT NOT NULL,
    key TEXT NOT NULL,
    schema_version INTEGER NOT NULL,
    value TEXT NOT NULL,
    saved_at REAL NOT NULL,
    PRIMARY KEY (run_id, stage, key)
)
"""
_COLUMNS: Final = "run_id, stage, key, schema_version, value, saved_at"
_UPSERT: Final = f"""
INSERT INTO checkpoints ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (run_id, stage, key) DO UPDATE SET
    schema_version = excluded.schema_version, value = excluded.value, saved_at = excluded.saved_at
"""
_INSERT_NEW: Final = f"""
INSERT INTO checkpoints ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (run_id, stage, key) DO NOTHING
"""
# Addresses looked up by one statement: 3 parameters each, within SQLite's 999 of old.
_READ_CHUNK: Final = 300
_JOINED: Final = ", ".join(f"c.{column}" for column in _COLUMNS.split(", "))
_SELECT_ONE: Final = (
    f"SELECT {_COLUMNS} FROM checkpoints WHERE run_id = ? AND stage = ? AND key = ?"
)


class SQLiteStore(StoreBase):
    """Checkpoints in a SQLite file (WAL; puts made at once share one transaction).

    Args:
        path: the database file; its directory is created. Default
            `.agentmesh/checkpoints.sqlite` under the working directory.
        busy_timeout: seconds to wait for another process's write lock before failing.
        synchronous: SQLite's `synchronous` setting. "FULL" (default) makes every put
            durable on return, even across a power cut; "NORMAL" is faster, and in WAL
            mode still survives a crash of the process.

    Use it as `async with SQLiteStore(path) as store:`, or call `await store.close()`.
    """

    _group_commit = True

    def __init__(
        self,
        path: str | os.PathLike[str] = DEFAULT_PATH,
        *,
        busy_timeout: float = 30.0,
        synchronous: str = "FULL",
    ) -> None:
        super().__init__()
        busy_timeout = number("SQLiteStore(busy_timeout=)", busy_timeout, unit="seconds")
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise UsageError(
                f"SQLiteStore(synchronous=) must be OFF, NORMAL, FULL or EXTRA, got {synchronous!r}"
            )
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self.synchronous = synchronous.upper()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._connection: sqlite3.Connection | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as what it was built from: the copy opens a connection of its own where
        it is used (a Ray worker on this host), never this one's, which cannot leave."""
        return (_rebuild, (str(self.path), self.busy_timeout, self.synchronous))

    # -- lifecycle -----------------------------------------------------------------------

    async def _open(self) -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="agentmesh-checkpoints"
        )
        try:
            self._connection = await self._run(self._connect)
        except BaseException:
            self._shutdown()
            raise

    async def _close(self) -> None:
        try:
            await self._run(self._disconnect)
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        if self._executor is not None:
            # The worker is idle by now: joining it is immediate, and no thread outlives close.
            self._executor.shutdown(wait=True)
            self._executor = None

    async def _run(self, fn: Callable[[], R]) -> R:
        if self._executor is None:
            raise UsageError(f"{self!r} is closed; create a new store")
        return await asyncio.wrap_future(self._executor.submit(fn))

    # -- on the worker thread ------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        path = self.path
        try:
            exists = path.exists()
            if exists:
                _check_header(path)
        except OSError as exc:
            message = f"cannot read checkpoint store {path}: {_reason(path, exc)}"
            raise CheckpointError(message, path=path) from exc
        if not exists:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise CheckpointError(
                    f"cannot create the directory {path.parent} of checkpoint store {path}: "
                    f"{_reason(path, exc)}",
                    path=path,
                ) from exc
        try:
            connection = sqlite3.connect(path, timeout=self.busy_timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise CheckpointError(f"cannot open checkpoint store {path}: {exc}", path=path) from exc
        try:
            self._prepare(connection)
        except BaseException:
            connection.close()
            raise
        return connection

    def _prepare(self, connection: sqlite3.Connection) -> None:
        path = self.path
        try:
            connection.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            found = _identity(connection)
            if found == (0, 0, 0):
                connection.execute("BEGIN IMMEDIATE")
                # Another process may have set the file up while we waited for the lock.
                found = _identity(connection)
                if found == (0, 0, 0):
                    connection.execute(_SCHEMA)
                    connection.execute(f"PRAGMA application_id = {_APPLICATION_ID}")
                    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                    found = (_APPLICATION_ID, SCHEMA_VERSION, 1)
                connection.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            raise CheckpointError(
                f"checkpoint store {path} cannot be read as a SQLite database ({exc}); "
                "it was left untouched",
                path=path,
            ) from exc
        application_id, version, _ = found
        if application_id != _APPLICATION_ID:
            raise CheckpointError(
                f"{path} is a SQLite database of another application, not an agentmesh "
                "checkpoint store; it was left untouched. Give SQLiteStore another path.",
                path=path,
            )
        if version != SCHEMA_VERSION:
            raise CheckpointError(
                f"checkpoint store {path} has schema version {version}; this agentmesh reads "
                f"version {SCHEMA_VERSION}. It was left untouched: use the agentmesh that "
                "wrote it, or another path.",
                path=path,
            )
        try:
            _into_wal(connection, self.busy_timeout)
            connection.execute(f"PRAGMA synchronous = {self.synchronous}")
        except sqlite3.Error as exc:
            message = f"cannot set up checkpoint store {path}: {exc}"
            raise CheckpointError(message, path=path) from exc

    def _disconnect(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _execute(self, work: Callable[[sqlite3.Connection], R]) -> Callable[[], R]:
        def call() -> R:
            if self._connection is None:  # a call that was queued behind close()
                raise UsageError(f"{self!r} is closed; create a new store")
            try:
                return work(self._connection)
            except sqlite3.Error as exc:
                raise CheckpointError(
                    f"checkpoint store {self.path}: {type(exc).__name__}: {exc}", path=self.path
                ) from exc

        return call

    # -- the operations ------------------------------------------------------------------

    async def _put(self, row: Row) -> None:
        def put(connection: sqlite3.Connection) -> None:
            # IMMEDIATE takes the write lock up front, so the wait is for busy_timeout, once.
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.execute(_UPSERT, row)
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise

        await self._run(self._execute(put))

    async def _put_many(self, rows: Sequence[Row]) -> Sequence[None]:
        def put_many(connection: sqlite3.Connection) -> Sequence[None]:
            # One transaction, one commit (one fsync) for every row of the batch.
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.executemany(_UPSERT, rows)
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
            return [None] * len(rows)

        return await self._run(self._execute(put_many))

    async def _get_many(self, addresses: Sequence[Address]) -> Sequence[Row | None]:
        def get_many(connection: sqlite3.Connection) -> list[Row | None]:
            # One statement per chunk (each key looked up in the primary key's index), not
            # one per address: a batch is as many reads as tasks starting at once.
            found: dict[tuple[str, ...], Row] = {}
            for start in range(0, len(addresses), _READ_CHUNK):
                chunk = addresses[start : start + _READ_CHUNK]
                values = ", ".join(["(?, ?, ?)"] * len(chunk))
                cursor = connection.execute(
                    # CROSS JOIN: the addresses outside, each a search of the index (an
                    # `IN (VALUES ...)` would scan the table).
                    f"SELECT {_JOINED} FROM (VALUES {values}) AS a CROSS JOIN checkpoints AS c "
                    "ON c.run_id = a.column1 AND c.stage = a.column2 AND c.key = a.column3",
                    [name for address in chunk for name in address],
                )
                found.update((row[:3], row) for row in cursor.fetchall())
            return [found.get(address) for address in addresses]

        return await self._run(self._execute(get_many))

    async def _claim(self, row: Row) -> Row | None:
        def claim(connection: sqlite3.Connection) -> Row | None:
            # Under the write lock of every process on the file: the insert and the read
            # of the winner are one step.
            connection.execute("BEGIN IMMEDIATE")
            try:
                inserted = connection.execute(_INSERT_NEW, row).rowcount
                existing: Row | None = (
                    None if inserted else connection.execute(_SELECT_ONE, row[:3]).fetchone()
                )
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
            return existing

        return await self._run(self._execute(claim))

    async def _get(self, run_id: str, stage: str, key: str) -> Row | None:
        def get(connection: sqlite3.Connection) -> Row | None:
            row: Row | None = connection.execute(_SELECT_ONE, (run_id, stage, key)).fetchone()
            return row

        return await self._run(self._execute(get))

    async def _list(self, run_id: str, stage: str | None) -> Sequence[Row]:
        def select(connection: sqlite3.Connection) -> list[Row]:
            if stage is None:
                cursor = connection.execute(
                    f"SELECT {_COLUMNS} FROM checkpoints WHERE run_id = ? ORDER BY rowid",
                    (run_id,),
                )
            else:
                cursor = connection.execute(
                    f"SELECT {_COLUMNS} FROM checkpoints WHERE run_id = ? AND stage = ? "
                    "ORDER BY rowid",
                    (run_id, stage),
                )
            rows: list[Row] = cursor.fetchall()
            return rows

        return await self._run(self._execute(select))

    async def _delete(self, run_id: str, stage: str | None, key: str | None) -> int:
        clauses = ["run_id = ?"]
        parameters = [run_id]
        for column, value in (("stage", stage), ("key", key)):
            if value is not None:
                clauses.append(f"{column} = ?")
                parameters.append(value)
        statement = f"DELETE FROM checkpoints WHERE {' AND '.join(clauses)}"

        def delete(connection: sqlite3.Connection) -> int:
            connection.execute("BEGIN IMMEDIATE")
            try:
                count = connection.execute(statement, parameters).rowcount
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
            return count

        return await self._run(self._execute(delete))

    async def _runs(self, stage: str | None, limit: int, offset: int) -> Sequence[RunSpan]:
        having = "" if stage is None else "HAVING sum(stage = ?) > 0 "
        statement = (
            "SELECT run_id, min(saved_at), max(saved_at) FROM checkpoints GROUP BY run_id "
            f"{having}ORDER BY min(saved_at) DESC, run_id LIMIT ? OFFSET ?"
        )
        parameters = (*(() if stage is None else (stage,)), limit, offset)

        def select(connection: sqlite3.Connection) -> list[RunSpan]:
            rows: list[RunSpan] = connection.execute(statement, parameters).fetchall()
            return rows

        return await self._run(self._execute(select))

    def event_table(self) -> EventTable:
        """The runs' event logs (`KeepsEventLogs`: `agentmesh.events.read_events`), on
        the store's thread."""
        return SQLiteEventTable(lambda work: self._run(self._execute(work)), self._event_writes)

    def __repr__(self) -> str:
        return f"<SQLiteStore {self.path}>"


def _check_header(path: Path) -> None:
    """Refuse an existing path that is not a file, or a file that is not a SQLite database."""
    if not path.is_file():
        raise CheckpointError(f"checkpoint store {path} is not a file", path=path)
    with path.open("rb") as file:
        header = file.read(len(_HEADER))
    # An empty file is an empty database to SQLite; anything else must say SQLite.
    if header and header != _HEADER:
        raise CheckpointError(
            f"checkpoint store {path} is not a SQLite database; it was left untouched. "
            "Move it away or give SQLiteStore another path.",
            path=path,
        )


def _reason(path: Path, exc: OSError) -> str:
    """Why the file system refused `path`, in words a person can act on."""
    if isinstance(exc, FileExistsError | NotADirectoryError):
        # The OS says "File exists" or "Not a directory": name the file in the way.
        for ancestor in reversed(path.parents):
            if os.path.exists(ancestor) and not os.path.isdir(ancestor):
                return f"{ancestor} is a file, not a directory"
    return exc.strerror or str(exc)


def _into_wal(connection: sqlite3.Connection, timeout: float) -> None:
    """Put the file in WAL mode (once set, it stays), waiting up to `timeout` seconds.

    SQLite answers "database is locked" at once, without its busy handler, to a
    connection changing the mode while another holds the file (two processes opening a
    new store together): tried again, on the store's thread, until the other is done.
    """
    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _identity(connection: sqlite3.Connection) -> tuple[int, int, int]:
    """`(application_id, user_version, schema objects)`: who wrote the file, and which layout.

    One statement, so one read of the file: read apart, another process setting the file
    up in between would make a new store look like another application's.
    """
    application_id, version, objects = connection.execute(
        "SELECT (SELECT application_id FROM pragma_application_id), "
        "(SELECT user_version FROM pragma_user_version), "
        "(SELECT count(*) FROM sqlite_master)"
    ).fetchone()
    return int(application_id), int(version), int(objects)


def _rebuild(path: str, busy_timeout: float, synchronous: str) -> SQLiteStore:
    return SQLiteStore(path, busy_timeout=busy_timeout, synchronous=synchronous)
