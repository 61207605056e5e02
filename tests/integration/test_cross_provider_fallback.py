"""One FallbackModel over three providers (Claude, GPT, Gemini), each through its real SDK
on loopback: a storm on one provider, or on two, and every task is still answered.

The providers' failures are the same envelopes (a 529 from Claude, a 503 from OpenAI,
a 503 UNAVAILABLE from Gemini), so the run's `ModelHealth` opens the stormed model's
breaker after a few calls and every later task skips it, whichever provider it is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from agentmesh import Coordinator, RetryPolicy, Task
from agentmesh.models import AnthropicModel, FallbackModel, GeminiModel, OpenAIModel
from agentmesh.report import CoverageStatus, Report
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import (
    FakeChatCompletionsAPI,
    FakeGeminiAPI,
    FakeMessagesAPI,
    RecordingSleep,
)

TASKS = 24
# The most calls a stormed model gets: the first window's (4), one probe at most, and
# the tasks' own retries before the breaker opened.
FEW = 8


@dataclass(frozen=True)
class Chain:
    claude: AnthropicModel
    gpt: OpenAIModel
    gemini: GeminiModel


@pytest.fixture
async def chain(
    fake_messages_api: FakeMessagesAPI,
    fake_chat_completions_api: FakeChatCompletionsAPI,
    fake_gemini_api: FakeGeminiAPI,
) -> AsyncIterator[Chain]:
    async with (
        AnthropicModel(
            "claude-sonnet-4-5", api_key="sk-ant-test", base_url=fake_messages_api.base_url
        ) as claude,
        OpenAIModel(
            "gpt-5-mini", api_key="sk-test", base_url=fake_chat_completions_api.base_url
        ) as gpt,
        GeminiModel(
            "gemini-2.5-flash", api_key="gemini-test", base_url=fake_gemini_api.base_url
        ) as gemini,
    ):
        yield Chain(claude, gpt, gemini)


async def run_tasks(model: FallbackModel) -> Report:
    agent = LLMSubagent("writer", model, retry=RetryPolicy(max_attempts=3, sleep=RecordingSleep()))
    return await Coordinator([agent], max_concurrency=TASKS).run(
        [Task(query=f"q{i}", topic=f"t{i}") for i in range(TASKS)]
    )


def covered(report: Report) -> int:
    return sum(entry.status is CoverageStatus.COVERED for entry in report.coverage)


class TestThreeProviders:
    async def test_a_529_storm_on_claude_and_a_503_storm_on_openai_are_answered_by_gemini(
        self,
        fake_messages_api: FakeMessagesAPI,
        fake_chat_completions_api: FakeChatCompletionsAPI,
        fake_gemini_api: FakeGeminiAPI,
        chain: Chain,
    ) -> None:
        fake_messages_api.handler = lambda request: FakeMessagesAPI.error(529)
        fake_chat_completions_api.handler = lambda request: FakeChatCompletionsAPI.error(503)
        fake_gemini_api.handler = lambda request: FakeGeminiAPI.text("from Gemini")
        report = await run_tasks(FallbackModel(chain.claude, chain.gpt, chain.gemini))
        assert covered(report) == TASKS
        assert {finding.content for finding in report.findings} == {"from Gemini"}
        assert fake_gemini_api.request_count == TASKS
        # Each stormed model is called a few times, then skipped by its open breaker.
        assert fake_messages_api.request_count <= FEW
        assert fake_chat_completions_api.request_count <= FEW
        usage = report.usage
        assert usage is not None
        skipped = {(f.model, f.error_type) for f in usage.failovers if f.skipped}
        assert skipped == {("claude-sonnet-4-5", "overloaded"), ("gpt-5-mini", "overloaded")}
        markdown = report.to_markdown()
        assert "- skipped: claude-sonnet-4-5 overloaded since" in markdown
        assert "- skipped: gpt-5-mini overloaded since" in markdown
        assert usage.by_model  # Gemini's calls are counted and priced like any other
        gemini = report.usage_by_model["gemini-2.5-flash"]
        assert gemini.model_calls == TASKS
        assert gemini.cost_usd is not None
        assert gemini.cost_usd > 0

    async def test_a_storm_on_the_first_provider_goes_no_further_than_the_second(
        self,
        fake_messages_api: FakeMessagesAPI,
        fake_chat_completions_api: FakeChatCompletionsAPI,
        fake_gemini_api: FakeGeminiAPI,
        chain: Chain,
    ) -> None:
        fake_gemini_api.handler = lambda request: FakeGeminiAPI.error(503)
        fake_messages_api.handler = lambda request: FakeMessagesAPI.text("from Claude")
        fake_chat_completions_api.handler = lambda r: FakeChatCompletionsAPI.text("from GPT")
        report = await run_tasks(FallbackModel(chain.gemini, chain.gpt, chain.claude))
        assert covered(report) == TASKS
        assert fake_chat_completions_api.request_count == TASKS
        assert fake_messages_api.request_count == 0
        assert fake_gemini_api.request_count <= FEW
        assert {finding.content for finding in report.findings} == {"from GPT"}
