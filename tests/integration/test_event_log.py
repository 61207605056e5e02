"""A run's events in its store (the event log): written as they happen, masked, bounded,
read from a position on, and waited for, on every built-in store."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentmesh import Context, Coordinator, Task, subagent
from agentmesh.checkpoints import CheckpointStore, MemoryStore, PostgresStore, SQLiteStore
from agentmesh.errors import UsageError
from agentmesh.events import (
    EventLog,
    RunFinished,
    RunStarted,
    TaskFinished,
    TaskStarted,
    follow_events,
    read_events,
)

SECRET = "sk-ant-api03-" + "x" * 40


@subagent(name="docs")
async def docs(task: Task, ctx: Context) -> list[dict[str, str]]:
    return [{"hit": task.query, "key": SECRET}]


def tasks(count: int) -> list[Task]:
    return [Task(query=f"question {index}", topic=f"topic {index}") for index in range(count)]


class TestTheLog:
    async def test_every_event_of_a_run_is_in_its_store_in_order_and_masked(
        self, store: CheckpointStore
    ) -> None:
        """What the stream yields is what the store holds, positions 1..n, secrets masked."""
        coordinator = Coordinator([docs], store=store, event_log=EventLog())
        async with coordinator.stream(tasks(3), run_id="r1") as stream:
            streamed = [event async for event in stream]
        page = await read_events(store, "r1")
        assert [type(logged.event) for logged in page.events] == [type(e) for e in streamed]
        assert [logged.position for logged in page.events] == list(range(1, len(streamed) + 1))
        assert [logged.event.seq for logged in page.events] == [e.seq for e in streamed]
        assert page.finished
        assert page.dropped == 0
        assert page.position == len(streamed)
        assert isinstance(page.events[-1].event, RunFinished)
        _head, rows = await store.event_table().read("r1", 0, 1_000)  # the text at rest
        assert not any(SECRET in row.text for row in rows)
        report = page.events[-1].event.report
        assert [finding.content["key"] for finding in report.findings] == ["[REDACTED]"] * 3

    async def test_a_reader_goes_on_from_its_position_and_waits_for_what_comes(
        self, store: CheckpointStore
    ) -> None:
        """`after=` skips what was read; `wait=` returns as soon as the next event is saved."""
        release = asyncio.Event()

        @subagent(name="slow")
        async def slow(task: Task, ctx: Context) -> str:
            await release.wait()
            return "done"

        running = asyncio.create_task(
            Coordinator([slow], store=store, event_log=EventLog()).run(tasks(1), run_id="r2")
        )
        first = await read_events(store, "r2", wait=10)
        while not any(isinstance(logged.event, TaskStarted) for logged in first.events):
            first = await read_events(store, "r2", after=first.position, wait=10)
        assert not first.finished
        waiting = asyncio.create_task(read_events(store, "r2", after=first.position, wait=10))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        release.set()
        more = await asyncio.wait_for(waiting, 5)
        assert more.events
        assert more.events[0].position == first.position + 1
        await running
        rest = [logged async for logged in follow_events(store, "r2", after=first.position)]
        assert isinstance(rest[-1].event, RunFinished)
        assert rest[0].position == first.position + 1

    async def test_a_resume_goes_on_in_the_same_log(self, store: CheckpointStore) -> None:
        """Positions go on across a run and its resume; the resume starts and finishes again."""
        coordinator = Coordinator([docs], store=store, event_log=EventLog())
        await coordinator.run(tasks(2), run_id="r3")
        before = await read_events(store, "r3")
        await coordinator.resume("r3")
        after = await read_events(store, "r3", after=before.position)
        assert isinstance(after.events[0].event, RunStarted)
        assert after.events[0].position == before.position + 1
        assert after.finished

    async def test_no_log_when_the_coordinator_asks_for_none(self, store: CheckpointStore) -> None:
        await Coordinator([docs], store=store, event_log=None).run(tasks(1), run_id="r4")
        page = await read_events(store, "r4")
        assert page.events == ()
        assert page.last_event_at is None
        assert not page.finished


class TestBounds:
    async def test_a_full_log_drops_the_oldest_progress_first_and_keeps_run_finished(
        self, store: CheckpointStore
    ) -> None:
        """Past max_bytes: task starts and routes go before task ends; RunFinished stays."""
        coordinator = Coordinator([docs], store=store, event_log=EventLog(max_bytes=20_000))
        await coordinator.run(tasks(12), run_id="full")
        page = await read_events(store, "full", limit=1_000)
        kinds = [type(logged.event).__name__ for logged in page.events]
        assert page.dropped > 0
        assert page.dropped + len(kinds) == page.last_position
        assert kinds[-1] == "RunFinished"
        assert page.finished
        assert kinds.count("TaskFinished") == 12  # essential: kept while progress could go
        assert "TaskStarted" not in kinds[:3]  # the oldest progress went first

    async def test_run_finished_is_kept_even_when_it_alone_is_over_the_bound(
        self, store: CheckpointStore
    ) -> None:
        coordinator = Coordinator([docs], store=store, event_log=EventLog(max_bytes=100))
        await coordinator.run(tasks(3), run_id="tiny")
        page = await read_events(store, "tiny")
        assert [type(logged.event) for logged in page.events] == [RunFinished]
        assert page.dropped == page.last_position - 1

    def test_the_bound_is_checked(self) -> None:
        with pytest.raises(UsageError, match="max_bytes"):
            EventLog(max_bytes=0)

    async def test_a_store_of_the_users_own_keeps_no_log(self) -> None:
        with pytest.raises(UsageError, match="keeps no event log"):
            await read_events(object(), "r")  # type: ignore[arg-type]


class TestTwoWriters:
    @pytest.mark.parametrize("kind", ["sqlite", "postgres"])
    def test_two_writers_of_one_run_take_its_positions_in_turn(
        self, kind: str, tmp_path: Path, request: pytest.FixtureRequest
    ) -> None:
        """Two threads, each with a store of its own on the same data, append to one run's
        log at a barrier: every position once, none lost, each writer's events in order."""
        if kind == "sqlite":
            make = functools.partial(SQLiteStore, tmp_path / "checkpoints.sqlite")
        else:
            dsn = request.getfixturevalue("postgres_dsn")
            schema = request.getfixturevalue("postgres_schema")
            make = functools.partial(PostgresStore, dsn, schema=schema)
        barrier = threading.Barrier(2)
        count = 40

        def writer(name: str) -> None:
            async def append() -> None:
                async with make() as store:
                    table = store.event_table()
                    barrier.wait()
                    for index in range(count):
                        text = f'{{"writer":"{name}","index":{index}}}'
                        await table.append([("shared", "Note", False, text, 10**6)])

            asyncio.run(append())

        threads = [threading.Thread(target=writer, args=(name,)) for name in "ab"]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)

        async def rows() -> list[Any]:
            async with make() as store:
                head, found = await store.event_table().read("shared", 0, 1_000)
                assert head is not None
                assert head.position == 2 * count
                return found

        found = asyncio.run(rows())
        assert [row.position for row in found] == list(range(1, 2 * count + 1))
        for name in "ab":
            mine = [row.text for row in found if f'"{name}"' in row.text]
            assert mine == [f'{{"writer":"{name}","index":{i}}}' for i in range(count)]


