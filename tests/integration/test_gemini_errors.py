"""The Google rows of the error table: each a failure of the Gemini API, through the real
google-genai SDK against FakeGeminiAPI, as the envelope the task ends in."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from agentmesh import ErrorCategory, ErrorEnvelope, Success
from agentmesh.models import GeminiModel
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeGeminiAPI, RecordingSleep
from tests.retrying import fast_retry

API_KEY = "gemini-test-key"
FLASH = "gemini-2.5-flash"
F = FakeGeminiAPI
TRANSIENT, VALIDATION = ErrorCategory.TRANSIENT, ErrorCategory.VALIDATION
PERMISSION, BUSINESS = ErrorCategory.PERMISSION, ErrorCategory.BUSINESS
OTHER = ErrorCategory.OTHER


@pytest.fixture
async def gemini(fake_gemini_api: FakeGeminiAPI) -> AsyncIterator[GeminiModel]:
    async with GeminiModel(
        FLASH, api_key=API_KEY, base_url=fake_gemini_api.base_url, timeout=5
    ) as model:
        yield model


async def ends_in(model: GeminiModel, attempts: int = 1) -> ErrorEnvelope:
    outcome = await LLMSubagent("a", model, retry=fast_retry(attempts=attempts)).run("hi")
    assert isinstance(outcome, ErrorEnvelope), outcome
    return outcome


# row -> (reply, category, error_type, retried)
ROWS: dict[str, tuple[Any, ErrorCategory, str, bool]] = {
    "rate_limited": (F.rate_limited(2.5), TRANSIENT, "rate_limited", True),
    "rate_limited_without_retry_info": (F.rate_limited(None), TRANSIENT, "rate_limited", True),
    "quota_exhausted_daily": (
        F.rate_limited(30, quota_id="GenerateRequestsPerDayPerProjectPerModel-FreeTier"),
        BUSINESS,
        "quota_exhausted",
        False,
    ),
    "quota_exhausted_far_retry_delay": (F.rate_limited(3600), BUSINESS, "quota_exhausted", False),
    "overloaded_503": (F.error(503), TRANSIENT, "overloaded", True),
    "server_error_500": (F.error(500), TRANSIENT, "server_error", True),
    "timeout_504": (F.error(504), TRANSIENT, "timeout", True),
    "proxy_page_502": (F.garbage(502), TRANSIENT, "server_error", True),
    "invalid_response_200": (F.garbage(200), TRANSIENT, "invalid_response", True),
    "context_too_long": (F.context_too_long(), VALIDATION, "context_too_long", False),
    "invalid_request": (F.error(400), VALIDATION, "invalid_request", False),
    "invalid_request_naming_the_field": (
        F.bad_field("generation_config.max_output_tokens", "must be positive"),
        VALIDATION,
        "invalid_request",
        False,
    ),
    "not_found": (F.error(404, "models/gemini-9 is not found"), VALIDATION, "not_found", False),
    "authentication_failed_bad_key": (
        F.invalid_key(),
        PERMISSION,
        "authentication_failed",
        False,
    ),
    "authentication_failed_401": (F.error(401), PERMISSION, "authentication_failed", False),
    "permission_denied": (F.error(403), PERMISSION, "permission_denied", False),
    "billing_error_free_tier_region": (
        F.error(
            400,
            "Gemini API free tier is not available in your country. Please enable "
            "billing on your project in Google AI Studio.",
            status_name="FAILED_PRECONDITION",
        ),
        PERMISSION,
        "billing_error",
        False,
    ),
    "safety_refused": (F.safety_stop("PROHIBITED_CONTENT"), BUSINESS, "refused", False),
    "prompt_blocked_refused": (F.blocked_prompt("SAFETY"), BUSINESS, "refused", False),
    "other_unknown_status": (
        F.error(499, "The operation was cancelled.", status_name="CANCELLED"),
        OTHER,
        "provider_error",
        False,
    ),
}


class TestTheGoogleRows:
    @pytest.mark.parametrize(("row"), list(ROWS))
    async def test_row(self, fake_gemini_api: FakeGeminiAPI, gemini: GeminiModel, row: str) -> None:
        """Each failure ends in its category and type; only transient ones are tried again."""
        reply, category, error_type, retried = ROWS[row]
        fake_gemini_api.enqueue(reply, reply)
        envelope = await ends_in(gemini, attempts=2)
        assert (envelope.error_category, envelope.error_type) == (category, error_type)
        assert envelope.is_retryable is retried
        assert fake_gemini_api.request_count == (2 if retried else 1)


class TestWhatTheRowsCarry:
    async def test_rate_limited_waits_the_retry_info_delay(
        self, fake_gemini_api: FakeGeminiAPI, gemini: GeminiModel
    ) -> None:
        """RetryInfo's retryDelay is the wait: honoured, then the call succeeds."""
        sleep = RecordingSleep()
        fake_gemini_api.enqueue(F.rate_limited(2.5), F.text("ok"))
        outcome = await LLMSubagent("a", gemini, retry=fast_retry(sleep, attempts=3)).run("hi")
        assert isinstance(outcome, Success)
        assert sleep.delays == [2.5]

    async def test_a_daily_quota_resumes_at_midnight_pacific(
        self, fake_gemini_api: FakeGeminiAPI, gemini: GeminiModel
    ) -> None:
        """Daily quotas reset at midnight Pacific time: retryAfter and resumeAt say when."""
        daily = "GenerateRequestsPerDayPerProjectPerModel-FreeTier"
        fake_gemini_api.enqueue(F.rate_limited(30, quota_id=daily))
        envelope = await ends_in(gemini, attempts=3)
        assert envelope.retry_after is not None
        assert 30 < envelope.retry_after <= 25 * 3600
        assert envelope.details is not None
        assert f"quota: {daily}" in envelope.details
        resume_at = envelope.details.split("resumeAt: ")[1][:20]
        resumes = datetime.strptime(resume_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        assert resumes.hour in (7, 8)  # midnight in Los Angeles, daylight saving or not
        assert (resumes.minute, resumes.second) == (0, 0)

    async def test_the_offending_field_is_named(
        self, fake_gemini_api: FakeGeminiAPI, gemini: GeminiModel
    ) -> None:
        fake_gemini_api.enqueue(F.bad_field("contents[0].parts", "must not be empty"))
        envelope = await ends_in(gemini)
        assert envelope.details is not None
        assert "contents[0].parts: must not be empty" in envelope.details

    async def test_an_unknown_error_names_provider_status_and_code(
        self, fake_gemini_api: FakeGeminiAPI, gemini: GeminiModel
    ) -> None:
        fake_gemini_api.enqueue(F.error(418, "I'm a teapot", status_name="TEAPOT"))
        envelope = await ends_in(gemini)
        assert envelope.error_category is OTHER
        assert envelope.details is not None
        for fact in ("provider: google", "HTTP 418 TEAPOT", "code: 418"):
            assert fact in envelope.details

    async def test_a_wrong_key_is_refused_by_the_fake_as_by_the_api(
        self, fake_gemini_api: FakeGeminiAPI
    ) -> None:
        """The fake checks the key: another one gets 400 API_KEY_INVALID, authentication."""
        with FakeGeminiAPI(api_key="the-right-key") as api:
            async with GeminiModel(FLASH, api_key="a-wrong-key", base_url=api.base_url) as model:
                envelope = await ends_in(model, attempts=3)
            assert api.request_count == 1
        assert envelope.error_type == "authentication_failed"


class TestTheWire:
    async def test_a_timeout_is_transient(self, fake_gemini_api: FakeGeminiAPI) -> None:
        """An answer slower than the model's timeout: transient timeout."""
        fake_gemini_api.handler = lambda request: F.slow(5, F.text("late"))
        async with GeminiModel(
            FLASH, api_key=API_KEY, base_url=fake_gemini_api.base_url, timeout=0.2
        ) as model:
            envelope = await ends_in(model)
        assert (envelope.error_category, envelope.error_type) == (TRANSIENT, "timeout")

    async def test_a_refused_connection_is_transient_unavailable(self) -> None:
        with socket.socket() as probe:  # a port nobody listens on
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        async with GeminiModel(FLASH, api_key=API_KEY, base_url=f"http://127.0.0.1:{port}") as m:
            envelope = await ends_in(m)
        assert (envelope.error_category, envelope.error_type) == (TRANSIENT, "unavailable")

    async def test_an_error_in_the_middle_of_a_stream(self, fake_gemini_api: FakeGeminiAPI) -> None:
        """Google's error object as an SSE chunk: the SDK raises it, classified as any other."""
        fake_gemini_api.enqueue(
            F.stream_cut(F.text("a text longer than one chunk"), 1, error=F.error(503))
        )
        async with GeminiModel(
            FLASH, api_key=API_KEY, base_url=fake_gemini_api.base_url, stream=True
        ) as model:
            envelope = await ends_in(model)
        assert (envelope.error_category, envelope.error_type) == (TRANSIENT, "overloaded")


class TestWhetherTheCallActed:
    @pytest.mark.parametrize(
        ("code", "acted"), [(500, True), (504, True), (503, False), (429, False), (400, False)]
    )
    def test_by_status(self, code: int, acted: bool) -> None:
        """After a 500 or 504 the API may have generated (and billed); a 4xx or 503 did not."""
        from google.genai import errors

        from agentmesh import default_classifier

        kind = errors.ServerError if code >= 500 else errors.ClientError
        failure = kind(code, {"error": {"code": code, "status": "X"}})
        assert default_classifier.may_have_taken_effect(failure) is acted


class TestTheKeyStaysSecret:
    def test_the_gemini_key_header_never_reaches_the_envelope(self) -> None:
        """The SDK sends the key as x-goog-api-key: redacted wherever an error echoes it."""
        import httpx2

        from agentmesh import classify

        key = "AIzaSyD-not-a-real-key-0123456789abcd"
        request = httpx2.Request("POST", "http://127.0.0.1:9/v1", headers={"x-goog-api-key": key})
        failure = httpx2.ConnectError(f"could not send the request of {key}", request=request)
        envelope = classify(failure, source="a", attempted_query="hi", attempts=1)
        assert key not in envelope.to_json()
        assert envelope.error_type == "unavailable"

    async def test_a_key_the_server_echoes_in_its_message_is_masked(
        self, fake_gemini_api: FakeGeminiAPI, gemini: GeminiModel
    ) -> None:
        """Google answers a bad key with a 400 that may repeat it: the envelope masks it."""
        fake_gemini_api.enqueue(F.error(400, f"API key not valid: {API_KEY}"))
        outcome = await LLMSubagent("a", gemini).run("hi")
        assert isinstance(outcome, ErrorEnvelope)
        assert API_KEY not in outcome.to_json()
