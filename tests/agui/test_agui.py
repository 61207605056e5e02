"""A coordinator as an AG-UI endpoint, served by uvicorn on loopback and read over HTTP as
a front end reads it: every event of every stream validated by the `ag-ui-protocol`
package's own models; a run that waits for a person interrupted, answered through the
protocol, resumed, and its refund made once; two answers at once, one winner."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import Event, EventType, RunFinishedEvent
from ag_ui.core.events import BaseEvent
from pydantic import TypeAdapter

from agentmesh.agui import RunTranslator, create_app
from agentmesh.checkpoints import SQLiteStore
from agentmesh.events import TaskStarted
from agentmesh.task import Task
from tests.console.desk import TICKETS, TOKEN, Desk, served

EVENT: TypeAdapter[BaseEvent] = TypeAdapter(Event)


def validated(raw: dict[str, Any]) -> BaseEvent:
    """`raw` read by the protocol's models, exactly: no key they do not know, none lost."""
    event = EVENT.validate_python(raw)
    assert not event.model_extra, raw
    assert event.model_dump(mode="json", by_alias=True) == raw
    return event


def run_input(run_id: str, **fields: Any) -> dict[str, Any]:
    message = {"id": "m1", "role": "user", "content": "refund the three orders"}
    return {"threadId": "thread-1", "runId": run_id, "messages": [message], **fields}


