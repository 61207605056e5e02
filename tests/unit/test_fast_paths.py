"""The dispatch path's shortcuts give exactly what the slow, validated path gave."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from agentmesh import (
    Context,
    Coordinator,
    ErrorEnvelope,
    RetryBudget,
    RetryPolicy,
    Success,
    Task,
    TransientError,
    UsageError,
    subagent,
)
from agentmesh.coordinator import CoverageStatus, Finding, Report, Step, TaskRecord
from agentmesh.coordinator._synthesis import coverage_entry
from agentmesh.envelope import Outcome, RetryCount
from agentmesh.executors import Dispatch, LocalExecutor
from agentmesh.retry import RetryResult
from agentmesh.subagents import Subagent


async def no_sleep(seconds: float) -> None:
    """Backoff is computed, never waited for."""


class TestReportRecords:
    async def test_records_equal_their_validated_rebuilds(self) -> None:
        """Steps, records, findings, coverage and the report equal validated rebuilds."""

        @subagent(name="docs", retry=RetryPolicy.never())
        async def docs(task: Task, ctx: Context) -> list[str]:
            return [task.query, "more"]

        report = await Coordinator([docs]).run([Task(query="q", topic="t")], run_id="r1")
        data = report.to_dict()
        rebuilt = Report.model_validate(data)
        assert rebuilt == report
        assert rebuilt.records[0].steps[0] == report.records[0].steps[0]
        assert rebuilt.findings == report.findings
        assert rebuilt.coverage == report.coverage
        assert rebuilt.to_dict() == data

    async def test_a_success_equals_the_validated_one(self) -> None:
        """The Success a subagent run hands back is the one `Success(...)` validates."""

        @subagent(name="docs", retry=RetryPolicy.never())
        async def docs(task: Task, ctx: Context) -> list[str]:
            return ["a"]

        outcome = await docs.run(Task(query="q"))
        slow = Success(data=["a"], source="docs", attempted_query="q", attempts=1)
        assert outcome == slow
        assert outcome.model_fields_set == slow.model_fields_set
        assert repr(outcome) == repr(slow)

    def test_records_stay_frozen(self) -> None:
        """Assigning a field of a record fails."""
        step = Step("a", "q", Success(data=1, source="a", attempted_query="q"), "Accept")
        with pytest.raises(AttributeError):
            step.decision = "Escalate"  # type: ignore[misc]

    def test_a_report_repr_is_short(self) -> None:
        """A report's repr names its counts, not every record."""
        finding = Finding("t", "docs", "q", "x" * 1000)
        report = Report(
            run_id="r", findings=(finding,) * 100, coverage=(), escalations=(), records=()
        )
        assert len(repr(report)) < 200
        assert "findings=100" in repr(report)
        assert str(report) == repr(report)


class TestCoverageOfOneStep:
    def _entry(self, retries: tuple[RetryCount, ...]) -> Any:
        outcome = Success[Any](
            data=["x"], source="docs", attempted_query="q", attempts=3, retries=retries
        )
        step = Step("docs", "q", outcome, "Accept")
        record = TaskRecord("t1", Task(query="q"), "docs", (step,), CoverageStatus.COVERED)
        return coverage_entry(record)

    def test_distinct_counts_are_reported_as_they_are(self) -> None:
        """A step's own retry counts become the entry's, each source and error type once."""
        retries = (
            RetryCount(source="docs", error_type="unavailable", count=2),
            RetryCount(source="search", error_type="timeout", count=1),
        )
        entry = self._entry(retries)
        assert entry.retries == retries
        assert entry.reason == (
            "recovered after 3 local retries: docs unavailable x2, search timeout x1"
        )

    def test_repeated_counts_from_a_wire_form_are_merged(self) -> None:
        """Two counts of one source and error type (from elsewhere) are added up."""
        retries = (
            RetryCount(source="docs", error_type="unavailable", count=2),
            RetryCount(source="docs", error_type="unavailable", count=1),
        )
        entry = self._entry(retries)
        assert entry.retries == (RetryCount(source="docs", error_type="unavailable", count=3),)
        assert entry.reason == "recovered after 3 local retries: docs unavailable x3"

    def test_counts_that_gave_up_are_kept_apart_from_those_that_recovered(self) -> None:
        """Retries of a call that gave up and of one that recovered are not added up."""
        retries = (
            RetryCount(source="docs", error_type="unavailable", count=2, gave_up=True),
            RetryCount(source="docs", error_type="unavailable", count=1),
        )
        entry = self._entry(retries)
        assert entry.retries == retries
        assert entry.reason == (
            "3 local retries: docs unavailable x2 (gave up), docs unavailable x1 (recovered)"
        )


