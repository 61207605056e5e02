"""Run-wide usage limits, enforced in code, through the real anthropic SDK."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentmesh import Coordinator, ErrorCategory, ErrorEnvelope, Success, Task, UsageError, tool
from agentmesh.coordinator import CoverageStatus
from agentmesh.models import AnthropicModel, UsageLimits
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeMessagesAPI, RecordedRequest, Reply

API_KEY = "sk-ant-test-0123456789abcdef"
F = FakeMessagesAPI
TASKS = 100


@pytest.fixture
async def model(fake_messages_api: FakeMessagesAPI) -> AsyncIterator[AnthropicModel]:
    async with AnthropicModel(
        "claude-sonnet-4-5", api_key=API_KEY, base_url=fake_messages_api.base_url, timeout=10
    ) as claude:
        yield claude


def answer(request: RecordedRequest) -> Reply:
    return F.text("answer", input_tokens=15, output_tokens=5)  # 20 tokens a call


@tool(idempotent=True)
async def lookup(query: str) -> list[str]:
    """Look a query up."""
    return [f"found {query}"]


class TestRunWideLimits:
    async def test_a_call_limit_is_never_overshot_by_100_concurrent_tasks(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """100 tasks at once, 30 calls allowed: exactly 30 requests, 70 gaps that say why."""
        fake_messages_api.handler = answer
        coordinator = Coordinator(
            [LLMSubagent("a", model)],
            max_concurrency=TASKS,
            usage_limits=UsageLimits(max_model_calls=30),
        )
        report = await coordinator.run([Task(query=f"q{n}", topic=f"t{n}") for n in range(TASKS)])
        assert fake_messages_api.request_count == 30
        assert len(report.coverage) == TASKS  # nothing dropped
        covered = [e for e in report.coverage if e.status is CoverageStatus.COVERED]
        gaps = [e for e in report.coverage if e.status is CoverageStatus.GAP]
        assert (len(covered), len(gaps)) == (30, 70)
        assert all(e.reason and "max_model_calls=30 reached" in e.reason for e in gaps)
        assert not any(e.is_retryable for e in gaps)
        assert report.usage is not None
        assert report.usage.model_calls == 30

    async def test_a_token_limit_overshoots_by_at_most_the_calls_in_flight(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """Calls start while under 200 tokens; those in flight (10 at most) finish and count."""
        fake_messages_api.handler = answer
        in_flight = 10
        coordinator = Coordinator(
            [LLMSubagent("a", model)],
            max_concurrency=in_flight,
            usage_limits=UsageLimits(max_total_tokens=200),
        )
        report = await coordinator.run([Task(query=f"q{n}", topic=f"t{n}") for n in range(TASKS)])
        assert report.usage is not None
        used = report.usage.total_tokens
        assert 200 <= used <= 200 + in_flight * 20
        assert fake_messages_api.request_count == report.usage.model_calls
        assert len(report.coverage) == TASKS
        limited = [e for e in report.coverage if e.status is CoverageStatus.GAP]
        assert len(limited) == TASKS - report.usage.model_calls
        assert all(e.reason and "max_total_tokens=200 reached" in e.reason for e in limited)

    async def test_tasks_not_started_say_the_limit_stopped_them(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """One task at a time and one call allowed: the second task never starts, and says so."""
        fake_messages_api.handler = answer
        coordinator = Coordinator(
            [LLMSubagent("a", model)],
            max_concurrency=1,
            usage_limits=UsageLimits(max_model_calls=1),
        )
        report = await coordinator.run([Task(query="first"), Task(query="second")])
        assert [e.status for e in report.coverage] == [CoverageStatus.COVERED, CoverageStatus.GAP]
        final = report.records[1].final
        assert isinstance(final, ErrorEnvelope)
        assert final.error_category is ErrorCategory.BUSINESS
        assert final.error_type == "usage_limit_exceeded"
        assert "this task did not start" in final.message
        assert final.attempts == 0


class TestSubagentLimits:
    async def test_the_task_that_hits_the_limit_keeps_its_partial_results(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """Turn 1 calls a tool; turn 2 is refused: a business envelope with the tool's result."""
        fake_messages_api.enqueue(F.tool_use("lookup", {"query": "x"}))
        agent = LLMSubagent("a", model, tools=[lookup], usage_limits=UsageLimits(max_model_calls=1))
        outcome = await agent.run("hi")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.BUSINESS
        assert outcome.error_type == "usage_limit_exceeded"
        assert not outcome.is_retryable
        assert "subagent a's usage limit: max_model_calls=1 reached" in outcome.message
        assert outcome.partial_results is not None
        assert outcome.partial_results.findings[0]["result"] == ["found x"]
        assert fake_messages_api.request_count == 1
        assert outcome.usage is not None
        assert outcome.usage.model_calls == 1

    async def test_a_subagent_limit_counts_all_its_tasks_in_the_run(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """Two calls allowed to one subagent of a run: its third task is refused, sequentially."""
        fake_messages_api.handler = answer
        agent = LLMSubagent("a", model, usage_limits=UsageLimits(max_model_calls=2))
        report = await Coordinator([agent], max_concurrency=1).run(["q1", "q2", "q3"])
        assert [e.status for e in report.coverage] == [
            CoverageStatus.COVERED,
            CoverageStatus.COVERED,
            CoverageStatus.GAP,
        ]
        assert fake_messages_api.request_count == 2

    async def test_a_cost_limit_refuses_a_model_without_a_price(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """A cost that cannot be counted cannot be bounded: the call is not made."""
        limits = UsageLimits(max_cost_usd=1.0)
        async with AnthropicModel(
            "claude-unpriced", api_key=API_KEY, base_url=fake_messages_api.base_url
        ) as unpriced:
            outcome = await LLMSubagent("a", unpriced, usage_limits=limits).run("hi")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "usage_limit_exceeded"
        assert "no known price" in outcome.message
        assert fake_messages_api.request_count == 0

    async def test_a_cost_limit_stops_calls_once_reached(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """$0.0001 allowed, each call costs $0.00012: the second call never starts."""
        fake_messages_api.handler = answer  # 15 in x $3 + 5 out x $15 per million
        agent = LLMSubagent("a", model, usage_limits=UsageLimits(max_cost_usd=0.0001))
        report = await Coordinator([agent], max_concurrency=1).run(["q1", "q2"])
        first, second = (record.final for record in report.records)
        assert isinstance(first, Success)
        assert isinstance(second, ErrorEnvelope)
        assert "max_cost_usd=0.0001 reached" in second.message


class TestMisuse:
    @pytest.mark.parametrize(
        "options",
        [{"max_model_calls": -1}, {"max_total_tokens": 1.5}, {"max_cost_usd": float("nan")}],
    )
    def test_limits_must_be_non_negative_numbers(self, options: dict[str, float]) -> None:
        """A bad limit is refused at construction, naming the argument."""
        with pytest.raises(UsageError, match=next(iter(options))):
            UsageLimits(**options)  # type: ignore[arg-type]

    def test_the_coordinator_takes_usage_limits_only(self, model: AnthropicModel) -> None:
        """A dict is not a `UsageLimits`."""
        with pytest.raises(UsageError, match="usage_limits="):
            Coordinator([LLMSubagent("a", model)], usage_limits={"max_model_calls": 1})  # type: ignore[arg-type]
