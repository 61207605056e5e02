"""FakeMessagesAPI as a crowded server: rate limits, 529 bursts and a spent quota, seen
through the real anthropic SDK."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import anthropic
import pytest

from agentmesh import UsageError
from agentmesh.testing import FakeMessagesAPI, RecordingSleep

F = FakeMessagesAPI
FAMILIES = ("requests", "input-tokens", "output-tokens", "tokens")


def ask(model: str = "claude-test", *, max_tokens: int = 64, text: str = "hi") -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": text}],
    }


@asynccontextmanager
async def client_for(api: FakeMessagesAPI) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(
        api_key="sk-ant-test", base_url=api.base_url, max_retries=0
    ) as client:
        yield client


async def answer(api: FakeMessagesAPI, **asked: Any) -> tuple[int, dict[str, str], Any]:
    """Status, headers and parsed body of one request, `ask(**asked)` (an error's too)."""
    async with client_for(api) as client:
        try:
            raw = await client.messages.with_raw_response.create(**ask(**asked))
        except anthropic.APIStatusError as error:
            return error.status_code, dict(error.response.headers), error.body
        return raw.status_code, dict(raw.headers), await raw.parse()


def seconds_until(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339).timestamp() - time.time()


class TestRateLimits:
    async def test_every_answer_carries_the_real_headers(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """Limit, remaining and an RFC 3339 reset for requests, input, output and tokens."""
        fake_messages_api.rate_limit(
            requests_per_minute=50, input_tokens_per_minute=10_000, output_tokens_per_minute=2_000
        )
        fake_messages_api.enqueue(F.text("ok", output_tokens=30))

        status, headers, _ = await answer(fake_messages_api, max_tokens=500)

        assert status == 200
        for family in FAMILIES:
            assert f"anthropic-ratelimit-{family}-limit" in headers
            assert 0 <= seconds_until(headers[f"anthropic-ratelimit-{family}-reset"]) <= 61
        assert headers["anthropic-ratelimit-requests-limit"] == "50"
        assert headers["anthropic-ratelimit-requests-remaining"] == "49"
        # max_tokens was only reserved: the reply's 30 output tokens are what is charged
        # (and a few came back, at 2,000 a minute, while the request was served).
        assert 1970 <= int(headers["anthropic-ratelimit-output-tokens-remaining"]) < 1980
        input_left = int(headers["anthropic-ratelimit-input-tokens-remaining"])
        assert 9_980 < input_left < 10_000
        # `tokens` is the more restrictive of input and output: output, at 98.5%.
        assert headers["anthropic-ratelimit-tokens-limit"] == "2000"

    async def test_an_empty_bucket_refuses_with_429_and_retry_after(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """Two a minute: the third is refused for the 30 s a request takes to come back,
        takes no scripted reply, and passes once the fake's clock has moved on."""
        fake_messages_api.rate_limit(requests_per_minute=2)
        fake_messages_api.handler = lambda request: F.text("ok")
        for _ in range(2):
            assert (await answer(fake_messages_api))[0] == 200

        status, headers, body = await answer(fake_messages_api)

        assert status == 429
        # 30 s, less the time since the first request (whole seconds, rounded up).
        assert headers["retry-after"] in ("30", "29")
        assert headers["anthropic-ratelimit-requests-remaining"] == "0"
        assert 55 < seconds_until(headers["anthropic-ratelimit-requests-reset"]) <= 61
        assert body["error"]["type"] == "rate_limit_error"
        fake_messages_api.advance(30)
        assert (await answer(fake_messages_api))[0] == 200

    async def test_a_refused_request_leaves_the_script_alone(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """The queued reply waits for the first request the limits let through."""
        fake_messages_api.rate_limit(requests_per_minute=1)
        fake_messages_api.enqueue(F.text("first"), F.text("second"))
        await answer(fake_messages_api)
        assert (await answer(fake_messages_api))[0] == 429
        assert fake_messages_api.pending == 1

    async def test_a_long_prompt_is_refused_by_the_input_tokens(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """Input tokens are estimated from the prompt, four characters a token."""
        # A "minute" of an hour: a loaded machine's seconds between the two requests
        # refill almost nothing (at 60 s, half a second refilled 8 tokens: a flaky bound).
        fake_messages_api.rate_limit(input_tokens_per_minute=1_000, minute=3600)
        fake_messages_api.handler = lambda request: F.text("ok")
        assert (await answer(fake_messages_api, text="x" * 3_000))[0] == 200

        status, headers, _ = await answer(fake_messages_api, text="x" * 3_000)

        assert status == 429
        # The prompt's JSON is about 3,050 characters: some 762 tokens of the 1,000.
        assert 230 < int(headers["anthropic-ratelimit-input-tokens-remaining"]) < 245
        # the ~524 missing, at 1,000 an "hour-long minute": about 1,886 s
        assert 1_860 < float(headers["retry-after"]) <= 1_890

    async def test_every_model_has_buckets_of_its_own(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """One model's spent limit does not refuse another's requests; a model's own
        limits replace the default for it."""
        fake_messages_api.rate_limit(requests_per_minute=1)
        fake_messages_api.rate_limit(requests_per_minute=100, model="claude-big")
        fake_messages_api.handler = lambda request: F.text("ok")
        assert (await answer(fake_messages_api, model="claude-a"))[0] == 200
        assert (await answer(fake_messages_api, model="claude-a"))[0] == 429
        assert (await answer(fake_messages_api, model="claude-b"))[0] == 200
        status, headers, _ = await answer(fake_messages_api, model="claude-big")
        assert status == 200
        assert headers["anthropic-ratelimit-requests-remaining"] == "99"

    async def test_a_scaled_minute_gives_fractional_waits(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """A minute of 0.6 s: one request a minute comes back in 0.6 s, said to the ms."""
        fake_messages_api.rate_limit(requests_per_minute=1, minute=0.6)
        fake_messages_api.handler = lambda request: F.text("ok")
        await answer(fake_messages_api)
        status, headers, _ = await answer(fake_messages_api)
        assert status == 429
        assert 0 < float(headers["retry-after"]) <= 0.6  # less the time the first took
        assert "." in headers["anthropic-ratelimit-requests-reset"]

    async def test_scripted_errors_carry_the_headers_too(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """The headers are on every answer; a scripted reply's own headers win."""
        fake_messages_api.rate_limit(requests_per_minute=10)
        fake_messages_api.enqueue(
            F.error(500), F.error(500, headers={"anthropic-ratelimit-requests-remaining": "7"})
        )
        _, plain, _ = await answer(fake_messages_api)
        _, own, _ = await answer(fake_messages_api)
        assert plain["anthropic-ratelimit-requests-remaining"] == "9"
        assert own["anthropic-ratelimit-requests-remaining"] == "7"

    async def test_no_limits_no_headers(self, fake_messages_api: FakeMessagesAPI) -> None:
        """Unconfigured, the fake answers as it always did; `rate_limit()` lifts limits."""
        fake_messages_api.rate_limit(requests_per_minute=1)
        fake_messages_api.rate_limit()
        fake_messages_api.handler = lambda request: F.text("ok")
        for _ in range(3):
            status, headers, _ = await answer(fake_messages_api)
            assert status == 200
            assert not [name for name in headers if name.startswith("anthropic-ratelimit")]

    def test_options_are_checked(self) -> None:
        api = FakeMessagesAPI()
        with pytest.raises(UsageError, match="requests_per_minute"):
            api.rate_limit(requests_per_minute=0)
        with pytest.raises(UsageError, match="minute"):
            api.rate_limit(requests_per_minute=5, minute=0)
        with pytest.raises(UsageError, match="share"):
            api.overload(share=1.5)
        with pytest.raises(UsageError, match="resets_in"):
            api.exhaust_quota(resets_in=-1)


class TestOverload:
    async def test_the_next_requests_are_overloaded(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """`overload(2)`: two 529 `overloaded_error`, then the script again."""
        fake_messages_api.overload(2)
        fake_messages_api.handler = lambda request: F.text("ok")
        answers = [await answer(fake_messages_api) for _ in range(3)]
        assert [status for status, _, _ in answers] == [529, 529, 200]
        assert answers[0][2]["error"] == {"type": "overloaded_error", "message": "Overloaded"}

    async def test_a_share_of_the_requests_for_a_while(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """Half the requests for 10 s, evenly: every other one; none after the window."""
        fake_messages_api.overload(share=0.5, seconds=10, retry_after=2)
        fake_messages_api.handler = lambda request: F.text("ok")
        during = [await answer(fake_messages_api) for _ in range(4)]
        assert [status for status, _, _ in during] == [200, 529, 200, 529]
        assert during[1][1]["retry-after"] == "2"
        fake_messages_api.advance(10)
        assert [(await answer(fake_messages_api))[0] for _ in range(2)] == [200, 200]

    async def test_one_model_overloaded_the_other_not(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """`overload(model=...)` until `overload(0, model=...)`."""
        fake_messages_api.overload(model="claude-busy")
        fake_messages_api.handler = lambda request: F.text("ok")
        assert (await answer(fake_messages_api, model="claude-busy"))[0] == 529
        assert (await answer(fake_messages_api, model="claude-calm"))[0] == 200
        fake_messages_api.overload(0, model="claude-busy")
        assert (await answer(fake_messages_api, model="claude-busy"))[0] == 200


class TestQuota:
    async def test_a_spent_quota_is_the_real_spend_limit_answer(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """429 `rate_limit_error` with `error.details.error_code`, the SDK's `error_code`,
        and retry-after at the reset, hours away."""
        fake_messages_api.exhaust_quota(resets_in=3 * 3600)
        async with client_for(fake_messages_api) as client:
            with pytest.raises(anthropic.RateLimitError) as raised:
                await client.messages.create(**ask())
        error = raised.value
        assert error.error_code == "enforced_spend_limit_reached"
        assert error.response.headers["retry-after"] == str(3 * 3600)
        assert "regain access" in error.body["error"]["message"]  # type: ignore[index]

    async def test_the_quota_ends_at_its_reset(self, fake_messages_api: FakeMessagesAPI) -> None:
        """Without retry-after, as the real API sends it; answered again after the reset."""
        fake_messages_api.exhaust_quota(resets_in=3600, retry_after=False, model="claude-test")
        fake_messages_api.handler = lambda request: F.text("ok")
        status, headers, body = await answer(fake_messages_api)
        assert status == 429
        assert "retry-after" not in headers
        assert body["error"]["details"] == {"error_code": "enforced_spend_limit_reached"}
        assert (await answer(fake_messages_api, model="claude-other"))[0] == 200
        fake_messages_api.advance(3600)
        assert (await answer(fake_messages_api))[0] == 200

    async def test_a_bare_quota_has_no_details(self, fake_messages_api: FakeMessagesAPI) -> None:
        """`error_code=None`: only the far retry-after tells it from a rate limit."""
        fake_messages_api.exhaust_quota(resets_in=7200, error_code=None)
        status, headers, body = await answer(fake_messages_api)
        assert status == 429
        assert headers["retry-after"] == "7200"
        assert "details" not in body["error"]

    async def test_error_can_carry_an_error_code(self, fake_messages_api: FakeMessagesAPI) -> None:
        """`FakeMessagesAPI.error(..., error_code=...)` scripts any coded error."""
        fake_messages_api.enqueue(F.error(429, error_code="ramp_limit_exceeded", retry_after=5))
        async with client_for(fake_messages_api) as client:
            with pytest.raises(anthropic.RateLimitError) as raised:
                await client.messages.create(**ask())
        assert raised.value.error_code == "ramp_limit_exceeded"


class TestRecordingSleepAdvances:
    async def test_a_recorded_sleep_moves_the_fake_s_clock(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """`RecordingSleep(advance=api.advance)`: the delay is recorded and has passed for
        the server, without the test waiting."""
        fake_messages_api.rate_limit(requests_per_minute=1)
        fake_messages_api.handler = lambda request: F.text("ok")
        sleep = RecordingSleep(advance=fake_messages_api.advance)
        await answer(fake_messages_api)
        assert (await answer(fake_messages_api))[0] == 429
        started = time.monotonic()
        await sleep(60)
        assert time.monotonic() - started < 1
        assert sleep.delays == [60]
        assert (await answer(fake_messages_api))[0] == 200
