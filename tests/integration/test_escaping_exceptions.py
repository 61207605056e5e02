"""Exceptions that are not `Exception`s: one task's failure, or a stop that must propagate."""

from __future__ import annotations

import asyncio
import gc
import traceback
from collections.abc import Coroutine, Iterator
from typing import Any

import pytest

from agentmesh import (
    Classifier,
    Context,
    Coordinator,
    ErrorCategory,
    ErrorEnvelope,
    InvalidInput,
    Report,
    Success,
    Task,
    ToolCallFailed,
    TransientError,
    subagent,
    tool,
)
from agentmesh.classify import is_strict, set_strict, strict
from agentmesh.coordinator import CoverageStatus, Route, RouteContext, Router
from agentmesh.errors import UsageError
from agentmesh.subagents import Subagent
from agentmesh.testing import FailTimes, RecordingSleep
from tests.retrying import fast_retry


class Stop(BaseException):
    """A BaseException of the user's own, neither an interrupt nor a cancellation."""


@subagent(name="good", retry=fast_retry(attempts=1))
async def good(task: Task, ctx: Context) -> list[str]:
    return [f"found {task.query}"]


def failing(name: str, make_error: Any) -> Subagent:
    @subagent(name=name, retry=fast_retry(attempts=1))
    async def body(task: Task, ctx: Context) -> list[str]:
        raise make_error()

    return body


async def run_pair(bad: Subagent) -> Report:
    coordinator = Coordinator([good, bad])
    return await coordinator.run(
        [Task(query="a", topic="a", subagent="good"), Task(query="b", topic="b", subagent=bad.name)]
    )


def final_of(report: Report, subagent_name: str) -> Any:
    (record,) = [r for r in report.records if r.subagent == subagent_name]
    return record.final


def others() -> set[asyncio.Task[Any]]:
    return asyncio.all_tasks() - {asyncio.current_task()}  # type: ignore[operator]


def interrupted(work: Coroutine[Any, Any, Any]) -> BaseException | None:
    """What `asyncio.run(work)` raised.

    An interrupt leaves the event loop before `asyncio.run` can retrieve its main task's
    exception; that task is collected here, not in the middle of a later test (its
    "never retrieved" log would then run inside whatever the collector interrupted).
    """
    try:
        asyncio.run(work)
    except BaseException as exc:
        return exc
    finally:
        gc.collect()
    return None


