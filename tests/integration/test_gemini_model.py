"""The Gemini path: the real google-genai SDK against FakeGeminiAPI on loopback."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from google import genai
from pydantic import BaseModel

from agentmesh import ErrorCategory, ErrorEnvelope, Success, configure_tracing, tool
from agentmesh.models import (
    AnthropicModel,
    FallbackModel,
    GeminiModel,
    ModelResponse,
    ToolUseBlock,
)
from agentmesh.subagents import SUBMIT_RESULT, LLMSubagent
from agentmesh.testing import FakeGeminiAPI, FakeMessagesAPI, RecordingSleep
from tests.retrying import fast_retry

API_KEY = "gemini-test-key"
FLASH = "gemini-2.5-flash"  # priced by the default table: $0.30 in, $2.50 out per million
F = FakeGeminiAPI


@pytest.fixture
async def gemini(fake_gemini_api: FakeGeminiAPI) -> AsyncIterator[GeminiModel]:
    async with GeminiModel(
        FLASH, api_key=API_KEY, base_url=fake_gemini_api.base_url, timeout=5
    ) as model:
        yield model


@tool(idempotent=True)
async def lookup(query: str) -> list[str]:
    """Look a query up."""
    return [f"found {query}"]


class Book(BaseModel):
    title: str
    year: int


def function_responses(contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p["functionResponse"] for c in contents for p in c["parts"] if "functionResponse" in p]


class TestTranslation:
    async def test_the_request_is_the_gemini_wire_format(
        self, fake_gemini_api: FakeGeminiAPI, gemini: GeminiModel
    ) -> None:
        """System, tools (JSON Schema as is), tool choice and max tokens, as Gemini spells them."""
        fake_gemini_api.enqueue(F.text("hi"))
        tools = [
            {
                "name": "lookup",
                "description": "Look a query up.",
                "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}},
            }
        ]
        await gemini.create(
            messages=[{"role": "user", "content": "hello"}],
            system="be brief",
            tools=tools,
            tool_choice={"type": "tool", "name": "lookup"},
            max_tokens=99,
        )
        [request] = fake_gemini_api.requests
        assert request.path == f"/v1/models/{FLASH}:generateContent"
        assert request.api_key == API_KEY
        assert request.system == "be brief"
        assert request.contents == [{"role": "user", "parts": [{"text": "hello"}]}]
        [declaration] = request.function_declarations
        # The SDK sends this field under its proto name; the API takes either spelling.
        schema = declaration.get("parametersJsonSchema", declaration.get("parameters_json_schema"))
        assert schema == tools[0]["input_schema"]
        assert request.body["toolConfig"] == {
            "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["lookup"]}
        }
        assert request.body["generationConfig"]["maxOutputTokens"] == 99

    async def test_a_function_call_is_a_tool_use_with_a_stable_id(
        self, fake_gemini_api: FakeGeminiAPI, gemini: GeminiModel
    ) -> None:
        """No id from the API: one made from the answer's id, the same for the same answer."""
        fake_gemini_api.enqueue(F.tool_calls(F.function_call("lookup", {"query": "x"}), text="ok"))
        response = await gemini.create(messages=[{"role": "user", "content": "hi"}])
        assert response.stop_reason == "tool_use"
        assert response.text == "ok"
        [call] = response.tool_uses
        assert (call.name, call.input) == ("lookup", {"query": "x"})
        assert call.id == "gemini_call_resp-000000_1"

    async def test_an_id_the_api_gives_is_kept_and_sent_back(
        self, fake_gemini_api: FakeGeminiAPI, gemini: GeminiModel
    ) -> None:
        """The call's own id, and its thought signature, go back with the function response."""
        call = F.function_call("lookup", {"query": "x"}, id="call-7", thought_signature="c2ln")
        fake_gemini_api.enqueue(F.tool_calls(call), F.text("done"))
        first = await gemini.create(messages=[{"role": "user", "content": "hi"}])
        assert first.tool_uses[0].id == "call-7"
        result = {"type": "tool_result", "tool_use_id": "call-7", "content": "found x"}
        history = [
            {"role": "user", "content": "hi"},
            first.to_message(),
            {"role": "user", "content": [result]},
        ]
        await gemini.create(messages=history)
        contents = fake_gemini_api.requests[1].contents
        assert contents[1]["parts"][0]["thoughtSignature"] == "c2ln"
        assert contents[1]["parts"][0]["functionCall"]["id"] == "call-7"
        assert function_responses(contents) == [
            {"id": "call-7", "name": "lookup", "response": {"output": "found x"}}
        ]


