"""Three limits, three answers, through the real anthropic SDK against a crowded fake API.

A short rate limit is waited out for as long as the headers say; an overload is backed
off (and failed over); a spent quota ends the task at once as a business failure that
says when the model comes back, keeping the work already done.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from agentmesh import Coordinator, ErrorCategory, ErrorEnvelope, Success, Task, tool
from agentmesh.coordinator import CoverageStatus
from agentmesh.envelope import ErrorType
from agentmesh.models import AnthropicModel, FallbackModel, ModelHealth
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeMessagesAPI, RecordingSleep
from tests.retrying import fast_retry

API_KEY = "sk-ant-test-0123456789abcdef"
F = FakeMessagesAPI
PRIMARY, BACKUP = "claude-primary", "claude-backup"


@pytest.fixture
async def model(fake_messages_api: FakeMessagesAPI) -> AsyncIterator[AnthropicModel]:
    async with AnthropicModel(
        PRIMARY, api_key=API_KEY, base_url=fake_messages_api.base_url, timeout=5
    ) as claude:
        yield claude


def resume_at(envelope: ErrorEnvelope) -> datetime:
    """The `resumeAt: <ISO time>` fact of an envelope's details."""
    [when] = [
        fact.removeprefix("resumeAt: ")
        for fact in (envelope.details or "").split("; ")
        if fact.startswith("resumeAt: ")
    ]
    return datetime.fromisoformat(when)


