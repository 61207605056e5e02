"""Fallback chains through the real anthropic SDK: one model name overloaded, another up."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from agentmesh import Coordinator, ErrorCategory, ErrorEnvelope, Success, Task, UsageError
from agentmesh.coordinator import CoverageStatus
from agentmesh.models import AnthropicModel, FallbackModel, ModelFailover, ScriptedModel
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeMessagesAPI, RecordedRequest, RecordingSleep, Reply
from tests.retrying import fast_retry

API_KEY = "sk-ant-test-0123456789abcdef"
F = FakeMessagesAPI
PRIMARY, BACKUP = "claude-primary", "claude-backup"


def by_model(**replies: Callable[[], Reply]) -> Callable[[RecordedRequest], Reply]:
    """A handler answering each model name with its own reply (a 404 for any other)."""

    def handler(request: RecordedRequest) -> Reply:
        reply = replies.get((request.model or "").replace("-", "_"))
        return reply() if reply is not None else F.error(404, message=f"no model {request.model}")

    return handler


def models_asked(api: FakeMessagesAPI) -> list[str | None]:
    return [request.model for request in api.requests]


@pytest.fixture
async def chain(fake_messages_api: FakeMessagesAPI) -> AsyncIterator[FallbackModel]:
    url = fake_messages_api.base_url
    async with (
        AnthropicModel(PRIMARY, api_key=API_KEY, base_url=url, timeout=5) as primary,
        AnthropicModel(BACKUP, api_key=API_KEY, base_url=url, timeout=5) as backup,
    ):
        yield FallbackModel(primary, backup)


class TestFailover:
    async def test_overloaded_primary_fails_over_after_its_retries(
        self, fake_messages_api: FakeMessagesAPI, chain: FallbackModel
    ) -> None:
        """A 529 on every try of the primary sends the same request to the backup, which answers."""
        fake_messages_api.handler = by_model(
            claude_primary=lambda: F.error(529), claude_backup=lambda: F.text("from backup")
        )
        sleep = RecordingSleep()
        agent = LLMSubagent("a", chain, retry=fast_retry(sleep, attempts=3))
        outcome = await agent.run("hi")
        assert isinstance(outcome, Success)
        assert outcome.data == "from backup"
        assert models_asked(fake_messages_api) == [PRIMARY, PRIMARY, PRIMARY, BACKUP]
        assert sleep.delays == [0.1, 0.2]  # the primary's own retries, none before the backup
        requests = fake_messages_api.requests
        assert requests[3].messages == requests[0].messages  # the same request
        assert outcome.usage is not None
        assert outcome.usage.failovers == (
            ModelFailover(model=PRIMARY, error_type="overloaded", attempts=3, fallback=BACKUP),
        )
        assert outcome.usage.answered_by == (BACKUP,)

    async def test_retry_after_beyond_the_deadline_fails_over_at_once(
        self, fake_messages_api: FakeMessagesAPI, chain: FallbackModel
    ) -> None:
        """A primary asking for 60 s with 5 s left is not waited for: the backup answers now."""
        fake_messages_api.handler = by_model(
            claude_primary=lambda: F.error(529, retry_after=60),
            claude_backup=lambda: F.text("now"),
        )
        sleep = RecordingSleep()
        agent = LLMSubagent("a", chain, retry=fast_retry(sleep, attempts=4))
        outcome = await agent.run("hi", timeout=5)
        assert isinstance(outcome, Success)
        assert outcome.data == "now"
        assert models_asked(fake_messages_api) == [PRIMARY, BACKUP]
        assert sleep.delays == []

    async def test_rate_limited_primary_fails_over(
        self, fake_messages_api: FakeMessagesAPI, chain: FallbackModel
    ) -> None:
        """A 429 is one of the default fail-over types too."""
        fake_messages_api.handler = by_model(
            claude_primary=lambda: F.error(429), claude_backup=lambda: F.text("ok")
        )
        outcome = await LLMSubagent("a", chain, retry=fast_retry(attempts=1)).run("hi")
        assert isinstance(outcome, Success)
        assert models_asked(fake_messages_api) == [PRIMARY, BACKUP]

    @pytest.mark.parametrize(
        ("status", "category"),
        [(400, ErrorCategory.VALIDATION), (403, ErrorCategory.PERMISSION)],
    )
    async def test_validation_and_permission_errors_are_not_failed_over(
        self,
        fake_messages_api: FakeMessagesAPI,
        chain: FallbackModel,
        status: int,
        category: ErrorCategory,
    ) -> None:
        """The request or the key is at fault, not the model: the backup is never asked."""
        fake_messages_api.handler = by_model(
            claude_primary=lambda: F.error(status), claude_backup=lambda: F.text("never")
        )
        outcome = await LLMSubagent("a", chain, retry=fast_retry(attempts=3)).run("hi")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is category
        assert models_asked(fake_messages_api) == [PRIMARY]

    async def test_only_the_chosen_error_types_fail_over(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """With `on={"rate_limited"}`, an overloaded primary is not failed over."""
        fake_messages_api.handler = by_model(
            claude_primary=lambda: F.error(529), claude_backup=lambda: F.text("never")
        )
        url = fake_messages_api.base_url
        async with (
            AnthropicModel(PRIMARY, api_key=API_KEY, base_url=url) as primary,
            AnthropicModel(BACKUP, api_key=API_KEY, base_url=url) as backup,
        ):
            chain = FallbackModel(primary, backup, on={"rate_limited"})
            outcome = await LLMSubagent("a", chain, retry=fast_retry(attempts=1)).run("hi")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "overloaded"
        assert models_asked(fake_messages_api) == [PRIMARY]


class TestEveryModelDown:
    async def test_the_envelope_names_every_model_tried_and_why(
        self, fake_messages_api: FakeMessagesAPI, chain: FallbackModel
    ) -> None:
        """When the whole chain fails, `details` says which models failed and how."""
        fake_messages_api.handler = by_model(
            claude_primary=lambda: F.error(529), claude_backup=lambda: F.error(503)
        )
        outcome = await LLMSubagent("a", chain, retry=fast_retry(attempts=2)).run("hi")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "unavailable"
        assert outcome.is_retryable
        assert outcome.details is not None
        assert (
            f"models tried: {PRIMARY} (overloaded after 2 attempts), "
            f"{BACKUP} (unavailable after 2 attempts)"
        ) in outcome.details
        assert outcome.usage is not None
        assert outcome.usage.model_calls == 4
        assert outcome.usage.answered_by == ()


class TestInTheReport:
    async def test_the_coverage_reason_names_the_failed_and_the_answering_model(
        self, fake_messages_api: FakeMessagesAPI, chain: FallbackModel
    ) -> None:
        """The report says the primary failed over and the backup answered, in Markdown too."""
        fake_messages_api.handler = by_model(
            claude_primary=lambda: F.error(529), claude_backup=lambda: F.text("answer")
        )
        agent = LLMSubagent("a", chain, retry=fast_retry(attempts=2))
        report = await Coordinator([agent]).run([Task(query="q", topic="t")])
        entry = report.coverage[0]
        assert entry.status is CoverageStatus.COVERED
        assert entry.reason is not None
        assert f"models failed over: {PRIMARY} overloaded after 2 attempts" in entry.reason
        assert f"answered by model {BACKUP}" in entry.reason
        markdown = report.to_markdown()
        assert f"failed over: {PRIMARY} (overloaded after 2 attempts) → {BACKUP}" in markdown
        failovers = report.to_dict()["usage"]["failovers"]
        assert failovers == [
            {"model": PRIMARY, "errorType": "overloaded", "attempts": 2, "fallback": BACKUP}
        ]


class TestDirectCalls:
    async def test_create_called_directly_tries_each_model_once(
        self, fake_messages_api: FakeMessagesAPI, chain: FallbackModel
    ) -> None:
        """Outside a subagent, `create` asks each model once, in order, until one answers."""
        fake_messages_api.handler = by_model(
            claude_primary=lambda: F.error(529), claude_backup=lambda: F.text("direct")
        )
        response = await chain.create(messages=[{"role": "user", "content": "hi"}])
        assert response.text == "direct"
        assert models_asked(fake_messages_api) == [PRIMARY, BACKUP]


class TestMisuse:
    def test_a_chain_needs_a_fallback(self) -> None:
        """A chain of one model is a mistake, said at construction."""
        with pytest.raises(UsageError, match="fallbacks"):
            FallbackModel(ScriptedModel([]))

    def test_a_fallback_must_be_a_model(self) -> None:
        """What is not a model is named by its position."""
        with pytest.raises(UsageError, match=r"fallbacks\[0\]"):
            FallbackModel(ScriptedModel([]), "claude-backup")  # a name with no provider

    def test_on_takes_a_set_of_error_types(self) -> None:
        """A bare string for `on` would be a set of letters: refused."""
        with pytest.raises(UsageError, match="on="):
            FallbackModel(ScriptedModel([]), ScriptedModel([]), on="overloaded")
