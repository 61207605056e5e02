"""Fixtures shared across the test suite: the PostgreSQL server of the `PostgresStore` tests."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agentmesh.checkpoints import CheckpointStore, MemoryStore, PostgresStore, SQLiteStore

POSTGRES_DSN_VARIABLE = "AGENTMESH_TEST_POSTGRES_DSN"


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    """The connection string of the test server (`scripts/pg_test_server.sh start`).

    Without one the PostgreSQL tests skip, except in CI (`CI=true`), where they fail:
    `.ci/run` starts a server, so a missing one is a broken CI, not a reason to skip.
    """
    reason = ""
    dsn = os.environ.get(POSTGRES_DSN_VARIABLE, "")
    if not dsn:
        reason = (
            f"{POSTGRES_DSN_VARIABLE} is not set; start a PostgreSQL server for the tests with "
            '`eval "$(scripts/pg_test_server.sh start)"`'
        )
    else:
        try:
            import psycopg  # noqa: F401  # the postgres extra, part of dev
        except ImportError:
            reason = "psycopg is not installed: pip install -e '.[dev]'"
    if reason:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI must run the PostgreSQL tests, but {reason}", pytrace=False)
        pytest.skip(reason)
    return dsn


@pytest.fixture
def postgres_schema(postgres_dsn: str) -> Iterator[str]:
    """A Postgres schema name of this test's own; the schema is dropped afterwards."""
    from psycopg import connect
    from psycopg.sql import SQL, Identifier

    name = f"test_{uuid.uuid4().hex[:12]}"
    yield name
    with connect(postgres_dsn, autocommit=True) as connection:
        connection.execute(SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(Identifier(name)))


@pytest.fixture(params=["sqlite", "postgres", "memory"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[CheckpointStore]:
    """Each store in turn (PostgreSQL only with a test server): they must not differ."""
    instance: SQLiteStore | PostgresStore | MemoryStore
    if request.param == "sqlite":
        instance = SQLiteStore(tmp_path / "checkpoints.sqlite")
    elif request.param == "postgres":
        dsn: str = request.getfixturevalue("postgres_dsn")
        instance = PostgresStore(dsn, schema=request.getfixturevalue("postgres_schema"))
    else:
        instance = MemoryStore()
    async with instance:
        yield instance
