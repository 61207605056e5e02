"""Prompt caching: cache_control markers on what a call re-sends, through the real SDK."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentmesh import Success, tool
from agentmesh.models import AnthropicModel
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeMessagesAPI, RecordedRequest
from tests.retrying import fast_retry

API_KEY = "sk-ant-test-0123456789abcdef"
F = FakeMessagesAPI
EPHEMERAL = {"type": "ephemeral"}


@pytest.fixture
async def model(fake_messages_api: FakeMessagesAPI) -> AsyncIterator[AnthropicModel]:
    async with AnthropicModel(
        "claude-test", api_key=API_KEY, base_url=fake_messages_api.base_url, timeout=5
    ) as claude:
        yield claude


@tool(idempotent=True)
async def lookup(order_id: str) -> dict[str, str]:
    """Look an order up."""
    return {"order": order_id, "status": "shipped"}


def unmarked(value: Any) -> Any:
    """`value` without its cache_control markers and with string content as a text block."""
    if isinstance(value, dict):
        plain = {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(plain.get("content"), str) and "role" in plain:
            plain["content"] = [{"type": "text", "text": plain["content"]}]
        return plain
    if isinstance(value, list):
        return [unmarked(item) for item in value]
    return value


def cached_prefix(request: RecordedRequest) -> list[dict[str, Any]]:
    """The messages up to the request's last marker, the part a later request can read."""
    [last] = [path for path in request.cache_breakpoints if path.startswith("messages[")]
    index = int(last.removeprefix("messages[").split("]", 1)[0])
    return unmarked(request.messages[: index + 1])  # type: ignore[no-any-return]


