"""`RunLimits`: a coordinator's limits as one value, the plain keywords still working."""

from __future__ import annotations

import asyncio

import pytest

from agentmesh import Context, Task, subagent
from agentmesh.coordinator import Coordinator, RunLimits
from agentmesh.errors import UsageError
from agentmesh.usage import UsageLimits


@subagent(name="docs")
async def docs(task: Task, ctx: Context) -> str:
    return task.query


class TestRunLimits:
    def test_limits_given_as_one_value_are_the_coordinators(self) -> None:
        """`Coordinator(limits=RunLimits(...))` sets every limit of its runs at once."""
        usage = UsageLimits(max_model_calls=3)
        limits = RunLimits(concurrency=2, timeout=5, rounds=1, min_coverage=0.5, usage=usage)
        coordinator = Coordinator([docs], limits=limits)
        assert coordinator.limits is limits
        assert (coordinator.max_concurrency, coordinator.timeout, coordinator.max_rounds) == (
            2,
            5.0,
            1,
        )
        assert (coordinator.min_coverage, coordinator.usage_limits) == (0.5, usage)

    def test_the_plain_keywords_make_the_same_limits(self) -> None:
        """The keywords of before still work, and read back as one `RunLimits`."""
        coordinator = Coordinator([docs], max_concurrency=2, timeout=5, max_rounds=1)
        assert coordinator.limits == RunLimits(concurrency=2, timeout=5.0, rounds=1)

    def test_a_limit_given_twice_is_refused_naming_it(self) -> None:
        """`limits=` with a plain keyword beside it would ignore one of them: a UsageError."""
        with pytest.raises(UsageError, match=r"Coordinator\(timeout=\)"):
            Coordinator([docs], limits=RunLimits(), timeout=3)

    @pytest.mark.parametrize(
        ("given", "named"),
        [
            ({"concurrency": 0}, "concurrency"),
            ({"timeout": -1}, "timeout"),
            ({"rounds": -1}, "rounds"),
            ({"min_coverage": 2}, "min_coverage"),
            ({"usage": {"requests": 1}}, "usage"),
        ],
    )
    def test_a_bad_limit_is_refused_naming_its_field(
        self, given: dict[str, object], named: str
    ) -> None:
        """Each field is checked when the value is made, the error naming it."""
        with pytest.raises(UsageError, match=rf"RunLimits\({named}="):
            RunLimits(**given)  # type: ignore[arg-type]

    def test_a_bad_plain_keyword_is_refused_naming_the_keyword(self) -> None:
        """A bad plain keyword's error names the keyword the user wrote, not the field."""
        with pytest.raises(UsageError, match=r"Coordinator\(max_concurrency=\)"):
            Coordinator([docs], max_concurrency=0)

    async def test_a_run_keeps_to_the_limits_value(self) -> None:
        """The run's concurrency is the value's: at most one task in flight at a time."""
        in_flight = peak = 0

        @subagent(name="slow")
        async def slow(task: Task, ctx: Context) -> str:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0)
            in_flight -= 1
            return task.query

        report = await Coordinator([slow], limits=RunLimits(concurrency=1)).run(["a", "b", "c"])
        assert peak == 1
        assert report.coverage_ratio == 1.0
