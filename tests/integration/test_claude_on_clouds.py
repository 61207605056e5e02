"""Claude on Amazon Bedrock and Google Vertex AI: `AnthropicModel` over the SDK's
`AsyncAnthropicBedrock` (signed with AWS SigV4 by botocore) and `AsyncAnthropicVertex`
(a Google access token), against the fake's Bedrock and Vertex routes on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest

from agentmesh import ErrorCategory, ErrorEnvelope, Success, tool
from agentmesh.classify import classify
from agentmesh.models import AnthropicModel
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeMessagesAPI, RecordingSleep
from tests.retrying import fast_retry

F = FakeMessagesAPI
BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
VERTEX_MODEL = "claude-sonnet-4-5@20250929"
ACCESS_KEY = "AKIDFAKEEXAMPLE0001"
HI: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]


@pytest.fixture
def aws_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Credentials from the environment only: no profile, no instance metadata."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret-key")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture
async def bedrock(
    fake_messages_api: FakeMessagesAPI, aws_environment: None
) -> AsyncIterator[AnthropicModel]:
    client = anthropic.AsyncAnthropicBedrock(
        aws_region="us-east-1", base_url=fake_messages_api.base_url
    )
    async with client, AnthropicModel(BEDROCK_MODEL, client=client, timeout=5) as claude:
        yield claude


@pytest.fixture
async def vertex(fake_messages_api: FakeMessagesAPI) -> AsyncIterator[AnthropicModel]:
    client = anthropic.AsyncAnthropicVertex(
        region="us-east5",
        project_id="fake-project",
        access_token="ya29.fake-token",
        base_url=f"{fake_messages_api.base_url}/v1",
    )
    async with client, AnthropicModel(VERTEX_MODEL, client=client, timeout=5) as claude:
        yield claude


async def envelope_of(model: AnthropicModel) -> ErrorEnvelope:
    """The envelope of the one failed call `model` makes."""
    with pytest.raises(anthropic.APIStatusError) as caught:
        await model.create(messages=HI)
    return classify(caught.value, source="claude", attempted_query="hi", attempts=1)


class TestBedrock:
    async def test_a_signed_call_reaches_the_model_s_invoke_path(
        self, fake_messages_api: FakeMessagesAPI, bedrock: AnthropicModel
    ) -> None:
        """SigV4 with the environment's keys; the model id in the path, not the body."""
        fake_messages_api.enqueue(F.text("hello from Bedrock"))
        response = await bedrock.create(messages=HI)
        assert response.content[0].model_dump()["text"] == "hello from Bedrock"
        (request,) = fake_messages_api.requests
        assert request.path == f"/model/{BEDROCK_MODEL}/invoke"
        assert (request.auth_scheme, request.api_key) == ("sigv4", ACCESS_KEY)
        assert "model" not in request.body
        assert "anthropic_version" in request.body  # the platforms want it in the body
        assert bedrock.provider == "aws.bedrock"
        assert bedrock.endpoint == fake_messages_api.base_url

    async def test_a_streamed_answer_arrives_in_aws_event_stream_frames(
        self, fake_messages_api: FakeMessagesAPI, aws_environment: None
    ) -> None:
        fake_messages_api.enqueue(F.tool_use("lookup", {"order_id": "#7"}, text="Checking."))
        client = anthropic.AsyncAnthropicBedrock(
            aws_region="eu-west-1", base_url=fake_messages_api.base_url
        )
        async with client:
            model = AnthropicModel(BEDROCK_MODEL, client=client, stream=True, timeout=5)
            response = await model.create(messages=HI)
        assert response.stop_reason == "tool_use"
        assert [block.type for block in response.content] == ["text", "tool_use"]
        assert fake_messages_api.requests[0].path.endswith("/invoke-with-response-stream")

    async def test_a_tool_loop_runs_on_bedrock_with_the_sdk_retries_off(
        self, fake_messages_api: FakeMessagesAPI, bedrock: AnthropicModel
    ) -> None:
        """One throttled request, one retry by agentmesh, then the tool loop."""

        @tool(idempotent=True)
        async def lookup(order_id: str) -> dict[str, str]:
            return {"order": order_id, "status": "shipped"}

        fake_messages_api.enqueue(
            F.bedrock_error("ThrottlingException"),
            F.tool_use("lookup", {"order_id": "#12345"}, id="toolu_1"),
            F.text("It shipped."),
        )
        sleep = RecordingSleep()
        agent = LLMSubagent("support", bedrock, tools=[lookup], retry=fast_retry(sleep))
        outcome = await agent.run("where is #12345?")
        assert isinstance(outcome, Success)
        assert outcome.data == "It shipped."
        assert fake_messages_api.request_count == 3
        assert len(sleep.delays) == 1


