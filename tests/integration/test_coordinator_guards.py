"""What the coordinator guarantees even when the code it calls misbehaves."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from agentmesh import (
    Context,
    Coordinator,
    ErrorEnvelope,
    Outcome,
    Report,
    RetryPolicy,
    Subagent,
    Success,
    Task,
    UsageError,
    subagent,
    tool,
)
from agentmesh.coordinator import CoverageStatus, Router, TaskRecord
from agentmesh.executors import Dispatch

# The deadline tests here cut a call that would sleep 30 s, so a real clock is the behaviour:
# finishing within this shows the cut, with ample room for a loaded machine.
CUT_WITHIN = 5.0


@subagent(name="echo")
async def echo(task: Task, ctx: Context) -> list[str]:
    return [task.query]


class TestMisbehavingParts:
    async def test_a_synthesizer_that_raises_falls_back_and_says_so(self) -> None:
        """Every result survives a broken synthesizer; the report names the failure."""

        class Broken:
            async def synthesize(
                self, records: Sequence[TaskRecord], *, run_id: str, min_coverage: float | None
            ) -> Report:
                raise RuntimeError("template missing")

        report = await Coordinator([echo], synthesizer=Broken()).run(["a", "b"])
        assert [f.content for f in report.findings] == ["a", "b"]
        assert report.synthesis_note is not None
        assert "template missing" in report.synthesis_note
        assert "template missing" in report.to_markdown()

    async def test_a_slow_synthesizer_does_not_hold_the_run_past_its_deadline(self) -> None:
        """The deadline covers synthesis too."""

        class Slow:
            async def synthesize(
                self, records: Sequence[TaskRecord], *, run_id: str, min_coverage: float | None
            ) -> Report:
                await asyncio.sleep(30)
                raise AssertionError("unreachable")

        loop = asyncio.get_running_loop()
        started = loop.time()
        report = await Coordinator([echo], synthesizer=Slow(), timeout=0.2).run(["a"])
        assert loop.time() - started < CUT_WITHIN
        assert report.coverage[0].status is CoverageStatus.COVERED
        assert "deadline" in (report.synthesis_note or "")

    async def test_a_malformed_executor_result_fails_that_task_only(self) -> None:
        """One payload that is not an outcome does not cost the other tasks."""

        class WireExecutor:
            async def execute(self, subagent: Subagent, task: Task, dispatch: Dispatch) -> Any:
                outcome = await subagent.run(task, run_id=dispatch.run_id)
                wire = outcome.to_dict()
                if task.query == "bad":
                    del wire["source"]
                return wire

        report = await Coordinator([echo], executor=WireExecutor()).run(["a", "bad", "c"])
        statuses = [e.status for e in report.coverage]
        assert statuses == [CoverageStatus.COVERED, CoverageStatus.GAP, CoverageStatus.COVERED]

    async def test_an_executor_ignoring_the_deadline_is_cut(self) -> None:
        """A late result is not waited for beyond a short grace after the deadline."""

        class Stubborn:
            async def execute(self, subagent: Subagent, task: Task, dispatch: Dispatch) -> Outcome:
                await asyncio.sleep(30)
                raise AssertionError("unreachable")

        loop = asyncio.get_running_loop()
        started = loop.time()
        report = await Coordinator([echo], executor=Stubborn(), timeout=0.1).run(["a"])
        assert loop.time() - started < CUT_WITHIN
        entry = report.coverage[0]
        assert entry.status is CoverageStatus.GAP
        assert entry.is_retryable


class TestCoordinatorArguments:
    def test_a_single_subagent_must_be_in_a_list(self) -> None:
        """Coordinator(agent) names the fix instead of failing on iteration."""
        with pytest.raises(UsageError, match="list of subagents"):
            Coordinator(echo)  # type: ignore[arg-type]

    def test_max_rounds_must_be_a_whole_number(self) -> None:
        """None or a float is refused by name."""
        with pytest.raises(UsageError, match="max_rounds"):
            Coordinator([echo], max_rounds=None)  # type: ignore[arg-type]

    def test_a_router_class_instead_of_an_instance_is_refused(self) -> None:
        """router=Router would turn every task into a silent routing failure."""
        with pytest.raises(UsageError, match="router"):
            Coordinator([echo], router=Router)  # type: ignore[arg-type]


class TestRetryPolicyDeadline:
    async def test_the_policy_deadline_bounds_an_attempt_in_flight(self) -> None:
        """RetryPolicy(timeout=) cuts a hanging call, not only the waits between calls."""

        @tool(idempotent=True)
        async def hang() -> None:
            await asyncio.sleep(30)

        @subagent(retry=RetryPolicy(max_attempts=3, initial_delay=0.01, timeout=0.2))
        async def agent(task: Task, ctx: Context) -> None:
            await ctx.call(hang)

        loop = asyncio.get_running_loop()
        started = loop.time()
        outcome = await agent.run("q")
        assert loop.time() - started < CUT_WITHIN
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "timeout"
        assert not isinstance(outcome, Success)