def rfc3339_in(seconds: float) -> str:
    moment = datetime.fromtimestamp(math.ceil(time.time() + seconds), UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class TestShortRateLimit:
    async def test_the_headers_hold_the_next_call_until_the_limit_refills(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """One request a minute, two runs sharing their model health: the first answer's
        headers say none is left for 60 s, so the second task waits them out (recorded,
        the fake's clock moved) before it calls, and is never refused."""
        fake_messages_api.rate_limit(requests_per_minute=1)
        fake_messages_api.handler = lambda request: F.text("ok")
        sleep = RecordingSleep(advance=fake_messages_api.advance)
        agent = LLMSubagent("a", model, retry=fast_retry(sleep, attempts=4, max_delay=120))
        coordinator = Coordinator([agent], model_health=ModelHealth())

        first = await coordinator.run([Task(query="first", topic="a")])
        second = await coordinator.run([Task(query="second", topic="a")])

        assert isinstance(first.records[0].final, Success)
        assert isinstance(second.records[0].final, Success)
        # The headers' 60 s.
        [delay] = sleep.delays
        assert 58 < delay <= 61  # the reset is sent in whole seconds, rounded up
        assert fake_messages_api.request_count == 2  # none refused

    async def test_a_429_is_waited_out_as_long_as_retry_after_says(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """A 429 with retry-after and no rate-limit headers: the retry waits what it says."""
        fake_messages_api.enqueue(F.error(429, retry_after=60), F.text("ok"))
        sleep = RecordingSleep()
        agent = LLMSubagent("a", model, retry=fast_retry(sleep, attempts=4, max_delay=120))

        outcome = await agent.run("hi")

        assert isinstance(outcome, Success)
        assert sleep.delays == [60.0]
        assert fake_messages_api.request_count == 2

    async def test_without_retry_after_the_wait_follows_the_used_up_limit_s_reset(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """A 429 with no retry-after: the reset of the limit at 0 (not of the one left)."""
        headers = {
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": rfc3339_in(20),
            "anthropic-ratelimit-tokens-remaining": "9000",
            "anthropic-ratelimit-tokens-reset": rfc3339_in(50),
        }
        fake_messages_api.enqueue(F.error(429, headers=headers), F.text("ok"))
        sleep = RecordingSleep()
        agent = LLMSubagent("a", model, retry=fast_retry(sleep, attempts=4, max_delay=120))

        assert isinstance(await agent.run("hi"), Success)

        [delay] = sleep.delays
        assert 18 < delay <= 21


class TestOverload:
    async def test_a_burst_of_529s_is_backed_off_then_answered(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """Two overloaded answers, then the script: backoff, not a reset, decides the wait."""
        fake_messages_api.overload(2)
        fake_messages_api.enqueue(F.text("at last"))
        sleep = RecordingSleep()
        agent = LLMSubagent("a", model, retry=fast_retry(sleep, attempts=4))

        outcome = await agent.run("hi")

        assert isinstance(outcome, Success)
        assert outcome.data == "at last"
        assert sleep.delays == [0.1, 0.2]
        assert fake_messages_api.request_count == 3

    async def test_an_overloaded_model_fails_over(self, fake_messages_api: FakeMessagesAPI) -> None:
        """Only the primary is overloaded: after its retries the backup answers."""
        fake_messages_api.overload(model=PRIMARY)
        fake_messages_api.handler = lambda request: F.text(f"from {request.model}")
        url = fake_messages_api.base_url
        sleep = RecordingSleep()
        async with (
            AnthropicModel(PRIMARY, api_key=API_KEY, base_url=url, timeout=5) as primary,
            AnthropicModel(BACKUP, api_key=API_KEY, base_url=url, timeout=5) as backup,
        ):
            agent = LLMSubagent(
                "a", FallbackModel(primary, backup), retry=fast_retry(sleep, attempts=2)
            )
            outcome = await agent.run("hi")

        assert isinstance(outcome, Success)
        assert outcome.data == f"from {BACKUP}"
        assert [request.model for request in fake_messages_api.requests] == [
            PRIMARY,
            PRIMARY,
            BACKUP,
        ]


class TestSpentQuota:
    async def test_a_spent_quota_is_a_business_failure_never_retried(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """The monthly spend limit: one request, no sleep, `quota_exhausted` with the reset."""
        fake_messages_api.exhaust_quota(resets_in=4 * 3600)
        sleep = RecordingSleep()
        agent = LLMSubagent("a", model, retry=fast_retry(sleep, attempts=4))

        outcome = await agent.run("hi")

        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.BUSINESS
        assert outcome.error_type == ErrorType.QUOTA_EXHAUSTED == "quota_exhausted"
        assert outcome.is_retryable is False
        assert fake_messages_api.request_count == 1
        assert sleep.delays == []
        assert outcome.retry_after == 4 * 3600
        expected = datetime.now(UTC) + timedelta(hours=4)
        assert abs((resume_at(outcome) - expected).total_seconds()) < 5
        assert outcome.to_dict()["details"].count("resumeAt: ") == 1
        assert outcome.user_message is not None

    async def test_a_spend_limit_without_retry_after_resumes_next_month(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """As the real API answers it (no retry-after): back on the 1st at 00:00 UTC."""
        fake_messages_api.exhaust_quota(retry_after=False)
        outcome = await LLMSubagent("a", model, retry=fast_retry(attempts=4)).run("hi")

        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "quota_exhausted"
        back = resume_at(outcome)
        assert (back.day, back.hour, back.minute) == (1, 0, 0)
        assert outcome.retry_after is not None
        assert 0 < outcome.retry_after <= 31 * 24 * 3600
        assert fake_messages_api.request_count == 1

    async def test_a_bare_429_with_a_far_reset_is_a_quota_too(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """No error code, only an hour's retry-after: past 15 minutes it is a quota."""
        fake_messages_api.exhaust_quota(resets_in=3600, error_code=None)
        outcome = await LLMSubagent("a", model, retry=fast_retry(attempts=4)).run("hi")

        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "quota_exhausted"
        assert outcome.retry_after == 3600
        assert fake_messages_api.request_count == 1

    async def test_the_work_done_before_the_quota_ran_out_is_kept(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """A tool answered in turn 1; turn 2 meets the spent quota: the task ends as a
        business failure carrying the tool's result, and the report keeps it."""

        @tool(idempotent=True)
        async def lookup(query: str) -> list[str]:
            """Look the query up."""
            fake_messages_api.exhaust_quota()  # the quota runs out while the tool works
            return [f"found {query}"]

        fake_messages_api.enqueue(F.tool_use("lookup", {"query": "limits"}))
        agent = LLMSubagent("research", model, tools=[lookup], retry=fast_retry(attempts=4))

        report = await Coordinator([agent]).run([Task(query="limits", topic="limits")])

        final = report.records[0].final
        assert isinstance(final, ErrorEnvelope)
        assert final.error_type == "quota_exhausted"
        assert final.partial_results is not None
        [finding] = final.partial_results.findings
        assert finding["result"] == ["found limits"]
        # A business failure goes to a person, with the reset in its user message; the
        # tool's result stays in the report as a preliminary finding.
        [entry] = report.coverage
        assert entry.status is CoverageStatus.ESCALATED
        assert entry.reason == final.user_message
        [kept] = report.findings
        assert kept.preliminary
        assert kept.content == finding
        assert fake_messages_api.request_count == 2