class TestBedrockErrors:
    async def test_throttling_is_transient_rate_limited(
        self, fake_messages_api: FakeMessagesAPI, bedrock: AnthropicModel
    ) -> None:
        fake_messages_api.enqueue(F.bedrock_error("ThrottlingException"))
        envelope = await envelope_of(bedrock)
        assert (envelope.error_category, envelope.error_type) == (
            ErrorCategory.TRANSIENT,
            "rate_limited",
        )
        assert envelope.is_retryable
        assert envelope.message.startswith("Too many requests")

    async def test_a_throttled_stream_is_transient_rate_limited(
        self, fake_messages_api: FakeMessagesAPI, aws_environment: None
    ) -> None:
        """An exception frame after the stream began: the same row."""
        fake_messages_api.enqueue(
            F.stream_error(after_events=2, type="throttlingException", message="Slow down")
        )
        client = anthropic.AsyncAnthropicBedrock(
            aws_region="us-east-1", base_url=fake_messages_api.base_url
        )
        async with client:
            model = AnthropicModel(BEDROCK_MODEL, client=client, stream=True, timeout=5)
            envelope = await envelope_of(model)
        assert (envelope.error_type, envelope.is_retryable) == ("rate_limited", True)

    @pytest.mark.parametrize("exception", ["ServiceUnavailableException", "ModelNotReadyException"])
    async def test_unavailable_and_not_ready_are_transient_unavailable(
        self, fake_messages_api: FakeMessagesAPI, bedrock: AnthropicModel, exception: str
    ) -> None:
        fake_messages_api.enqueue(F.bedrock_error(exception))
        envelope = await envelope_of(bedrock)
        assert (envelope.error_category, envelope.error_type) == (
            ErrorCategory.TRANSIENT,
            "unavailable",
        )
        assert exception in (envelope.details or "")

    @pytest.mark.parametrize(
        ("exception", "error_type"),
        [
            ("ModelErrorException", "server_error"),
            ("InternalServerException", "server_error"),
            ("ModelTimeoutException", "timeout"),
        ],
    )
    async def test_model_and_server_errors_are_transient(
        self,
        fake_messages_api: FakeMessagesAPI,
        bedrock: AnthropicModel,
        exception: str,
        error_type: str,
    ) -> None:
        fake_messages_api.enqueue(F.bedrock_error(exception))
        envelope = await envelope_of(bedrock)
        assert (envelope.error_type, envelope.is_retryable) == (error_type, True)

    @pytest.mark.parametrize(
        ("exception", "message"),
        [
            ("ValidationException", "Input is too long for requested model."),
            ("ModelErrorException", "prompt is too long: 210000 tokens > 200000 maximum"),
        ],
    )
    async def test_input_too_long_is_validation_context_too_long(
        self,
        fake_messages_api: FakeMessagesAPI,
        bedrock: AnthropicModel,
        exception: str,
        message: str,
    ) -> None:
        fake_messages_api.enqueue(F.bedrock_error(exception, message))
        envelope = await envelope_of(bedrock)
        assert (envelope.error_category, envelope.error_type) == (
            ErrorCategory.VALIDATION,
            "context_too_long",
        )
        assert not envelope.is_retryable

    async def test_another_validation_error_keeps_its_message(
        self, fake_messages_api: FakeMessagesAPI, bedrock: AnthropicModel
    ) -> None:
        message = "messages.0.content: Field required"
        fake_messages_api.enqueue(F.bedrock_error("ValidationException", message))
        envelope = await envelope_of(bedrock)
        assert (envelope.error_type, envelope.message) == ("invalid_request", message)

    async def test_a_spent_daily_quota_is_business_quota_exhausted(
        self, fake_messages_api: FakeMessagesAPI, bedrock: AnthropicModel
    ) -> None:
        fake_messages_api.enqueue(F.bedrock_error("ServiceQuotaExceededException"))
        envelope = await envelope_of(bedrock)
        assert (envelope.error_category, envelope.error_type) == (
            ErrorCategory.BUSINESS,
            "quota_exhausted",
        )
        assert not envelope.is_retryable

    @pytest.mark.parametrize(
        ("exception", "error_type"),
        [
            ("AccessDeniedException", "permission_denied"),
            ("UnrecognizedClientException", "authentication_failed"),
        ],
    )
    async def test_access_errors_are_permission_never_retried(
        self,
        fake_messages_api: FakeMessagesAPI,
        bedrock: AnthropicModel,
        exception: str,
        error_type: str,
    ) -> None:
        fake_messages_api.enqueue(F.bedrock_error(exception))
        envelope = await envelope_of(bedrock)
        assert (envelope.error_category, envelope.error_type) == (
            ErrorCategory.PERMISSION,
            error_type,
        )
        assert not envelope.is_retryable