class TestToolLoop:
    async def test_the_subagent_calls_the_tool_and_answers(
        self, fake_gemini_api: FakeGeminiAPI, gemini: GeminiModel
    ) -> None:
        """function_call -> our tool -> function_response named after the call -> answer."""
        fake_gemini_api.enqueue(F.tool_call("lookup", {"query": "dune"}), F.text("Dune, 1965"))
        outcome = await LLMSubagent("a", gemini, tools=[lookup]).run("find dune")
        assert isinstance(outcome, Success)
        assert outcome.data == "Dune, 1965"
        [answer] = function_responses(fake_gemini_api.requests[1].contents)
        assert answer["name"] == "lookup"
        assert "found dune" in answer["response"]["output"]
        assert "id" not in answer  # a made id never goes to the API


class TestTypedOutput:
    async def test_an_invalid_result_goes_back_with_the_errors_then_is_corrected(
        self, fake_gemini_api: FakeGeminiAPI, gemini: GeminiModel
    ) -> None:
        """The output_type contract holds on Gemini: errors named in an error response."""
        fake_gemini_api.enqueue(
            F.tool_call(SUBMIT_RESULT, {"result": {"title": "Dune", "year": "soon"}}),
            F.tool_call(SUBMIT_RESULT, {"result": {"title": "Dune", "year": 1965}}),
        )
        outcome = await LLMSubagent("books", gemini, output_type=Book).run("find Dune")
        assert isinstance(outcome, Success)
        assert outcome.data == Book(title="Dune", year=1965)
        [answer] = function_responses(fake_gemini_api.requests[1].contents)
        assert answer["name"] == SUBMIT_RESULT
        envelope = json.loads(answer["response"]["error"])
        assert envelope["errorType"] == "invalid_output"
        assert "result.year" in envelope["message"]


class TestUsage:
    async def test_cached_and_thought_tokens_in_the_usage_shape(
        self, fake_gemini_api: FakeGeminiAPI, gemini: GeminiModel
    ) -> None:
        """input excludes cached reads (tool-use prompt tokens count), output includes thoughts."""
        fake_gemini_api.enqueue(
            F.text(
                "hi",
                prompt_tokens=1000,
                cached_tokens=400,
                tool_use_prompt_tokens=50,
                output_tokens=200,
                thoughts_tokens=300,
            )
        )
        usage = (await gemini.create(messages=[{"role": "user", "content": "hi"}])).usage
        assert usage.input_tokens == 650
        assert usage.cache_read_input_tokens == 400
        assert usage.output_tokens == 500
        assert usage.reasoning_tokens == 300

    async def test_the_outcome_carries_tokens_and_the_cost(
        self, fake_gemini_api: FakeGeminiAPI, gemini: GeminiModel
    ) -> None:
        """gemini-2.5-flash is priced by DEFAULT_PRICES: input, cached input and output."""
        fake_gemini_api.enqueue(
            F.text("hi", prompt_tokens=1000, cached_tokens=200, output_tokens=100)
        )
        outcome = await LLMSubagent("a", gemini).run("hi")
        assert outcome.usage is not None
        assert outcome.usage.input_tokens == 800
        assert outcome.usage.cost_usd == pytest.approx((800 * 0.30 + 200 * 0.03 + 100 * 2.5) / 1e6)
        assert outcome.usage.by_model[0].model == FLASH


