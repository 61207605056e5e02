"""Checkpoint stores, the side-effect ledger and saved subagent progress."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import sqlite3
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from pydantic import BaseModel

from agentmesh import (
    Context,
    ErrorEnvelope,
    PermissionDenied,
    RetryPolicy,
    Subagent,
    Success,
    Task,
    UsageError,
    subagent,
    tool,
)
from agentmesh.checkpoints import (
    Checkpoint,
    CheckpointError,
    CheckpointStore,
    MemoryStore,
    PostgresStore,
    SQLiteStore,
)
from agentmesh.checkpoints._store import Row
from agentmesh.policies import Ruling, ToolResultEvent, post_tool_use
from agentmesh.testing import RecordingSleep
from tests.retrying import fast_retry


class Doc(BaseModel):
    title: str
    score: float = 0.0


class Receipt(BaseModel):
    order_id: str
    amount: int


def store_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("agentmesh-checkpoints")]


class TestStores:
    async def test_a_model_goes_in_and_comes_back_as_json_or_as_the_model(
        self, store: CheckpointStore
    ) -> None:
        """A pydantic model is stored as JSON with a schema version and read back as a model."""
        await store.put("run-1", "retrieval", "output", Doc(title="asyncio", score=0.5))
        saved = await store.get("run-1", "retrieval", "output")
        assert isinstance(saved, Checkpoint)
        assert saved.value == {"title": "asyncio", "score": 0.5}
        assert saved.schema_version == 1
        assert await store.get("run-1", "retrieval", "output", model=Doc) == Doc(
            title="asyncio", score=0.5
        )

    async def test_plain_json_and_typed_collections_round_trip(
        self, store: CheckpointStore
    ) -> None:
        """Plain JSON data is stored as is, and reads back as any type pydantic knows."""
        await store.put("run-1", "retrieval", "output", [{"title": "a"}, {"title": "b"}])
        docs = await store.get("run-1", "retrieval", "output", model=list[Doc])
        assert docs == [Doc(title="a"), Doc(title="b")]

    async def test_a_missing_checkpoint_is_none_and_a_stored_null_is_not(
        self, store: CheckpointStore
    ) -> None:
        """ "Nothing saved" and "saved null" are told apart."""
        assert await store.get("run-1", "stage", "output") is None
        await store.put("run-1", "stage", "output", None)
        saved = await store.get("run-1", "stage", "output")
        assert saved is not None
        assert saved.value is None

    async def test_put_replaces_the_value_under_the_same_key(self, store: CheckpointStore) -> None:
        """A second put under the same run, stage and key replaces the first."""
        await store.put("run-1", "stage", "output", {"v": 1})
        await store.put("run-1", "stage", "output", {"v": 2})
        listed = await store.list("run-1")
        assert [c.value for c in listed] == [{"v": 2}]

    async def test_list_and_delete_are_namespaced_by_run_stage_and_key(
        self, store: CheckpointStore
    ) -> None:
        """Runs never see each other's checkpoints; delete removes a key, a stage or a run."""
        for run_id, stage, key in [
            ("run-1", "a", "output"),
            ("run-1", "a", "extra"),
            ("run-1", "b", "output"),
            ("run-2", "a", "output"),
        ]:
            await store.put(run_id, stage, key, f"{run_id}/{stage}/{key}")
        assert [c.address for c in await store.list("run-1")] == [
            "run-1/a/output",
            "run-1/a/extra",
            "run-1/b/output",
        ]
        assert [c.key for c in await store.list("run-1", "a")] == ["output", "extra"]
        assert await store.delete("run-1", "a", "extra") == 1
        assert await store.delete("run-1", "a") == 1
        assert await store.delete("run-1") == 1
        assert await store.list("run-1") == ()
        assert [c.value for c in await store.list("run-2")] == ["run-2/a/output"]

    async def test_a_value_that_is_not_json_is_refused_naming_its_key(
        self, store: CheckpointStore
    ) -> None:
        """An object that cannot be JSON is a usage error, and nothing is written."""
        with pytest.raises(UsageError, match="run-1/stage/output"):
            await store.put("run-1", "stage", "output", object())
        assert await store.list("run-1") == ()

    @pytest.mark.parametrize("names", [("", "s", "k"), ("r", "", "k"), ("r", "s", "")])
    async def test_empty_names_are_refused(
        self, store: CheckpointStore, names: tuple[str, str, str]
    ) -> None:
        """Run id, stage and key must be non-empty strings."""
        with pytest.raises(UsageError, match="must be a non-empty string"):
            await store.put(*names, 1)

    async def test_a_value_that_no_longer_fits_its_model_is_a_clear_error(
        self, store: CheckpointStore
    ) -> None:
        """Reading back as a model the value does not fit names the checkpoint."""
        await store.put("run-1", "stage", "output", {"name": "not a doc"})
        with pytest.raises(CheckpointError, match="run-1/stage/output"):
            await store.get("run-1", "stage", "output", model=Doc)

    async def test_200_concurrent_writers_all_succeed(self, store: CheckpointStore) -> None:
        """200 tasks writing at once all succeed, and every value is there."""
        await asyncio.gather(
            *(store.put("run-1", f"stage-{i}", "output", {"i": i}) for i in range(200))
        )
        listed = await store.list("run-1")
        assert sorted(c.value["i"] for c in listed if isinstance(c.value, dict)) == list(range(200))

    async def test_a_closed_store_refuses_to_be_used(self, store: CheckpointStore) -> None:
        """After close, every call is a usage error; closing twice is harmless."""
        await store.close()
        await store.close()
        with pytest.raises(UsageError, match="closed"):
            await store.get("run-1", "stage", "output")