class TestStrayCancellation:
    async def test_a_body_raising_cancelled_error_ends_as_a_transient_cancelled_envelope(
        self,
    ) -> None:
        """A CancelledError raised by the body, the run not cancelled, is that task's envelope."""
        outcome = await failing("bad", asyncio.CancelledError).run("q")

        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.TRANSIENT
        assert outcome.error_type == "cancelled"
        assert outcome.is_retryable

    async def test_a_stray_cancellation_is_retried_locally_like_any_transient_failure(
        self,
    ) -> None:
        """The stray cancellation is retried by the subagent's policy and can then succeed."""
        sleep = RecordingSleep()
        flaky = FailTimes(1, asyncio.CancelledError)

        @subagent(retry=fast_retry(sleep, attempts=2))
        async def docs(task: Task, ctx: Context) -> str:
            flaky()
            return "ok"

        outcome = await docs.run("q")

        assert isinstance(outcome, Success)
        assert outcome.data == "ok"
        assert len(sleep.delays) == 1

    async def test_the_coordinator_keeps_every_other_task_result(self) -> None:
        """One body's stray CancelledError costs no other task its result."""
        report = await run_pair(failing("bad", asyncio.CancelledError))

        statuses = {entry.source: entry.status for entry in report.coverage}
        assert statuses["good"] is CoverageStatus.COVERED
        assert statuses["bad"] is CoverageStatus.GAP
        assert final_of(report, "bad").error_type == "cancelled"
        assert others() == set()

    async def test_a_tool_raising_cancelled_error_gives_the_tool_a_transient_envelope(
        self,
    ) -> None:
        """In ctx.call a tool's stray CancelledError is the call's envelope, not a cancel."""

        @tool(idempotent=True, retry=fast_retry(attempts=1))
        async def lookup(query: str) -> str:
            raise asyncio.CancelledError

        @subagent(retry=fast_retry(attempts=1))
        async def docs(task: Task, ctx: Context) -> str:
            try:
                return await ctx.call(lookup, query=task.query)
            except ToolCallFailed as failed:
                return f"{failed.envelope.error_category}/{failed.envelope.error_type}"

        outcome = await docs.run("q")

        assert isinstance(outcome, Success)
        assert outcome.data == "transient/cancelled"

    async def test_a_non_idempotent_tool_is_not_repeated_after_a_stray_cancellation(
        self,
    ) -> None:
        """A tool cut by a stray cancel may have acted: a non-idempotent one is not retried."""
        calls = FailTimes(5, asyncio.CancelledError)

        @tool(retry=fast_retry(attempts=3))
        async def charge(amount: int) -> str:
            calls()
            return "charged"

        @subagent(retry=fast_retry(attempts=1))
        async def billing(task: Task, ctx: Context) -> str:
            return await ctx.call(charge, amount=5)

        outcome = await billing.run("q")

        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "cancelled"
        assert not outcome.is_retryable
        assert calls.calls == 1

    async def test_cancelling_the_run_propagates_and_leaves_no_task_running(self) -> None:
        """A real cancellation of Coordinator.run propagates; no subagent is left running."""
        started = 0
        all_started = asyncio.Event()
        cancelled: list[str] = []

        @subagent(name="slow", retry=fast_retry(attempts=1))
        async def slow(task: Task, ctx: Context) -> None:
            nonlocal started
            started += 1
            if started == 3:
                all_started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(task.query)
                raise

        run = asyncio.create_task(Coordinator([slow]).run(["a", "b", "c"]))
        await all_started.wait()
        run.cancel()

        with pytest.raises(asyncio.CancelledError):
            await run
        assert sorted(cancelled) == ["a", "b", "c"]
        assert others() == set()

    async def test_cancelling_subagent_run_propagates(self) -> None:
        """A real cancellation of Subagent.run's own task propagates, not an envelope."""
        entered = asyncio.Event()

        @subagent(retry=fast_retry(attempts=1))
        async def slow(task: Task, ctx: Context) -> None:
            entered.set()
            await asyncio.Event().wait()

        running = asyncio.create_task(slow.run("q"))
        await entered.wait()
        running.cancel()

        with pytest.raises(asyncio.CancelledError):
            await running
        assert running.cancelled()


class TestOtherBaseExceptions:
    async def test_a_base_exception_of_the_user_becomes_an_other_envelope(self) -> None:
        """Any other BaseException from a body is that task's `other` envelope."""
        outcome = await failing("bad", lambda: Stop("halt")).run("q")

        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.OTHER
        assert not outcome.is_retryable
        assert "Stop: halt" in (outcome.details or "")

    @pytest.mark.parametrize(
        "make_error",
        [
            lambda: Stop("halt"),
            lambda: BaseExceptionGroup("several", [Stop("halt"), ValueError("v")]),
            lambda: BaseExceptionGroup("cancel", [asyncio.CancelledError()]),
        ],
        ids=["base-exception", "base-exception-group", "group-with-stray-cancel"],
    )
    async def test_it_never_costs_another_task_its_result(self, make_error: Any) -> None:
        """A BaseException or a BaseExceptionGroup from one body leaves the other task covered."""
        report = await run_pair(failing("bad", make_error))

        statuses = {entry.source: entry.status for entry in report.coverage}
        assert statuses == {"good": CoverageStatus.COVERED, "bad": CoverageStatus.GAP}
        assert isinstance(final_of(report, "bad"), ErrorEnvelope)

    @pytest.mark.parametrize(
        "make_error",
        [
            KeyboardInterrupt,
            lambda: SystemExit(3),
            lambda: BaseExceptionGroup("stop", [KeyboardInterrupt(), ValueError("v")]),
        ],
        ids=["keyboard-interrupt", "system-exit", "group-holding-an-interrupt"],
    )
    def test_interrupts_propagate_out_of_the_run_promptly(self, make_error: Any) -> None:
        """KeyboardInterrupt and SystemExit stop the run at once; the other bodies are cancelled."""
        waiting = asyncio.Event()
        cancelled: list[str] = []

        @subagent(name="waits", retry=fast_retry(attempts=1))
        async def waits(task: Task, ctx: Context) -> None:
            waiting.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(task.query)
                raise

        @subagent(name="stops", retry=fast_retry(attempts=1))
        async def stops(task: Task, ctx: Context) -> None:
            await waiting.wait()
            raise make_error()

        raised = interrupted(Coordinator([waits, stops]).run(["q"]))

        assert type(raised) is type(make_error())
        assert cancelled == ["q"]