class TestStreaming:
    async def test_a_streamed_answer_is_the_same_response(
        self, fake_gemini_api: FakeGeminiAPI
    ) -> None:
        """Text pieces joined, the function call kept, usage from the last chunk."""
        fake_gemini_api.enqueue(
            F.tool_calls(
                F.function_call("lookup", {"query": "x"}),
                text="a text longer than one chunk",
                thoughts_tokens=7,
            )
        )
        async with GeminiModel(
            FLASH, api_key=API_KEY, base_url=fake_gemini_api.base_url, stream=True
        ) as model:
            response = await model.create(messages=[{"role": "user", "content": "hi"}])
        assert fake_gemini_api.requests[0].stream
        assert response.text == "a text longer than one chunk"
        assert [b.name for b in response.tool_uses] == ["lookup"]
        assert response.stop_reason == "tool_use"
        assert response.usage.reasoning_tokens == 7

    async def test_a_stream_that_ends_without_a_finish_reason_is_transient(
        self, fake_gemini_api: FakeGeminiAPI
    ) -> None:
        """A dropped stream is an unfinished answer: invalid_response, retried, then fine."""
        fake_gemini_api.enqueue(
            F.stream_cut(F.text("a text longer than one chunk"), after_chunks=2), F.text("whole")
        )
        async with GeminiModel(
            FLASH, api_key=API_KEY, base_url=fake_gemini_api.base_url, stream=True
        ) as model:
            outcome = await LLMSubagent("a", model, retry=fast_retry(attempts=2)).run("hi")
        assert isinstance(outcome, Success)
        assert outcome.data == "whole"
        assert fake_gemini_api.request_count == 2


class TestSafety:
    async def test_a_safety_stop_is_a_refusal_with_the_reason(
        self, fake_gemini_api: FakeGeminiAPI, gemini: GeminiModel
    ) -> None:
        """finish_reason SAFETY: stop_reason refusal, the task business/refused, asked once."""
        fake_gemini_api.enqueue(F.safety_stop("SAFETY"))
        outcome = await LLMSubagent("a", gemini, retry=fast_retry(attempts=3)).run("hi")
        assert isinstance(outcome, ErrorEnvelope)
        assert (outcome.error_category, outcome.error_type) == (ErrorCategory.BUSINESS, "refused")
        assert "finish_reason SAFETY" in outcome.message
        assert fake_gemini_api.request_count == 1

    async def test_recitation_is_a_refusal_too(
        self, fake_gemini_api: FakeGeminiAPI, gemini: GeminiModel
    ) -> None:
        fake_gemini_api.enqueue(F.safety_stop("RECITATION", partial="It was a"))
        response = await gemini.create(messages=[{"role": "user", "content": "hi"}])
        assert response.stop_reason == "refusal"
        assert "RECITATION" in response.text

    async def test_a_stream_stopped_for_safety_is_a_refusal(
        self, fake_gemini_api: FakeGeminiAPI
    ) -> None:
        """The text streamed before the stop is not the answer: the reason is."""
        fake_gemini_api.enqueue(F.safety_stop("SPII", partial="the number you asked for is"))
        async with GeminiModel(
            FLASH, api_key=API_KEY, base_url=fake_gemini_api.base_url, stream=True
        ) as model:
            response = await model.create(messages=[{"role": "user", "content": "hi"}])
        assert response.stop_reason == "refusal"
        assert response.text == "blocked by the provider's safety filter (finish_reason SPII)"

    @pytest.mark.parametrize("stream", [False, True])
    async def test_a_blocked_prompt_is_business_refused(
        self, fake_gemini_api: FakeGeminiAPI, stream: bool
    ) -> None:
        """prompt_feedback.block_reason: the request is refused, never retried."""
        fake_gemini_api.enqueue(F.blocked_prompt("PROHIBITED_CONTENT"))
        gemini = GeminiModel(
            FLASH, api_key=API_KEY, base_url=fake_gemini_api.base_url, stream=stream
        )
        async with gemini:
            outcome = await LLMSubagent("a", gemini, retry=fast_retry(attempts=3)).run("hi")
        assert isinstance(outcome, ErrorEnvelope)
        assert (outcome.error_category, outcome.error_type) == (ErrorCategory.BUSINESS, "refused")
        assert "PROHIBITED_CONTENT" in outcome.message
        assert fake_gemini_api.request_count == 1


class TestOneOwnerOfRetries:
    async def test_a_client_built_with_retries_still_makes_one_request(
        self, fake_gemini_api: FakeGeminiAPI
    ) -> None:
        """The SDK's HttpRetryOptions are overridden per call: agentmesh retries, once each."""
        client = genai.Client(
            api_key=API_KEY,
            http_options={"base_url": fake_gemini_api.base_url, "retry_options": {"attempts": 5}},
        )
        fake_gemini_api.overload(2)
        fake_gemini_api.enqueue(F.text("ok"))
        sleep = RecordingSleep()
        model = GeminiModel(FLASH, client=client, base_url=fake_gemini_api.base_url)
        outcome = await LLMSubagent("a", model, retry=fast_retry(sleep, attempts=4)).run("hi")
        assert isinstance(outcome, Success)
        assert fake_gemini_api.request_count == 3
        assert sleep.delays == [0.1, 0.2]
        await client.aio.aclose()
        client.close()