class TestSuccessIsEmpty:
    @pytest.mark.parametrize("value", [None, "", [], (), {}, set(), frozenset()])
    def test_empty_builtins(self, value: Any) -> None:
        """A success holding an empty value of a sized builtin is empty."""
        assert Success(data=value, source="docs", attempted_query="q").is_empty

    def test_subclasses_take_the_slow_path(self) -> None:
        """A list subclass is judged by its length like a list."""

        class Hits(list[str]):
            pass

        assert Success(data=Hits(), source="docs", attempted_query="q").is_empty
        assert not Success(data=Hits(["x"]), source="docs", attempted_query="q").is_empty
        assert not Success(
            data=b"", source="docs", attempted_query="q"
        ).is_empty  # bytes never meant "nothing"
        assert not Success(data=0, source="docs", attempted_query="q").is_empty


@pytest.fixture
def no_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def cyclic_garbage() -> list[object]:
    """What of ours only the cyclic GC would free now (collected with DEBUG_SAVEALL, then
    dropped): objects of agentmesh and tenacity, and frames, coroutines and functions of
    their code. Other garbage is another test's, freed by a thread of its own (a server
    fixture's sockets) while this one ran."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return [found for found in gc.garbage if _ours(found)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def _ours(found: object) -> bool:
    module = getattr(type(found), "__module__", None) or ""
    if module.startswith(("agentmesh", "tenacity")):
        return True
    names = ("f_code", "cr_code", "__code__")
    code = next((getattr(found, n) for n in names if hasattr(found, n)), None)
    path = Path(getattr(code, "co_filename", "")).parts
    return "agentmesh" in path or "tenacity" in path


class TestNoCyclesPerCall:
    @pytest.mark.usefixtures("no_gc")
    async def test_a_call_that_succeeds_at_once_leaves_no_cyclic_garbage(self) -> None:
        """The common path (no retry) is freed by reference counting, not by the GC."""

        @subagent(name="steady", retry=RetryPolicy(max_attempts=3, sleep=no_sleep))
        async def steady(task: Task, ctx: Context) -> str:
            return task.query

        report = await Coordinator([steady]).run([f"q{i}" for i in range(50)])
        assert report.coverage_ratio == 1.0
        assert cyclic_garbage() == []

    @pytest.mark.usefixtures("no_gc")
    async def test_a_retried_call_leaves_no_cyclic_garbage(self) -> None:
        """A retried call is freed by reference counting too: tenacity's public API is enough.

        Each call's state is its own `RetryCallState`; the `Retrying` with the stateless
        strategies is shared, so nothing per call is left in a cycle for the GC.
        """
        attempts: dict[str, int] = {}

        @subagent(name="flaky", retry=RetryPolicy(max_attempts=3, sleep=no_sleep))
        async def flaky(task: Task, ctx: Context) -> str:
            attempts[task.query] = attempts.get(task.query, 0) + 1
            if attempts[task.query] == 1:
                raise TransientError("blip")
            return task.query

        report = await Coordinator([flaky]).run([f"q{i}" for i in range(50)])
        assert report.coverage_ratio == 1.0
        assert set(attempts.values()) == {2}
        assert cyclic_garbage() == []


def transient(query: str = "q") -> ErrorEnvelope:
    """A retryable envelope, as an attempt that failed for a moment returns it."""
    return ErrorEnvelope(
        error_category="transient",
        error_type="unavailable",
        is_retryable=True,
        message="down",
        attempted_query=query,
        source="s",
        attempts=1,
    )


class TestRetryLoop:
    async def test_a_call_given_as_one_object_goes_through_the_same_loop(self) -> None:
        """`RetryPolicy.drive` runs every attempt of an `Attempts` object the same way, the
        first one included: the work, its outcome, each retry told, then `finish`."""
        envelope = transient()

        class Flaky:
            def __init__(self) -> None:
                self.made: list[int] = []
                self.told: list[tuple[int, float]] = []

            async def attempt(self, number: int) -> str:
                self.made.append(number)
                if number < 3:
                    raise ConnectionError("down")
                return "done"

            def succeeded(self, data: str, number: int) -> str:
                return f"{data} at {number}"

            def failed(self, exc: BaseException, number: int) -> ErrorEnvelope:
                return envelope

            def retryable(self, failed: ErrorEnvelope) -> bool:
                return failed.is_retryable

            def on_retry(self, failed: ErrorEnvelope, number: int, delay: float) -> None:
                self.told.append((number, delay))

            def cut_short(self) -> None:
                raise AssertionError("the loop ended normally")

            def finish(self, result: RetryResult[Any]) -> tuple[Any, int, str | None]:
                return result.result, result.attempts, result.stop_reason

        policy = RetryPolicy(max_attempts=3, initial_delay=1, jitter="none", sleep=no_sleep)
        call = Flaky()
        assert await policy.drive(call) == ("done at 3", 3, None)
        assert call.made == [1, 2, 3]
        assert call.told == [(1, 1.0), (2, 2.0)]

    async def test_delays_callbacks_and_attempts_follow_the_policy(self) -> None:
        """Every retry is announced, slept through the injected sleep, and counted."""
        slept: list[float] = []
        announced: list[tuple[int, float]] = []

        async def sleep(seconds: float) -> None:
            slept.append(seconds)

        policy = RetryPolicy(max_attempts=4, initial_delay=1, jitter="none", sleep=sleep)
        envelope = transient()

        async def attempt(number: int) -> str | ErrorEnvelope:
            return "done" if number == 4 else envelope

        result = await policy.run(
            attempt, on_retry=lambda env, number, delay: announced.append((number, delay))
        )
        assert result.result == "done"
        assert result.attempts == 4
        assert slept == [1.0, 2.0, 4.0]
        assert announced == [(1, 1.0), (2, 2.0), (3, 4.0)]

    async def test_the_budget_stops_the_retries(self) -> None:
        """An empty budget ends the loop with the last envelope and says why."""
        policy = RetryPolicy(max_attempts=5, sleep=no_sleep)
        budget = RetryBudget(ratio=0, reserve=1)
        envelope = transient()

        async def attempt(number: int) -> ErrorEnvelope:
            return envelope

        result = await policy.run(attempt, budget=budget)
        assert result.result is envelope
        assert result.attempts == 2
        assert result.stop_reason == "gave up: the run's retry budget is spent"

    async def test_cancellation_propagates_out_of_a_retry(self) -> None:
        """A cancelled attempt is not retried: the CancelledError reaches the caller."""
        policy = RetryPolicy(max_attempts=3, sleep=no_sleep)
        envelope = transient()

        async def attempt(number: int) -> ErrorEnvelope:
            if number == 2:
                raise asyncio.CancelledError
            return envelope

        with pytest.raises(asyncio.CancelledError):
            await policy.run(attempt)

    async def test_interleaved_calls_keep_their_own_attempts_and_stops(self) -> None:
        """Calls retried at once, with different policies, never mix counts or reasons."""
        slept: list[float] = []

        async def sleep(seconds: float) -> None:
            slept.append(seconds)
            await asyncio.sleep(0)  # every call's rounds interleave with the others'

        async def one(max_attempts: int, succeeds_at: int | None) -> tuple[Any, int, Any]:
            policy = RetryPolicy(max_attempts=max_attempts, jitter="none", sleep=sleep)
            failure = transient(f"{max_attempts}-{succeeds_at}")

            async def attempt(number: int) -> str | ErrorEnvelope:
                await asyncio.sleep(0)
                return f"ok at {number}" if number == succeeds_at else failure

            result = await policy.run(attempt)
            return result.result, result.attempts, result.stop_reason

        cases = [(2, None), (5, None), (4, 3), (3, 2), (6, 6), (1, None)] * 5
        results = await asyncio.gather(*(one(n, at) for n, at in cases))
        for (max_attempts, succeeds_at), (result, attempts, reason) in zip(
            cases, results, strict=True
        ):
            if succeeds_at is None:
                assert isinstance(result, ErrorEnvelope)
                assert result.attempted_query == f"{max_attempts}-None"
                assert attempts == max_attempts
                assert reason == f"gave up after {max_attempts} attempts"
            else:
                assert result == f"ok at {succeeds_at}"
                assert attempts == succeeds_at
                assert reason is None
        assert len(slept) == 5 * (1 + 4 + 2 + 1 + 5)

    def test_a_call_in_another_threads_loop_retries(self) -> None:
        """A loop in a worker thread retries as the main thread's loop does."""
        policy = RetryPolicy(max_attempts=3, sleep=no_sleep)
        envelope = transient()

        async def attempt(number: int) -> str | ErrorEnvelope:
            return "done" if number == 3 else envelope

        async def call() -> tuple[Any, int]:
            result = await policy.run(attempt)
            return result.result, result.attempts

        with ThreadPoolExecutor(max_workers=1) as pool:
            assert pool.submit(asyncio.run, call()).result() == ("done", 3)


