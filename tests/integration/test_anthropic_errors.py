"""The Anthropic column of the model error table (docs/reference/model-errors.md): each
row one failure the real SDK meets against the fake Messages API on loopback, and the
envelope agentmesh makes of it."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agentmesh import ErrorCategory, ErrorEnvelope
from agentmesh.classify import classify
from agentmesh.models import AnthropicModel
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeMessagesAPI, Reply

F = FakeMessagesAPI
HI: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
TRANSIENT, VALIDATION = ErrorCategory.TRANSIENT, ErrorCategory.VALIDATION
BUSINESS, PERMISSION, OTHER = ErrorCategory.BUSINESS, ErrorCategory.PERMISSION, ErrorCategory.OTHER


@pytest.fixture
async def model(fake_messages_api: FakeMessagesAPI) -> AsyncIterator[AnthropicModel]:
    async with AnthropicModel(
        "claude-test", api_key="sk-ant-test", base_url=fake_messages_api.base_url, timeout=5
    ) as claude:
        yield claude


async def envelope_of(model: AnthropicModel) -> ErrorEnvelope:
    """The envelope of the one failed call `model` makes."""
    with pytest.raises(Exception) as caught:  # noqa: PT011 - each row's own SDK error
        await model.create(messages=HI)
    return classify(caught.value, source="claude", attempted_query="hi", attempts=1)


async def row(api: FakeMessagesAPI, model: AnthropicModel, reply: Reply) -> ErrorEnvelope:
    api.enqueue(reply)
    return await envelope_of(model)


class TestRateLimited:
    async def test_a_429_is_transient_rate_limited_after_retry_after(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        envelope = await row(fake_messages_api, model, F.error(429, retry_after=7))
        assert (envelope.error_category, envelope.error_type) == (TRANSIENT, "rate_limited")
        assert (envelope.is_retryable, envelope.retry_after) == (True, 7)

    async def test_without_retry_after_the_spent_limit_s_reset_is_the_wait(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        reset = datetime.now(UTC) + timedelta(seconds=30)
        headers = {
            "anthropic-ratelimit-input-tokens-remaining": "0",
            "anthropic-ratelimit-input-tokens-reset": reset.isoformat(),
        }
        envelope = await row(fake_messages_api, model, F.error(429, headers=headers))
        assert envelope.error_type == "rate_limited"
        assert envelope.retry_after is not None
        assert 25 < envelope.retry_after <= 30


class TestQuotaExhausted:
    async def test_a_far_reset_is_business_quota_exhausted_with_resume_at(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        envelope = await row(fake_messages_api, model, F.error(429, retry_after=3 * 3600))
        assert (envelope.error_category, envelope.error_type) == (BUSINESS, "quota_exhausted")
        assert (envelope.is_retryable, envelope.retry_after) == (False, 3 * 3600)
        assert "resumeAt: " in (envelope.details or "")

    async def test_a_spend_limit_code_is_quota_exhausted(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        reply = F.error(429, error_code="enforced_spend_limit_reached")
        envelope = await row(fake_messages_api, model, reply)
        assert envelope.error_type == "quota_exhausted"
        assert "error_code: enforced_spend_limit_reached" in (envelope.details or "")


class TestOverloadedAndServerErrors:
    @pytest.mark.parametrize(
        ("status", "error_type"),
        [(529, "overloaded"), (500, "server_error"), (503, "unavailable")],
    )
    async def test_each_is_transient(
        self,
        fake_messages_api: FakeMessagesAPI,
        model: AnthropicModel,
        status: int,
        error_type: str,
    ) -> None:
        envelope = await row(fake_messages_api, model, F.error(status))
        assert (envelope.error_category, envelope.error_type) == (TRANSIENT, error_type)
        assert envelope.is_retryable

    async def test_a_proxy_s_html_502_is_transient_server_error(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        envelope = await row(fake_messages_api, model, F.garbage())
        assert (envelope.error_type, envelope.is_retryable) == ("server_error", True)


class TestTimeoutAndConnection:
    async def test_a_call_past_its_deadline_is_transient_timeout(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        fake_messages_api.enqueue(F.slow(5, F.text("too late")))
        async with AnthropicModel(
            "claude-test", api_key="sk-ant-test", base_url=fake_messages_api.base_url, timeout=0.2
        ) as hasty:
            envelope = await envelope_of(hasty)
        assert (envelope.error_category, envelope.error_type) == (TRANSIENT, "timeout")
        assert envelope.is_retryable
        fake_messages_api.close()  # cuts the slow reply short

    async def test_no_server_listening_is_transient_unavailable(self) -> None:
        with socket.socket() as probe:  # a port nobody listens on once it is closed
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        async with AnthropicModel(
            "claude-test", api_key="sk-ant-test", base_url=f"http://127.0.0.1:{port}", timeout=5
        ) as nowhere:
            envelope = await envelope_of(nowhere)
        assert (envelope.error_category, envelope.error_type) == (TRANSIENT, "unavailable")


class TestContextTooLong:
    @pytest.mark.parametrize(
        "message",
        [
            "prompt is too long: 208310 tokens > 200000 maximum",
            "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, "
            "decrease input length or `max_tokens` and try again",
        ],
    )
    async def test_is_validation_context_too_long_never_retried(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel, message: str
    ) -> None:
        envelope = await row(fake_messages_api, model, F.error(400, message=message))
        assert (envelope.error_category, envelope.error_type) == (VALIDATION, "context_too_long")
        assert not envelope.is_retryable
        assert envelope.message == message


class TestBadRequest:
    async def test_names_the_field_the_api_names(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        message = "max_tokens: Input should be greater than or equal to 1"
        envelope = await row(fake_messages_api, model, F.error(400, message=message))
        assert (envelope.error_category, envelope.error_type) == (VALIDATION, "invalid_request")
        assert envelope.message == message
        assert not envelope.is_retryable


class TestRefused:
    async def test_a_refusal_is_business_refused_with_the_reason(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        fake_messages_api.enqueue(F.text("I can't help with that.", stop_reason="refusal"))
        outcome = await LLMSubagent("a", model).run("q")
        assert isinstance(outcome, ErrorEnvelope)
        assert (outcome.error_category, outcome.error_type) == (BUSINESS, "refused")
        assert outcome.message == "I can't help with that."
        assert fake_messages_api.request_count == 1


class TestAuthAndPermission:
    @pytest.mark.parametrize(
        ("status", "error_type"), [(401, "authentication_failed"), (403, "permission_denied")]
    )
    async def test_is_permission_never_retried(
        self,
        fake_messages_api: FakeMessagesAPI,
        model: AnthropicModel,
        status: int,
        error_type: str,
    ) -> None:
        envelope = await row(fake_messages_api, model, F.error(status))
        assert (envelope.error_category, envelope.error_type) == (PERMISSION, error_type)
        assert not envelope.is_retryable


class TestUnknown:
    async def test_an_error_no_row_knows_is_other_with_provider_status_and_code(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        reply = F.error(418, "teapot_error", "I'm a teapot")
        envelope = await row(fake_messages_api, model, reply)
        assert (envelope.error_category, envelope.error_type) == (OTHER, "provider_error")
        details = envelope.details or ""
        for fact in ("provider: anthropic", "status: 418", "code: teapot_error"):
            assert fact in details
