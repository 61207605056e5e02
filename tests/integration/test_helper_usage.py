"""The coordinator's own model helpers (`LLMSynthesizer`, `LLMRewriter`) call their model as
subagents do: the run's usage limits hold for them and the report counts what they used."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentmesh import Context, Coordinator, InvalidInput, RetryPolicy, Task, subagent
from agentmesh.coordinator import CoverageStatus, LLMRewriter, LLMSynthesizer
from agentmesh.events import UsageUpdated
from agentmesh.models import AnthropicModel, UsageLimits
from agentmesh.testing import FakeMessagesAPI, Reply

API_KEY = "sk-ant-test-0123456789abcdef"
F = FakeMessagesAPI
SONNET = "claude-sonnet-4-5"


@pytest.fixture
async def sonnet(fake_messages_api: FakeMessagesAPI) -> AsyncIterator[AnthropicModel]:
    async with AnthropicModel(
        SONNET, api_key=API_KEY, base_url=fake_messages_api.base_url, timeout=10
    ) as model:
        yield model


@subagent(name="docs", retry=RetryPolicy.never())
async def docs(task: Task, ctx: Context) -> list[str]:
    """Answers without any model."""
    return [f"found {task.query}"]


def summary_reply() -> Reply:
    return F.tool_use(
        "write_summary", {"summary": "It was found [1]."}, input_tokens=15, output_tokens=5
    )


class TestSynthesizerUsage:
    async def test_the_synthesizers_call_is_counted_in_the_report(
        self, fake_messages_api: FakeMessagesAPI, sonnet: AnthropicModel
    ) -> None:
        """One request, and the report's usage has it, on a line of its own named synthesizer."""
        fake_messages_api.enqueue(summary_reply())
        coordinator = Coordinator(
            [docs],
            synthesizer=LLMSynthesizer(sonnet),
            usage_limits=UsageLimits(max_model_calls=1),
        )
        report = await coordinator.run(["q"])
        assert fake_messages_api.request_count == 1
        assert report.summary == "It was found [1]."
        assert report.usage is not None
        assert (report.usage.model_calls, report.usage.total_tokens) == (1, 20)
        assert list(report.usage_by_subagent) == ["synthesizer"]
        assert report.helper_usage["synthesizer"].model_calls == 1
        usage = report.to_dict()["usage"]
        assert usage["bySubagent"]["synthesizer"]["inputTokens"] == 15
        assert "| synthesizer | 1 | 15 | 5 |" in report.to_markdown()

    async def test_a_refused_synthesizer_falls_back_with_a_note(
        self, fake_messages_api: FakeMessagesAPI, sonnet: AnthropicModel
    ) -> None:
        """The subagent used the run's one call: no request for a summary, and the note says why."""

        @subagent(name="asks")
        async def asks(task: Task, ctx: Context) -> list[str]:
            response = await ctx.call_model(sonnet, messages=[{"role": "user", "content": "hi"}])
            return [response.text]

        fake_messages_api.enqueue(F.text("found it", input_tokens=15, output_tokens=5))
        coordinator = Coordinator(
            [asks],
            synthesizer=LLMSynthesizer(sonnet),
            usage_limits=UsageLimits(max_model_calls=1),
        )
        report = await coordinator.run(["q"])
        assert fake_messages_api.request_count == 1
        assert report.summary is None
        assert report.synthesis_note is not None
        assert "max_model_calls=1 reached" in report.synthesis_note
        assert "deterministic synthesis used" in report.synthesis_note
        assert report.coverage[0].status is CoverageStatus.COVERED
        assert report.usage is not None
        assert report.usage.model_calls == 1
        assert list(report.usage_by_subagent) == ["asks"]  # the refusal used nothing

    async def test_the_synthesizers_usage_event_is_the_runs_own(
        self, fake_messages_api: FakeMessagesAPI, sonnet: AnthropicModel
    ) -> None:
        """A streamed run emits its UsageUpdated with no task id, from "synthesizer"."""
        fake_messages_api.enqueue(summary_reply())
        coordinator = Coordinator([docs], synthesizer=LLMSynthesizer(sonnet))
        async with coordinator.stream(["q"]) as events:
            updates = [event async for event in events if isinstance(event, UsageUpdated)]
        [update] = updates
        assert (update.task_id, update.subagent, update.total.total_tokens) == (
            None,
            "synthesizer",
            20,
        )


class TestRewriterUsage:
    async def test_the_rewriters_call_is_counted_and_limited(
        self, fake_messages_api: FakeMessagesAPI, sonnet: AnthropicModel
    ) -> None:
        """Its proposal used the one call allowed: the corrected query cannot start (a gap)."""

        @subagent(name="sql", retry=RetryPolicy.never())
        async def sql(task: Task, ctx: Context) -> list[str]:
            raise InvalidInput(f"unknown column in {task.query!r}")

        fake_messages_api.enqueue(
            F.tool_use(
                "propose_query",
                {"query": "SELECT id FROM orders", "reason": "the column is id"},
                input_tokens=15,
                output_tokens=5,
            )
        )
        coordinator = Coordinator(
            [sql], rewriter=LLMRewriter(sonnet), usage_limits=UsageLimits(max_model_calls=1)
        )
        report = await coordinator.run([Task(query="SELECT idd FROM orders", id="t1")])
        assert fake_messages_api.request_count == 1
        [entry] = report.coverage
        assert entry.status is CoverageStatus.GAP
        assert entry.reason is not None
        assert "max_model_calls=1 reached" in entry.reason
        assert report.usage_by_subagent["rewriter"].total_tokens == 20

    async def test_a_refused_rewriter_is_the_gap_it_would_be(
        self, fake_messages_api: FakeMessagesAPI, sonnet: AnthropicModel
    ) -> None:
        """The subagent used the one call allowed: the rewriter sends nothing; the task is a gap."""

        @subagent(name="sql", retry=RetryPolicy.never())
        async def sql(task: Task, ctx: Context) -> list[str]:
            await ctx.call_model(sonnet, messages=[{"role": "user", "content": task.query}])
            raise InvalidInput(f"unknown column in {task.query!r}")

        fake_messages_api.enqueue(F.text("SELECT idd", input_tokens=15, output_tokens=5))
        coordinator = Coordinator(
            [sql], rewriter=LLMRewriter(sonnet), usage_limits=UsageLimits(max_model_calls=1)
        )
        report = await coordinator.run(["SELECT idd FROM orders"])
        assert fake_messages_api.request_count == 1
        [entry] = report.coverage
        assert entry.status is CoverageStatus.GAP
        assert entry.reason is not None
        assert "the rewriter had no corrected query" in entry.reason
        assert "max_model_calls=1 reached" in entry.reason
        assert "rewriter" not in report.usage_by_subagent
