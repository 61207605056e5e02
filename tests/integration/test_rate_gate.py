"""The rate-limit headers drive admission: through the real anthropic SDK, on loopback.

`FakeMessagesAPI.rate_limit` sends the Messages API's `anthropic-ratelimit-*` headers on
every answer and a 429 when a request does not fit; the run's `ModelHealth` reads them
and holds each call until one request, its estimated input and its `max_tokens` fit.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from agentmesh import Coordinator, ErrorCategory, ErrorEnvelope, Success, Task
from agentmesh.models import AnthropicModel, ModelHealth, ModelResponse, ScriptedModel
from agentmesh.retry import RetryPolicy
from agentmesh.scope import RunScope
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeMessagesAPI, RecordingSleep
from tests.retrying import fast_retry

API_KEY = "sk-ant-test-0123456789abcdef"
F = FakeMessagesAPI
MODEL = "claude-sonnet-4-5"


@pytest.fixture
async def model(fake_messages_api: FakeMessagesAPI) -> AsyncIterator[AnthropicModel]:
    async with AnthropicModel(
        MODEL, api_key=API_KEY, base_url=fake_messages_api.base_url, timeout=5
    ) as claude:
        yield claude


def rfc3339_in(seconds: float) -> str:
    moment = datetime.fromtimestamp(math.ceil(time.time() + seconds), UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def charged(body: Mapping[str, Any]) -> int:
    """The input tokens the fake charges a request (its JSON, four characters a token):
    what its answer reports, as the real API reports what it counted."""
    prompt = {key: body[key] for key in ("system", "messages", "tools") if key in body}
    return math.ceil(len(json.dumps(prompt)) / 4)


def refused(fake: FakeMessagesAPI, answered: int) -> int:
    """The requests the fake refused: each task's call was answered once."""
    return fake.request_count - answered


class TestFanOut:
    async def test_a_fan_out_waits_for_the_refill_instead_of_meeting_429s(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """40 tasks against 10 requests and 2,000 input tokens a (0.2 s) minute: the
        headers of the first answers hold the rest until the buckets refill, so every
        task is answered and (almost) no request is refused."""
        fake_messages_api.rate_limit(
            requests_per_minute=10, input_tokens_per_minute=2_000, minute=0.2
        )
        fake_messages_api.handler = lambda request: F.text("ok", input_tokens=charged(request.body))
        # Real sleeps: the waits are the buckets' own (a fifth of a second a minute).
        agent = LLMSubagent("a", model, max_tokens=64, retry=RetryPolicy(max_attempts=6))
        coordinator = Coordinator([agent], max_concurrency=40)

        report = await coordinator.run([Task(query=f"q{n}", topic="t") for n in range(40)])

        assert all(isinstance(record.final, Success) for record in report.records)
        # Before the first answer no limit is known: the first calls go as they come.
        assert refused(fake_messages_api, 40) <= 2

    async def test_without_headers_every_call_is_admitted(self) -> None:
        """A model whose answers carry no rate-limit header: nothing waits."""
        scripted = ScriptedModel([ModelResponse.of_text("ok") for _ in range(20)])
        sleep = RecordingSleep()
        agent = LLMSubagent("a", scripted, retry=fast_retry(sleep))

        report = await Coordinator([agent], max_concurrency=20).run(
            [Task(query=f"q{n}", topic="t") for n in range(20)]
        )

        assert all(isinstance(record.final, Success) for record in report.records)
        assert sleep.delays == []


class TestDeadline:
    async def test_a_wait_past_the_deadline_fails_at_once_saying_when(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """One request a minute: the second task's deadline (5 s) comes before the
        refill (60 s), so it is not called and fails transient with `retry_after`."""
        fake_messages_api.rate_limit(requests_per_minute=1)
        fake_messages_api.handler = lambda request: F.text("ok")
        sleep = RecordingSleep()
        agent = LLMSubagent("a", model, retry=fast_retry(sleep, attempts=4))
        health = ModelHealth()

        first = await agent.run("first", scope=RunScope(model_health=health))
        second = await agent.run("second", scope=RunScope(model_health=health), timeout=5)

        assert isinstance(first, Success)
        assert isinstance(second, ErrorEnvelope)
        assert second.error_category is ErrorCategory.TRANSIENT
        assert second.error_type == "rate_limited"
        assert second.retry_after is not None
        assert 55 < second.retry_after <= 61
        assert fake_messages_api.request_count == 1  # the second was never sent
        assert sleep.delays == []  # and nothing waited for what could not come in time

    async def test_a_streamed_answer_s_headers_hold_the_next_call_too(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """The streaming endpoint: the headers come with the stream's response."""
        fake_messages_api.rate_limit(requests_per_minute=1)
        fake_messages_api.handler = lambda request: F.text("ok")
        health = ModelHealth()
        async with AnthropicModel(
            MODEL, api_key=API_KEY, base_url=fake_messages_api.base_url, timeout=5, stream=True
        ) as streamed:
            agent = LLMSubagent("a", streamed, retry=fast_retry(attempts=4))
            first = await agent.run("first", scope=RunScope(model_health=health))
            second = await agent.run("second", scope=RunScope(model_health=health), timeout=5)

        assert isinstance(first, Success)
        assert isinstance(second, ErrorEnvelope)
        assert second.error_type == "rate_limited"
        assert fake_messages_api.request_count == 1


class TestA429:
    async def test_the_headers_of_a_429_close_the_gate_until_the_reset(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """A 429 saying no request is left for 30 s: the next task, sharing the model's
        health, does not call before then."""
        headers = {
            "anthropic-ratelimit-requests-limit": "1",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": rfc3339_in(30),
        }
        fake_messages_api.enqueue(F.error(429, headers=headers))
        health = ModelHealth()
        once = LLMSubagent("a", model, retry=fast_retry(attempts=1))

        refused_first = await once.run("first", scope=RunScope(model_health=health))
        later = await once.run("second", scope=RunScope(model_health=health), timeout=5)

        assert isinstance(refused_first, ErrorEnvelope)
        assert refused_first.error_type == "rate_limited"
        assert isinstance(later, ErrorEnvelope)
        assert later.error_type == "rate_limited"
        assert later.retry_after is not None
        assert 25 < later.retry_after <= 31
        assert fake_messages_api.request_count == 1
