"""What an LLMSubagent sends the model, read from the requests of the real anthropic SDK.

The model is `AnthropicModel` against `FakeMessagesAPI` on loopback: each test looks at
the request body the fake server recorded, as the Messages API would receive it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentmesh import tool
from agentmesh.models import AnthropicModel
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeMessagesAPI

API_KEY = "sk-ant-test-0123456789abcdef"
F = FakeMessagesAPI
TEXT = 'line 1\nline 2 "q"'


@pytest.fixture
async def model(fake_messages_api: FakeMessagesAPI) -> AsyncIterator[AnthropicModel]:
    async with AnthropicModel(
        "claude-test", api_key=API_KEY, base_url=fake_messages_api.base_url, timeout=5
    ) as claude:
        yield claude


def tool_result(api: FakeMessagesAPI, index: int) -> dict[str, Any]:
    """The one tool_result block of request `index`'s last message."""
    [block] = [b for b in api.requests[index].messages[-1]["content"] if b["type"] == "tool_result"]
    return dict(block)


@tool(idempotent=True)
async def quote(name: str) -> str:
    """Two lines of text with quotes."""
    return TEXT


@tool(idempotent=True)
async def lookup(name: str) -> dict[str, Any]:
    """A structured record."""
    return {"name": name, "lines": TEXT.splitlines()}


@tool(idempotent=True)
async def blank(name: str) -> str:
    """An empty text: searched, nothing found."""
    return ""


class TestToolResultsAsTheModelReadsThem:
    async def test_a_text_result_reaches_the_model_as_the_text_itself(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """A tool's string comes back unescaped: its line break and quotes as they are."""
        fake_messages_api.enqueue(F.tool_use("quote", {"name": "x"}), F.text("done"))
        await LLMSubagent("a", model, tools=[quote]).run("q")
        result = tool_result(fake_messages_api, 1)
        assert result["content"] == TEXT
        assert "is_error" not in result

    async def test_structured_data_reaches_the_model_as_json(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """A dict result is sent as its JSON, which reads back as the same data."""
        fake_messages_api.enqueue(F.tool_use("lookup", {"name": "x"}), F.text("done"))
        await LLMSubagent("a", model, tools=[lookup]).run("q")
        content = tool_result(fake_messages_api, 1)["content"]
        assert json.loads(content) == {"name": "x", "lines": ["line 1", 'line 2 "q"']}

    async def test_an_empty_text_result_is_still_shown_as_empty(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """An empty string is sent as `""`: never a blank block the API would refuse."""
        fake_messages_api.enqueue(F.tool_use("blank", {"name": "x"}), F.text("done"))
        await LLMSubagent("a", model, tools=[blank]).run("q")
        assert tool_result(fake_messages_api, 1)["content"] == '""'
