"""What an LLMSubagent sends the model, read from the requests of the real anthropic SDK.

The model is `AnthropicModel` against `FakeMessagesAPI` on loopback: each test looks at
the request body the fake server recorded, as the Messages API would receive it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentmesh import Coordinator, ErrorEnvelope, Task, tool
from agentmesh.coordinator import CoverageStatus
from agentmesh.envelope import RetryCount
from agentmesh.models import AnthropicModel
from agentmesh.subagents import REPORT_FAILURE, LLMSubagent
from agentmesh.testing import FailTimes, FakeMessagesAPI
from agentmesh.tools import Tool
from tests.retrying import fast_retry

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


FRAMEWORK_FIELDS = ("source", "attempts", "usage", "retries", "rulings", "policy", "isError")


def failure_tool(api: FakeMessagesAPI, index: int = 0) -> dict[str, Any]:
    [offered] = [t for t in api.requests[index].body["tools"] if t["name"] == REPORT_FAILURE]
    return dict(offered)


class TestFailureReportTool:
    async def test_the_tool_offers_only_what_a_model_can_honestly_fill(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """No usage, source, attempts or rulings are asked for, in a schema under 1.5 KB."""
        fake_messages_api.enqueue(F.text("done"))
        await LLMSubagent("a", model).run("q")
        offered = failure_tool(fake_messages_api)
        schema = offered["input_schema"]
        assert not set(FRAMEWORK_FIELDS) & set(schema["properties"])
        assert set(schema["required"]) == {"errorCategory", "errorType", "isRetryable", "message"}
        sent = {key: value for key, value in offered.items() if key != "cache_control"}
        assert len(json.dumps(sent, separators=(",", ":"))) < 1500  # it was 5.9 KB

    async def test_a_report_that_fills_the_offered_schema_is_the_outcome(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """Every field the schema offers reaches the envelope as the model said it."""
        report = {
            "errorCategory": "business",
            "errorType": "out_of_stock",
            "isRetryable": False,
            "message": "the item is sold out",
            "attemptedQuery": {"sku": "A1"},
            "partialResults": {"completed": ["price"], "pending": ["stock"], "findings": [3]},
            "alternativeApproaches": ["ask_supplier"],
            "details": "warehouse 2",
            "userMessage": "Sorry, sold out.",
        }
        fake_messages_api.enqueue(F.tool_use(REPORT_FAILURE, report))
        outcome = await LLMSubagent("a", model).run("q")
        assert isinstance(outcome, ErrorEnvelope)
        wire = outcome.to_dict()
        assert {key: wire[key] for key in report} == report

    async def test_what_only_the_framework_knows_is_never_taken_from_the_model(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """Invented usage, attempts, source and retries give way to the framework's own."""
        report = {
            "errorCategory": "transient",
            "errorType": "timeout",
            "isRetryable": True,
            "message": "the archive timed out",
            "usage": {"inputTokens": 123456, "modelCalls": 40},
            "attempts": 9,
            "source": "someone else",
            "retries": [{"source": "x", "errorType": "timeout", "count": 5}],
        }
        fake_messages_api.enqueue(
            F.tool_use(REPORT_FAILURE, report, input_tokens=30, output_tokens=7)
        )
        outcome = await LLMSubagent("archive", model).run("archive search 1999")
        assert isinstance(outcome, ErrorEnvelope)
        assert (outcome.error_type, outcome.message) == ("timeout", "the archive timed out")
        assert (outcome.source, outcome.attempts, outcome.retries) == ("archive", 1, None)
        assert outcome.attempted_query == "archive search 1999"
        assert outcome.usage is not None
        assert (outcome.usage.input_tokens, outcome.usage.model_calls) == (30, 1)


def flaky_search(failures: int) -> Tool[..., Any]:
    """A search that times out `failures` times, then answers; 3 attempts per call."""
    flaky = FailTimes(failures, lambda: TimeoutError("search timeout"))

    @tool(idempotent=True, retry=fast_retry(attempts=3))
    async def search(query: str) -> list[str]:
        """Search."""
        flaky()
        return [f"hit for {query}"]

    return search


class TestRetriesOfAToolCallInTheReport:
    async def test_a_call_that_gave_up_says_so(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """Two retries then a third timeout: the model answers anyway, the report says gave up."""
        fake_messages_api.enqueue(F.tool_use("search", {"query": "x"}), F.text("no luck"))
        lead = LLMSubagent("lead", model, tools=[flaky_search(3)])
        report = await Coordinator([lead]).run([Task(query="q", topic="t")])
        [entry] = report.coverage
        assert tool_result(fake_messages_api, 1)["is_error"] is True
        assert entry.status is CoverageStatus.COVERED
        assert entry.reason == "2 local retries, gave up: lead/search timeout x2"
        assert entry.retries == (
            RetryCount(source="lead/search", error_type="timeout", count=2, gave_up=True),
        )
        assert report.to_dict()["coverage"][0]["retries"][0]["gaveUp"] is True

    async def test_a_call_that_recovered_says_so(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """Two timeouts then a result: the report says the call recovered."""
        fake_messages_api.enqueue(F.tool_use("search", {"query": "x"}), F.text("found"))
        lead = LLMSubagent("lead", model, tools=[flaky_search(2)])
        report = await Coordinator([lead]).run([Task(query="q", topic="t")])
        [entry] = report.coverage
        assert "is_error" not in tool_result(fake_messages_api, 1)
        assert entry.reason == "recovered after 2 local retries: lead/search timeout x2"
        assert "gaveUp" not in report.to_dict()["coverage"][0]["retries"][0]

    async def test_calls_that_ended_differently_are_told_apart(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """Of two calls in one turn, the one that gave up and the one that recovered differ."""
        fake_messages_api.enqueue(
            F.message(
                [
                    F.tool_use_block("search", {"query": "a"}),
                    F.tool_use_block("lookup_slowly", {"name": "b"}),
                ]
            ),
            F.text("half found"),
        )
        slow = FailTimes(1, lambda: ConnectionError("refused"))

        @tool(idempotent=True, retry=fast_retry(attempts=3))
        async def lookup_slowly(name: str) -> str:
            """Look up."""
            slow()
            return name

        lead = LLMSubagent("lead", model, tools=[flaky_search(3), lookup_slowly])
        report = await Coordinator([lead]).run([Task(query="q", topic="t")])
        [entry] = report.coverage
        # Counted as each call ends: the two calls run concurrently, in either order.
        counted, _, shown = (entry.reason or "").partition(": ")
        assert counted == "3 local retries"
        assert set(shown.split(", ")) == {
            "lead/search timeout x2 (gave up)",
            "lead/lookup_slowly unavailable x1 (recovered)",
        }
