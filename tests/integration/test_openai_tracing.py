"""OpenAIModel's calls as GenAI chat spans: provider `openai`, its models, tokens and
finish reasons, as the conventions spell them (see test_genai_conventions.py)."""

from __future__ import annotations

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.trace import SpanKind, StatusCode

from agentmesh import ErrorEnvelope, Success
from agentmesh.models import OpenAIModel
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeChatCompletionsAPI
from tests.integration.test_genai_conventions import Telemetry, telemetry
from tests.retrying import fast_retry

__all__ = ["telemetry"]  # the fixture, shared with the Claude path's tests

F = FakeChatCompletionsAPI
OPENAI = gen_ai.GenAiProviderNameValues.OPENAI.value


async def test_each_call_is_a_chat_span_with_provider_openai(
    telemetry: Telemetry, fake_chat_completions_api: FakeChatCompletionsAPI
) -> None:
    fake_chat_completions_api.enqueue(
        F.text(
            "hi",
            model="gpt-4o-mini-2024-07-18",
            prompt_tokens=120,
            cached_tokens=100,
            completion_tokens=7,
        )
    )
    async with OpenAIModel(
        "gpt-4o-mini", api_key="sk-test", base_url=fake_chat_completions_api.base_url
    ) as gpt:
        outcome = await LLMSubagent("a", gpt).run("hi")
    assert isinstance(outcome, Success)
    [span] = telemetry.named("chat gpt-4o-mini")
    assert span.kind is SpanKind.CLIENT
    attributes = span.attributes or {}
    assert attributes[gen_ai.GEN_AI_PROVIDER_NAME] == OPENAI
    assert attributes[gen_ai.GEN_AI_REQUEST_MODEL] == "gpt-4o-mini"
    assert attributes[gen_ai.GEN_AI_RESPONSE_MODEL] == "gpt-4o-mini-2024-07-18"
    # Input counts every prompt token, the cached ones included, as OpenAI's prompt_tokens.
    assert attributes[gen_ai.GEN_AI_USAGE_INPUT_TOKENS] == 120
    assert attributes[gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 100
    assert attributes[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS] == 7
    assert attributes[gen_ai.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)


async def test_a_failed_call_has_error_type_and_status_error(
    telemetry: Telemetry, fake_chat_completions_api: FakeChatCompletionsAPI
) -> None:
    fake_chat_completions_api.enqueue(F.error(400, code="context_length_exceeded"))
    async with OpenAIModel(
        "gpt-4o-mini", api_key="sk-test", base_url=fake_chat_completions_api.base_url
    ) as gpt:
        outcome = await LLMSubagent("a", gpt, retry=fast_retry(attempts=1)).run("hi")
    assert isinstance(outcome, ErrorEnvelope)
    [span] = telemetry.named("chat gpt-4o-mini")
    assert span.status.status_code is StatusCode.ERROR
