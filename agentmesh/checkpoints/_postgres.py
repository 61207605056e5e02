"""`PostgresStore`: checkpoints in a PostgreSQL database, for runs that span machines.

Any number of processes on any number of machines share one store through the server:
each `put` is an upsert in a transaction (shared by the puts made while the store is
busy: group commit), so concurrent writers of the same key never fail and a reader
sees the old value or the new one. Each store keeps a small
pool of connections (psycopg 3, `psycopg_pool`), so hundreds of concurrent tasks share
a few connections instead of opening one each.

The store keeps its checkpoints in one table, `agentmesh_checkpoints`, in the schema it
is given, marked as agentmesh's by the table's comment, which also names the schema
version. It creates the table (and the schema) only when there is none; a table of that
name without the marker, or with the marker of another version, raises `CheckpointError`
and is neither written, altered nor dropped.

A store pickles as its connection string and options, never its pool: a copy sent to
another process (a Ray worker) opens its own pool on first use, on the same database.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

from agentmesh._codec import SCHEMA_VERSION
from agentmesh._numbers import number, whole
from agentmesh.checkpoints._event_rows import EventTable
from agentmesh.checkpoints._events_postgres import PostgresEventTable
from agentmesh.checkpoints._postgres_driver import describe, require_driver
from agentmesh.checkpoints._store import Address, Row, RunSpan, StoreBase
from agentmesh.errors import CheckpointError, UsageError

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.rows import TupleRow
    from psycopg.sql import Composed
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresStore"]

R = TypeVar("R")

TABLE: Final = "agentmesh_checkpoints"
_MARKER: Final = "agentmesh checkpoint store, schema version "
_MARKER_PATTERN: Final = re.compile(re.escape(_MARKER) + r"(\d+)")
# What the table must have, as `format_type` spells it: anything else is not our table.
_COLUMNS: Final = (
    ("seq", "bigint"),
    ("run_id", "text"),
    ("stage", "text"),
    ("key", "text"),
    ("schema_version", "integer"),
    ("value", "json"),
    ("saved_at", "timestamp with time zone"),
)
# Serialises creating the table across every process that opens a store at once.
_SETUP_LOCK: Final = int.from_bytes(b"AgMsInit", "big") - (1 << 63)
# Postgres truncates longer names silently; the store would then look for the wrong one.
_MAX_IDENTIFIER: Final = 63


class PostgresStore(StoreBase):
    """Checkpoints in a PostgreSQL database, shared by every process that opens it.

    Needs the `postgres` extra (`pip install 'agentmesh-failwell[postgres]'`: psycopg 3 and
    psycopg_pool).

    Args:
        dsn: a libpq connection string or URL, e.g.
            `"postgresql://user:password@db.internal:5432/agentmesh"`; `""` takes
            everything from the `PG*` environment variables.
        schema: the Postgres schema of the `agentmesh_checkpoints` table; created with
            the table when missing. Give each application its own, or share one to
            share checkpoints.
        max_connections: the most connections this store holds at once; further calls
            wait for one.
        timeout: seconds to wait for a connection (to connect, or for a free one in the
            pool) before the call fails with `CheckpointError`.

    Use it as `async with PostgresStore(dsn) as store:`, or call `await store.close()`.
    """

    _group_commit = True

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "public",
        max_connections: int = 10,
        timeout: float = 30.0,
    ) -> None:
        super().__init__()
        require_driver()
        from psycopg import ProgrammingError
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        if not isinstance(dsn, str):
            raise UsageError(f"PostgresStore(dsn=) must be a string, got {type(dsn).__name__}")
        try:
            params = conninfo_to_dict(dsn)
        except ProgrammingError as exc:
            # The message names the bad option; the string itself may hold a password.
            raise UsageError(f"PostgresStore(dsn=) is not a connection string: {exc}") from None
        if not isinstance(schema, str) or not schema or len(schema.encode()) > _MAX_IDENTIFIER:
            raise UsageError(
                f"PostgresStore(schema=) must be a name of 1 to {_MAX_IDENTIFIER} bytes, "
                f"got {schema!r}"
            )
        max_connections = whole("PostgresStore(max_connections=)", max_connections, at_least=1)
        timeout = number("PostgresStore(timeout=)", timeout, above=True, unit="seconds")
        self.schema = schema
        self.max_connections = max_connections
        self.timeout = timeout
        # Asked for only when the connection string does not say otherwise.
        defaults = {
            key: value
            for key, value in (
                ("application_name", "agentmesh"),
                ("connect_timeout", str(max(2, round(timeout)))),
            )
            if key not in params
        }
        self._dsn = dsn
        self._conninfo = make_conninfo(dsn, **defaults)
        self._server = describe(params)
        self._pool: AsyncConnectionPool[AsyncConnection[TupleRow]] | None = None

    # -- lifecycle -----------------------------------------------------------------------

    async def _open(self) -> None:
        from psycopg import AsyncConnection, Error
        from psycopg_pool import AsyncConnectionPool

        try:
            connection = await AsyncConnection.connect(self._conninfo, autocommit=True)
        except Error as exc:
            raise self._error(f"cannot connect: {exc}") from exc
        async with connection:
            info = connection.info
            self._server = f"postgresql://{info.user}@{info.host}:{info.port}/{info.dbname}"
            try:
                await self._prepare(connection)
            except Error as exc:
                raise self._error(f"cannot set up: {type(exc).__name__}: {exc}") from exc
        pool: AsyncConnectionPool[AsyncConnection[TupleRow]] = AsyncConnectionPool(
            self._conninfo,
            kwargs={"autocommit": True},
            min_size=1,
            max_size=self.max_connections,
            timeout=self.timeout,
            name=f"agentmesh-checkpoints-{self.schema}",
            open=False,
        )
        try:
            await pool.open(wait=True, timeout=self.timeout)
        except BaseException as exc:
            await pool.close()
            if isinstance(exc, Error):
                raise self._error(f"cannot connect: {exc}") from exc
            raise
        self._pool = pool

    async def _close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def _prepare(self, connection: AsyncConnection[TupleRow]) -> None:
        """Check that the table is agentmesh's at our version; create it if there is none."""
        found = await self._identity(connection)
        if found is None:
            async with connection.transaction():
                await connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))
                # Another process may have created it while we waited for the lock.
                found = await self._identity(connection)
                if found is None:
                    await self._create(connection)
                    found = (SCHEMA_VERSION, True)
        version, columns_match = found
        where = f"{self._server} table {self._table_name}"
        if version is None:
            raise self._error(
                f"has a table {self._table_name} that is not an agentmesh checkpoint store; "
                "it was left untouched. Give PostgresStore another schema=."
            )
        if version != SCHEMA_VERSION:
            raise CheckpointError(
                f"checkpoint store {where} has schema version {version}; this agentmesh "
                f"reads version {SCHEMA_VERSION}. It was left untouched: use the agentmesh "
                "that wrote it, or another schema=."
            )
        if not columns_match:
            raise CheckpointError(
                f"checkpoint store {where} is marked as agentmesh's but does not have its "
                "columns; it was left untouched. Give PostgresStore another schema=."
            )

    async def _identity(
        self, connection: AsyncConnection[TupleRow]
    ) -> tuple[int | None, bool] | None:
        """None when there is no such table; else `(marked version or None, columns match)`."""
        cursor = await connection.execute(
            "SELECT c.oid, c.relkind, obj_description(c.oid, 'pg_class') FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
            (self.schema, TABLE),
        )
        row = await cursor.fetchone()
        if row is None:
            return None
        oid, kind, comment = row
        marked = _MARKER_PATTERN.fullmatch(comment or "") if kind in ("r", "p") else None
        cursor = await connection.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            (oid,),
        )
        columns = tuple(tuple(column) for column in await cursor.fetchall())
        return (int(marked.group(1)) if marked else None), columns == _COLUMNS

    async def _create(self, connection: AsyncConnection[TupleRow]) -> None:
        from psycopg.sql import SQL, Identifier, Literal

        cursor = await connection.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,)
        )
        # Creating a schema needs a privilege on the whole database, even with IF NOT
        # EXISTS: asked only when the schema is missing, so a user who may only create
        # tables in an existing schema can set the store up.
        if await cursor.fetchone() is None:
            await connection.execute(SQL("CREATE SCHEMA {}").format(Identifier(self.schema)))
        table = self._table
        for statement in (
            SQL(
                "CREATE TABLE {} ("
                "seq bigint GENERATED ALWAYS AS IDENTITY, "
                "run_id text NOT NULL, stage text NOT NULL, key text NOT NULL, "
                "schema_version integer NOT NULL, value json NOT NULL, "
                "saved_at timestamptz NOT NULL, "
                "PRIMARY KEY (run_id, stage, key))"
            ).format(table),
            SQL("COMMENT ON TABLE {} IS {}").format(table, Literal(f"{_MARKER}{SCHEMA_VERSION}")),
        ):
            await connection.execute(statement)

    @property
    def _table(self) -> Composed:
        from psycopg.sql import SQL, Identifier

        return SQL("{}.{}").format(Identifier(self.schema), Identifier(TABLE))

    @property
    def _table_name(self) -> str:
        return f"{self.schema}.{TABLE}"

    def _error(self, message: str) -> CheckpointError:
        return CheckpointError(f"checkpoint store {self._server} (schema {self.schema}) {message}")

    # -- the operations ------------------------------------------------------------------

    async def _run(self, work: Callable[[AsyncConnection[TupleRow]], Awaitable[R]]) -> R:
        from psycopg import Error
        from psycopg_pool import PoolClosed

        pool = self._pool
        if pool is None:
            raise UsageError(f"{self!r} is closed; create a new store")
        try:
            # A connection the server dropped (a restart, a failover, an idle timeout) is
            # discarded before use instead of failing the call: one empty round trip each.
            # Not the pool's own `check=`: it backs off a second, then two, four... between
            # dead connections, so a pool emptied by a server restart timed calls out.
            for _ in range(self.max_connections):
                async with pool.connection() as connection:
                    if await _alive(connection):
                        return await work(connection)
            # Every pooled connection was dead: this one is new, so its failure is real.
            async with pool.connection() as connection:
                return await work(connection)
        except PoolClosed:  # a call that was waiting for a connection when close() came
            raise UsageError(f"{self!r} is closed; create a new store") from None
        except Error as exc:
            raise self._error(f"{type(exc).__name__}: {exc}") from exc

    async def _put(self, row: Row) -> None:
        await self._put_many([row])

    async def _put_many(self, rows: Sequence[Row]) -> Sequence[None]:
        from psycopg.sql import SQL

        statement = SQL(
            "INSERT INTO {} (run_id, stage, key, schema_version, value, saved_at) "
            "VALUES (%s, %s, %s, %s, %s::json, to_timestamp(%s)) "
            "ON CONFLICT (run_id, stage, key) DO UPDATE SET "
            "schema_version = excluded.schema_version, value = excluded.value, "
            "saved_at = excluded.saved_at"
        ).format(self._table)

        async def put_many(connection: AsyncConnection[TupleRow]) -> Sequence[None]:
            # One transaction, whoever else writes the keys: one commit for the batch.
            async with connection.transaction(), connection.cursor() as cursor:
                await cursor.executemany(statement, rows)
            return [None] * len(rows)

        return await self._run(put_many)

    async def _claim(self, row: Row) -> Row | None:
        from psycopg.sql import SQL

        insert = SQL(
            "INSERT INTO {} (run_id, stage, key, schema_version, value, saved_at) "
            "VALUES (%s, %s, %s, %s, %s::json, to_timestamp(%s)) "
            "ON CONFLICT (run_id, stage, key) DO NOTHING RETURNING 1"
        ).format(self._table)
        select = self._select("run_id = %s AND stage = %s AND key = %s")

        async def claim(connection: AsyncConnection[TupleRow]) -> Row | None:
            # The server decides between concurrent inserts of one key: one inserts, the
            # others wait for it and do nothing. The winner's row is read afterwards, in a
            # statement of its own, so that it sees the row committed meanwhile; a winner
            # deleted in between (a claim released) leaves the key free to try again.
            while True:
                cursor = await connection.execute(insert, row)
                if await cursor.fetchone() is not None:
                    return None
                cursor = await connection.execute(select, row[:3])
                found = await cursor.fetchone()
                if found is not None:
                    return _row(found)

        return await self._run(claim)

    async def _get(self, run_id: str, stage: str, key: str) -> Row | None:
        (row,) = await self._get_many([(run_id, stage, key)])
        return row

    async def _get_many(self, addresses: Sequence[Address]) -> Sequence[Row | None]:
        statement = self._select(
            "(run_id, stage, key) IN (SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]))"
        )
        columns = tuple(list(column) for column in zip(*addresses, strict=True))

        async def get_many(connection: AsyncConnection[TupleRow]) -> list[Row | None]:
            cursor = await connection.execute(statement, columns)
            found = {row[:3]: _row(row) for row in await cursor.fetchall()}
            return [found.get(address) for address in addresses]

        return await self._run(get_many)

    async def _list(self, run_id: str, stage: str | None) -> Sequence[Row]:
        parameters: tuple[str, ...]
        if stage is None:
            statement, parameters = self._select("run_id = %s ORDER BY seq"), (run_id,)
        else:
            statement = self._select("run_id = %s AND stage = %s ORDER BY seq")
            parameters = (run_id, stage)

        async def select(connection: AsyncConnection[TupleRow]) -> list[Row]:
            cursor = await connection.execute(statement, parameters)
            return [_row(row) for row in await cursor.fetchall()]

        return await self._run(select)

    async def _delete(self, run_id: str, stage: str | None, key: str | None) -> int:
        from psycopg.sql import SQL

        clauses = ["run_id = %s"]
        parameters = [run_id]
        for column, value in (("stage", stage), ("key", key)):
            if value is not None:
                clauses.append(f"{column} = %s")
                parameters.append(value)
        statement = SQL("DELETE FROM {} WHERE " + " AND ".join(clauses)).format(self._table)

        async def delete(connection: AsyncConnection[TupleRow]) -> int:
            cursor = await connection.execute(statement, parameters)
            return cursor.rowcount

        return await self._run(delete)

    def _select(self, where: str) -> Composed:
        from psycopg.sql import SQL

        return SQL(
            "SELECT run_id, stage, key, schema_version, value::text, "
            "extract(epoch FROM saved_at)::float8 FROM {} WHERE " + where
        ).format(self._table)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as what it was built from: the copy connects lazily, where it is used.

        An open pool (its connections, locks and threads) cannot leave this process; the
        connection string can. The pickle holds the password if the string does, as the
        store itself does; it is never part of a message.
        """
        options = {
            "schema": self.schema,
            "max_connections": self.max_connections,
            "timeout": self.timeout,
        }
        return (_rebuild, (self._dsn, options))

    async def _runs(self, stage: str | None, limit: int, offset: int) -> Sequence[RunSpan]:
        from psycopg.sql import SQL

        having = "" if stage is None else "HAVING bool_or(stage = %s) "
        statement = SQL(
            "SELECT run_id, extract(epoch FROM min(saved_at))::float8, "
            "extract(epoch FROM max(saved_at))::float8 FROM {} GROUP BY run_id "
            f"{having}ORDER BY min(saved_at) DESC, run_id LIMIT %s OFFSET %s"
        ).format(self._table)
        parameters = (*(() if stage is None else (stage,)), limit, offset)

        async def select(connection: AsyncConnection[TupleRow]) -> list[RunSpan]:
            cursor = await connection.execute(statement, parameters)
            return [(str(r[0]), float(r[1]), float(r[2])) for r in await cursor.fetchall()]

        return await self._run(select)

    def event_table(self) -> EventTable:
        """The runs' event logs (`KeepsEventLogs`: `agentmesh.events.read_events`),
        notified with NOTIFY."""
        return PostgresEventTable(self._run, self.schema, self._conninfo, self, self._event_writes)

    def __repr__(self) -> str:
        return f"<PostgresStore {self._server} schema={self.schema}>"


def _rebuild(dsn: str, options: dict[str, Any]) -> PostgresStore:
    return PostgresStore(dsn, **options)


async def _alive(connection: AsyncConnection[TupleRow]) -> bool:
    """Whether the server still answers on `connection`; a dead one is discarded by the pool."""
    from psycopg import OperationalError

    try:
        await connection.execute("")
    except OperationalError:
        if connection.broken:
            return False
        raise
    return True


def _row(row: TupleRow) -> Row:
    run_id, stage, key, version, text, saved_at = row
    return (run_id, stage, key, version, text, saved_at)
