"""`KeepsEventLogs`: the one seam through which a run's events reach a store.

A store of one's own that has `event_table()` (an `EventTable` implementing `append`
and `read`) gets its runs' events appended in batches and read back by `read_events`,
`follow_events` and the console, as a built-in store does; a store without it keeps
checkpoints and no events, and says so where an event log is asked for.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import httpx
import pytest
from structlog.testing import capture_logs

from agentmesh import Context, Coordinator, Task, subagent
from agentmesh.checkpoints import (
    CheckpointStore,
    EventTable,
    KeepsEventLogs,
    LoggedRow,
    LogHead,
    event_table_of,
)
from agentmesh.console import Access, RunStatus, create_app, load_run
from agentmesh.errors import UsageError
from agentmesh.events import EventLog, RunFinished, RunStarted, follow_events, read_events
from tests.user_store import UserStore

TOKEN = "seam-test-token-0123456789abcdef"


@subagent(name="docs")
async def docs(task: Task, ctx: Context) -> str:
    return f"about {task.query}"


def tasks(count: int) -> list[Task]:
    return [Task(query=f"question {index}", topic=f"topic {index}") for index in range(count)]


class ListTable(EventTable):
    """A user's event logs in plain lists: `append` and `read`, nothing else."""

    def __init__(self, logs: dict[str, list[LoggedRow]], batches: list[int]) -> None:
        self.logs = logs
        self.batches = batches

    async def append(self, items: Sequence[tuple[str, str, bool, str, int]]) -> Sequence[None]:
        self.batches.append(len(items))
        for run_id, kind, _essential, text, _max_bytes in items:
            log = self.logs.setdefault(run_id, [])
            log.append(LoggedRow(len(log) + 1, kind, text, time.time()))
        return [None] * len(items)

    async def read(
        self, run_id: str, after: int, limit: int
    ) -> tuple[LogHead | None, list[LoggedRow]]:
        log = self.logs.get(run_id)
        if log is None:
            return None, []
        ends = [row.kind for row in log if row.kind in ("RunStarted", "RunFinished")]
        finished = bool(ends) and ends[-1] == "RunFinished"
        head = LogHead(len(log), sum(len(row.text) for row in log), 0, log[-1].saved_at, finished)
        return head, log[after : after + limit]


class LoggingStore(UserStore):
    """A user's store that keeps its runs' event logs too (`KeepsEventLogs`)."""

    def __init__(self) -> None:
        super().__init__()
        self.logs: dict[str, list[LoggedRow]] = {}
        self.batches: list[int] = []

    def event_table(self) -> EventTable:
        return ListTable(self.logs, self.batches)


class FailingTable(ListTable):
    async def append(self, items: Sequence[tuple[str, str, bool, str, int]]) -> Sequence[None]:
        raise OSError("the log's disk is full")


class FailingStore(LoggingStore):
    def event_table(self) -> EventTable:
        return FailingTable(self.logs, self.batches)


def console(store: CheckpointStore) -> httpx.AsyncClient:
    app = create_app(store, access=Access(TOKEN))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console")


class TestAStoreOfOnesOwnWithTheSeam:
    async def test_its_runs_events_are_appended_in_batches_and_read_back(self) -> None:
        """What the stream yields is what the user's table holds, positions 1..n, and
        `read_events` / `follow_events` read it through the seam."""
        store = LoggingStore()
        assert isinstance(store, KeepsEventLogs)
        coordinator = Coordinator([docs], store=store, event_log=EventLog())
        async with coordinator.stream(tasks(3), run_id="own") as stream:
            streamed = [event async for event in stream]
        assert sum(store.batches) == len(streamed)  # every event once, queued in batches
        assert len(store.batches) < len(streamed)
        page = await read_events(store, "own")
        assert [type(logged.event) for logged in page.events] == [type(e) for e in streamed]
        assert [logged.position for logged in page.events] == list(range(1, len(streamed) + 1))
        assert page.finished
        followed = [logged async for logged in follow_events(store, "own")]
        assert isinstance(followed[0].event, RunStarted)
        assert isinstance(followed[-1].event, RunFinished)

    async def test_the_console_shows_its_status_and_streams_its_events(self) -> None:
        """The console reads the user's log: a finished run from its `RunFinished`, and
        the live page's stream sends each event, then `end`."""
        store = LoggingStore()
        await Coordinator([docs], store=store, event_log=EventLog()).run(tasks(2), run_id="r1")
        view = await load_run(store, "r1", stale_after=0)
        assert view is not None
        assert view.summary.status is RunStatus.FINISHED
        async with console(store) as http:
            body = (await http.get("/runs/r1/events?after=0")).text
        assert body.count("event: run\n") == len(store.logs["r1"])
        assert body.rstrip().endswith('data: {"status": "finished"}')

    async def test_a_failed_append_is_logged_and_the_run_still_reports(self) -> None:
        """The log is for a console: a table that cannot append costs the run nothing
        but an error in the log naming the store."""
        store = FailingStore()
        with capture_logs() as logs:
            report = await Coordinator([docs], store=store, event_log=EventLog()).run(
                tasks(2), run_id="full"
            )
        assert report.coverage_ratio == 1.0
        [failed] = [entry for entry in logs if entry["event"] == "event_log_write_failed"]
        assert "disk is full" in failed["error"]

    def test_a_table_that_is_not_an_event_table_is_refused(self) -> None:
        class Wrong(UserStore):
            def event_table(self) -> object:
                return {}

        with pytest.raises(UsageError, match=r"event_table\(\) gave dict"):
            event_table_of(Wrong())


class TestAStoreWithoutTheSeam:
    async def test_a_run_keeps_its_checkpoints_and_no_events(self) -> None:
        """`event_log=` asks for a log a plain store cannot keep: the run goes on as
        always, and whoever asks for its events is told the store keeps none."""
        store = UserStore()
        assert event_table_of(store) is None
        report = await Coordinator([docs], store=store, event_log=EventLog()).run(
            tasks(2), run_id="plain"
        )
        assert report.coverage_ratio == 1.0
        with pytest.raises(UsageError, match="keeps no event log"):
            await read_events(store, "plain")
        view = await load_run(store, "plain", stale_after=900)
        assert view is not None
        assert view.summary.finished == 2
        async with console(store) as http:
            stream = await http.get("/runs/plain/events")
        assert stream.status_code == 404
        assert "keeps no event log" in stream.text

    async def test_a_built_in_store_has_the_seam(self, store: CheckpointStore) -> None:
        assert isinstance(store, KeepsEventLogs)
        assert isinstance(event_table_of(store), EventTable)