class TestCrossProviderFallback:
    async def test_a_529_storm_on_claude_fails_over_to_gemini_and_back(
        self, fake_gemini_api: FakeGeminiAPI, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """Both providers' overloads are the same transient envelope: either way, one
        FallbackModel chain goes on to the other provider."""
        fake_messages_api.handler = lambda request: FakeMessagesAPI.error(529)
        fake_gemini_api.handler = lambda request: F.text("from gemini")
        async with (
            AnthropicModel(
                "claude-haiku-4-5", api_key="sk-ant-test", base_url=fake_messages_api.base_url
            ) as haiku,
            GeminiModel(FLASH, api_key=API_KEY, base_url=fake_gemini_api.base_url) as flash,
        ):
            retry = fast_retry(attempts=2)
            first = await LLMSubagent("a", FallbackModel(haiku, flash), retry=retry).run("hi")
            fake_messages_api.handler = lambda request: FakeMessagesAPI.text("from claude")
            fake_gemini_api.handler = lambda request: F.error(503)
            second = await LLMSubagent("b", FallbackModel(flash, haiku), retry=retry).run("hi")
        assert isinstance(first, Success)
        assert isinstance(second, Success)
        assert (first.data, second.data) == ("from gemini", "from claude")
        assert first.usage is not None
        assert second.usage is not None
        assert [(f.model, f.error_type) for f in first.usage.failovers] == [
            ("claude-haiku-4-5", "overloaded")
        ]
        assert [(f.model, f.error_type) for f in second.usage.failovers] == [(FLASH, "overloaded")]


class TestTracing:
    async def test_a_chat_span_in_the_genai_conventions(
        self, fake_gemini_api: FakeGeminiAPI, gemini: GeminiModel
    ) -> None:
        """Provider gcp.gemini; every prompt token is input there, cached ones included."""
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        configure_tracing(tracer_provider=provider)
        try:
            fake_gemini_api.enqueue(F.text("hi", prompt_tokens=100, cached_tokens=40))
            await gemini.create(messages=[{"role": "user", "content": "hi"}])
        finally:
            configure_tracing(enabled=False)
            provider.shutdown()
        [span] = [s for s in exporter.get_finished_spans() if s.name == f"chat {FLASH}"]
        attributes = dict(span.attributes or {})
        assert attributes[gen_ai.GEN_AI_PROVIDER_NAME] == (
            gen_ai.GenAiProviderNameValues.GCP_GEMINI.value
        )
        assert attributes[gen_ai.GEN_AI_USAGE_INPUT_TOKENS] == 100
        assert attributes[gen_ai.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)


class TestLifecycle:
    def test_importing_agentmesh_does_not_import_the_sdk(self) -> None:
        """google.genai costs its import only when a GeminiModel is used."""
        code = (
            "import sys, agentmesh, agentmesh.models, agentmesh.testing;"
            "assert 'google.genai' not in sys.modules, 'google.genai imported'"
        )
        subprocess.run([sys.executable, "-c", code], check=True)

    def test_endpoint_and_repr(self) -> None:
        model = GeminiModel(FLASH, base_url="http://127.0.0.1:9/", timeout=3)
        assert model.endpoint == "http://127.0.0.1:9"
        assert GeminiModel(FLASH).endpoint == "https://generativelanguage.googleapis.com"
        assert repr(model) == "GeminiModel('gemini-2.5-flash', timeout=3.0, stream=False)"

    async def test_no_key_is_a_permission_failure(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """No api_key and none in the environment: authentication_failed, never retried."""
        monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
        monkeypatch.delenv("GEMINI_API_KEY", raising=False)
        outcome = await LLMSubagent("a", GeminiModel(FLASH)).run("hi")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "authentication_failed"

    def test_a_response_round_trips_as_a_message(self) -> None:
        """The made id is a plain ToolUseBlock id: the conversation stays provider-neutral."""
        response = ModelResponse(content=(ToolUseBlock(id="gemini_call_r_0", name="t"),))
        assert response.to_message()["content"][0]["id"] == "gemini_call_r_0"
