"""A FallbackModel across providers: Claude and GPT, each through its real SDK on loopback.

Both providers' failures are classified into the same envelopes, so a storm of 529s on
Claude, of 503s on OpenAI, or OpenAI's spent quota sends the run to the other one, and
the run's `ModelHealth` keeps the failing model away from the other tasks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentmesh import Coordinator, RetryPolicy, Task
from agentmesh.models import AnthropicModel, FallbackModel, OpenAIModel
from agentmesh.report import CoverageStatus
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeChatCompletionsAPI, FakeMessagesAPI, RecordingSleep

TASKS = 20


@pytest.fixture
async def claude(fake_messages_api: FakeMessagesAPI) -> AsyncIterator[AnthropicModel]:
    async with AnthropicModel(
        "claude-sonnet-4-5", api_key="sk-ant-test", base_url=fake_messages_api.base_url
    ) as model:
        yield model


@pytest.fixture
async def gpt(fake_chat_completions_api: FakeChatCompletionsAPI) -> AsyncIterator[OpenAIModel]:
    async with OpenAIModel(
        "gpt-5-mini", api_key="sk-test", base_url=fake_chat_completions_api.base_url
    ) as model:
        yield model


async def covered_by(chain: FallbackModel) -> int:
    """How many of TASKS concurrent tasks over `chain` got an answer."""
    agent = LLMSubagent("writer", chain, retry=RetryPolicy(max_attempts=3, sleep=RecordingSleep()))
    report = await Coordinator([agent], max_concurrency=TASKS).run(
        [Task(query=f"q{i}", topic=f"t{i}") for i in range(TASKS)]
    )
    return sum(entry.status is CoverageStatus.COVERED for entry in report.coverage)


class TestAcrossProviders:
    async def test_a_529_storm_on_claude_is_answered_by_gpt(
        self,
        fake_messages_api: FakeMessagesAPI,
        fake_chat_completions_api: FakeChatCompletionsAPI,
        claude: AnthropicModel,
        gpt: OpenAIModel,
    ) -> None:
        fake_messages_api.handler = lambda request: FakeMessagesAPI.error(529)
        fake_chat_completions_api.handler = lambda r: FakeChatCompletionsAPI.text("from GPT")
        assert await covered_by(FallbackModel(claude, gpt)) == TASKS
        assert fake_chat_completions_api.request_count == TASKS
        # The breaker and the window keep most tasks away from the overloaded model.
        assert fake_messages_api.request_count <= 8

    async def test_a_503_storm_on_openai_is_answered_by_claude(
        self,
        fake_messages_api: FakeMessagesAPI,
        fake_chat_completions_api: FakeChatCompletionsAPI,
        claude: AnthropicModel,
        gpt: OpenAIModel,
    ) -> None:
        fake_chat_completions_api.handler = lambda r: FakeChatCompletionsAPI.error(503)
        fake_messages_api.handler = lambda request: FakeMessagesAPI.text("from Claude")
        assert await covered_by(FallbackModel(gpt, claude)) == TASKS
        assert fake_messages_api.request_count == TASKS
        assert fake_chat_completions_api.request_count <= 8

    async def test_openai_s_spent_quota_leaves_it_out_for_the_run(
        self,
        fake_messages_api: FakeMessagesAPI,
        fake_chat_completions_api: FakeChatCompletionsAPI,
        claude: AnthropicModel,
        gpt: OpenAIModel,
    ) -> None:
        """insufficient_quota is quota_exhausted: no retry, and no other task asks again."""
        fake_chat_completions_api.handler = lambda r: FakeChatCompletionsAPI.error(
            429, code="insufficient_quota"
        )
        fake_messages_api.handler = lambda request: FakeMessagesAPI.text("from Claude")
        assert await covered_by(FallbackModel(gpt, claude)) == TASKS
        # The tasks in the first window may each have asked before the first answer.
        assert fake_chat_completions_api.request_count <= 4
