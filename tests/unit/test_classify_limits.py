"""A 429 read by its reset: a short rate limit is transient, a far or spent quota business."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import anthropic
import httpx2
import pytest

from agentmesh.classify import classify
from agentmesh.classify._sdk import QUOTA_RESET_AFTER
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, ErrorType

URL = "http://127.0.0.1/v1/messages"


def status_error(
    status: int,
    error_type: str = "rate_limit_error",
    *,
    headers: dict[str, str] | None = None,
    error_code: str | None = None,
) -> anthropic.APIStatusError:
    """The SDK's error for a JSON error body, with `error.details.error_code` if given."""
    error: dict[str, Any] = {"type": error_type, "message": f"{error_type} happened"}
    if error_code is not None:
        error["details"] = {"error_code": error_code}
    body = {"type": "error", "error": error}
    response = httpx2.Response(
        status, headers=headers, json=body, request=httpx2.Request("POST", URL)
    )
    return anthropic.APIStatusError(f"Error code: {status}", response=response, body=body)


def envelope_of(exc: BaseException) -> ErrorEnvelope:
    return classify(exc, source="claude", attempted_query="q", attempts=1)


def rfc3339_in(seconds: float) -> str:
    moment = datetime.fromtimestamp(math.ceil(time.time() + seconds), UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def resume_at(envelope: ErrorEnvelope) -> datetime | None:
    found = [
        fact.removeprefix("resumeAt: ")
        for fact in (envelope.details or "").split("; ")
        if fact.startswith("resumeAt: ")
    ]
    return datetime.fromisoformat(found[0]) if found else None


class TestShortRateLimit:
    def test_retry_after_is_the_wait(self) -> None:
        """429 with retry-after 30: transient `rate_limited`, retryable, 30 s."""
        envelope = envelope_of(status_error(429, headers={"retry-after": "30"}))
        assert envelope.error_category is ErrorCategory.TRANSIENT
        assert envelope.error_type == "rate_limited"
        assert envelope.is_retryable
        assert envelope.retry_after == 30
        assert resume_at(envelope) is None

    def test_without_retry_after_the_used_up_limit_s_reset_is_the_wait(self) -> None:
        """The limits at 0 decide (the latest of them); a limit with room left does not."""
        headers = {
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": rfc3339_in(20),
            "anthropic-ratelimit-input-tokens-remaining": "0",
            "anthropic-ratelimit-input-tokens-reset": rfc3339_in(40),
            "anthropic-ratelimit-output-tokens-remaining": "5000",
            "anthropic-ratelimit-output-tokens-reset": rfc3339_in(600),
        }
        envelope = envelope_of(status_error(429, headers=headers))
        assert envelope.error_type == "rate_limited"
        assert envelope.retry_after is not None
        assert 38 < envelope.retry_after <= 41

    def test_no_hint_at_all_leaves_the_wait_to_backoff(self) -> None:
        envelope = envelope_of(status_error(429))
        assert envelope.error_type == "rate_limited"
        assert envelope.retry_after is None

    def test_the_threshold_itself_is_still_a_rate_limit(self) -> None:
        """Up to QUOTA_RESET_AFTER (15 minutes) a 429 is waited for; a second more is not."""
        at = envelope_of(status_error(429, headers={"retry-after": f"{QUOTA_RESET_AFTER:g}"}))
        past = envelope_of(status_error(429, headers={"retry-after": f"{QUOTA_RESET_AFTER + 1:g}"}))
        assert QUOTA_RESET_AFTER == 900
        assert at.error_type == "rate_limited"
        assert past.error_type == "quota_exhausted"


class TestOverload:
    def test_529_is_transient_overloaded(self) -> None:
        envelope = envelope_of(status_error(529, "overloaded_error"))
        assert envelope.error_category is ErrorCategory.TRANSIENT
        assert envelope.error_type == "overloaded"
        assert envelope.is_retryable


class TestQuota:
    def test_a_far_reset_is_a_spent_quota(self) -> None:
        """retry-after of 3 hours: business `quota_exhausted`, not retryable, resumeAt."""
        envelope = envelope_of(status_error(429, headers={"retry-after": "10800"}))
        assert envelope.error_category is ErrorCategory.BUSINESS
        assert envelope.error_type == ErrorType.QUOTA_EXHAUSTED
        assert not envelope.is_retryable
        assert envelope.retry_after == 10800
        back = resume_at(envelope)
        assert back is not None
        expected = datetime.now(UTC) + timedelta(hours=3)
        assert abs((back - expected).total_seconds()) < 3
        assert envelope.user_message is not None
        assert f"{back:%Y-%m-%d %H:%M} UTC" in envelope.user_message

    def test_far_reset_headers_are_a_quota_too(self) -> None:
        """No retry-after, a used-up limit back only in two hours."""
        headers = {
            "anthropic-ratelimit-tokens-remaining": "0",
            "anthropic-ratelimit-tokens-reset": rfc3339_in(7200),
        }
        envelope = envelope_of(status_error(429, headers=headers))
        assert envelope.error_type == "quota_exhausted"
        assert envelope.retry_after is not None
        assert 7190 < envelope.retry_after <= 7201

    def test_the_monthly_spend_limit_resumes_on_the_first(self) -> None:
        """`enforced_spend_limit_reached` and no retry-after: the 1st of next month, 00:00
        UTC, as Anthropic documents; the per-minute headers say nothing about it."""
        headers = {
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": rfc3339_in(30),
        }
        envelope = envelope_of(
            status_error(429, headers=headers, error_code="enforced_spend_limit_reached")
        )
        assert envelope.error_type == "quota_exhausted"
        assert not envelope.is_retryable
        back = resume_at(envelope)
        assert back is not None
        assert (back.day, back.hour, back.minute, back.second) == (1, 0, 0, 0)
        assert back > datetime.now(UTC)
        assert envelope.retry_after is not None
        assert abs(back.timestamp() - time.time() - envelope.retry_after) < 2
        assert "error_code: enforced_spend_limit_reached" in (envelope.details or "")

    def test_a_spend_limit_is_a_quota_even_with_a_short_retry_after(self) -> None:
        envelope = envelope_of(
            status_error(
                429, headers={"retry-after": "5"}, error_code="contract_spend_limit_reached"
            )
        )
        assert envelope.error_type == "quota_exhausted"
        assert envelope.retry_after == 5

    def test_a_contract_limit_without_a_reset_says_no_time(self) -> None:
        """When nothing says when the quota returns: retry_after None, no resumeAt."""
        envelope = envelope_of(status_error(429, error_code="contract_spend_limit_reached"))
        assert envelope.error_type == "quota_exhausted"
        assert envelope.retry_after is None
        assert resume_at(envelope) is None

    @pytest.mark.parametrize("code", ["ramp_limit_exceeded", None])
    def test_other_429s_stay_rate_limits(self, code: str | None) -> None:
        envelope = envelope_of(status_error(429, headers={"retry-after": "2"}, error_code=code))
        assert envelope.error_type == "rate_limited"

    def test_an_httpx2_429_with_a_far_retry_after_is_a_quota(self) -> None:
        """Any HTTP API's 429 is read the same way (`raise_for_status()`)."""
        request = httpx2.Request("GET", "http://127.0.0.1/search")
        response = httpx2.Response(429, headers={"retry-after": "86400"}, request=request)
        with pytest.raises(httpx2.HTTPStatusError) as raised:
            response.raise_for_status()
        envelope = envelope_of(raised.value)
        assert envelope.error_category is ErrorCategory.BUSINESS
        assert envelope.error_type == "quota_exhausted"
        assert envelope.retry_after == 86400