class TestCrowdedBedrock:
    async def test_an_overload_storm_is_bedrock_s_service_unavailable(
        self, fake_messages_api: FakeMessagesAPI, bedrock: AnthropicModel
    ) -> None:
        """The fake's crowded-server modes answer in Bedrock's shape on its paths."""
        fake_messages_api.overload(1)
        envelope = await envelope_of(bedrock)
        assert (envelope.error_type, envelope.is_retryable) == ("unavailable", True)
        assert "ServiceUnavailableException" in (envelope.details or "")

    async def test_a_rate_limit_is_throttling_with_the_wait(
        self, fake_messages_api: FakeMessagesAPI, bedrock: AnthropicModel
    ) -> None:
        fake_messages_api.rate_limit(requests_per_minute=1)
        fake_messages_api.enqueue(F.text("first"))
        await bedrock.create(messages=HI)
        envelope = await envelope_of(bedrock)
        assert (envelope.error_type, envelope.is_retryable) == ("rate_limited", True)
        assert envelope.retry_after is not None
        assert envelope.retry_after > 0

    async def test_a_spent_quota_is_service_quota_exceeded(
        self, fake_messages_api: FakeMessagesAPI, bedrock: AnthropicModel
    ) -> None:
        fake_messages_api.exhaust_quota()
        envelope = await envelope_of(bedrock)
        assert (envelope.error_type, envelope.is_retryable) == ("quota_exhausted", False)


class TestVertex:
    async def test_a_call_reaches_the_model_s_raw_predict_path(
        self, fake_messages_api: FakeMessagesAPI, vertex: AnthropicModel
    ) -> None:
        fake_messages_api.enqueue(F.text("hello from Vertex"))
        response = await vertex.create(messages=HI)
        assert response.content[0].model_dump()["text"] == "hello from Vertex"
        (request,) = fake_messages_api.requests
        assert request.path == (
            "/v1/projects/fake-project/locations/us-east5/publishers/anthropic/"
            f"models/{VERTEX_MODEL}:rawPredict"
        )
        assert (request.auth_scheme, request.api_key) == ("bearer", "ya29.fake-token")
        assert "anthropic_version" in request.body
        assert vertex.provider == "gcp.vertex_ai"

    async def test_a_streamed_answer_uses_stream_raw_predict(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        fake_messages_api.enqueue(F.text("streamed from Vertex"))
        client = anthropic.AsyncAnthropicVertex(
            region="global",
            project_id="fake-project",
            access_token="ya29.fake-token",
            base_url=f"{fake_messages_api.base_url}/v1",
        )
        async with client:
            model = AnthropicModel(VERTEX_MODEL, client=client, stream=True, timeout=5)
            response = await model.create(messages=HI)
        assert response.content[0].model_dump()["text"] == "streamed from Vertex"
        assert fake_messages_api.requests[0].path.endswith(":streamRawPredict")


class TestVertexErrors:
    async def test_a_quota_429_is_transient_rate_limited(
        self, fake_messages_api: FakeMessagesAPI, vertex: AnthropicModel
    ) -> None:
        """Vertex's per-minute quota: a Google RESOURCE_EXHAUSTED error."""
        fake_messages_api.enqueue(F.vertex_error(429))
        envelope = await envelope_of(vertex)
        assert (envelope.error_type, envelope.is_retryable) == ("rate_limited", True)
        assert envelope.message.startswith("Quota exceeded")

    async def test_unavailable_is_transient_unavailable(
        self, fake_messages_api: FakeMessagesAPI, vertex: AnthropicModel
    ) -> None:
        fake_messages_api.enqueue(F.vertex_error(503))
        envelope = await envelope_of(vertex)
        assert (envelope.error_type, envelope.is_retryable) == ("unavailable", True)

    async def test_claude_s_overload_passes_through_as_overloaded(
        self, fake_messages_api: FakeMessagesAPI, vertex: AnthropicModel
    ) -> None:
        fake_messages_api.enqueue(F.error(529))
        envelope = await envelope_of(vertex)
        assert (envelope.error_type, envelope.is_retryable) == ("overloaded", True)

    async def test_a_prompt_too_long_is_validation_context_too_long(
        self, fake_messages_api: FakeMessagesAPI, vertex: AnthropicModel
    ) -> None:
        fake_messages_api.enqueue(
            F.error(400, message="prompt is too long: 208310 tokens > 200000 maximum")
        )
        envelope = await envelope_of(vertex)
        assert envelope.error_type == "context_too_long"