class TestCoordinatorDispatch:
    async def test_queued_jobs_respect_max_concurrency_and_keep_their_order(self) -> None:
        """Jobs waiting for a slot still run, bounded, and the records keep the task order."""
        in_flight = peak = 0

        @subagent(name="slow")
        async def slow(task: Task, ctx: Context) -> str:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0)
            in_flight -= 1
            return task.query

        queries = [f"q{i}" for i in range(25)]
        report = await Coordinator([slow], max_concurrency=4).run(queries)
        assert peak == 4
        assert [record.task.query for record in report.records] == queries
        assert report.coverage_ratio == 1.0

    async def test_an_executor_may_return_the_wire_form(self) -> None:
        """A dict from a remote executor is read as the outcome it describes."""

        class Remote:
            async def execute(self, subagent: Subagent, task: Task, dispatch: Dispatch) -> Any:
                return Success(
                    data=[task.query], source=subagent.name, attempted_query=task.query
                ).to_dict()

        @subagent(name="docs")
        async def docs(task: Task, ctx: Context) -> list[str]:
            raise AssertionError("runs remotely")

        report = await Coordinator([docs], executor=Remote()).run(["q"])
        assert report.coverage[0].status is CoverageStatus.COVERED
        assert isinstance(report.records[0].final, Success)
        assert report.findings[0].content == "q"

    async def test_a_local_executor_subclass_still_gets_each_dispatch(self) -> None:
        """Only the default executor is bypassed: a subclass sees every task's Dispatch."""
        seen: list[Dispatch] = []

        class Watching(LocalExecutor):
            def execute(
                self, subagent: Subagent, task: Task, dispatch: Dispatch
            ) -> Coroutine[Any, Any, Outcome]:
                seen.append(dispatch)
                return super().execute(subagent, task, dispatch)

        @subagent(name="docs")
        async def docs(task: Task, ctx: Context) -> str:
            return f"{ctx.run_id}/{ctx.task_id}"

        budget = RetryBudget.unlimited()
        coordinator = Coordinator([docs], executor=Watching(), retry_budget=budget)
        report = await coordinator.run([Task(query="a", id="t1"), "b"], run_id="r1")
        assert [(d.run_id, d.task_id, d.scope.budget) for d in seen] == [
            ("r1", "t1", budget),
            ("r1", "task-1", budget),
        ]
        assert [finding.content for finding in report.findings] == ["r1/t1", "r1/task-1"]

    async def test_a_run_id_must_be_a_string(self) -> None:
        """A wrong run_id fails before anything runs, naming the argument."""

        @subagent(name="docs")
        async def docs(task: Task, ctx: Context) -> str:
            raise AssertionError("never runs")

        with pytest.raises(UsageError, match="run_id"):
            await Coordinator([docs]).run(["q"], run_id=42)  # type: ignore[arg-type]


class TestInFlightFootprint:
    async def test_a_task_in_flight_holds_few_objects_for_the_collector(self) -> None:
        """A waiting task keeps no ledger, recorder or Dispatch: at most 32 tracked objects."""

        async def count_in_flight(n: int) -> float:
            release, everyone = asyncio.Event(), asyncio.Event()
            waiting = 0

            @subagent(name="held", retry=RetryPolicy(max_attempts=3, sleep=no_sleep))
            async def held(task: Task, ctx: Context) -> str:
                nonlocal waiting
                waiting += 1
                if waiting == n:
                    everyone.set()
                await release.wait()
                return task.query

            coordinator = Coordinator(
                [held], max_concurrency=n, retry_budget=RetryBudget.unlimited()
            )
            tasks = [Task(query=f"q{i}") for i in range(n)]
            gc.collect()
            before = len(gc.get_objects())
            job = asyncio.ensure_future(coordinator.run(tasks))
            await everyone.wait()
            gc.collect()
            during = len(gc.get_objects())
            release.set()
            report = await job
            assert report.coverage_ratio == 1.0
            return (during - before) / n

        await count_in_flight(20)  # first-use imports and caches are not the tasks'
        assert await count_in_flight(200) <= 32
