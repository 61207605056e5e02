"""Live runs: `Coordinator.stream` delivers every event of a run, in order, and stops cleanly."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentmesh import (
    BusinessError,
    Context,
    Coordinator,
    Report,
    RetryPolicy,
    Task,
    TransientError,
    UsageError,
    subagent,
    tool,
)
from agentmesh.coordinator import (
    Accept,
    CoverageStatus,
    Escalate,
    RecordGap,
    TryAlternative,
)
from agentmesh.events import (
    AttemptFailed,
    EscalationPending,
    Event,
    PartialRecorded,
    PolicyRuling,
    Routed,
    RunFinished,
    RunStarted,
    RunStream,
    StreamState,
    TaskFinished,
    TaskStarted,
    ToolCalled,
    parse_event,
)
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use
from agentmesh.testing import RecordingSleep

SECRET = "sk-ant-api03-" + "A" * 40


class Mixed:
    """A coordinator whose tasks end every way a run can: the scenario of the issue."""

    def __init__(self) -> None:
        self.sleep = RecordingSleep()
        self.flaky_calls = 0
        retry = RetryPolicy(max_attempts=3, initial_delay=0.5, jitter="none", sleep=self.sleep)

        @tool(idempotent=True)
        async def search(query: str) -> list[str]:
            self.flaky_calls += 1
            if self.flaky_calls == 1:
                raise TransientError("a blip", error_type="unavailable")
            return [f"found {query}"]

        @subagent(name="ok", retry=retry)
        async def ok(task: Task, ctx: Context) -> list[str]:
            return [f"ok {task.query}"]

        @subagent(name="flaky", retry=retry)
        async def flaky(task: Task, ctx: Context) -> list[str]:
            return await ctx.call(search, query=task.query)

        @subagent(name="down", retry=RetryPolicy.never(), alternatives=["cache"])
        async def down(task: Task, ctx: Context) -> list[str]:
            raise TransientError("the index is down", error_type="unavailable")

        @subagent(name="cache")
        async def cache(task: Task, ctx: Context) -> list[str]:
            return [f"cached {task.query}"]

        @subagent(name="refund")
        async def refund(task: Task, ctx: Context) -> list[str]:
            raise BusinessError("refund over the limit", user_message="a person must approve it")

        @subagent(name="gap", retry=RetryPolicy.never())
        async def gap(task: Task, ctx: Context) -> list[str]:
            ctx.record_partial(["page 1"], completed="page1", pending="page2")
            raise TransientError("page 2 timed out", error_type="timeout")

        self.coordinator = Coordinator(
            [ok, flaky, down, refund, gap], alternatives={"cache": cache}
        )
        self.tasks = [
            Task(id=name, query=f"q-{name}", topic=name, subagent=name)
            for name in ("ok", "flaky", "down", "refund", "gap")
        ]


async def collect(stream: RunStream) -> list[Event]:
    return [event async for event in stream]


def kinds(events: list[Event], task_id: str) -> list[str]:
    return [type(e).__name__ for e in events if e.task_id == task_id]


class TestEventOrder:
    async def test_each_task_of_a_mixed_run_has_its_events_in_the_order_they_happened(
        self,
    ) -> None:
        """Success, local retry, alternative, escalation and gap each emit their story."""
        mixed = Mixed()
        events = await collect(mixed.coordinator.stream(mixed.tasks, run_id="mixed"))
        assert kinds(events, "ok") == ["TaskStarted", "Routed", "TaskFinished"]
        assert kinds(events, "flaky") == [
            "TaskStarted",
            "AttemptFailed",
            "ToolCalled",
            "Routed",
            "TaskFinished",
        ]
        (call,) = [e for e in events if isinstance(e, ToolCalled)]
        assert (call.tool, call.arguments, call.result, call.envelope, call.attempts) == (
            "search",
            {"query": "q-flaky"},
            ["found q-flaky"],
            None,
            2,
        )
        assert kinds(events, "down") == [
            "TaskStarted",
            "AttemptFailed",
            "Routed",
            "Routed",
            "TaskFinished",
        ]
        assert kinds(events, "refund") == [
            "TaskStarted",
            "AttemptFailed",
            "Routed",
            "EscalationPending",
            "TaskFinished",
        ]
        assert kinds(events, "gap") == [
            "TaskStarted",
            "PartialRecorded",
            "AttemptFailed",
            "Routed",
            "TaskFinished",
        ]

    async def test_the_events_carry_what_a_consumer_acts_on(self) -> None:
        """The retry's scheduled delay, the decisions, the escalation and the final entries."""
        mixed = Mixed()
        events = await collect(mixed.coordinator.stream(mixed.tasks, run_id="mixed"))
        by_task: dict[str | None, list[Event]] = {}
        for event in events:
            by_task.setdefault(event.task_id, []).append(event)
        retried = next(e for e in by_task["flaky"] if isinstance(e, AttemptFailed))
        assert (retried.source, retried.attempt, retried.retry_in) == ("flaky/search", 1, 0.5)
        assert retried.envelope.error_type == "unavailable"
        assert mixed.sleep.delays == [0.5]
        assert [e.decision for e in by_task["down"] if isinstance(e, Routed)] == [
            TryAlternative("cache"),
            Accept(),
        ]
        failed = next(e for e in by_task["down"] if isinstance(e, AttemptFailed))
        assert failed.retry_in is None  # no attempt follows: the call failed for good
        pending = next(e for e in by_task["refund"] if isinstance(e, EscalationPending))
        assert (pending.reason, pending.approval_id) == ("a person must approve it", None)
        routed = next(e for e in by_task["refund"] if isinstance(e, Routed))
        assert routed.decision == Escalate("a person must approve it")
        partial = next(e for e in by_task["gap"] if isinstance(e, PartialRecorded))
        assert (partial.findings, partial.completed, partial.pending) == (
            ("page 1",),
            ("page1",),
            ("page2",),
        )
        assert isinstance(
            next(e for e in by_task["gap"] if isinstance(e, Routed)).decision, RecordGap
        )
        statuses = {e.task_id: e.entry.status for e in events if isinstance(e, TaskFinished)}
        assert statuses == {
            "ok": CoverageStatus.COVERED,
            "flaky": CoverageStatus.COVERED,
            "down": CoverageStatus.COVERED,
            "refund": CoverageStatus.ESCALATED,
            "gap": CoverageStatus.PARTIAL,
        }

    async def test_sequence_numbers_count_every_event_of_the_run_once(self) -> None:
        """1, 2, 3, ... in delivery order; RunStarted first, RunFinished last, one run id."""
        mixed = Mixed()
        events = await collect(mixed.coordinator.stream(mixed.tasks, run_id="mixed"))
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert isinstance(events[0], RunStarted)
        assert (events[0].tasks, events[0].task_id) == (5, None)
        assert isinstance(events[-1], RunFinished)
        assert {e.run_id for e in events} == {"mixed"}
        assert [e.timestamp for e in events] == sorted(e.timestamp for e in events)

    async def test_a_policy_ruling_is_an_event_of_its_task(self) -> None:
        """A denied tool call shows as a PolicyRuling naming the policy and the tool."""

        @tool
        async def pay(amount: int) -> str:
            return "paid"

        @pre_tool_use
        def no_big_payments(event: ToolCallEvent) -> Ruling | None:
            return Ruling.deny("over the limit") if event.arguments["amount"] > 100 else None

        @subagent(name="payer")
        async def payer(task: Task, ctx: Context) -> str:
            return await ctx.call(pay, amount=500)

        coordinator = Coordinator([payer], policies=[no_big_payments])
        events = await collect(coordinator.stream([Task(id="t", query="pay")]))
        rulings = [e for e in events if isinstance(e, PolicyRuling)]
        assert [(r.ruling.action, r.ruling.policy, r.ruling.tool) for r in rulings] == [
            ("deny", "no_big_payments", "pay")
        ]
        assert kinds(events, "t").index("PolicyRuling") < kinds(events, "t").index("Routed")


