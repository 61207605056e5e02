"""The Claude path: the real anthropic SDK against a fake Messages API on loopback."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import structlog

from agentmesh import (
    Coordinator,
    ErrorCategory,
    ErrorEnvelope,
    Success,
    Task,
    UsageError,
    configure_logging,
    tool,
)
from agentmesh.models import AnthropicModel
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeMessagesAPI, RecordingSleep
from tests.retrying import fast_retry

API_KEY = "sk-ant-test-0123456789abcdef"
F = FakeMessagesAPI


@pytest.fixture
async def model(fake_messages_api: FakeMessagesAPI) -> AsyncIterator[AnthropicModel]:
    async with AnthropicModel(
        "claude-test", api_key=API_KEY, base_url=fake_messages_api.base_url, timeout=5
    ) as claude:
        yield claude


class TestOneOwnerOfRetries:
    async def test_two_overloads_then_success_is_three_requests(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """The SDK's own retries are off: agentmesh's policy makes every request."""
        sleep = RecordingSleep()
        fake_messages_api.enqueue(F.error(529), F.error(529), F.text("hello"))
        outcome = await LLMSubagent("a", model, retry=fast_retry(sleep, attempts=4)).run("hi")
        assert isinstance(outcome, Success)
        assert outcome.data == "hello"
        assert fake_messages_api.request_count == 3
        assert sleep.delays == [0.1, 0.2]
        fake_messages_api.assert_authenticated(API_KEY)

    async def test_rate_limit_waits_as_the_server_asks_then_succeeds(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """retry-after is honoured: the wait is never shorter than the server asked."""
        sleep = RecordingSleep()
        fake_messages_api.enqueue(F.error(429, retry_after=2), F.text("ok"))
        outcome = await LLMSubagent("a", model, retry=fast_retry(sleep, attempts=4)).run("hi")
        assert isinstance(outcome, Success)
        assert sleep.delays == [2.0]
        assert fake_messages_api.request_count == 2

    async def test_retry_after_ms_takes_precedence(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """retry-after-ms is the more precise hint."""
        sleep = RecordingSleep()
        fake_messages_api.enqueue(F.error(529, retry_after=9, retry_after_ms=1500), F.text("ok"))
        await LLMSubagent("a", model, retry=fast_retry(sleep, attempts=4)).run("hi")
        assert sleep.delays == [1.5]

    async def test_an_hour_long_retry_after_gives_up_at_once(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """retry-after: 3600 beyond max_delay: one request, no sleep, retryAfter kept."""
        sleep = RecordingSleep()
        fake_messages_api.enqueue(F.error(429, retry_after=3600))
        outcome = await LLMSubagent("a", model, retry=fast_retry(sleep, attempts=4)).run("hi")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.retry_after == 3600
        assert sleep.delays == []
        assert fake_messages_api.request_count == 1

    @pytest.mark.parametrize(
        ("status", "category"),
        [
            (400, ErrorCategory.VALIDATION),
            (401, ErrorCategory.PERMISSION),
            (403, ErrorCategory.PERMISSION),
        ],
    )
    async def test_client_errors_are_not_retried(
        self,
        fake_messages_api: FakeMessagesAPI,
        model: AnthropicModel,
        status: int,
        category: ErrorCategory,
    ) -> None:
        """400 is validation, 401/403 permission: one request each."""
        sleep = RecordingSleep()
        fake_messages_api.enqueue(F.error(status))
        outcome = await LLMSubagent("a", model, retry=fast_retry(sleep, attempts=4)).run("hi")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is category
        assert outcome.is_retryable is False
        assert fake_messages_api.request_count == 1

    async def test_a_persistent_overload_ends_in_a_transient_envelope(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """After exactly the policy's attempts the caller gets the structured failure."""
        sleep = RecordingSleep()
        fake_messages_api.enqueue(*[F.error(529)] * 3)
        outcome = await LLMSubagent("a", model, retry=fast_retry(sleep, attempts=3)).run("hi")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.TRANSIENT
        assert outcome.error_type == "overloaded"
        assert outcome.is_retryable
        assert outcome.attempts == 3
        assert fake_messages_api.request_count == 3
        assert outcome.details is not None
        assert "request-id" in outcome.details


