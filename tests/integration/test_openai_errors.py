"""The OpenAI rows of the model error table: each one an error the real openai SDK raises
against FakeChatCompletionsAPI, classified into the envelope the table promises.

Each row of docs/reference/model-errors.md names the test here that drives it.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import openai
import pytest

from agentmesh import ErrorCategory, ErrorEnvelope
from agentmesh.classify import default_classifier
from agentmesh.models import OpenAIModel
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import ChatReply, FakeChatCompletionsAPI, RecordingSleep
from tests.retrying import fast_retry

API_KEY = "sk-test-0123456789abcdef"
F = FakeChatCompletionsAPI
TRANSIENT, VALIDATION = ErrorCategory.TRANSIENT, ErrorCategory.VALIDATION
BUSINESS, PERMISSION, OTHER = ErrorCategory.BUSINESS, ErrorCategory.PERMISSION, ErrorCategory.OTHER


@pytest.fixture
async def model(fake_chat_completions_api: FakeChatCompletionsAPI) -> AsyncIterator[OpenAIModel]:
    async with OpenAIModel(
        "gpt-4o-mini", api_key=API_KEY, base_url=fake_chat_completions_api.base_url, timeout=5
    ) as gpt:
        yield gpt


async def envelope_of(
    api: FakeChatCompletionsAPI, model: OpenAIModel, reply: ChatReply, *, attempts: int = 1
) -> ErrorEnvelope:
    """The envelope a task gets when every answer is `reply`."""
    api.handler = lambda request: reply
    outcome = await LLMSubagent("a", model, retry=fast_retry(attempts=attempts)).run("hi")
    assert isinstance(outcome, ErrorEnvelope)
    return outcome


def remaining(requests: int | str, reset_requests: str, **more: str | int) -> dict[str, str | int]:
    return {"remaining-requests": requests, "reset-requests": reset_requests, **more}


class TestRateLimits:
    @pytest.mark.parametrize(
        ("reply", "wait"),
        [
            (F.error(429, retry_after=2), 2.0),
            (F.error(429, retry_after_ms=250, retry_after=9), 0.25),
            (F.error(429, ratelimit=remaining(0, "1.5s")), 1.5),
            (F.error(429, ratelimit=remaining(0, "20ms")), 0.02),
            (F.error(429, ratelimit=remaining(5, "1s", **{"reset-tokens": "6m0s"})), 360.0),
        ],
        ids=[
            "retry-after",
            "retry-after-ms",
            "reset-requests",
            "reset-requests-ms",
            "reset-tokens",
        ],
    )
    async def test_rate_limited_is_transient_with_the_providers_wait(
        self,
        fake_chat_completions_api: FakeChatCompletionsAPI,
        model: OpenAIModel,
        reply: ChatReply,
        wait: float,
    ) -> None:
        outcome = await envelope_of(fake_chat_completions_api, model, reply)
        assert (outcome.error_category, outcome.error_type) == (TRANSIENT, "rate_limited")
        assert outcome.is_retryable
        assert outcome.retry_after == pytest.approx(wait)
        assert outcome.details is not None
        assert "x-request-id" not in outcome.details  # named as request-id, like Anthropic's
        assert "request-id: req_fake" in outcome.details

    async def test_a_rate_limit_is_waited_out_then_the_call_succeeds(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, model: OpenAIModel
    ) -> None:
        sleep = RecordingSleep()
        fake_chat_completions_api.enqueue(
            F.error(429, ratelimit=remaining(0, "1s")), F.text("answered")
        )
        agent = LLMSubagent("a", model, retry=fast_retry(sleep, attempts=3, max_delay=5))
        outcome = await agent.run("hi")
        assert not isinstance(outcome, ErrorEnvelope)
        assert sleep.delays[0] >= 1.0

    async def test_the_fake_s_rate_limit_answers_as_openai_does(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, model: OpenAIModel
    ) -> None:
        """Every answer reports the buckets; a request that does not fit is a 429 whose
        headers say when the used-up limit is back."""
        fake_chat_completions_api.rate_limit(requests_per_minute=1, tokens_per_minute=90_000)
        fake_chat_completions_api.handler = lambda request: F.text("ok")
        await model.create(messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.RateLimitError) as raised:
            await model.create(messages=[{"role": "user", "content": "hi"}])
        headers = raised.value.response.headers
        assert headers["x-ratelimit-remaining-requests"] == "0"
        assert headers["x-ratelimit-limit-tokens"] == "90000"
        assert raised.value.code == "rate_limit_exceeded"
        envelope = default_classifier.classify(
            raised.value, source="a", attempted_query="hi", attempts=1
        )
        assert envelope.error_type == "rate_limited"
        assert envelope.retry_after is not None
        assert 55 < envelope.retry_after <= 60

    async def test_a_far_reset_is_quota_exhausted_with_resume_at(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, model: OpenAIModel
    ) -> None:
        """A daily request limit used up: 20 hours is no wait inside a task."""
        reply = F.error(429, ratelimit=remaining(0, "20h0m0s"))
        outcome = await envelope_of(fake_chat_completions_api, model, reply, attempts=3)
        assert (outcome.error_category, outcome.error_type) == (BUSINESS, "quota_exhausted")
        assert not outcome.is_retryable
        assert outcome.retry_after == pytest.approx(72000, abs=5)
        assert outcome.details is not None
        assert "resumeAt: " in outcome.details
        resume = outcome.details.split("resumeAt: ")[1][:20]
        assert datetime.strptime(resume, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) > datetime.now(
            UTC
        )
        assert fake_chat_completions_api.request_count == 1

    async def test_insufficient_quota_is_quota_exhausted_never_retried(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, model: OpenAIModel
    ) -> None:
        reply = F.error(429, code="insufficient_quota")
        outcome = await envelope_of(fake_chat_completions_api, model, reply, attempts=3)
        assert (outcome.error_category, outcome.error_type) == (BUSINESS, "quota_exhausted")
        assert not outcome.is_retryable
        assert "exceeded your current quota" in outcome.message
        assert fake_chat_completions_api.request_count == 1


class TestServerFailures:
    @pytest.mark.parametrize(
        ("reply", "error_type"),
        [
            (F.error(503), "overloaded"),
            (F.error(503, "Service Unavailable."), "unavailable"),
            (F.error(500), "server_error"),
            (F.error(502, "Bad gateway."), "server_error"),
            (F.garbage(status=502), "server_error"),
        ],
        ids=["503-overloaded", "503", "500", "502", "502-html"],
    )
    async def test_overloaded_and_5xx_are_transient(
        self,
        fake_chat_completions_api: FakeChatCompletionsAPI,
        model: OpenAIModel,
        reply: ChatReply,
        error_type: str,
    ) -> None:
        outcome = await envelope_of(fake_chat_completions_api, model, reply, attempts=2)
        assert (outcome.error_category, outcome.error_type) == (TRANSIENT, error_type)
        assert outcome.is_retryable
        assert fake_chat_completions_api.request_count == 2

    async def test_an_error_event_mid_stream_is_transient(
        self, fake_chat_completions_api: FakeChatCompletionsAPI
    ) -> None:
        fake_chat_completions_api.handler = lambda request: F.stream_cut(error=F.error(500))
        async with OpenAIModel(
            "gpt-4o", api_key=API_KEY, base_url=fake_chat_completions_api.base_url, stream=True
        ) as streaming:
            outcome = await LLMSubagent("a", streaming, retry=fast_retry(attempts=1)).run("hi")
        assert isinstance(outcome, ErrorEnvelope)
        assert (outcome.error_category, outcome.error_type) == (TRANSIENT, "server_error")

    async def test_a_timeout_is_transient(
        self, fake_chat_completions_api: FakeChatCompletionsAPI
    ) -> None:
        fake_chat_completions_api.handler = lambda request: F.slow(5, F.text("late"))
        async with OpenAIModel(
            "gpt-4o", api_key=API_KEY, base_url=fake_chat_completions_api.base_url, timeout=0.2
        ) as impatient:
            outcome = await LLMSubagent("a", impatient, retry=fast_retry(attempts=1)).run("hi")
        assert isinstance(outcome, ErrorEnvelope)
        assert (outcome.error_category, outcome.error_type) == (TRANSIENT, "timeout")

    async def test_a_refused_connection_is_transient_and_never_reached_the_server(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        async with OpenAIModel(
            "gpt-4o", api_key=API_KEY, base_url=f"http://127.0.0.1:{port}/v1", timeout=2
        ) as nowhere:
            with pytest.raises(openai.APIConnectionError) as raised:
                await nowhere.create(messages=[{"role": "user", "content": "hi"}])
        envelope = default_classifier.classify(
            raised.value, source="a", attempted_query="hi", attempts=1
        )
        assert (envelope.error_category, envelope.error_type) == (TRANSIENT, "unavailable")
        assert default_classifier.may_have_taken_effect(raised.value) is False


class TestTheRequestsFault:
    async def test_context_length_exceeded_is_context_too_long(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, model: OpenAIModel
    ) -> None:
        reply = F.error(400, code="context_length_exceeded")
        outcome = await envelope_of(fake_chat_completions_api, model, reply, attempts=3)
        assert (outcome.error_category, outcome.error_type) == (VALIDATION, "context_too_long")
        assert not outcome.is_retryable
        assert "maximum context length" in outcome.message
        assert fake_chat_completions_api.request_count == 1

    @pytest.mark.parametrize("code", ["content_policy_violation", "invalid_prompt"])
    async def test_a_refused_prompt_is_business_refused_with_the_reason(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, model: OpenAIModel, code: str
    ) -> None:
        reply = F.error(400, code=code)
        outcome = await envelope_of(fake_chat_completions_api, model, reply, attempts=3)
        assert (outcome.error_category, outcome.error_type) == (BUSINESS, "refused")
        assert "safety system" in outcome.message or "usage policy" in outcome.message
        assert fake_chat_completions_api.request_count == 1

    async def test_a_bad_request_names_the_field(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, model: OpenAIModel
    ) -> None:
        reply = F.error(
            400,
            "Invalid type: expected a string.",
            code="invalid_type",
            param="messages[0].content",
        )
        outcome = await envelope_of(fake_chat_completions_api, model, reply, attempts=3)
        assert (outcome.error_category, outcome.error_type) == (VALIDATION, "invalid_request")
        assert "messages[0].content" in outcome.message
        assert outcome.details is not None
        assert "param: messages[0].content" in outcome.details
        assert fake_chat_completions_api.request_count == 1

    async def test_an_unknown_model_is_not_found(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, model: OpenAIModel
    ) -> None:
        outcome = await envelope_of(fake_chat_completions_api, model, F.error(404), attempts=3)
        assert (outcome.error_category, outcome.error_type) == (VALIDATION, "not_found")
        assert fake_chat_completions_api.request_count == 1


class TestPermission:
    @pytest.mark.parametrize(
        ("status", "error_type"), [(401, "authentication_failed"), (403, "permission_denied")]
    )
    async def test_auth_and_permission_are_never_retried(
        self,
        fake_chat_completions_api: FakeChatCompletionsAPI,
        model: OpenAIModel,
        status: int,
        error_type: str,
    ) -> None:
        reply = F.error(status)
        outcome = await envelope_of(fake_chat_completions_api, model, reply, attempts=3)
        assert (outcome.error_category, outcome.error_type) == (PERMISSION, error_type)
        assert not outcome.is_retryable
        assert fake_chat_completions_api.request_count == 1

    async def test_a_wrong_key_is_refused_by_the_fake_as_by_openai(self) -> None:
        with FakeChatCompletionsAPI(api_key="sk-right") as api:
            async with OpenAIModel("gpt-4o", api_key="sk-wrong", base_url=api.base_url) as gpt:
                outcome = await LLMSubagent("a", gpt, retry=fast_retry(attempts=3)).run("hi")
        assert isinstance(outcome, ErrorEnvelope)
        assert (outcome.error_category, outcome.error_type) == (PERMISSION, "authentication_failed")
        assert outcome.details is not None
        assert "code: invalid_api_key" in outcome.details

    async def test_no_key_at_all_is_authentication_failed(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        async with OpenAIModel("gpt-4o", base_url="http://127.0.0.1:9/v1") as keyless:
            outcome = await LLMSubagent("a", keyless, retry=fast_retry(attempts=3)).run("hi")
        assert isinstance(outcome, ErrorEnvelope)
        assert (outcome.error_category, outcome.error_type) == (PERMISSION, "authentication_failed")


class TestUnknown:
    async def test_an_unknown_status_is_other_with_provider_status_and_code(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, model: OpenAIModel
    ) -> None:
        reply = F.error(418, "I'm a teapot.", type="teapot_error", code="teapot")
        outcome = await envelope_of(fake_chat_completions_api, model, reply, attempts=3)
        assert (outcome.error_category, outcome.error_type) == (OTHER, "provider_error")
        assert outcome.details is not None
        for fact in ("provider: openai", "HTTP 418", "code: teapot", "type: teapot_error"):
            assert fact in outcome.details

    async def test_an_unknown_error_mid_stream_is_other(
        self, fake_chat_completions_api: FakeChatCompletionsAPI
    ) -> None:
        error = F.error(400, "Something new.", type="novel_error", code="novel")
        fake_chat_completions_api.handler = lambda request: F.stream_cut(error=error)
        async with OpenAIModel(
            "gpt-4o", api_key=API_KEY, base_url=fake_chat_completions_api.base_url, stream=True
        ) as streaming:
            outcome = await LLMSubagent("a", streaming, retry=fast_retry(attempts=2)).run("hi")
        assert isinstance(outcome, ErrorEnvelope)
        assert (outcome.error_category, outcome.error_type) == (OTHER, "provider_error")
        assert outcome.details is not None
        assert "code: novel" in outcome.details


class TestMayHaveTakenEffect:
    @pytest.mark.parametrize(
        ("reply", "acted"),
        [(F.error(500), True), (F.error(429), False), (F.error(503), False)],
        ids=["500", "429", "503"],
    )
    async def test_only_a_failure_after_the_server_began_may_have_acted(
        self,
        fake_chat_completions_api: FakeChatCompletionsAPI,
        model: OpenAIModel,
        reply: ChatReply,
        acted: bool,
    ) -> None:
        fake_chat_completions_api.enqueue(reply)
        with pytest.raises(openai.APIStatusError) as raised:
            await model.create(messages=[{"role": "user", "content": "hi"}])
        assert default_classifier.may_have_taken_effect(raised.value) is acted