class TestRunIsTheDrainedStream:
    async def test_runs_report_equals_the_one_in_run_finished(self) -> None:
        """The same tasks and run id give the same report through run() and stream()."""
        streamed = await collect(Mixed().coordinator.stream(Mixed().tasks, run_id="same"))
        mixed = Mixed()
        report = await mixed.coordinator.run(mixed.tasks, run_id="same")
        final = streamed[-1]
        assert isinstance(final, RunFinished)
        assert final.report == report
        assert final.report.to_dict() == report.to_dict()

    async def test_the_stream_keeps_the_final_report(self) -> None:
        """After the last event, `stream.report` is RunFinished's report."""
        mixed = Mixed()
        stream = mixed.coordinator.stream(mixed.tasks)
        events = await collect(stream)
        assert stream.state is StreamState.FINISHED
        assert isinstance(events[-1], RunFinished)
        assert stream.report is events[-1].report


class Blocking:
    """Subagents that record progress, then wait for a gate that never opens."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.cancelled: list[str] = []

        @subagent(name="fast")
        async def fast(task: Task, ctx: Context) -> list[str]:
            return [task.query]

        @subagent(name="slow")
        async def slow(task: Task, ctx: Context) -> list[str]:
            ctx.record_partial([f"half of {task.query}"], completed="first half")
            try:
                await self.gate.wait()
            except asyncio.CancelledError:
                self.cancelled.append(task.query)
                raise
            return [task.query]

        self.coordinator = Coordinator([fast, slow])
        self.tasks = [
            Task(id="a", query="a", subagent="fast"),
            Task(id="b", query="b", subagent="slow"),
        ]


def nothing_else_runs() -> bool:
    return asyncio.all_tasks() == {asyncio.current_task()}


class TestEarlyExit:
    async def test_break_in_async_with_leaves_no_task_running(self) -> None:
        """Leaving the loop cancels the run; once the block exits, no task of it is left."""
        blocking = Blocking()
        async with blocking.coordinator.stream(blocking.tasks) as stream:
            async for event in stream:
                if isinstance(event, PartialRecorded):
                    break
        assert nothing_else_runs()
        assert blocking.cancelled == ["b"]
        assert stream.state is StreamState.STOPPED

    async def test_the_partial_report_keeps_what_finished_and_what_was_found(self) -> None:
        """A finished task stays covered; the cut one is partial, with its recorded progress."""
        blocking = Blocking()
        async with blocking.coordinator.stream(blocking.tasks) as stream:
            async for event in stream:
                if isinstance(event, TaskFinished):
                    break
        report = stream.report
        assert isinstance(report, Report)
        status = {e.source: (e.status, e.reason) for e in report.coverage}
        assert status["fast"] == (CoverageStatus.COVERED, None)
        assert status["slow"][0] is CoverageStatus.PARTIAL
        assert "event stream was closed" in str(status["slow"][1])
        partial = next(e for e in report.coverage if e.source == "slow").partial
        assert partial is not None
        assert partial.findings == ("half of b",)
        assert report.synthesis_note is not None
        assert "1 of 2 tasks unfinished" in report.synthesis_note

    async def test_aclose_stops_the_run(self) -> None:
        """`await stream.aclose()` without `async with` stops it the same way."""
        blocking = Blocking()
        stream = blocking.coordinator.stream(blocking.tasks)
        async for event in stream:
            if isinstance(event, PartialRecorded):
                break
        await stream.aclose()
        assert nothing_else_runs()
        assert stream.report is not None
        assert len(stream.report.coverage) == 2

    async def test_an_exception_in_the_loop_stops_the_run_and_propagates(self) -> None:
        """The consumer's own error reaches it; the run is cancelled on the way out."""
        blocking = Blocking()
        stream = blocking.coordinator.stream(blocking.tasks)

        async def consume() -> None:
            async with stream:
                async for event in stream:
                    if isinstance(event, PartialRecorded):
                        raise KeyError("consumer bug")

        with pytest.raises(KeyError):
            await consume()
        assert nothing_else_runs()
        assert stream.state is StreamState.STOPPED

    async def test_a_stream_dropped_after_break_cancels_its_run(self) -> None:
        """`async for ... break` on a bare stream: the run is cancelled once it is dropped."""
        blocking = Blocking()
        async for event in blocking.coordinator.stream(blocking.tasks):
            if isinstance(event, PartialRecorded):
                break
        for _ in range(50):  # loop turns, not time: the cancellation unwinds in a few
            if nothing_else_runs():
                break
            await asyncio.sleep(0)
        assert nothing_else_runs()
        assert blocking.cancelled == ["b"]

    async def test_a_stream_closed_before_it_started_reports_every_task_as_a_gap(self) -> None:
        """Nothing ran: every entry is a gap that says why."""
        blocking = Blocking()
        stream = blocking.coordinator.stream(blocking.tasks)
        await stream.aclose()
        assert stream.report is not None
        assert [e.status for e in stream.report.coverage] == [CoverageStatus.GAP] * 2


