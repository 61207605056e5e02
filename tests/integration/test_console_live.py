"""The console over a run's event log: a run's status, the live page's stream, and an
application that waits for answers woken by the console's answer."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from agentmesh import Context, Coordinator, Task, subagent
from agentmesh.approvals import Approve, Reject
from agentmesh.checkpoints import CheckpointStore, MemoryStore, PostgresStore
from agentmesh.console import Access, RunStatus, answer_approval, create_app, load_run
from agentmesh.events import EventLog
from tests.console.desk import TICKETS, TOKEN, Desk

MARKUP = "<img src=x onerror=alert(1)>"


@subagent(name="docs")
async def docs(task: Task, ctx: Context) -> str:
    return f"about {task.query}"


def client(store: CheckpointStore) -> httpx.AsyncClient:
    app = create_app(store, access=Access(TOKEN))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console")


def messages(body: str) -> list[tuple[str, str]]:
    """`(event, data)` of each server-sent message; comments left out."""
    found = []
    for block in body.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":")
        )
        if "event" in fields:
            found.append((fields["event"], fields.get("data", "")))
    return found


class TestStatusFromTheLog:
    async def test_a_run_without_run_finished_is_running_until_stale_then_stopped(
        self, store: CheckpointStore
    ) -> None:
        """A run whose stream was closed early never logged RunFinished: `running` while
        its last event is recent, `stopped` once it is older than stale_after."""
        coordinator = Coordinator([docs], store=store, event_log=EventLog())
        async with coordinator.stream([Task(query="q", topic="t")] * 2, run_id="cut") as stream:
            await anext(stream)  # RunStarted: its plan is saved; then the stream is closed
        running = await load_run(store, "cut", stale_after=900)
        stopped = await load_run(store, "cut", stale_after=0)
        assert running is not None
        assert stopped is not None
        assert running.summary.status is RunStatus.RUNNING
        assert stopped.summary.status is RunStatus.STOPPED
        await coordinator.run([Task(query="q", topic="t")], run_id="whole")
        finished = await load_run(store, "whole", stale_after=0)
        assert finished is not None
        assert finished.summary.status is RunStatus.FINISHED


class TestTheLiveStream:
    async def test_the_stream_sends_each_event_with_its_grid_cell_then_ends(self) -> None:
        """A finished run's stream: every event once, a task's end with its cell, `end`
        after RunFinished; from Last-Event-ID on, only what follows it."""
        async with MemoryStore() as store:
            await Coordinator([docs], store=store, event_log=EventLog()).run(
                [Task(query="q", topic=MARKUP)], run_id="r1"
            )
            async with client(store) as http:
                body = (await http.get("/runs/r1/events?after=0")).text
                sent = messages(body)
                again = messages(
                    (await http.get("/runs/r1/events", headers={"last-event-id": "2"})).text
                )
                page = (await http.get("/runs/r1")).text
        kinds = [json.loads(data)["kind"] for event, data in sent if event == "run"]
        assert kinds[0] == "RunStarted"
        assert kinds[-1] == "RunFinished"
        assert sent[-1] == ("end", '{"status": "finished"}')
        finished = next(json.loads(d) for e, d in sent if e == "run" and "TaskFinished" in d)
        assert finished["cell"] == {"topic": MARKUP, "source": "docs", "status": "covered"}
        assert next(json.loads(d)["position"] for e, d in again if e == "run") == 3
        # On the page, the store's text is escaped; a finished run has no live script.
        assert MARKUP not in page
        assert 'data-topic="&lt;img src=x onerror=alert(1)&gt;"' in page
        assert 'id="events"' in page
        assert "EventSource" not in page

    async def test_a_run_without_events_is_404_not_a_stream_open_for_ever(self) -> None:
        """No log for the run (unknown, or run without `event_log=`): a plain 404."""
        async with MemoryStore() as store:
            await Coordinator([docs], store=store).run([Task(query="q")], run_id="quiet")
            async with client(store) as http:
                quiet = await http.get("/runs/quiet/events")
                unknown = await http.get("/runs/nope/events")
        assert (quiet.status_code, unknown.status_code) == (404, 404)
        assert "no events" in unknown.text

    async def test_a_running_runs_page_carries_the_script_and_its_stream_waits(self) -> None:
        release = asyncio.Event()

        @subagent(name="slow")
        async def slow(task: Task, ctx: Context) -> str:
            await release.wait()
            return "late"

        async with MemoryStore() as store:
            run = asyncio.create_task(
                Coordinator([slow], store=store, event_log=EventLog()).run(
                    [Task(query="q", topic="t")], run_id="live"
                )
            )
            await asyncio.sleep(0.05)
            async with client(store) as http:
                page = (await http.get("/runs/live")).text
                assert "EventSource" in page
                streaming = asyncio.create_task(http.get("/runs/live/events?after=0"))
                await asyncio.sleep(0.05)
                assert not streaming.done()  # the run goes on: so does its stream
                release.set()
                sent = messages((await asyncio.wait_for(streaming, 10)).text)
            await run
        assert sent[-1][0] == "end"


class TestResumeWhenAnsweredIsWoken:
    @pytest.mark.parametrize("kind", ["memory", "postgres"])
    async def test_an_answer_on_the_console_wakes_the_application_at_once(
        self, kind: str, request: pytest.FixtureRequest
    ) -> None:
        """With a store that notifies, the application waiting with poll=60 goes on as
        soon as the last answer is given, not a minute later."""
        desk = Desk()
        if kind == "memory":
            store: CheckpointStore = MemoryStore()
            other = store
        else:
            dsn = request.getfixturevalue("postgres_dsn")
            schema = request.getfixturevalue("postgres_schema")
            store = PostgresStore(dsn, schema=schema)
            other = PostgresStore(dsn, schema=schema)
        report = await desk.coordinator(store).run(TICKETS, run_id="w1")
        ids = {pending.topic: pending.id for pending in report.pending_approvals}
        going_on = asyncio.create_task(desk.coordinator(store).resume_when_answered("w1", poll=60))
        await asyncio.sleep(0.2)
        await answer_approval(other, "w1", ids["B-2"], Approve(), by="ann")
        started = time.monotonic()
        await answer_approval(other, "w1", ids["C-3"], Reject("no"), by="bob")
        resumed = await asyncio.wait_for(going_on, 20)
        assert time.monotonic() - started < 10
        assert not resumed.pending_approvals
        assert desk.refunds == [("A-1", 40), ("B-2", 900)]
        await store.close()
        await other.close()