def post(url: str, body: Any, *, token: str | None = TOKEN) -> tuple[int, list[BaseEvent]]:
    """POST `body` as a front end would; the status and every event, each validated."""
    headers = {"accept": "text/event-stream"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    response = httpx.post(url, json=body, headers=headers, timeout=30)
    if response.status_code != 200:
        return response.status_code, []
    assert response.headers["content-type"].startswith("text/event-stream")
    blocks = [block for block in response.text.split("\n\n") if block.strip()]
    assert all(block.startswith("data: ") for block in blocks), blocks
    return 200, [validated(json.loads(block.removeprefix("data: "))) for block in blocks]


def resume_entries(finished: BaseEvent, answers: dict[str, dict[str, Any]], by: str) -> list[Any]:
    """The entries that answer each interrupt of `finished`, by the topic it is about."""
    assert isinstance(finished, RunFinishedEvent)
    assert finished.outcome is not None
    assert finished.outcome.type == "interrupt"
    entries = []
    for interrupt in finished.outcome.interrupts:
        topic = (interrupt.metadata or {})["agentmesh"]["topic"]
        entries.append(
            {
                "interruptId": interrupt.id,
                "status": "resolved",
                "payload": answers[topic],
                "metadata": {"by": by},
            }
        )
    return entries


def kinds(events: list[BaseEvent]) -> list[str]:
    return [event.type.value for event in events]


def grid_of(events: list[BaseEvent], start: Any = None) -> Any:
    """The state a consumer holds after `events`: snapshots replace it, deltas patch it."""
    state = copy.deepcopy(start)
    for event in events:
        if event.type is EventType.STATE_SNAPSHOT:
            state = copy.deepcopy(event.snapshot)  # type: ignore[attr-defined]
        elif event.type is EventType.STATE_DELTA:
            for operation in event.delta:  # type: ignore[attr-defined]
                assert operation.op == "add"  # the only operation the grid sends
                *parents, last = operation.path.split("/")[1:]
                target = state
                for part in parents:
                    target = target[part.replace("~1", "/").replace("~0", "~")]
                target[last.replace("~1", "/").replace("~0", "~")] = operation.value
    return state


def assert_well_formed(events: list[BaseEvent], earlier: frozenset[str] = frozenset()) -> None:
    """One AG-UI run: RUN_STARTED first, one end last; steps and tool calls open and close
    (a result may answer a call `earlier` runs of the thread streamed)."""
    assert events[0].type is EventType.RUN_STARTED
    assert events[-1].type in (EventType.RUN_FINISHED, EventType.RUN_ERROR)
    assert [e.type for e in events].count(EventType.RUN_STARTED) == 1
    steps: set[str] = set()
    calls: dict[str, str] = dict.fromkeys(earlier, "ended")
    for event in events[1:-1]:
        match event.type:
            case EventType.STEP_STARTED:
                assert event.step_name not in steps  # type: ignore[attr-defined]
                steps.add(event.step_name)  # type: ignore[attr-defined]
            case EventType.STEP_FINISHED:
                steps.remove(event.step_name)  # type: ignore[attr-defined]
            case EventType.TOOL_CALL_START:
                calls[event.tool_call_id] = "open"  # type: ignore[attr-defined]
            case EventType.TOOL_CALL_ARGS:
                assert calls[event.tool_call_id] == "open"  # type: ignore[attr-defined]
                json.loads(event.delta)  # type: ignore[attr-defined]
            case EventType.TOOL_CALL_END:
                calls[event.tool_call_id] = "ended"  # type: ignore[attr-defined]
            case EventType.TOOL_CALL_RESULT:
                assert calls[event.tool_call_id] == "ended"  # type: ignore[attr-defined]
    assert steps == set()
    assert set(calls.values()) <= {"ended"}


@pytest.fixture
def stores(tmp_path: Path) -> Callable[[], SQLiteStore]:
    """A new store on the same SQLite file each call: one per endpoint, as two processes."""
    return lambda: SQLiteStore(tmp_path / "checkpoints.sqlite")


@pytest.fixture
def endpoint(stores: Callable[[], SQLiteStore]) -> Iterator[tuple[str, Desk]]:
    desk = Desk()
    app = create_app(desk.coordinator(stores()), token=TOKEN, tasks=lambda _given: TICKETS)
    with served(app) as url:
        yield url, desk


def test_import_agentmesh_imports_no_agui() -> None:
    """AG-UI is an optional extra: the library imports neither it nor the protocol package."""
    code = (
        "import sys, agentmesh, agentmesh.coordinator, agentmesh.events; "
        "print([m for m in sys.modules if m.split('.')[0] == 'ag_ui' "
        "or m.startswith('agentmesh.agui')])"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"


class TestARun:
    def test_every_event_is_the_protocols_and_a_pending_approval_interrupts_the_run(
        self, endpoint: tuple[str, Desk]
    ) -> None:
        """Steps per task, the tool calls made, the grid as snapshot and deltas, envelopes
        as custom events, the synthesis as text; two refunds over the limit interrupt it."""
        url, desk = endpoint
        status, events = post(url, run_input("run-1"))
        assert status == 200
        assert_well_formed(events)
        assert desk.refunds == [("A-1", 40)]
        assert kinds(events).count("STEP_STARTED") == 3
        made = [e for e in events if e.type is EventType.TOOL_CALL_RESULT]
        results = [json.loads(e.content) for e in made]  # type: ignore[attr-defined]
        assert {"order": "A-1", "note": ""} in results
        assert "refunded 40 on A-1" in results
        assert len(results) == 4  # three look-ups and the one refund under the limit
        envelopes = [e for e in events if getattr(e, "name", None) == "agentmesh.envelope"]
        assert {e.value["envelope"]["errorType"] for e in envelopes} == {  # type: ignore[attr-defined]
            "decision_pending"
        }
        text = next(e for e in events if e.type is EventType.TEXT_MESSAGE_CONTENT)
        assert "A-1" in text.delta  # type: ignore[attr-defined]
        snapshots = [e for e in events if e.type is EventType.STATE_SNAPSHOT]
        # The deltas alone bring the consumer to the grid the report holds at the end.
        assert grid_of(events[: events.index(snapshots[-1])]) == snapshots[-1].snapshot  # type: ignore[attr-defined]
        statuses = {
            row["topic"]: row["status"] for row in snapshots[-1].snapshot["coverage"].values()
        }  # type: ignore[attr-defined]
        assert statuses == {"A-1": "covered", "B-2": "escalated", "C-3": "escalated"}
        finished = events[-1]
        assert isinstance(finished, RunFinishedEvent)
        assert finished.outcome is not None
        assert finished.outcome.type == "interrupt"
        interrupts = finished.outcome.interrupts
        assert {i.reason for i in interrupts} == {"tool_approval"}
        assert {i.metadata["agentmesh"]["topic"] for i in interrupts} == {"B-2", "C-3"}  # type: ignore[index]
        streamed = {e.tool_call_id for e in events if e.type is EventType.TOOL_CALL_START}  # type: ignore[attr-defined]
        assert {i.tool_call_id for i in interrupts} <= streamed
        assert all("over the limit" in (i.message or "") for i in interrupts)

    def test_a_request_without_the_token_or_not_an_input_is_refused(
        self, endpoint: tuple[str, Desk]
    ) -> None:
        """No token: 401; a body that is not a RunAgentInput: 422; nothing runs."""
        url, desk = endpoint
        assert post(url, run_input("run-1"), token=None)[0] == 401
        assert post(url, run_input("run-1"), token="x" * 30)[0] == 401
        assert post(url, {"runId": "r"})[0] == 422
        auth = {"authorization": f"Bearer {TOKEN}"}
        # A form another site could post (no preflight), and a body over the cap.
        form = httpx.post(url, content=b"{}", headers={**auth, "content-type": "text/plain"})
        assert form.status_code == 415
        huge = b'{"x": "' + b"a" * 1_100_000 + b'"}'
        big = httpx.post(url, content=huge, headers={**auth, "content-type": "application/json"})
        assert big.status_code == 413
        assert desk.refunds == []


class TestNothingToDo:
    def test_an_input_without_a_user_message_ends_with_run_error(
        self, stores: Callable[[], SQLiteStore]
    ) -> None:
        """The default reads one task from the last user message; without one, RUN_ERROR."""
        app = create_app(Desk().coordinator(stores()), token=TOKEN)
        with served(app) as url:
            _, events = post(url, run_input("run-1", messages=[]))
        assert kinds(events) == ["RUN_STARTED", "RUN_ERROR"]
        assert events[-1].code == "usage_error"  # type: ignore[attr-defined]


class TestResume:
    def test_answered_through_the_protocol_the_run_goes_on_and_each_refund_is_made_once(
        self, endpoint: tuple[str, Desk]
    ) -> None:
        """B-2 approved, C-3 rejected in resume entries: the resumed run refunds B-2 once;
        the same answers sent again are refused, naming who answered."""
        url, desk = endpoint
        _, first = post(url, run_input("run-1"))
        answers = {"B-2": {"approved": True}, "C-3": {"approved": False, "reason": "fraud"}}
        entries = resume_entries(first[-1], answers, by="ana")
        state = grid_of(first)
        status, events = post(url, run_input("run-2", messages=[], resume=entries, state=state))
        assert status == 200
        asked = {e.tool_call_id for e in first if e.type is EventType.TOOL_CALL_START}  # type: ignore[attr-defined]
        assert_well_formed(events, frozenset(asked))
        assert desk.refunds == [("A-1", 40), ("B-2", 900)]
        # Each call an interrupt named gets its result in the resumed run: the answer.
        named = {i.tool_call_id for i in first[-1].outcome.interrupts}  # type: ignore[attr-defined]
        answered = {
            e.tool_call_id: json.loads(e.content)["answer"]  # type: ignore[attr-defined]
            for e in events
            if e.type is EventType.TOOL_CALL_RESULT and e.tool_call_id in named  # type: ignore[attr-defined]
        }
        assert sorted(answered.values()) == ["approve", "reject"]
        finished = events[-1]
        assert isinstance(finished, RunFinishedEvent)
        assert finished.outcome is not None
        assert finished.outcome.type == "success"
        # The resume's grid starts from the one the client holds: A-1 stays covered.
        assert events[1].snapshot["coverage"]["task-0"]["status"] == "covered"  # type: ignore[attr-defined]
        statuses = {row["topic"]: row["status"] for row in grid_of(events)["coverage"].values()}
        assert statuses == {"A-1": "covered", "B-2": "covered", "C-3": "partial"}
        applied = [e for e in events if getattr(e, "name", "") == "agentmesh.ApprovalApplied"]
        assert sorted(e.value["approval"]["answer"] for e in applied) == ["approve", "reject"]  # type: ignore[attr-defined]

        status, again = post(url, run_input("run-3", messages=[], resume=entries))
        assert kinds(again) == ["RUN_STARTED", "RUN_ERROR"]
        assert again[-1].code == "already_answered"  # type: ignore[attr-defined]
        assert "by ana" in again[-1].message  # type: ignore[attr-defined]
        assert desk.refunds == [("A-1", 40), ("B-2", 900)]

    def test_a_resume_must_answer_every_open_interrupt_and_only_those(
        self, endpoint: tuple[str, Desk]
    ) -> None:
        """One of two answered, or an interrupt the run never had: RUN_ERROR, nothing claimed."""
        url, desk = endpoint
        _, first = post(url, run_input("run-1"))
        entries = resume_entries(
            first[-1], {"B-2": {"approved": True}, "C-3": {"approved": True}}, "ana"
        )
        _, partial = post(url, run_input("run-2", messages=[], resume=entries[:1]))
        assert partial[-1].code == "unanswered_interrupts"  # type: ignore[attr-defined]
        stranger = [{**entries[0], "interruptId": entries[0]["interruptId"][:-1] + "z"}, entries[1]]
        _, unknown = post(url, run_input("run-3", messages=[], resume=stranger))
        assert unknown[-1].code == "unknown_interrupt"  # type: ignore[attr-defined]
        _, bad = post(
            url, run_input("run-4", messages=[], resume=[{**e, "payload": {}} for e in entries])
        )
        assert bad[-1].code == "invalid_answer"  # type: ignore[attr-defined]
        # Nothing was claimed: the whole answer still goes through. A cancelled
        # interrupt is a rejection: its refund is not made.
        cancelled = [entries[0], {**entries[1], "status": "cancelled", "payload": None}]
        _, good = post(url, run_input("run-5", messages=[], resume=cancelled))
        assert good[-1].type is EventType.RUN_FINISHED
        assert len(desk.refunds) == 2
        assert desk.refunds[0] == ("A-1", 40)
        rejected = [e for e in good if getattr(e, "name", "") == "agentmesh.ApprovalApplied"]
        reasons = [e.value["approval"]["answerReason"] for e in rejected]  # type: ignore[attr-defined]
        assert "the question was cancelled through AG-UI" in reasons


class TestTwoAnswersAtOnce:
    def test_of_two_resumes_at_once_exactly_one_wins_and_the_refund_is_made_at_most_once(
        self, stores: Callable[[], SQLiteStore]
    ) -> None:
        """Two endpoints on one store (two connections, as two processes); Ann approves and
        Bob rejects the same interrupts at one instant (threads at a barrier)."""
        desk = Desk()

        def make() -> object:
            coordinator = desk.coordinator(stores())
            return create_app(coordinator, token=TOKEN, tasks=lambda _given: TICKETS[1:2])

        with served(make()) as one, served(make()) as two:
            _, first = post(one, run_input("run-1"))
            barrier = threading.Barrier(2)
            results: dict[str, list[BaseEvent]] = {}

            def answer(url: str, who: str, payload: dict[str, Any]) -> None:
                entries = resume_entries(first[-1], {"B-2": payload}, by=who)
                barrier.wait()
                results[who] = post(url, run_input(f"run-{who}", messages=[], resume=entries))[1]

            people = [
                threading.Thread(target=answer, args=(one, "ann", {"approved": True})),
                threading.Thread(
                    target=answer, args=(two, "bob", {"approved": False, "reason": "no"})
                ),
            ]
            for person in people:
                person.start()
            for person in people:
                person.join(30)
        ends = sorted(events[-1].type.value for events in results.values())
        assert ends == ["RUN_ERROR", "RUN_FINISHED"], results
        winner = next(
            who for who, events in results.items() if events[-1].type.value == "RUN_FINISHED"
        )
        loser = results["bob" if winner == "ann" else "ann"][-1]
        assert loser.code == "already_answered"  # type: ignore[attr-defined]
        assert f"by {winner}" in loser.message  # type: ignore[attr-defined]
        assert desk.refunds == ([("B-2", 900)] if winner == "ann" else [])


class TestTranslator:
    def test_a_task_id_with_a_slash_is_an_escaped_pointer(self) -> None:
        """The grid's JSON Pointer escapes "/" and "~" in a task id (RFC 6901)."""
        translator = RunTranslator("t", "r")
        task = Task(query="q", topic="a/b~c")
        (step, delta) = translator.translate(
            TaskStarted(run_id="m", task_id="x/y~z", seq=1, timestamp=1.0, task=task, subagent="s")
        )
        validated(step.model_dump(mode="json", by_alias=True))
        assert delta.delta[0].path == "/coverage/x~1y~0z"  # type: ignore[attr-defined]
        assert grid_of([delta], {"coverage": {}}) == {
            "coverage": {"x/y~z": {"topic": "a/b~c", "source": "s", "status": "running"}}
        }