class TestBackPressure:
    async def test_a_slow_consumer_gets_every_event_and_holds_the_run_back(self) -> None:
        """With buffer=4 the backlog stays small, and not one of 60 tasks' events is lost."""

        @subagent(name="quick")
        async def quick(task: Task, ctx: Context) -> list[str]:
            ctx.record_partial([task.query])
            return [task.query]

        coordinator = Coordinator([quick], max_concurrency=3)
        stream = coordinator.stream([f"q{i}" for i in range(60)], buffer=4)
        events: list[Event] = []
        backlog = 0
        async for event in stream:
            backlog = max(backlog, stream.unread)
            events.append(event)
            for _ in range(5):  # a slow consumer: the run gets the loop meanwhile
                await asyncio.sleep(0)
        assert [e.seq for e in events] == list(range(1, 2 + 60 * 4 + 1))
        assert sum(isinstance(e, TaskFinished) for e in events) == 60
        # At most `buffer`, plus the few events each task in flight emits between checks.
        assert backlog <= 4 + 3 * 4

    async def test_buffer_must_be_a_positive_int(self) -> None:
        """A buffer of 0 could never deliver anything: refused, naming the argument."""
        mixed = Mixed()
        with pytest.raises(UsageError, match="buffer"):
            mixed.coordinator.stream(mixed.tasks, buffer=0)

    async def test_a_stream_runs_once(self) -> None:
        """Iterating a finished stream again is a UsageError, not a second run."""
        mixed = Mixed()
        stream = mixed.coordinator.stream(mixed.tasks)
        await collect(stream)
        with pytest.raises(UsageError, match="finished"):
            await stream.drain()