@pytest.fixture
def strict_default(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts and ends with strict mode off: no setting, no environment variable."""
    monkeypatch.delenv("AGENTMESH_STRICT", raising=False)
    set_strict(None)
    yield
    set_strict(None)


def buggy_body() -> Subagent:
    @subagent(name="buggy", retry=fast_retry(attempts=1))
    async def buggy(task: Task, ctx: Context) -> str:
        return task.query.no_such_method()  # type: ignore[attr-defined, no-any-return]

    return buggy


def raising(error: Exception, classifier: Classifier) -> Subagent:
    @subagent(retry=fast_retry(attempts=1), classifier=classifier)
    async def body(task: Task, ctx: Context) -> None:
        raise error

    return body


def frames(exc: BaseException) -> list[str]:
    return [frame.name for frame in traceback.extract_tb(exc.__traceback__)]


@pytest.mark.usefixtures("strict_default")
class TestStrictMode:
    async def test_off_by_default_a_bug_is_an_other_envelope(self) -> None:
        """Without strict mode a programming error in a body becomes an `other` envelope."""
        outcome = await buggy_body().run("q")

        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.OTHER

    async def test_a_bug_in_a_body_propagates_out_of_subagent_run(self) -> None:
        """In strict mode the AttributeError leaves Subagent.run with the body in its traceback."""
        with strict(), pytest.raises(AttributeError) as raised:
            await buggy_body().run("q")

        assert "buggy" in frames(raised.value)

    async def test_a_bug_in_a_tool_propagates_with_the_tool_in_its_traceback(self) -> None:
        """A TypeError in a tool's function reaches the caller of Subagent.run unchanged."""

        @tool(idempotent=True)
        async def add(a: int) -> int:
            return a + "1"  # type: ignore[operator, no-any-return]

        @subagent(retry=fast_retry(attempts=1))
        async def calc(task: Task, ctx: Context) -> int:
            return await ctx.call(add, a=1)

        with strict(), pytest.raises(TypeError) as raised:
            await calc.run("q")

        assert "add" in frames(raised.value)
        assert "calc" in frames(raised.value)

    async def test_a_bug_propagates_out_of_coordinator_run_and_stops_the_rest(self) -> None:
        """Coordinator.run raises the bug itself (not a group) and leaves nothing running."""
        entered = asyncio.Event()

        @subagent(name="slow", retry=fast_retry(attempts=1))
        async def slow(task: Task, ctx: Context) -> None:
            entered.set()
            await asyncio.Event().wait()

        @subagent(name="buggy", retry=fast_retry(attempts=1))
        async def buggy(task: Task, ctx: Context) -> None:
            await entered.wait()
            undefined_name  # type: ignore[name-defined]  # noqa: B018, F821

        with strict(), pytest.raises(NameError) as raised:
            await Coordinator([slow, buggy]).run(["q"])

        assert "buggy" in frames(raised.value)
        assert others() == set()

    async def test_the_bug_keeps_its_own_cause_out_of_coordinator_run(self) -> None:
        """The exception the user raised `from` another reaches the caller with that cause."""

        @subagent(name="buggy", retry=fast_retry(attempts=1))
        async def buggy(task: Task, ctx: Context) -> None:
            try:
                {}["missing"]
            except KeyError as missing:
                raise AttributeError("no such setting") from missing

        with strict(), pytest.raises(AttributeError) as raised:
            await Coordinator([buggy]).run(["q"])

        assert isinstance(raised.value.__cause__, KeyError)

    async def test_classified_and_other_errors_still_become_envelopes(self) -> None:
        """A registered TypeError, a ValueError and our own signals are classified as usual."""
        classifier = Classifier()
        classifier.register(TypeError, lambda exc: InvalidInput(str(exc)))
        errors = [TypeError("sdk"), ValueError("v"), KeyError("k"), TransientError("t")]
        with strict():
            outcomes = [await raising(error, classifier).run("q") for error in errors]

        categories = [o.error_category for o in outcomes if isinstance(o, ErrorEnvelope)]
        assert categories == [
            ErrorCategory.VALIDATION,
            ErrorCategory.OTHER,
            ErrorCategory.OTHER,
            ErrorCategory.TRANSIENT,
        ]

    async def test_the_environment_variable_turns_it_on(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """AGENTMESH_STRICT=1 turns strict mode on; set_strict(False) overrides it."""
        monkeypatch.setenv("AGENTMESH_STRICT", "1")
        with pytest.raises(AttributeError):
            await buggy_body().run("q")

        set_strict(False)
        assert isinstance(await buggy_body().run("q"), ErrorEnvelope)

    def test_the_context_manager_restores_the_previous_setting(self) -> None:
        """`with strict():` turns it on for the block only, even when the block raises."""
        set_strict(False)
        seen: list[bool] = []

        def inside() -> None:
            with strict():
                seen.append(is_strict())
                raise RuntimeError

        with pytest.raises(RuntimeError):
            inside()
        assert seen == [True]
        assert not is_strict()

    def test_set_strict_refuses_a_non_bool(self) -> None:
        """A value that is not True, False or None is a UsageError naming the argument."""
        with pytest.raises(UsageError, match="on="):
            set_strict("yes")  # type: ignore[arg-type]


class TestRouterEscapes:
    @pytest.mark.parametrize(
        "make_error",
        [asyncio.CancelledError, lambda: Stop("halt")],
        ids=["stray-cancel", "base-exception"],
    )
    async def test_a_router_that_raises_a_base_exception_costs_only_its_task(
        self, make_error: Any
    ) -> None:
        """A stray CancelledError or BaseException from the router is that task's gap."""

        class Breaking(Router):
            async def route(self, ctx: RouteContext) -> Route:
                if ctx.task.query == "b":
                    raise make_error()
                return await super().route(ctx)

        coordinator = Coordinator([good], router=Breaking())
        report = await coordinator.run(
            [Task(query="a", topic="a"), Task(query="b", topic="b")], run_id="r"
        )

        statuses = {entry.topic: entry.status for entry in report.coverage}
        assert statuses == {"a": CoverageStatus.COVERED, "b": CoverageStatus.GAP}
        (gap,) = report.gaps
        assert "routing failed" in (gap.reason or "")

    async def test_a_synthesizer_that_raises_a_stray_cancel_falls_back(self) -> None:
        """A custom synthesizer's stray CancelledError gives the deterministic report."""

        class Cancelling:
            async def synthesize(self, records: Any, *, run_id: str, min_coverage: float) -> Report:
                raise asyncio.CancelledError

        report = await Coordinator([good], synthesizer=Cancelling()).run(["a"])

        assert [entry.status for entry in report.coverage] == [CoverageStatus.COVERED]
        assert "synthesizer failed" in (report.synthesis_note or "")