class TestSQLiteStore:
    def test_stores_opening_one_new_file_at_once_all_open_it(self, tmp_path: Path) -> None:
        """Four threads, each with a store of its own, open one new file at a barrier (as
        the processes of a fan-out would): one sets the file up, every one opens it (the
        identity read in one statement; WAL set while another holds the file, tried
        again)."""
        for trial in range(12):
            path = tmp_path / f"new-{trial}.sqlite"
            barrier = threading.Barrier(4)
            failures: list[BaseException] = []

            def open_it(
                path: Path = path,
                barrier: threading.Barrier = barrier,
                failures: list[BaseException] = failures,
            ) -> None:
                async def opened() -> None:
                    store = SQLiteStore(path)
                    barrier.wait(10)
                    async with store:
                        await store.put("run", "stage", "key", {"ok": True})

                try:
                    asyncio.run(opened())
                except BaseException as exc:
                    failures.append(exc)

            threads = [threading.Thread(target=open_it) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
            assert failures == []

    async def test_checkpoints_survive_a_new_store_on_the_same_file(self, tmp_path: Path) -> None:
        """What one store saved, another store (another process, later) reads back."""
        path = tmp_path / "nested" / "dir" / "checkpoints.sqlite"
        async with SQLiteStore(path) as first:
            await first.put("run-1", "retrieval", "output", [Doc(title="x")])
        async with SQLiteStore(path) as second:
            assert await second.get("run-1", "retrieval", "output", model=list[Doc]) == [
                Doc(title="x")
            ]

    async def test_the_default_path_is_under_the_working_directory(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without a path the store is .agentmesh/checkpoints.sqlite, directory created."""
        monkeypatch.chdir(tmp_path)
        async with SQLiteStore() as store:
            await store.put("run-1", "stage", "output", 1)
        assert (tmp_path / ".agentmesh" / "checkpoints.sqlite").is_file()

    async def test_the_database_uses_wal(self, tmp_path: Path) -> None:
        """The file is in WAL mode, so readers never block the writer."""
        path = tmp_path / "checkpoints.sqlite"
        async with SQLiteStore(path) as store:
            await store.put("run-1", "stage", "output", 1)
        with sqlite3.connect(path) as connection:
            assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        connection.close()

    async def test_200_concurrent_writers_on_two_connections_never_see_a_locked_database(
        self, tmp_path: Path
    ) -> None:
        """Two stores on one file (two connections) take 200 concurrent writes without errors."""
        path = tmp_path / "checkpoints.sqlite"
        async with SQLiteStore(path) as one, SQLiteStore(path) as two:
            await asyncio.gather(
                *((one if i % 2 else two).put("run-1", f"s{i}", "k", i) for i in range(200))
            )
            assert len(await one.list("run-1")) == 200

    async def test_a_corrupt_file_is_a_clear_error_and_stays_untouched(
        self, tmp_path: Path
    ) -> None:
        """A file that is not SQLite gives a CheckpointError naming it; its bytes do not change."""
        path = tmp_path / "checkpoints.sqlite"
        original = b"these are my notes, not a database\n" * 200
        path.write_bytes(original)
        with pytest.raises(CheckpointError, match="not a SQLite database") as caught:
            async with SQLiteStore(path):
                pass
        assert str(path) in str(caught.value)
        assert caught.value.path == path
        assert path.read_bytes() == original
        assert sorted(os.listdir(tmp_path)) == ["checkpoints.sqlite"]  # no -wal, no -shm
        assert store_threads() == []

    async def test_a_damaged_database_behind_a_valid_header_stays_untouched(
        self, tmp_path: Path
    ) -> None:
        """A SQLite header followed by garbage is refused without writing a byte."""
        path = tmp_path / "checkpoints.sqlite"
        original = b"SQLite format 3\x00" + b"\xff" * 4000
        path.write_bytes(original)
        with pytest.raises(CheckpointError, match=str(path)):
            await SQLiteStore(path).open()
        assert path.read_bytes() == original

    async def test_another_applications_database_is_refused_untouched(self, tmp_path: Path) -> None:
        """A SQLite file of another application is not taken over."""
        path = tmp_path / "app.sqlite"
        with sqlite3.connect(path) as connection:
            connection.execute("CREATE TABLE users (name TEXT)")
        connection.close()
        original = path.read_bytes()
        with pytest.raises(CheckpointError, match="another application") as caught:
            await SQLiteStore(path).put("run-1", "stage", "output", 1)
        assert str(path) in str(caught.value)
        assert path.read_bytes() == original

    async def test_an_incompatible_schema_version_is_refused_untouched(
        self, tmp_path: Path
    ) -> None:
        """A store written by another schema version is named with its version and not changed."""
        path = tmp_path / "checkpoints.sqlite"
        async with SQLiteStore(path) as store:
            await store.put("run-1", "stage", "output", 1)
        with sqlite3.connect(path) as connection:
            connection.execute("PRAGMA user_version = 99")
        connection.close()
        original = path.read_bytes()
        with pytest.raises(CheckpointError, match="schema version 99") as caught:
            await SQLiteStore(path).open()
        assert str(path) in str(caught.value)
        assert path.read_bytes() == original

    @pytest.mark.parametrize("inside", ["notes.txt", "notes.txt/sub"])
    async def test_a_file_where_the_directory_should_be_is_a_clear_error(
        self, tmp_path: Path, inside: str
    ) -> None:
        """A path under a file gives a CheckpointError naming the path and the file in the way."""
        blocker = tmp_path / "notes.txt"
        blocker.write_text("my notes\n")
        path = tmp_path / inside / "checkpoints.sqlite"
        with pytest.raises(CheckpointError) as caught:
            await SQLiteStore(path).put("run-1", "stage", "output", 1)
        assert caught.value.path == path
        assert str(path) in str(caught.value)
        assert f"{blocker} is a file, not a directory" in str(caught.value)
        assert blocker.read_text() == "my notes\n"
        assert store_threads() == []

    @pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
    async def test_a_directory_the_system_will_not_create_is_a_clear_error(self) -> None:
        """Under /proc no directory can be made: a CheckpointError with the OS's reason."""
        path = Path("/proc/agentmesh-test/checkpoints.sqlite")
        with pytest.raises(CheckpointError, match="cannot create the directory") as caught:
            await SQLiteStore(path).open()
        assert caught.value.path == path
        assert "No such file or directory" in str(caught.value)

    @pytest.mark.skipif(
        sys.platform == "win32" or os.geteuid() == 0, reason="permissions do not bind root"
    )
    async def test_a_read_only_directory_is_a_clear_error(self, tmp_path: Path) -> None:
        """A directory that may not be written to gives a CheckpointError naming the path."""
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        try:
            for path in (locked / "checkpoints.sqlite", locked / "sub" / "checkpoints.sqlite"):
                with pytest.raises(CheckpointError) as caught:
                    await SQLiteStore(path).open()
                assert caught.value.path == path
                assert str(path) in str(caught.value)
        finally:
            locked.chmod(0o700)

    async def test_close_leaves_no_thread_behind(self, tmp_path: Path) -> None:
        """The worker thread lives from open to close, and not a moment longer."""
        store = SQLiteStore(tmp_path / "checkpoints.sqlite")
        await store.put("run-1", "stage", "output", 1)
        assert len(store_threads()) == 1
        await store.close()
        assert store_threads() == []


# --- PostgreSQL -------------------------------------------------------------------

# The table as agentmesh creates it, so a test can fake one that differs in one way only.
OUR_TABLE = (
    "CREATE TABLE {}.agentmesh_checkpoints (seq bigint GENERATED ALWAYS AS IDENTITY, "
    "run_id text NOT NULL, stage text NOT NULL, key text NOT NULL, "
    "schema_version integer NOT NULL, value json NOT NULL, saved_at timestamptz NOT NULL, "
    "PRIMARY KEY (run_id, stage, key))"
)


async def query(dsn: str, statement: str, *params: object) -> list[tuple[Any, ...]]:
    """Run one statement on a connection of its own, as any other client of the server."""
    from psycopg import AsyncConnection

    async with await AsyncConnection.connect(dsn, autocommit=True) as connection:
        cursor = await connection.execute(statement.encode(), params or None)
        return await cursor.fetchall() if cursor.description else []


async def snapshot(dsn: str, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    """Everything in a schema that a store could change: objects, columns, comments, rows."""
    return {
        "objects": await query(
            dsn,
            "SELECT c.relname, c.relkind, obj_description(c.oid, 'pg_class') FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s ORDER BY 1",
            schema,
        ),
        "columns": await query(
            dsn,
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = %s ORDER BY table_name, ordinal_position",
            schema,
        ),
        "rows": await query(
            dsn, f'SELECT t::text FROM "{schema}".agentmesh_checkpoints t ORDER BY 1'
        ),
    }


class Role(NamedTuple):
    name: str
    dsn: str


@pytest.fixture
async def postgres_role(postgres_dsn: str) -> AsyncIterator[Role]:
    """A role of this test's own that may only connect; dropped after the test."""
    from psycopg.conninfo import make_conninfo

    name, password = f"role_{uuid.uuid4().hex[:12]}", uuid.uuid4().hex
    await query(postgres_dsn, f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
    try:
        yield Role(name, make_conninfo(postgres_dsn, user=name, password=password))
    finally:
        await query(postgres_dsn, f"DROP OWNED BY {name}")
        await query(postgres_dsn, f"DROP ROLE {name}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class TestPostgresStore:
    async def test_checkpoints_survive_a_new_store_on_the_same_database(
        self, postgres_dsn: str, postgres_schema: str
    ) -> None:
        """What one store saved, another store (another machine, later) reads back."""
        async with PostgresStore(postgres_dsn, schema=postgres_schema) as first:
            await first.put("run-1", "retrieval", "output", [Doc(title="x")])
        async with PostgresStore(postgres_dsn, schema=postgres_schema) as second:
            assert await second.get("run-1", "retrieval", "output", model=list[Doc]) == [
                Doc(title="x")
            ]

    async def test_the_table_is_created_marked_with_the_schema_version(
        self, postgres_dsn: str, postgres_schema: str
    ) -> None:
        """A new store is one table, agentmesh_checkpoints, whose comment names its version."""
        async with PostgresStore(postgres_dsn, schema=postgres_schema) as store:
            await store.put("run-1", "stage", "output", 1)
        objects = (await snapshot(postgres_dsn, postgres_schema))["objects"]
        marker = "agentmesh checkpoint store, schema version 1"
        assert ("agentmesh_checkpoints", "r", marker) in objects

    async def test_many_stores_opening_an_empty_schema_at_once_all_succeed(
        self, postgres_dsn: str, postgres_schema: str
    ) -> None:
        """Eight processes starting at once set the store up once, and none of them fails."""
        stores = [PostgresStore(postgres_dsn, schema=postgres_schema) for _ in range(8)]
        try:
            await asyncio.gather(*(store.open() for store in stores))
            await asyncio.gather(*(s.put("run-1", f"s{i}", "k", i) for i, s in enumerate(stores)))
        finally:
            await asyncio.gather(*(store.close() for store in stores))
        async with PostgresStore(postgres_dsn, schema=postgres_schema) as store:
            assert len(await store.list("run-1")) == 8

    async def test_concurrent_writers_on_two_stores_never_fail(
        self, postgres_dsn: str, postgres_schema: str
    ) -> None:
        """Two stores (two machines) take 200 concurrent writes, even all to one key."""
        async with (
            PostgresStore(postgres_dsn, schema=postgres_schema) as one,
            PostgresStore(postgres_dsn, schema=postgres_schema, max_connections=2) as two,
        ):
            await asyncio.gather(
                *((one if i % 2 else two).put("run-1", f"s{i}", "k", i) for i in range(200))
            )
            await asyncio.gather(
                *((one if i % 2 else two).put("run-2", "s", "k", i) for i in range(200))
            )
            assert len(await one.list("run-1")) == 200
            [last] = await two.list("run-2")
            assert last.value in range(200)

    @pytest.mark.parametrize(
        "create",
        [
            pytest.param(
                "CREATE TABLE {}.agentmesh_checkpoints (id serial PRIMARY KEY, note text);"
                "INSERT INTO {}.agentmesh_checkpoints (note) VALUES ('keep me')",
                id="other-columns",
            ),
            pytest.param(OUR_TABLE, id="our-columns-unmarked"),
            pytest.param(
                OUR_TABLE + ";COMMENT ON TABLE {}.agentmesh_checkpoints IS 'orders of the shop'",
                id="another-comment",
            ),
            pytest.param(
                "CREATE VIEW {}.agentmesh_checkpoints AS SELECT 1 AS one;"
                "COMMENT ON VIEW {}.agentmesh_checkpoints IS "
                "'agentmesh checkpoint store, schema version 1'",
                id="a-view",
            ),
        ],
    )
    async def test_a_foreign_table_of_the_same_name_is_refused_untouched(
        self, postgres_dsn: str, postgres_schema: str, create: str
    ) -> None:
        """A table (or view) named agentmesh_checkpoints that agentmesh did not create is
        refused with a CheckpointError naming it, and nothing in the schema changes."""
        await query(postgres_dsn, f'CREATE SCHEMA "{postgres_schema}"')
        for statement in create.format(*[f'"{postgres_schema}"'] * 2).split(";"):
            await query(postgres_dsn, statement)
        before = await snapshot(postgres_dsn, postgres_schema)
        store = PostgresStore(postgres_dsn, schema=postgres_schema)
        with pytest.raises(CheckpointError, match="not an agentmesh checkpoint store") as caught:
            await store.put("run-1", "stage", "output", 1)
        assert f"{postgres_schema}.agentmesh_checkpoints" in str(caught.value)
        assert "left untouched" in str(caught.value)
        assert await snapshot(postgres_dsn, postgres_schema) == before
        await store.close()

    async def test_an_incompatible_schema_version_is_refused_untouched(
        self, postgres_dsn: str, postgres_schema: str
    ) -> None:
        """A store marked with another schema version is named with its version, not changed."""
        async with PostgresStore(postgres_dsn, schema=postgres_schema) as store:
            await store.put("run-1", "stage", "output", 1)
        await query(
            postgres_dsn,
            f'COMMENT ON TABLE "{postgres_schema}".agentmesh_checkpoints IS '
            "'agentmesh checkpoint store, schema version 99'",
        )
        before = await snapshot(postgres_dsn, postgres_schema)
        with pytest.raises(CheckpointError, match="schema version 99") as caught:
            await PostgresStore(postgres_dsn, schema=postgres_schema).open()
        assert f"{postgres_schema}.agentmesh_checkpoints" in str(caught.value)
        assert await snapshot(postgres_dsn, postgres_schema) == before

    async def test_a_marked_table_without_our_columns_is_refused_untouched(
        self, postgres_dsn: str, postgres_schema: str
    ) -> None:
        """The marker alone is not enough: a table that lacks the store's columns is refused."""
        await query(postgres_dsn, f'CREATE SCHEMA "{postgres_schema}"')
        await query(postgres_dsn, f'CREATE TABLE "{postgres_schema}".agentmesh_checkpoints (x int)')
        await query(
            postgres_dsn,
            f'COMMENT ON TABLE "{postgres_schema}".agentmesh_checkpoints IS '
            "'agentmesh checkpoint store, schema version 1'",
        )
        before = await snapshot(postgres_dsn, postgres_schema)
        with pytest.raises(CheckpointError, match="does not have its columns"):
            await PostgresStore(postgres_dsn, schema=postgres_schema).open()
        assert await snapshot(postgres_dsn, postgres_schema) == before

    async def test_a_user_who_may_create_tables_but_not_schemas_sets_the_store_up(
        self, postgres_dsn: str, postgres_schema: str, postgres_role: Role
    ) -> None:
        """In an existing schema, creating the store needs CREATE on that schema only."""
        await query(postgres_dsn, f'CREATE SCHEMA "{postgres_schema}"')
        await query(
            postgres_dsn,
            f'GRANT USAGE, CREATE ON SCHEMA "{postgres_schema}" TO {postgres_role.name}',
        )
        async with PostgresStore(postgres_role.dsn, schema=postgres_schema) as store:
            await store.put("run-1", "stage", "output", 1)
            assert [c.value for c in await store.list("run-1")] == [1]

    async def test_a_user_who_may_only_read_and_write_the_table_uses_the_store(
        self, postgres_dsn: str, postgres_schema: str, postgres_role: Role
    ) -> None:
        """Once the table exists (made by an administrator), using it needs no CREATE at all."""
        async with PostgresStore(postgres_dsn, schema=postgres_schema) as store:
            await store.put("run-1", "stage", "output", 1)
        await query(
            postgres_dsn, f'GRANT USAGE ON SCHEMA "{postgres_schema}" TO {postgres_role.name}'
        )
        await query(
            postgres_dsn,
            f'GRANT SELECT, INSERT, UPDATE, DELETE ON "{postgres_schema}".agentmesh_checkpoints '
            f"TO {postgres_role.name}",
        )
        async with PostgresStore(postgres_role.dsn, schema=postgres_schema) as store:
            await store.put("run-1", "stage", "output", 2)
            assert [c.value for c in await store.list("run-1")] == [2]
            assert await store.delete("run-1") == 1

    async def test_a_schema_name_is_quoted_never_spliced_into_sql(
        self, postgres_dsn: str, postgres_schema: str
    ) -> None:
        """Any schema name works as given: quotes and semicolons are part of the name."""
        odd = f'{postgres_schema} "x"; DROP TABLE y; --'
        try:
            async with PostgresStore(postgres_dsn, schema=odd) as store:
                await store.put("run-1", "stage", "output", "value")
                assert (await store.list("run-1"))[0].value == "value"
            assert await query(
                postgres_dsn, "SELECT nspname FROM pg_namespace WHERE nspname = %s", odd
            ) == [(odd,)]
        finally:
            escaped = odd.replace('"', '""')
            await query(postgres_dsn, f'DROP SCHEMA IF EXISTS "{escaped}" CASCADE')

    async def test_connections_the_server_dropped_are_replaced(
        self, postgres_dsn: str, postgres_schema: str
    ) -> None:
        """After the server ends every connection of a store (a restart), the next put works."""
        from psycopg.conninfo import make_conninfo

        name = f"agentmesh-{postgres_schema}"
        dsn = make_conninfo(postgres_dsn, application_name=name)
        # A timeout shorter than a back-off between dead connections would add up to.
        async with PostgresStore(dsn, schema=postgres_schema, timeout=3) as store:
            # Claims, each its own transaction: puts made at once would share one connection.
            await asyncio.gather(*(store.claim("run-1", f"s{i}", "k", i) for i in range(100)))
            ended = await query(
                postgres_dsn,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s",
                name,
            )
            assert len(ended) >= 2  # a pool of connections, every one of them dead
            assert all(ok for (ok,) in ended)
            await store.put("run-1", "s0", "k", "after")
            assert (await store.get("run-1", "s0", "k")) is not None

    async def test_close_ends_every_connection(
        self, postgres_dsn: str, postgres_schema: str
    ) -> None:
        """A closed store holds no connection to the server."""
        from psycopg.conninfo import make_conninfo

        name = f"agentmesh-{postgres_schema}"
        store = PostgresStore(
            make_conninfo(postgres_dsn, application_name=name), schema=postgres_schema
        )
        await asyncio.gather(*(store.put("run-1", f"s{i}", "k", i) for i in range(50)))
        count = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
        assert (await query(postgres_dsn, count, name))[0][0] >= 1
        await store.close()
        for _ in range(100):  # the server notices a closed connection a moment later
            if (await query(postgres_dsn, count, name))[0][0] == 0:
                break
            await asyncio.sleep(0.02)
        assert (await query(postgres_dsn, count, name))[0][0] == 0

    @pytest.mark.parametrize(
        "dsn",
        [
            "postgresql://agentmesh:hunter2@127.0.0.1:{port}/checkpoints",
            "host=127.0.0.1 port={port} user=agentmesh password=hunter2 dbname=checkpoints",
        ],
        ids=["url", "key=value"],
    )
    async def test_an_unreachable_server_is_a_clear_error_without_the_password(
        self, dsn: str
    ) -> None:
        """A server that does not answer gives a CheckpointError naming it, never the password."""
        store = PostgresStore(dsn.format(port=free_port()), timeout=2)
        with pytest.raises(CheckpointError, match="cannot connect") as caught:
            await store.put("run-1", "stage", "output", 1)
        assert "127.0.0.1" in str(caught.value)
        assert "hunter2" not in str(caught.value)
        assert "hunter2" not in repr(store)
        await store.close()

    async def test_a_wrong_password_is_a_clear_error_without_it(self, postgres_dsn: str) -> None:
        """Authentication failures name the server, not the password that was tried."""
        from psycopg.conninfo import make_conninfo

        store = PostgresStore(make_conninfo(postgres_dsn, password="hunter2"))
        with pytest.raises(CheckpointError, match="password authentication failed") as caught:
            await store.open()
        assert "hunter2" not in str(caught.value)
        await store.close()


class TestPostgresStoreArguments:
    @pytest.mark.parametrize(
        ("arguments", "message"),
        [
            ({"dsn": "host=db password=hunter2 colour=blue"}, "(dsn=) is not a connection string"),
            ({"dsn": "", "schema": ""}, "(schema=) must be a name"),
            ({"dsn": "", "schema": "s" * 64}, "(schema=) must be a name"),
            ({"dsn": "", "max_connections": 0}, "(max_connections=) must be an int >= 1"),
            ({"dsn": "", "timeout": 0}, "(timeout=) must be a finite number of seconds > 0"),
        ],
    )
    def test_bad_arguments_are_usage_errors_naming_them(
        self, arguments: dict[str, Any], message: str
    ) -> None:
        """A bad argument is refused when the store is made, and a password is never shown."""
        with pytest.raises(UsageError, match=re.escape(message)) as caught:
            PostgresStore(**arguments)
        assert "hunter2" not in str(caught.value)

    def test_without_the_extra_the_error_says_what_to_install(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without psycopg, making a PostgresStore names agentmesh-failwell[postgres]."""
        monkeypatch.setitem(sys.modules, "psycopg", None)
        with pytest.raises(ImportError, match=r"agentmesh-failwell\[postgres\]"):
            PostgresStore("")


# --- the ledger ---------------------------------------------------------------------


class Effects:
    """Counts the side effects the outside world saw."""

    def __init__(self) -> None:
        self.charges: list[str] = []
        self.keys: list[str | None] = []
        self.fail_after_charge = True


def checkout_agent(effects: Effects) -> Subagent:
    @tool
    async def charge(order_id: str, amount: int) -> Receipt:
        effects.charges.append(order_id)
        return Receipt(order_id=order_id, amount=amount)

    @subagent(name="checkout", retry=RetryPolicy.never())
    async def checkout(task: Task, ctx: Context) -> dict[str, Any]:
        receipt = await ctx.call(charge, order_id=task.query, amount=42)
        assert isinstance(receipt, Receipt)  # the replayed result is typed like a fresh one
        if effects.fail_after_charge:
            raise PermissionDenied("the mailer refused the confirmation")
        return {"receipt": receipt.model_dump(), "mailed": True}

    return checkout


class TestLedger:
    async def test_a_resumed_run_does_not_repeat_a_completed_non_idempotent_call(
        self, store: CheckpointStore
    ) -> None:
        """The charge made before the failure is not made again when the run resumes."""
        effects = Effects()
        checkout = checkout_agent(effects)
        first = await checkout.run(Task(query="#10001", id="order"), run_id="run-1", store=store)
        assert isinstance(first, ErrorEnvelope)
        effects.fail_after_charge = False
        second = await checkout.run(Task(query="#10001", id="order"), run_id="run-1", store=store)
        assert isinstance(second, Success)
        assert second.data == {"receipt": {"order_id": "#10001", "amount": 42}, "mailed": True}
        assert effects.charges == ["#10001"]

    async def test_the_task_id_is_derived_from_the_task_when_none_is_given(
        self, store: CheckpointStore
    ) -> None:
        """The same task without an id finds its ledger again in a resumed run."""
        effects = Effects()
        checkout = checkout_agent(effects)
        await checkout.run("#10001", run_id="run-1", store=store)
        effects.fail_after_charge = False
        assert isinstance(await checkout.run("#10001", run_id="run-1", store=store), Success)
        assert effects.charges == ["#10001"]

    async def test_a_new_run_id_acts_again(self, store: CheckpointStore) -> None:
        """The ledger belongs to one run: another run makes its own calls."""
        effects = Effects()
        checkout = checkout_agent(effects)
        await checkout.run("#10001", run_id="run-1", store=store)
        await checkout.run("#10001", run_id="run-2", store=store)
        assert effects.charges == ["#10001", "#10001"]

    async def test_identical_calls_in_one_attempt_are_distinct_calls(
        self, store: CheckpointStore
    ) -> None:
        """Two identical charges in one run are both made once, and neither is repeated."""
        charges: list[str] = []

        @tool
        async def charge(order_id: str) -> str:
            charges.append(order_id)
            return f"receipt {len(charges)}"

        @subagent(retry=RetryPolicy.never())
        async def twice(task: Task, ctx: Context) -> list[str]:
            return [await ctx.call(charge, order_id="#1"), await ctx.call(charge, order_id="#1")]

        first = await twice.run("q", run_id="run-1", store=store)
        again = await twice.run("q", run_id="run-1", store=store)
        assert isinstance(first, Success)
        assert isinstance(again, Success)
        assert first.data == again.data == ["receipt 1", "receipt 2"]
        assert charges == ["#1", "#1"]

    async def test_a_local_retry_of_the_subagent_does_not_repeat_the_call(
        self, store: CheckpointStore
    ) -> None:
        """A transient failure after the charge is retried without charging twice."""
        charges: list[str] = []
        failures = [TimeoutError("mailer timed out")]
        sleep = RecordingSleep()

        @tool
        async def charge(order_id: str) -> str:
            charges.append(order_id)
            return "receipt"

        @subagent(retry=fast_retry(sleep))
        async def checkout(task: Task, ctx: Context) -> str:
            receipt: str = await ctx.call(charge, order_id="#1")
            if failures:
                raise failures.pop()
            return receipt

        outcome = await checkout.run("q", run_id="run-1", store=store)
        assert isinstance(outcome, Success)
        assert outcome.attempts == 2
        assert charges == ["#1"]
        assert sleep.delays == [0.1]

    async def test_idempotent_tools_are_not_recorded(self, store: CheckpointStore) -> None:
        """Reads are simply made again; only non-idempotent calls go into the ledger."""
        reads: list[str] = []

        @tool(idempotent=True)
        async def search(query: str) -> list[str]:
            reads.append(query)
            return [query]

        @subagent
        async def docs(task: Task, ctx: Context) -> list[str]:
            return await ctx.call(search, query=task.query)

        await docs.run("q", run_id="run-1", store=store)
        await docs.run("q", run_id="run-1", store=store)
        assert reads == ["q", "q"]
        assert await store.list("run-1") == ()

    async def test_the_idempotency_key_is_the_same_in_a_resumed_run(
        self, store: CheckpointStore
    ) -> None:
        """A call that failed after acting gets the same idempotency key when the run resumes.

        This covers the ledger's blind spot (a crash between the side effect and its
        record) for services that honour idempotency keys.
        """
        keys: list[str | None] = []

        @tool
        async def transfer(amount: int, idempotency_key: str | None = None) -> str:
            keys.append(idempotency_key)
            raise ConnectionError("connection reset after the bank acted")

        @subagent(retry=RetryPolicy.never())
        async def payout(task: Task, ctx: Context) -> str:
            return await ctx.call(transfer, amount=10)

        for _ in range(2):
            outcome = await payout.run("q", run_id="run-1", store=store)
            assert isinstance(outcome, ErrorEnvelope)
        assert len(keys) == 2
        assert keys[0] is not None
        assert keys[0] == keys[1]

    async def test_an_unreadable_ledger_means_the_call_is_not_made(self, tmp_path: Path) -> None:
        """When the ledger cannot say whether the call happened, the tool is not run."""
        charges: list[str] = []

        class BrokenStore(MemoryStore):
            async def _get(self, run_id: str, stage: str, key: str) -> Row | None:
                raise CheckpointError("disk gone")

            async def _claim(self, row: Row) -> Row | None:
                raise CheckpointError("disk gone")

        @tool
        async def charge(order_id: str) -> str:
            charges.append(order_id)
            return "receipt"

        @subagent(retry=RetryPolicy.never())
        async def checkout(task: Task, ctx: Context) -> str:
            return await ctx.call(charge, order_id="#1")

        async with BrokenStore() as broken:
            outcome = await checkout.run("q", run_id="run-1", store=broken)
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.is_retryable is False
        assert "disk gone" in outcome.message
        assert charges == []

    async def test_policies_still_rule_on_a_replayed_result(self, store: CheckpointStore) -> None:
        """A result withheld by a post-tool policy stays withheld when it comes from the ledger."""
        effects = Effects()
        checkout = checkout_agent(effects)
        await checkout.run("#10001", run_id="run-1", store=store)

        @post_tool_use(tool="charge")
        def no_receipts(event: ToolResultEvent) -> Ruling | None:
            return Ruling.deny("receipts are confidential")

        effects.fail_after_charge = False
        outcome = await checkout.run("#10001", run_id="run-1", store=store, policies=[no_receipts])
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "policy_blocked"
        assert effects.charges == ["#10001"]


# --- saved progress -----------------------------------------------------------------


class Sources(Subagent):
    """Reads three sources in turn, recording each as it completes."""

    def __init__(self, failing: set[str], **options: Any) -> None:
        super().__init__("sources", retry=RetryPolicy.never(), **options)
        self.failing = failing
        self.fetched: list[str] = []

    async def handle(self, task: Task, ctx: Context) -> Sequence[Any]:
        ctx.record_partial(pending=["s1", "s2", "s3"])
        for source in ("s1", "s2", "s3"):
            if source in ctx.partials.completed:
                continue
            self.fetched.append(source)
            if source in self.failing:
                raise PermissionDenied(f"{source} refused")
            ctx.record_partial([f"finding from {source}"], completed=source)
        return ctx.partials.findings


class TestSubagentProgress:
    async def test_a_rerun_continues_from_its_pending_sources(self, store: CheckpointStore) -> None:
        """With checkpoint=True a re-run of the same run and task skips the completed sources."""
        agent = Sources(failing={"s3"}, checkpoint=True)
        task = Task(query="q", id="t1")
        first = await agent.run(task, run_id="run-1", store=store)
        assert isinstance(first, ErrorEnvelope)
        assert first.partial_results is not None
        assert first.partial_results.completed == ("s1", "s2")
        agent.failing.clear()
        second = await agent.run(task, run_id="run-1", store=store)
        assert isinstance(second, Success)
        assert list(second.data) == ["finding from s1", "finding from s2", "finding from s3"]
        assert agent.fetched == ["s1", "s2", "s3", "s3"]

    async def test_without_checkpoint_a_rerun_starts_over(self, store: CheckpointStore) -> None:
        """Progress is only saved for a subagent that asks for it."""
        agent = Sources(failing={"s3"})
        await agent.run(Task(query="q", id="t1"), run_id="run-1", store=store)
        agent.failing.clear()
        await agent.run(Task(query="q", id="t1"), run_id="run-1", store=store)
        assert agent.fetched == ["s1", "s2", "s3", "s1", "s2", "s3"]
        assert await store.list("run-1") == ()

    async def test_another_task_of_the_same_run_has_its_own_progress(
        self, store: CheckpointStore
    ) -> None:
        """Saved progress is keyed by run and task: another task starts from scratch."""
        agent = Sources(failing={"s3"}, checkpoint=True)
        await agent.run(Task(query="q", id="t1"), run_id="run-1", store=store)
        agent.failing.clear()
        await agent.run(Task(query="q", id="t2"), run_id="run-1", store=store)
        assert agent.fetched == ["s1", "s2", "s3", "s1", "s2", "s3"]
