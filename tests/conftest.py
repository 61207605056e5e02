"""Fixtures shared across the test suite: the PostgreSQL server of the `PostgresStore` tests."""

from __future__ import annotations

import gc
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentmesh.checkpoints import CheckpointStore, MemoryStore, PostgresStore, SQLiteStore

POSTGRES_DSN_VARIABLE = "AGENTMESH_TEST_POSTGRES_DSN"
RAY_TESTS = "tests/ray/"


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (the SDKs, pydantic's schemas, every test module: millions
    of objects, alive to the end) leaves the collector's view: `gc.freeze()`.

    Every full collection walked them all again, about 0.2 s each, dozens of times per
    process (and each test's own `gc.collect()`). Objects made from here on are collected
    as before; what the tests check of the collector (a weak reference dying, objects a
    task holds) is about those.
    """
    gc.collect()
    gc.freeze()


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`, with the Ray tests as one unit, handed out first.

    One worker then starts the session's local Ray instance, not each worker (seconds,
    and two instances on a small machine slow each other); and the unit, the longest of
    the suite but few tests, is not left to the end by xdist's order (most tests first),
    where it would make the other worker wait for it.
    """
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class RayFirst(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith(RAY_TESTS):
                return RAY_TESTS
            return super()._split_scope(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            if RAY_TESTS in self.workqueue:
                self.workqueue.move_to_end(RAY_TESTS, last=False)
            super()._assign_work_unit(node)

    return RayFirst(config, log)


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