class TestGarbage:
    @pytest.mark.parametrize(
        "reply",
        [
            F.garbage("<html>bad gateway</html>", status=502),
            F.garbage("<html>welcome to the hotel wifi</html>", status=200),
            F.garbage('{"id": "msg_1", "type": "mess', status=200, content_type="application/json"),
        ],
        ids=["html-502", "html-200", "truncated-json"],
    )
    async def test_a_garbled_answer_is_a_transient_envelope_never_a_crash(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel, reply: Any
    ) -> None:
        """A response that cannot be read is retried like any transient failure."""
        sleep = RecordingSleep()
        fake_messages_api.enqueue(reply, reply)
        outcome = await LLMSubagent("a", model, retry=fast_retry(sleep, attempts=2)).run("hi")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.TRANSIENT
        assert fake_messages_api.request_count == 2

    async def test_an_error_in_the_middle_of_a_stream_is_retried(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """A mid-stream overload event becomes a transient envelope and the retry works."""
        sleep = RecordingSleep()
        fake_messages_api.enqueue(F.stream_error(F.text("partial answer")), F.text("full answer"))
        async with AnthropicModel(
            "claude-test", api_key=API_KEY, base_url=fake_messages_api.base_url, stream=True
        ) as streaming:
            outcome = await LLMSubagent("a", streaming, retry=fast_retry(sleep, attempts=4)).run(
                "hi"
            )
        assert isinstance(outcome, Success)
        assert outcome.data == "full answer"
        assert fake_messages_api.request_count == 2
        assert all(r.stream for r in fake_messages_api.requests)


class TestToolLoopOverHTTP:
    async def test_a_tool_call_and_its_result_round_trip_through_the_sdk(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """tool_use from the API runs the tool; the tool_result goes back in the next request."""

        @tool(idempotent=True)
        async def lookup(order_id: str) -> dict[str, str]:
            return {"order": order_id, "status": "shipped"}

        fake_messages_api.enqueue(
            F.tool_use("lookup", {"order_id": "#12345"}, id="toolu_1"), F.text("It shipped.")
        )
        outcome = await LLMSubagent("support", model, tools=[lookup]).run("where is #12345?")
        assert isinstance(outcome, Success)
        assert outcome.data == "It shipped."
        first, second = fake_messages_api.requests
        assert first.body["tools"][0]["name"] == "lookup"
        result = second.messages[-1]["content"][0]
        assert result["type"] == "tool_result"
        assert result["tool_use_id"] == "toolu_1"
        assert json.loads(result["content"]) == {"order": "#12345", "status": "shipped"}


class TestSecrets:
    async def test_the_api_key_never_reaches_logs_envelopes_or_reports(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """Scan everything a run produces for the key."""
        stream = io.StringIO()
        configure_logging("DEBUG", json=True, stream=stream)
        try:
            sleep = RecordingSleep()
            fake_messages_api.enqueue(F.error(401), F.error(529), F.error(529))
            agent = LLMSubagent("a", model, retry=fast_retry(sleep, attempts=2))
            report = await Coordinator([agent]).run([Task(query="q1"), Task(query="q2")])
        finally:
            structlog.reset_defaults()
        produced = stream.getvalue() + report.to_json() + report.to_markdown()
        assert "route_decision" in stream.getvalue()
        assert API_KEY not in produced
        assert API_KEY[7:] not in produced


class TestConfiguration:
    def test_a_model_name_is_required(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """No silent default model: the error names both ways to set one."""
        monkeypatch.delenv("AGENTMESH_MODEL", raising=False)
        with pytest.raises(UsageError, match="AGENTMESH_MODEL"):
            AnthropicModel()

    def test_the_model_name_comes_from_the_environment(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """AGENTMESH_MODEL names the model; building one touches no network."""
        monkeypatch.setenv("AGENTMESH_MODEL", "claude-from-env")
        monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
        assert AnthropicModel().name == "claude-from-env"
