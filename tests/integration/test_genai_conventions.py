"""GenAI semantic conventions: chat, execute_tool and invoke_agent spans, the token metric.

Attribute names come from the `opentelemetry-semantic-conventions` package, so a name
the library spells differently from the conventions fails here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
from opentelemetry.semconv.attributes import error_attributes
from opentelemetry.trace import SpanKind, StatusCode

from agentmesh import ErrorEnvelope, PermissionDenied, Success, configure_tracing, tool
from agentmesh.models import AnthropicModel
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeMessagesAPI
from tests.retrying import fast_retry

API_KEY = "sk-ant-test-0123456789abcdef"
F = FakeMessagesAPI
CHAT = gen_ai.GenAiOperationNameValues.CHAT.value
EXECUTE_TOOL = gen_ai.GenAiOperationNameValues.EXECUTE_TOOL.value
INVOKE_AGENT = gen_ai.GenAiOperationNameValues.INVOKE_AGENT.value
ANTHROPIC = gen_ai.GenAiProviderNameValues.ANTHROPIC.value


@dataclass
class Telemetry:
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans.get_finished_spans() if s.name == name]

    def token_points(self) -> list[HistogramDataPoint]:
        data = self.metrics.get_metrics_data()
        if data is None:
            return []  # nothing was recorded at all
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == gen_ai_metrics.GEN_AI_CLIENT_TOKEN_USAGE
            for point in metric.data.data_points  # type: ignore[union-attr]
            if isinstance(point, HistogramDataPoint)
        ]


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    configure_tracing(tracer_provider=tracer_provider, meter_provider=meter_provider)
    yield Telemetry(exporter, reader)
    configure_tracing(enabled=False)
    tracer_provider.shutdown()
    meter_provider.shutdown()


@pytest.fixture
async def model(fake_messages_api: FakeMessagesAPI) -> AsyncIterator[AnthropicModel]:
    async with AnthropicModel(
        "claude-test", api_key=API_KEY, base_url=fake_messages_api.base_url, timeout=5
    ) as claude:
        yield claude


@tool(idempotent=True)
async def lookup(order_id: str) -> dict[str, str]:
    """Look an order up."""
    if order_id == "#secret":
        raise PermissionDenied("not your order")
    return {"order": order_id, "status": "shipped"}


def tool_loop(api: FakeMessagesAPI, order_id: str = "#1") -> None:
    api.enqueue(
        F.tool_use(
            "lookup",
            {"order_id": order_id},
            id="toolu_1",
            model="claude-test-20260101",
            input_tokens=20,
            output_tokens=7,
            cache_read_input_tokens=100,
        ),
        F.text("It shipped.", model="claude-test-20260101", input_tokens=30, output_tokens=4),
    )


class TestSpans:
    async def test_each_model_call_is_a_chat_span(
        self, telemetry: Telemetry, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """chat {model}: a client span with provider, models, tokens and finish reason."""
        tool_loop(fake_messages_api)
        outcome = await LLMSubagent("support", model, tools=[lookup]).run("where is #1?")
        assert isinstance(outcome, Success)
        first, second = telemetry.named("chat claude-test")
        assert first.kind is SpanKind.CLIENT
        attributes = first.attributes or {}
        assert attributes[gen_ai.GEN_AI_OPERATION_NAME] == CHAT
        assert attributes[gen_ai.GEN_AI_PROVIDER_NAME] == ANTHROPIC
        assert attributes[gen_ai.GEN_AI_REQUEST_MODEL] == "claude-test"
        assert attributes[gen_ai.GEN_AI_RESPONSE_MODEL] == "claude-test-20260101"
        # Input counts every prompt token, the ones read from the cache included.
        assert attributes[gen_ai.GEN_AI_USAGE_INPUT_TOKENS] == 120
        assert attributes[gen_ai.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 100
        assert attributes[gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS] == 7
        assert attributes[gen_ai.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_use",)
        assert (second.attributes or {})[gen_ai.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)
        assert first.status.status_code is StatusCode.UNSET

    async def test_each_tool_call_is_an_execute_tool_span_with_the_call_id(
        self, telemetry: Telemetry, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """execute_tool {name} carries the tool's name and the model's tool_use id."""
        tool_loop(fake_messages_api)
        await LLMSubagent("support", model, tools=[lookup]).run("where is #1?")
        [span] = telemetry.named("execute_tool lookup")
        attributes = span.attributes or {}
        assert attributes[gen_ai.GEN_AI_OPERATION_NAME] == EXECUTE_TOOL
        assert attributes[gen_ai.GEN_AI_TOOL_NAME] == "lookup"
        assert attributes[gen_ai.GEN_AI_TOOL_CALL_ID] == "toolu_1"
        [inner] = telemetry.named("agentmesh.tool")
        assert inner.parent is not None
        assert inner.parent.span_id == span.context.span_id

    async def test_each_subagent_run_is_an_invoke_agent_span_around_its_calls(
        self, telemetry: Telemetry, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """invoke_agent {name} names the agent; its model and tool calls are inside it."""
        tool_loop(fake_messages_api)
        await LLMSubagent("support", model, tools=[lookup]).run("where is #1?")
        [agent] = telemetry.named("invoke_agent support")
        attributes = agent.attributes or {}
        assert attributes[gen_ai.GEN_AI_OPERATION_NAME] == INVOKE_AGENT
        assert attributes[gen_ai.GEN_AI_AGENT_NAME] == "support"
        inner = [*telemetry.named("chat claude-test"), *telemetry.named("execute_tool lookup")]
        trace_ids = {s.context.trace_id for s in inner}
        assert trace_ids == {agent.context.trace_id}
        assert all(s.start_time >= agent.start_time and s.end_time <= agent.end_time for s in inner)  # type: ignore[operator]
        assert agent.status.status_code is StatusCode.UNSET


class TestFailedAttempts:
    async def test_a_failed_model_call_has_error_type_and_status_error(
        self, telemetry: Telemetry, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """A 529 marks its chat span and its attempt span failed; the retry's are not."""
        fake_messages_api.enqueue(F.error(529), F.text("done"))
        agent = LLMSubagent("support", model, retry=fast_retry(attempts=2))
        assert isinstance(await agent.run("hi"), Success)
        failed, answered = telemetry.named("chat claude-test")
        assert failed.status.status_code is StatusCode.ERROR
        assert (failed.attributes or {})[error_attributes.ERROR_TYPE] == "OverloadedError"
        assert answered.status.status_code is StatusCode.UNSET
        assert error_attributes.ERROR_TYPE not in (answered.attributes or {})
        attempts = [
            s
            for s in telemetry.named("agentmesh.attempt")
            if (s.attributes or {}).get("agentmesh.source") == "support/model"
        ]
        statuses = [
            (s.status.status_code, (s.attributes or {}).get("error.type")) for s in attempts
        ]
        assert statuses == [(StatusCode.ERROR, "overloaded"), (StatusCode.UNSET, None)]

    async def test_a_failed_tool_call_and_a_failed_run_have_status_error(
        self, telemetry: Telemetry, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """A denied tool marks execute_tool failed; a run ending in an envelope, invoke_agent."""
        fake_messages_api.enqueue(
            F.tool_use("lookup", {"order_id": "#secret"}, id="toolu_1"),
            F.tool_use(
                "report_failure",
                {
                    "errorCategory": "permission",
                    "errorType": "forbidden",
                    "isRetryable": False,
                    "message": "the order is not the user's",
                },
            ),
        )
        outcome = await LLMSubagent("support", model, tools=[lookup]).run("where is #secret?")
        assert isinstance(outcome, ErrorEnvelope)
        [tool_span] = telemetry.named("execute_tool lookup")
        assert tool_span.status.status_code is StatusCode.ERROR
        assert (tool_span.attributes or {})[error_attributes.ERROR_TYPE] == "permission_denied"
        [agent] = telemetry.named("invoke_agent support")
        assert agent.status.status_code is StatusCode.ERROR
        assert (agent.attributes or {})[error_attributes.ERROR_TYPE] == "forbidden"


class TestTokenMetric:
    async def test_token_usage_is_a_histogram_by_token_type(
        self, telemetry: Telemetry, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """gen_ai.client.token.usage records input and output tokens of every call."""
        tool_loop(fake_messages_api)
        await LLMSubagent("support", model, tools=[lookup]).run("where is #1?")
        points = telemetry.token_points()
        by_type = {p.attributes[gen_ai.GEN_AI_TOKEN_TYPE]: p for p in points}  # type: ignore[index]
        input_type = gen_ai.GenAiTokenTypeValues.INPUT.value
        output_type = gen_ai.GenAiTokenTypeValues.OUTPUT.value
        assert set(by_type) == {input_type, output_type}
        assert (by_type[input_type].count, by_type[input_type].sum) == (2, 150)
        assert (by_type[output_type].count, by_type[output_type].sum) == (2, 11)
        attributes = by_type[input_type].attributes or {}
        assert attributes[gen_ai.GEN_AI_OPERATION_NAME] == CHAT
        assert attributes[gen_ai.GEN_AI_PROVIDER_NAME] == ANTHROPIC
        assert attributes[gen_ai.GEN_AI_REQUEST_MODEL] == "claude-test"
        assert attributes[gen_ai.GEN_AI_RESPONSE_MODEL] == "claude-test-20260101"

    async def test_unusable_token_counts_are_not_recorded_as_zero(
        self, telemetry: Telemetry, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """An answer with a negative count gives no token attributes and no metric point."""
        fake_messages_api.enqueue(F.text("hi", usage={"input_tokens": -5, "output_tokens": 3}))
        await LLMSubagent("support", model).run("q")
        [chat] = telemetry.named("chat claude-test")
        attributes = chat.attributes or {}
        assert gen_ai.GEN_AI_USAGE_INPUT_TOKENS not in attributes
        assert attributes["agentmesh.usage.unusable"] == ("input_tokens=-5",)
        assert telemetry.token_points() == []


class TestClaudeOnClouds:
    async def test_a_bedrock_call_names_aws_bedrock_as_its_provider(
        self,
        telemetry: Telemetry,
        fake_messages_api: FakeMessagesAPI,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """gen_ai.provider.name is the platform that served Claude."""
        import anthropic

        monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key-fake")
        fake_messages_api.enqueue(F.text("hi"))
        client = anthropic.AsyncAnthropicBedrock(
            aws_region="us-east-1", base_url=fake_messages_api.base_url
        )
        async with client:
            await AnthropicModel("anthropic.claude-test", client=client).create(
                messages=[{"role": "user", "content": "hi"}]
            )
        (span,) = telemetry.named("chat anthropic.claude-test")
        assert span.attributes is not None
        bedrock = gen_ai.GenAiProviderNameValues.AWS_BEDROCK.value
        assert span.attributes[gen_ai.GEN_AI_PROVIDER_NAME] == bedrock
