"""Testing your own agents: offline, fast, and without waiting out a single backoff.

Copy this file next to your tests and run `pytest`. What it needs in your project:

    pip install 'agentmesh-failwell[testing]' pytest pytest-asyncio

    # pyproject.toml
    [tool.pytest.ini_options]
    asyncio_mode = "auto"                            # async def tests run without a marker
    asyncio_default_fixture_loop_scope = "function"  # one event loop per test
    filterwarnings = ["error"]                       # a warning is a bug in a test suite

The `fake_messages_api` fixture comes with agentmesh (its pytest plugin): a real Messages
API server on 127.0.0.1 that the official SDK talks to, with a script of replies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from agentmesh import (
    Context,
    Coordinator,
    ErrorEnvelope,
    RetryPolicy,
    Subagent,
    Success,
    Task,
    TransientError,
    subagent,
    tool,
)
from agentmesh.models import AnthropicModel, ModelResponse, ScriptedModel
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FailTimes, FakeMessagesAPI, RecordingSleep

# The agents under test: in your project, import them from your own package. The docs
# agent is built by a function so a test can inject faults and a sleep that only records.
INDEX = {"asyncio cancellation": ["Task.cancel() requests cancellation"]}
refunds_made: list[int] = []


def make_docs_agent(
    fail: FailTimes | None = None, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
) -> Subagent:
    @tool(idempotent=True)
    async def search(query: str) -> list[str]:
        if fail is not None:
            fail()  # raises for the first `fail.times` calls
        return INDEX.get(query, [])

    retry = RetryPolicy(max_attempts=3, initial_delay=0.1, jitter="none", sleep=sleep)

    @subagent(name="docs", retry=retry)
    async def docs(task: Task, ctx: Context) -> list[str]:
        return await ctx.call(search, query=task.query)

    return docs


@tool(impact="financial")
async def refund(amount: int) -> str:
    refunds_made.append(amount)
    return f"refunded ${amount}"


@pre_tool_use(tool=refund)
def refund_limit(event: ToolCallEvent) -> Ruling | None:
    if event.arguments["amount"] > 500:
        return Ruling.deny("refunds above $500 need a supervisor")
    return None


@subagent(name="billing", policies=[refund_limit])
async def billing(task: Task, ctx: Context) -> str:
    return await ctx.call(refund, amount=int(task.query))


class TestDocsAgent:
    async def test_recovers_from_two_timeouts_with_backoff(self) -> None:
        """Two timeouts are retried locally after 0.1 s and 0.2 s, and the answer arrives."""
        fail = FailTimes(2, lambda: TransientError("timed out", error_type="timeout"))
        sleep = RecordingSleep()
        outcome = await make_docs_agent(fail, sleep).run("asyncio cancellation")
        assert isinstance(outcome, Success)
        assert outcome.data == ["Task.cancel() requests cancellation"]
        assert fail.calls == 3  # the tool really ran three times
        assert sleep.delays == [0.1, 0.2]  # asserted, never waited for

    async def test_nothing_found_is_reported_as_empty_not_as_a_gap(self) -> None:
        """A search with no hits is an empty success, and the report says 'empty'."""
        report = await Coordinator([make_docs_agent()]).run(
            [Task(query="tokio internals", topic="tokio")]
        )
        assert [entry.status.value for entry in report.coverage] == ["empty"]


class TestBillingPolicy:
    async def test_refund_over_the_limit_never_reaches_the_tool(self) -> None:
        """A $900 refund is denied by the policy: a policy_blocked envelope, no money moved."""
        refunds_made.clear()
        outcome = await billing.run("900")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "policy_blocked"
        assert not outcome.is_retryable
        assert refunds_made == []


class TestLeadAgent:
    async def test_scripted_model_calls_the_docs_subagent(self) -> None:
        """With a ScriptedModel, the lead calls its docs tool and answers from its result."""
        model = ScriptedModel(
            [
                ModelResponse.of_tool_calls(("docs", {"query": "asyncio cancellation"})),
                ModelResponse.of_text("Use Task.cancel()."),
            ]
        )
        lead = LLMSubagent("lead", model, tools=[make_docs_agent().as_tool()])
        outcome = await lead.run("How do I cancel a task?")
        assert isinstance(outcome, Success)
        assert outcome.data == "Use Task.cancel()."
        # The second request carried the docs subagent's result back to the model.
        tool_result = model.requests[1].messages[-1]["content"][0]
        assert "Task.cancel() requests cancellation" in str(tool_result["content"])

    async def test_overloaded_api_is_retried_by_agentmesh_not_the_sdk(
        self, fake_messages_api: FakeMessagesAPI
    ) -> None:
        """Two 529s then an answer: exactly three HTTP requests, the backoff recorded."""
        fake = FakeMessagesAPI
        fake_messages_api.enqueue(fake.error(529), fake.error(529), fake.text("hello"))
        sleep = RecordingSleep()
        async with AnthropicModel(
            "claude-test", api_key="sk-ant-test", base_url=fake_messages_api.base_url
        ) as model:
            lead = LLMSubagent("lead", model, retry=RetryPolicy(max_attempts=3, sleep=sleep))
            outcome = await lead.run("hi")
        assert isinstance(outcome, Success)
        assert outcome.data == "hello"
        assert fake_messages_api.request_count == 3
        assert len(sleep.delays) == 2