class TestJson:
    async def test_every_event_round_trips_through_its_json_form(self) -> None:
        """`parse_event(event.to_json())` gives back the same JSON, and an equal event."""
        mixed = Mixed()
        events = await collect(mixed.coordinator.stream(mixed.tasks, run_id="json"))
        for event in events:
            again = parse_event(event.to_json())
            assert type(again) is type(event)
            assert again.to_dict() == event.to_dict()
            if not isinstance(event, RunFinished):  # a report reads back as its JSON form
                assert again == event

    async def test_keys_are_stable_camel_case(self) -> None:
        """The common keys and each event's own, as documented."""
        mixed = Mixed()
        events = await collect(mixed.coordinator.stream(mixed.tasks, run_id="json"))
        started = next(e for e in events if isinstance(e, TaskStarted)).to_dict()
        assert list(started) == ["event", "runId", "taskId", "seq", "timestamp", "task", "subagent"]
        failed = next(e for e in events if isinstance(e, AttemptFailed)).to_dict()
        assert {"retryIn", "envelope", "attempt", "source"} <= set(failed)
        assert failed["envelope"]["isError"] is True
        routed = next(e for e in events if isinstance(e, Routed)).to_dict()
        assert routed["decision"]["type"] in {"Accept", "TryAlternative", "Escalate", "RecordGap"}
        finished = events[-1].to_dict()
        assert finished["report"]["coverageRatio"] == pytest.approx(0.6)

    async def test_secrets_are_masked(self) -> None:
        """A key pasted into a query never reaches an event's JSON."""

        @subagent(name="echo")
        async def echo(task: Task, ctx: Context) -> list[str]:
            ctx.record_partial([task.query])
            return [task.query]

        coordinator = Coordinator([echo])
        events = await collect(coordinator.stream([f"use {SECRET} please"]))
        for event in events:
            assert SECRET not in event.to_json()

    def test_parse_event_refuses_what_is_not_an_event(self) -> None:
        """An unknown event name is a UsageError that names the argument."""
        with pytest.raises(UsageError, match="data"):
            parse_event(json.dumps({"event": "Nope"}))


class TestFailedRunAtExit:
    async def test_a_run_that_failed_before_the_consumer_left_raises_there(self) -> None:
        """A run's exception (an ask nobody can answer) reaches the caller who breaks."""

        @tool
        async def refund(order: str) -> str:
            return f"refunded {order}"

        @pre_tool_use(tool="refund")
        def needs_a_person(event: ToolCallEvent) -> Ruling:
            return Ruling.ask("a person must look")

        @subagent(name="desk", policies=[needs_a_person])
        async def desk(task: Task, ctx: Context) -> str:
            return await ctx.call(refund, order=task.query)

        stream = Coordinator([desk]).stream(["A-1"])
        with pytest.raises(UsageError, match=r"Ruling.ask"):
            await leave_after_the_run_ended(stream)
        assert stream.state is StreamState.FAILED


async def leave_after_the_run_ended(stream: RunStream) -> None:
    """Read one event, let the run end meanwhile, then leave the loop."""
    async with stream:
        async for _event in stream:
            # No event marks the run's task ending: wait until it is the only one gone.
            while not nothing_else_runs():  # noqa: ASYNC110
                await asyncio.sleep(0)
            break
