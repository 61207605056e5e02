"""The report's usage as a reader meets it: one shape for both breakdowns, and fail-overs
counted instead of repeated once per task (issue 24 items 18 and 19)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import pytest

from agentmesh import Context, Coordinator, Report, Task, subagent
from agentmesh.models import FallbackModel, ModelHealth
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeMessagesAPI, RecordedRequest, Reply
from examples.research_agent.planner import Plan, Subtopic
from examples.research_agent.rendering import RunInfo, to_html, to_markdown
from tests.integration.test_fallback_model import BACKUP, PRIMARY, chain
from tests.retrying import fast_retry

__all__ = ["chain"]  # the fallback chain fixture of the fail-over tests

F = FakeMessagesAPI
FAILED_OVER = f"{PRIMARY} (overloaded after 2 attempts) → {BACKUP}"


def primary_down(request: RecordedRequest) -> Reply:
    """The primary is overloaded on every try; the backup answers."""
    if request.model == PRIMARY:
        return F.error(529)
    return F.text("from backup", input_tokens=10, output_tokens=2)


Run = Callable[[int], Awaitable[Report]]


@pytest.fixture
def failed_over_run(fake_messages_api: FakeMessagesAPI, chain: FallbackModel) -> Run:
    """A run of `n` tasks whose model chain fails over in every one."""

    async def run(tasks: int) -> Report:
        fake_messages_api.handler = primary_down
        agent = LLMSubagent("a", chain, retry=fast_retry(attempts=2))
        # A breaker that never opens: every task calls the primary and fails over itself
        # (TestSkippedLines shows the run skipping it once it is known to be out).
        health = ModelHealth(failure_threshold=1_000)
        return await Coordinator([agent], model_health=health).run(
            [Task(query=f"q{n}", topic=f"t{n}") for n in range(tasks)]
        )

    return run


class TestUsageMappings:
    async def test_by_model_and_by_subagent_are_both_mappings(self, failed_over_run: Run) -> None:
        """`.items()` works on both, keyed by model name and by subagent name."""
        report = await failed_over_run(2)
        by_model = {name: line.model_calls for name, line in report.usage_by_model.items()}
        assert by_model == {PRIMARY: 4, BACKUP: 2}
        assert report.usage_by_model[BACKUP].input_tokens == 20
        assert {name: s.model_calls for name, s in report.usage_by_subagent.items()} == {"a": 6}

    async def test_both_are_read_only(self, failed_over_run: Run) -> None:
        """Neither can be changed by the reader: they are views of the report, not copies."""
        report = await failed_over_run(1)
        with pytest.raises(TypeError):
            report.usage_by_model[PRIMARY] = report.usage_by_model[BACKUP]  # type: ignore[index]
        with pytest.raises(TypeError):
            report.usage_by_subagent["b"] = report.usage_by_subagent["a"]  # type: ignore[index]

    async def test_a_run_without_models_has_two_empty_mappings(self) -> None:
        """No model called: both are empty mappings, not None and not a tuple."""

        @subagent(name="plain")
        async def plain(task: Task, ctx: Context) -> str:
            return "done"

        report = await Coordinator([plain]).run(["q"])
        assert dict(report.usage_by_model) == {}
        assert dict(report.usage_by_subagent) == {}

    async def test_the_json_keeps_its_shape(self, failed_over_run: Run) -> None:
        """JSON `usage.byModel` stays the list of lines naming their model; `bySubagent` a map."""
        data = json.loads((await failed_over_run(1)).to_json())
        assert [line["model"] for line in data["usage"]["byModel"]] == [PRIMARY, BACKUP]
        assert list(data["usage"]["bySubagent"]) == ["a"]


class TestFailoverLines:
    async def test_markdown_counts_identical_failovers_in_one_line(
        self, failed_over_run: Run
    ) -> None:
        """Five tasks failing over the same way give one line saying 5 times, not five lines."""
        report = await failed_over_run(5)
        assert report.usage is not None
        assert len(report.usage.failovers) == 5  # the data keeps every one
        lines = [
            line for line in report.to_markdown().splitlines() if line.startswith("- failed over")
        ]
        assert lines == [f"- failed over: {FAILED_OVER}, 5 times"]

    async def test_a_single_failover_has_no_count(self, failed_over_run: Run) -> None:
        """One fail-over reads as before, without ", 1 times"."""
        markdown = (await failed_over_run(1)).to_markdown()
        assert f"- failed over: {FAILED_OVER}\n" in markdown

    async def test_the_research_agents_markdown_and_html_count_them_too(
        self, failed_over_run: Run
    ) -> None:
        """The example's own Markdown has one counted line; its HTML lists it once as well."""
        report = await failed_over_run(3)
        plan = Plan("q?", tuple(Subtopic(f"t{n}", f"q{n}") for n in range(3)))
        info = RunInfo(plan=plan, sources=("a",), mode="offline", seed=0)
        line = f"{PRIMARY} failed over (overloaded after 2 attempts) to {BACKUP}, 3 times"
        markdown = to_markdown(report, info)
        assert [text for text in markdown.splitlines() if text.startswith("- ")] == [f"- {line}"]
        page = to_html(report, info)
        assert page.count("<li>") == 1
        assert f"<li>{line}</li>" in page