class TestPostgresNotifies:
    async def test_an_event_reaches_a_listener_on_another_connection_at_once(
        self, postgres_dsn: str, postgres_schema: str
    ) -> None:
        """LISTEN on the schema's channel hears the run id as the append commits; a reader
        on another store waiting for 30 s returns as soon as the event is there."""
        from psycopg import AsyncConnection
        from psycopg.sql import SQL, Identifier

        from agentmesh.checkpoints._events_postgres import channel_of

        async with (
            PostgresStore(postgres_dsn, schema=postgres_schema) as writer,
            PostgresStore(postgres_dsn, schema=postgres_schema) as reader,
            await AsyncConnection.connect(postgres_dsn, autocommit=True) as listener,
        ):
            await writer.open()
            await writer.event_table().append([("warm", "Note", False, "{}", 10**6)])
            await listener.execute(SQL("LISTEN {}").format(Identifier(channel_of(postgres_schema))))
            waiting = asyncio.create_task(read_events(reader, "n1", wait=30))
            await asyncio.sleep(0.2)
            started = time.monotonic()
            await Coordinator([docs], store=writer, event_log=EventLog()).run(tasks(1), run_id="n1")
            page = await asyncio.wait_for(waiting, 10)
            assert page.events
            assert time.monotonic() - started < 5
            heard = await anext(listener.notifies(timeout=5))
            assert heard.payload == "n1"


class TestMemoryAndSQLiteAgree:
    @pytest.mark.parametrize("kind", ["memory", "sqlite"])
    async def test_the_log_of_a_finished_run_ends_with_its_report(
        self, kind: str, tmp_path: Path
    ) -> None:
        store = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "c.sqlite")
        async with store:
            report = await Coordinator([docs], store=store, event_log=EventLog()).run(
                tasks(2), run_id="same"
            )
            page = await read_events(store, "same")
        last = page.events[-1].event
        assert isinstance(last, RunFinished)
        assert [entry.topic for entry in last.report.coverage] == [
            entry.topic for entry in report.coverage
        ]
        assert sum(isinstance(logged.event, TaskFinished) for logged in page.events) == 2