class TestBreakpoints:
    async def test_system_tools_and_conversation_are_marked_by_default(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """One ephemeral marker each on the system prompt, the last tool and the last block."""
        fake_messages_api.enqueue(F.text("ok"))
        tools = [lookup.to_anthropic_tool(), {**lookup.to_anthropic_tool(), "name": "other"}]
        await model.create(
            messages=[{"role": "user", "content": "where is #1?"}], system="Be brief.", tools=tools
        )
        [request] = fake_messages_api.requests
        assert set(request.cache_breakpoints) == {"system[0]", "tools[1]", "messages[0].content[0]"}
        assert request.body["system"] == [
            {"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}
        ]
        assert "cache_control" not in request.body["tools"][0]
        assert request.messages[0]["content"][0] == {
            "type": "text",
            "text": "where is #1?",
            "cache_control": EPHEMERAL,
        }

    async def test_prompt_caching_false_sends_no_marker(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """The opt-out sends the request exactly as given: a plain system string, no markers."""
        fake_messages_api.enqueue(F.text("ok"))
        async with AnthropicModel(
            "claude-test",
            api_key=API_KEY,
            base_url=fake_messages_api.base_url,
            prompt_caching=False,
        ) as plain:
            await plain.create(
                messages=[{"role": "user", "content": "hi"}],
                system="Be brief.",
                tools=[lookup.to_anthropic_tool()],
            )
        [request] = fake_messages_api.requests
        assert request.cache_breakpoints == []
        assert request.body["system"] == "Be brief."

    async def test_the_callers_own_markers_count_against_the_limit_of_four(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """With three markers of the caller's, only the system prompt gets one more."""
        fake_messages_api.enqueue(F.text("ok"))
        mine = [
            {
                "role": "user",
                "content": [{"type": "text", "text": f"doc {i}", "cache_control": EPHEMERAL}],
            }
            for i in range(3)
        ]
        conversation = [
            mine[0],
            {"role": "assistant", "content": "noted"},
            {"role": "user", "content": [*mine[1]["content"], *mine[2]["content"]]},
        ]
        await model.create(messages=conversation, system="s", tools=[lookup.to_anthropic_tool()])
        [request] = fake_messages_api.requests
        assert len(request.cache_breakpoints) == 4
        assert "system[0]" in request.cache_breakpoints
        assert "cache_control" not in request.body["tools"][0]

    async def test_the_callers_messages_are_not_changed(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """Markers go on copies: the conversation the caller keeps has none."""
        fake_messages_api.enqueue(F.text("ok"))
        conversation = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
        await model.create(messages=conversation)
        assert conversation == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


class TestToolLoopReadsTheCache:
    async def test_each_turn_starts_with_the_prefix_the_turn_before_marked(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """Turn 2 re-sends turn 1's marked prefix unchanged and marks its own last block."""
        fake_messages_api.enqueue(
            F.tool_use("lookup", {"order_id": "#1"}, id="toolu_1", cache_creation_input_tokens=900),
            F.tool_use("lookup", {"order_id": "#2"}, id="toolu_2", cache_read_input_tokens=900),
            F.text("Both shipped.", cache_read_input_tokens=1200),
        )
        agent = LLMSubagent("support", model, system="You track orders.", tools=[lookup])
        outcome = await agent.run("where are #1 and #2?")
        assert isinstance(outcome, Success)
        requests = fake_messages_api.requests
        assert len(requests) == 3
        for before, after in itertools.pairwise(requests):
            prefix = cached_prefix(before)
            assert unmarked(after.messages[: len(prefix)]) == prefix
            assert unmarked(after.body["system"]) == unmarked(before.body["system"])
            assert unmarked(after.body["tools"]) == unmarked(before.body["tools"])
        last = requests[-1]
        assert set(last.cache_breakpoints) == {"system[0]", "tools[2]", "messages[4].content[0]"}
        assert last.messages[4]["content"][0]["type"] == "tool_result"

    async def test_a_retried_call_sends_the_same_marked_request(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """After a 529 the retry's body is the first one's, markers included."""
        fake_messages_api.enqueue(F.error(529), F.text("done"))
        agent = LLMSubagent("support", model, system="s", retry=fast_retry(attempts=2))
        outcome = await agent.run("hi")
        assert isinstance(outcome, Success)
        first, retry = fake_messages_api.requests
        assert retry.body == first.body
        assert len(first.cache_breakpoints) == 3


class TestCacheTokens:
    @pytest.mark.parametrize("stream", [False, True])
    async def test_cache_tokens_are_parsed_into_usage(
        self, fake_messages_api: FakeMessagesAPI, stream: bool
    ) -> None:
        """Tokens written to and read from the cache are counted apart from the others."""
        fake_messages_api.enqueue(
            F.text(
                "ok",
                input_tokens=12,
                output_tokens=5,
                cache_creation_input_tokens=300,
                cache_read_input_tokens=1500,
            )
        )
        async with AnthropicModel(
            "claude-test", api_key=API_KEY, base_url=fake_messages_api.base_url, stream=stream
        ) as claude:
            response = await claude.create(messages=[{"role": "user", "content": "hi"}])
        usage = response.usage
        assert (usage.input_tokens, usage.output_tokens) == (12, 5)
        assert usage.cache_creation_input_tokens == 300
        assert usage.cache_read_input_tokens == 1500
        assert usage.total_input_tokens == 1812

    async def test_a_response_without_cache_use_counts_zero(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """The API's null cache counts are zero, not missing."""
        fake_messages_api.enqueue(F.text("ok"))
        response = await model.create(messages=[{"role": "user", "content": "hi"}])
        assert response.usage.cache_creation_input_tokens == 0
        assert response.usage.cache_read_input_tokens == 0


class TestCacheTokensInOutcomes:
    async def test_a_tool_loops_cache_tokens_reach_the_outcomes_usage_and_cost(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """Written and read cache tokens are summed apart and priced at the cache rates."""
        fake_messages_api.enqueue(
            F.tool_use(
                "lookup", {"order_id": "#1"}, id="toolu_1", cache_creation_input_tokens=2000
            ),
            F.text("It shipped.", cache_read_input_tokens=2000),
        )
        # Sonnet's table price: $3 in, $15 out, $3.75 cache write, $0.30 cache read per MTok.
        async with AnthropicModel(
            "claude-sonnet-4-5", api_key=API_KEY, base_url=fake_messages_api.base_url
        ) as sonnet:
            outcome = await LLMSubagent("support", sonnet, tools=[lookup]).run("where is #1?")
        assert isinstance(outcome, Success)
        usage = outcome.usage
        assert usage is not None
        assert (usage.cache_creation_tokens, usage.cache_read_tokens) == (2000, 2000)
        assert (usage.input_tokens, usage.output_tokens, usage.model_calls) == (20, 20, 2)
        expected = (20 * 3 + 20 * 15 + 2000 * 3.75 + 2000 * 0.3) / 1e6
        assert usage.cost_usd == pytest.approx(expected)
