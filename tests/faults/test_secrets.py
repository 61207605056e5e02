"""Secrets never leave through logs, envelopes, reports or exception messages.

Every test in this package already runs with the planted key in the environment and has
its log scanned (see conftest). Here the key and a bearer token are planted where a
careless path would copy them out: server error bodies, tool arguments, exception text,
a model's tool calls, a task's own text.
"""

from __future__ import annotations

from agentmesh import (
    Context,
    Coordinator,
    ErrorEnvelope,
    RetryPolicy,
    Task,
    ToolCallFailed,
    subagent,
    tool,
)
from agentmesh.models import AnthropicModel, ModelResponse, ScriptedModel
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeMessagesAPI
from tests.retrying import fast_retry

from .conftest import PLANTED_KEY, PLANTED_TOKEN, Captured, leaks

F = FakeMessagesAPI


class TestClaudeCalls:
    async def test_the_key_in_use_is_in_no_envelope_report_or_log(
        self, fake_messages_api: FakeMessagesAPI, captured: Captured
    ) -> None:
        """Servers that echo the key in errors: every copy is masked."""
        echo = f"invalid x-api-key: {PLANTED_KEY}"
        fake_messages_api.enqueue(
            F.error(401, message=echo),
            F.error(500, message=f"upstream rejected Authorization: Bearer {PLANTED_KEY}"),
            F.error(529, message=echo, retry_after=0),
            F.stream_error(type="api_error", message=echo),
            F.stream_error(type="api_error", message=echo),
        )
        async with AnthropicModel("claude-test", base_url=fake_messages_api.base_url) as claude:
            agents = [LLMSubagent("plain", claude, retry=fast_retry(attempts=2))]
            report = await Coordinator(agents, max_concurrency=1).run(["q1", "q2"])
            async with AnthropicModel(
                "claude-test", base_url=fake_messages_api.base_url, stream=True
            ) as streaming:
                streamed = await LLMSubagent(
                    "streamed", streaming, retry=fast_retry(attempts=2)
                ).run("q3")
        captured.add(report, streamed, *(record.final for record in report.records))
        fake_messages_api.assert_authenticated(PLANTED_KEY)
        assert fake_messages_api.request_count == 5
        assert "x-api-key" in report.to_markdown()  # the messages are kept, masked
        assert not leaks(captured.everything())


@tool(idempotent=True)
async def fetch(url: str, api_key: str, authorization: str) -> str:
    raise PermissionError(f"401 for key {api_key}")


class TestToolCalls:
    async def test_credentials_passed_to_a_tool_are_masked_where_the_call_is_shown(
        self, captured: Captured
    ) -> None:
        """attemptedQuery, the exception text and the report mask them by name and shape."""
        failures: list[ToolCallFailed] = []

        @subagent(name="crawler", retry=fast_retry(attempts=2))
        async def crawler(task: Task, ctx: Context) -> str:
            try:
                return await ctx.call(
                    fetch,
                    url=f"https://api.example.com/?token={PLANTED_TOKEN}",
                    api_key=PLANTED_KEY,
                    authorization=f"Bearer {PLANTED_TOKEN}",
                )
            except ToolCallFailed as failed:
                failures.append(failed)
                raise

        report = await Coordinator([crawler]).run([Task(query="crawl", topic="crawl")])
        final = report.records[0].final
        captured.add(report, final, *failures)
        assert isinstance(final, ErrorEnvelope)
        assert final.attempted_query["arguments"]["api_key"] == "[REDACTED]"  # type: ignore[index]
        assert not leaks(captured.everything())

    async def test_a_bearer_token_quoted_in_an_exception_is_masked(
        self, captured: Captured
    ) -> None:
        """The same shapes the log redaction masks are masked in envelopes and reports."""

        @tool(idempotent=True)
        async def call_partner(order: str) -> str:
            raise RuntimeError(
                f"GET https://partner.example/?token={PLANTED_TOKEN} said 401 "
                f"to Authorization: Bearer {PLANTED_TOKEN}"
            )

        @subagent(name="partner", retry=fast_retry(attempts=2))
        async def partner(task: Task, ctx: Context) -> str:
            return await ctx.call(call_partner, order=task.query)

        report = await Coordinator([partner]).run(["o-1"])
        captured.add(report, report.records[0].final)
        assert not leaks(captured.everything())

    async def test_a_call_that_cannot_be_bound_still_masks_its_arguments(self) -> None:
        """The envelope of a mis-called tool shows the call, not the credential."""

        @subagent(name="crawler", retry=fast_retry(attempts=2))
        async def crawler(task: Task, ctx: Context) -> str:
            # Two positionals for one positional slot, and api_key twice: a binding error.
            return await ctx.call(fetch, "https://a", "https://b", api_key=PLANTED_KEY)  # type: ignore[call-arg, misc]

        outcome = await crawler.run("crawl")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "invalid_input"
        assert not leaks(outcome.to_json())


class TestModelSuppliedArguments:
    async def test_a_token_the_model_passed_to_a_tool_is_not_in_the_partial_results(
        self,
    ) -> None:
        """A later failure keeps the completed call as a finding, with its secret masked."""

        @tool(idempotent=True)
        async def lookup(account: str, token: str) -> str:
            return "balance: 12"

        model = ScriptedModel(
            [
                ModelResponse.of_tool_calls(("lookup", {"account": "a-1", "token": PLANTED_TOKEN})),
                RuntimeError("the model fell over"),
            ]
        )
        agent = LLMSubagent("banker", model, tools=[lookup], retry=RetryPolicy.never())
        report = await Coordinator([agent]).run(["balance?"])
        assert report.coverage[0].status.value == "partial"
        assert not leaks(report.to_json())


class TestTaskText:
    async def test_a_key_pasted_into_a_question_is_not_in_the_report(self) -> None:
        """The report shows the question with the key masked, as the log does."""

        @subagent(name="support", retry=fast_retry(attempts=2))
        async def support(task: Task, ctx: Context) -> str:
            raise ConnectionError("support backend down")

        question = f"why does my key {PLANTED_KEY} get 401?"
        report = await Coordinator([support]).run([Task(query=question, topic="auth")])
        assert not leaks(report.to_json() + report.to_markdown())
