"""OpenAIModel: the real openai SDK against FakeChatCompletionsAPI on loopback.

Tool loops, typed output, usage and cost, streaming, refusals and garbled answers, with
the Anthropic-shaped conversation translated to Chat Completions and the answer back.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
import structlog
from pydantic import BaseModel

from agentmesh import (
    Coordinator,
    ErrorCategory,
    ErrorEnvelope,
    RetryPolicy,
    Success,
    Task,
    UsageError,
    configure_logging,
    tool,
)
from agentmesh._numbers import duration_seconds
from agentmesh.models import ModelHealth, OpenAIModel
from agentmesh.scope import RunScope
from agentmesh.subagents import REPORT_FAILURE, SUBMIT_RESULT, LLMSubagent
from agentmesh.testing import FakeChatCompletionsAPI, RecordingSleep
from tests.retrying import fast_retry

API_KEY = "sk-test-0123456789abcdef"
F = FakeChatCompletionsAPI


@pytest.fixture
async def model(fake_chat_completions_api: FakeChatCompletionsAPI) -> AsyncIterator[OpenAIModel]:
    async with OpenAIModel(
        "gpt-4o-mini", api_key=API_KEY, base_url=fake_chat_completions_api.base_url, timeout=5
    ) as gpt:
        yield gpt


@pytest.fixture
async def streaming(
    fake_chat_completions_api: FakeChatCompletionsAPI,
) -> AsyncIterator[OpenAIModel]:
    async with OpenAIModel(
        "gpt-4o-mini",
        api_key=API_KEY,
        base_url=fake_chat_completions_api.base_url,
        timeout=5,
        stream=True,
    ) as gpt:
        yield gpt


@tool(idempotent=True)
async def lookup(order_id: str) -> dict[str, str]:
    """Look an order up."""
    return {"order": order_id, "status": "shipped"}


class Book(BaseModel):
    title: str
    year: int


def test_importing_agentmesh_imports_no_openai() -> None:
    """The SDK is an optional extra, imported by a model's first call only."""
    code = (
        "import sys, agentmesh, agentmesh.models, agentmesh.testing, agentmesh.classify\n"
        "from agentmesh.models import OpenAIModel\n"
        "OpenAIModel('gpt-5-mini')\n"
        "assert 'openai' not in sys.modules, 'openai was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


class TestOneOwnerOfRetries:
    async def test_two_503s_then_success_is_three_requests(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, model: OpenAIModel
    ) -> None:
        """The SDK's own retries are off: agentmesh's policy makes every request."""
        sleep = RecordingSleep()
        fake_chat_completions_api.enqueue(F.error(503), F.error(503), F.text("hello"))
        outcome = await LLMSubagent("a", model, retry=fast_retry(sleep, attempts=4)).run("hi")
        assert isinstance(outcome, Success)
        assert outcome.data == "hello"
        assert fake_chat_completions_api.request_count == 3
        assert sleep.delays == [0.1, 0.2]
        assert all(
            r.headers["authorization"] == f"Bearer {API_KEY}"
            for r in fake_chat_completions_api.requests
        )


class TestTranslation:
    async def test_the_request_is_chat_completions_shaped(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, model: OpenAIModel
    ) -> None:
        """System first, tools as functions, Anthropic's tool_choice in OpenAI's words."""
        fake_chat_completions_api.enqueue(F.text("ok"))
        await model.create(
            messages=[{"role": "user", "content": "hi"}],
            system="be brief",
            tools=[
                {"name": "lookup", "description": "Look up.", "input_schema": {"type": "object"}}
            ],
            tool_choice={"type": "any", "disable_parallel_tool_use": True},
            max_tokens=77,
        )
        [request] = fake_chat_completions_api.requests
        assert request.path == "/v1/chat/completions"
        assert request.body["messages"] == [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"},
        ]
        assert request.body["tools"] == [
            {
                "type": "function",
                "function": {
                    "name": "lookup",
                    "description": "Look up.",
                    "parameters": {"type": "object"},
                },
            }
        ]
        assert request.body["tool_choice"] == "required"
        assert request.body["parallel_tool_calls"] is False
        assert request.body["max_completion_tokens"] == 77

    async def test_an_older_server_gets_max_tokens(
        self, fake_chat_completions_api: FakeChatCompletionsAPI
    ) -> None:
        fake_chat_completions_api.enqueue(F.text("ok"))
        async with OpenAIModel(
            "llama3.1",
            api_key="ollama",
            base_url=fake_chat_completions_api.base_url,
            max_tokens_param="max_tokens",
        ) as llama:
            await llama.create(messages=[{"role": "user", "content": "hi"}], max_tokens=9)
        body = fake_chat_completions_api.requests[0].body
        assert body["max_tokens"] == 9
        assert "max_completion_tokens" not in body

    async def test_a_tool_call_and_its_result_round_trip_through_the_sdk(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, model: OpenAIModel
    ) -> None:
        """tool_calls run the tool; its result goes back as a `tool` message with the call id."""
        fake_chat_completions_api.enqueue(
            F.tool_call("lookup", {"order_id": "#12345"}, id="call_1"), F.text("It shipped.")
        )
        outcome = await LLMSubagent("support", model, tools=[lookup]).run("where is #12345?")
        assert isinstance(outcome, Success)
        assert outcome.data == "It shipped."
        first, second = fake_chat_completions_api.requests
        assert first.body["tools"][0]["function"]["name"] == "lookup"
        assistant, result = second.messages[-2:]
        assert assistant["tool_calls"] == [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"order_id":"#12345"}'},
            }
        ]
        assert result["role"] == "tool"
        assert result["tool_call_id"] == "call_1"
        assert json.loads(result["content"]) == {"order": "#12345", "status": "shipped"}

    async def test_the_turn_limit_forces_report_failure_as_a_named_function(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, model: OpenAIModel
    ) -> None:
        """tool_choice {type: tool} becomes {type: function, function: {name}}."""
        fake_chat_completions_api.enqueue(
            F.tool_call("lookup", {"order_id": "1"}),
            F.tool_call(
                REPORT_FAILURE,
                {
                    "errorCategory": "business",
                    "errorType": "not_found",
                    "isRetryable": False,
                    "message": "no such order",
                },
            ),
        )
        agent = LLMSubagent("support", model, tools=[lookup], max_turns=1)
        outcome = await agent.run("where is 1?")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "not_found"
        last = fake_chat_completions_api.requests[-1].body
        assert last["tool_choice"] == {"type": "function", "function": {"name": REPORT_FAILURE}}

    async def test_a_compatible_server_finishing_tool_calls_with_stop_still_calls_them(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, model: OpenAIModel
    ) -> None:
        """Some servers (Ollama) say `stop` after a turn of tool calls."""
        fake_chat_completions_api.enqueue(
            F.tool_calls(("lookup", {"order_id": "2"}), finish_reason="stop"), F.text("done")
        )
        outcome = await LLMSubagent("support", model, tools=[lookup]).run("2?")
        assert isinstance(outcome, Success)
        assert fake_chat_completions_api.request_count == 2


class TestTypedOutput:
    async def test_an_invalid_submission_goes_back_with_the_errors_then_is_corrected(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, model: OpenAIModel
    ) -> None:
        """The validation feedback reaches the model as the tool message of its call."""
        fake_chat_completions_api.enqueue(
            F.tool_call(SUBMIT_RESULT, {"result": {"title": "Dune", "year": "?"}}, id="c_bad"),
            F.tool_call(SUBMIT_RESULT, {"result": {"title": "Dune", "year": 1965}}, id="c_ok"),
        )
        outcome = await LLMSubagent("books", model, output_type=Book).run("find Dune")
        assert isinstance(outcome, Success)
        assert outcome.data == Book(title="Dune", year=1965)
        [submit] = [
            t
            for t in fake_chat_completions_api.requests[0].body["tools"]
            if t["function"]["name"] == SUBMIT_RESULT
        ]
        schema = submit["function"]["parameters"]["properties"]["result"]
        assert schema["properties"]["year"]["type"] == "integer"
        feedback = fake_chat_completions_api.requests[1].messages[-1]
        assert feedback["role"] == "tool"
        assert feedback["tool_call_id"] == "c_bad"
        envelope = json.loads(feedback["content"])
        assert envelope["errorType"] == "invalid_output"
        assert "result.year" in envelope["message"]


class TestUsageAndCost:
    async def test_cached_and_reasoning_tokens_and_the_cost(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, model: OpenAIModel
    ) -> None:
        """Input excludes the cached prompt tokens; output includes reasoning, shown apart."""
        fake_chat_completions_api.enqueue(
            F.text(
                "hi",
                prompt_tokens=1000,
                cached_tokens=400,
                completion_tokens=300,
                reasoning_tokens=120,
                model="gpt-4o-mini-2024-07-18",
            )
        )
        outcome = await LLMSubagent("a", model).run("hi")
        assert isinstance(outcome, Success)
        usage = outcome.usage
        assert usage is not None
        line = usage.by_model[0]
        assert (line.input_tokens, line.cache_read_tokens) == (600, 400)
        assert (line.output_tokens, line.reasoning_tokens) == (300, 120)
        assert usage.cost_usd == pytest.approx((600 * 0.15 + 400 * 0.075 + 300 * 0.60) / 1e6)

    async def test_an_answer_without_usage_has_unknown_counts(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, model: OpenAIModel
    ) -> None:
        fake_chat_completions_api.enqueue(F.text("hi", usage={}))
        response = await model.create(messages=[{"role": "user", "content": "hi"}])
        assert response.usage.input_tokens == 0
        assert "input_tokens=None" in response.usage.unusable

    async def test_a_dated_snapshot_is_priced_as_its_model(
        self, fake_chat_completions_api: FakeChatCompletionsAPI
    ) -> None:
        fake_chat_completions_api.enqueue(F.text("hi", prompt_tokens=100, completion_tokens=10))
        async with OpenAIModel(
            "gpt-5-2025-08-07", api_key=API_KEY, base_url=fake_chat_completions_api.base_url
        ) as gpt5:
            outcome = await LLMSubagent("a", gpt5).run("hi")
        assert outcome.usage is not None
        assert outcome.usage.cost_usd == pytest.approx((100 * 1.25 + 10 * 10) / 1e6)


class TestStreaming:
    async def test_text_and_usage_from_chunks(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, streaming: OpenAIModel
    ) -> None:
        fake_chat_completions_api.enqueue(F.text("hello there", prompt_tokens=12, cached_tokens=2))
        response = await streaming.create(messages=[{"role": "user", "content": "hi"}])
        assert response.text == "hello there"
        assert response.stop_reason == "end_turn"
        assert (response.usage.input_tokens, response.usage.cache_read_input_tokens) == (10, 2)
        body = fake_chat_completions_api.requests[0].body
        assert body["stream"] is True
        assert body["stream_options"] == {"include_usage": True}

    async def test_tool_call_deltas_are_assembled_into_the_tool_loop(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, streaming: OpenAIModel
    ) -> None:
        fake_chat_completions_api.enqueue(
            F.tool_calls(("lookup", {"order_id": "7"}), ("lookup", {"order_id": "8"})),
            F.text("both shipped"),
        )
        outcome = await LLMSubagent("support", streaming, tools=[lookup]).run("7 and 8?")
        assert isinstance(outcome, Success)
        results = [m for m in fake_chat_completions_api.requests[1].messages if m["role"] == "tool"]
        assert [json.loads(r["content"])["order"] for r in results] == ["7", "8"]

    @pytest.mark.parametrize(
        "cut",
        [F.stream_cut(after_chunks=2), F.stream_cut(after_chunks=2, error=F.error(500))],
        ids=["ended-without-finish", "error-event"],
    )
    async def test_a_broken_stream_is_transient_and_retried(
        self,
        fake_chat_completions_api: FakeChatCompletionsAPI,
        streaming: OpenAIModel,
        cut: Any,
    ) -> None:
        sleep = RecordingSleep()
        fake_chat_completions_api.enqueue(cut, F.text("full answer"))
        agent = LLMSubagent("a", streaming, retry=fast_retry(sleep, attempts=3))
        outcome = await agent.run("hi")
        assert isinstance(outcome, Success)
        assert outcome.data == "full answer"
        assert fake_chat_completions_api.request_count == 2


class TestRefusals:
    @pytest.mark.parametrize(
        ("reply", "reason"),
        [
            (F.refusal("I can't help with that."), "I can't help with that."),
            (F.content_filter(), "content_filter"),
        ],
        ids=["refusal", "content-filter"],
    )
    async def test_a_refused_answer_is_business_refused_with_the_reason(
        self,
        fake_chat_completions_api: FakeChatCompletionsAPI,
        model: OpenAIModel,
        reply: Any,
        reason: str,
    ) -> None:
        fake_chat_completions_api.enqueue(reply)
        outcome = await LLMSubagent("a", model, retry=fast_retry(attempts=3)).run("hi")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.BUSINESS
        assert outcome.error_type == "refused"
        assert reason in outcome.message + (outcome.details or "")
        assert fake_chat_completions_api.request_count == 1


class TestGarbage:
    @pytest.mark.parametrize(
        ("reply", "error_type"),
        [
            (F.garbage("<html>bad gateway</html>", status=502), "server_error"),
            (F.garbage("<html>welcome to the hotel wifi</html>", status=200), "invalid_response"),
            (
                F.garbage('{"id": "chatcmpl-1", "cho', status=200, content_type="application/json"),
                "invalid_response",
            ),
            (
                F.garbage('{"id": "chatcmpl-1"}', status=200, content_type="application/json"),
                "invalid_response",
            ),
            (F.tool_calls(("lookup", '{"order_id": ')), "invalid_response"),
        ],
        ids=["html-502", "html-200", "truncated-json", "no-choices", "tool-arguments-not-json"],
    )
    async def test_a_garbled_answer_is_a_transient_envelope_never_a_crash(
        self,
        fake_chat_completions_api: FakeChatCompletionsAPI,
        model: OpenAIModel,
        reply: Any,
        error_type: str,
    ) -> None:
        fake_chat_completions_api.enqueue(reply, reply)
        agent = LLMSubagent("a", model, tools=[lookup], retry=fast_retry(attempts=2))
        outcome = await agent.run("hi")
        assert isinstance(outcome, ErrorEnvelope)
        assert (outcome.error_category, outcome.error_type) == (ErrorCategory.TRANSIENT, error_type)
        assert fake_chat_completions_api.request_count == 2


class TestConfiguration:
    def test_a_model_name_is_required(self) -> None:
        with pytest.raises(UsageError, match="model name"):
            OpenAIModel("")

    def test_the_endpoint_is_the_base_url(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
        assert OpenAIModel("gpt-5").endpoint == "https://api.openai.com/v1"
        local = OpenAIModel("llama3.1", base_url="http://localhost:11434/v1/")
        assert local.endpoint == "http://localhost:11434/v1"
        assert "llama3.1" in repr(local)
        assert "localhost:11434" in repr(local)

    def test_the_repr_masks_a_password_and_a_key_in_the_base_url(self) -> None:
        gateway = OpenAIModel("gpt-5", base_url="https://bob:hunter2@gw.example/v1?api_key=abc123")
        shown = repr(gateway)
        assert "gw.example" in shown
        assert "hunter2" not in shown
        assert "abc123" not in shown

    async def test_a_client_passed_in_is_used_and_left_open(
        self, fake_chat_completions_api: FakeChatCompletionsAPI
    ) -> None:
        import openai

        fake_chat_completions_api.enqueue(F.text("one"), F.text("two"))
        client = openai.AsyncOpenAI(api_key=API_KEY, base_url=fake_chat_completions_api.base_url)
        async with OpenAIModel("gpt-4o", client=client) as gpt:
            assert gpt.endpoint == fake_chat_completions_api.base_url
            await gpt.create(messages=[{"role": "user", "content": "hi"}])
        assert not client.is_closed()
        await client.chat.completions.create(model="gpt-4o", messages=[])
        await client.close()


def ratelimit_headers(family: str, limit: int, remaining: int, reset: str) -> dict[str, str]:
    return {
        f"x-ratelimit-limit-{family}": str(limit),
        f"x-ratelimit-remaining-{family}": str(remaining),
        f"x-ratelimit-reset-{family}": reset,
    }


class TestRateGate:
    """OpenAI's `x-ratelimit-*` headers feed the run's gate, as Anthropic's do."""

    @pytest.mark.parametrize(
        ("family", "limit"), [("requests", 1), ("tokens", 1000)], ids=["requests", "tokens"]
    )
    async def test_a_used_up_limit_holds_the_next_call_until_its_reset(
        self,
        fake_chat_completions_api: FakeChatCompletionsAPI,
        model: OpenAIModel,
        family: str,
        limit: int,
    ) -> None:
        """The answer says nothing is left for 30 s: the next task, sharing the model's
        health, is not sent; its deadline (5 s) comes first, so it fails saying when.
        (1,000 tokens are fewer than one call takes, its input and `max_tokens`: it waits
        for the whole bucket.)"""
        headers = ratelimit_headers(family, limit, 0, "30s")
        fake_chat_completions_api.enqueue(F.text("ok", headers=headers))
        health = ModelHealth()
        agent = LLMSubagent("a", model, retry=fast_retry(attempts=3))

        first = await agent.run("first", scope=RunScope(model_health=health))
        second = await agent.run("second", scope=RunScope(model_health=health), timeout=5)

        assert isinstance(first, Success)
        assert isinstance(second, ErrorEnvelope)
        assert second.error_type == "rate_limited"
        assert second.retry_after is not None
        assert 25 < second.retry_after <= 31
        assert fake_chat_completions_api.request_count == 1

    async def test_a_fan_out_waits_for_the_refill_instead_of_meeting_429s(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, model: OpenAIModel
    ) -> None:
        """40 tasks against 10 requests and 4,000 tokens a (0.2 s) minute: the headers of
        the first answers hold the rest until the buckets refill, so every task is
        answered and (almost) no request is refused."""
        fake_chat_completions_api.rate_limit(
            requests_per_minute=10, tokens_per_minute=4_000, minute=0.2
        )
        fake_chat_completions_api.handler = lambda request: F.text("ok", completion_tokens=5)
        # Real sleeps: the waits are the buckets' own (a fifth of a second a minute).
        agent = LLMSubagent("a", model, max_tokens=64, retry=RetryPolicy(max_attempts=6))
        coordinator = Coordinator([agent], max_concurrency=40)

        report = await coordinator.run([Task(query=f"q{n}", topic="t") for n in range(40)])

        assert all(isinstance(record.final, Success) for record in report.records)
        # Before the first answers no limit is known: the first calls go as they come
        # (measured: 2 or 3 refused of 42 or 43 requests, all answered in about a second).
        assert fake_chat_completions_api.request_count - 40 <= 4

    async def test_a_limit_with_room_left_admits_the_next_call(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, model: OpenAIModel
    ) -> None:
        headers = {
            **ratelimit_headers("requests", 500, 499, "120ms"),
            **ratelimit_headers("tokens", 200_000, 199_000, "300ms"),
        }
        fake_chat_completions_api.handler = lambda request: F.text("ok", headers=headers)
        health = ModelHealth()
        agent = LLMSubagent("a", model, retry=fast_retry(attempts=3))
        for query in ("first", "second", "third"):
            outcome = await agent.run(query, scope=RunScope(model_health=health), timeout=5)
            assert isinstance(outcome, Success)
        assert fake_chat_completions_api.request_count == 3

    async def test_the_headers_of_a_429_close_the_gate_until_the_reset(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, model: OpenAIModel
    ) -> None:
        fake_chat_completions_api.enqueue(
            F.error(429, headers=ratelimit_headers("requests", 3, 0, "20s"))
        )
        health = ModelHealth()
        once = LLMSubagent("a", model, retry=fast_retry(attempts=1))

        refused = await once.run("first", scope=RunScope(model_health=health))
        later = await once.run("second", scope=RunScope(model_health=health), timeout=5)

        assert isinstance(refused, ErrorEnvelope)
        assert refused.retry_after == pytest.approx(20)
        assert isinstance(later, ErrorEnvelope)
        assert later.error_type == "rate_limited"
        assert fake_chat_completions_api.request_count == 1


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5), ("0.5s", 0.5)],
)
def test_openai_reset_durations_read_as_seconds(text: str, seconds: float) -> None:
    assert duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "5", "1x", "2024-01-01T00:00:00Z", "1s junk"])
def test_what_is_no_duration_is_none(text: str) -> None:
    assert duration_seconds(text) is None


class TestSecrets:
    @pytest.mark.parametrize(
        "key",
        [
            "sk-proj-Abc123_def456-GHI789jkl012MNO345",
            "sk-0123456789abcdefABCDEF0123456789abcdefABCDEF01",
        ],
        ids=["project-key", "legacy-key"],
    )
    async def test_the_api_key_never_reaches_logs_envelopes_or_reports(
        self, fake_chat_completions_api: FakeChatCompletionsAPI, key: str
    ) -> None:
        """Scan everything a run produces for the key, even when a server echoes it."""
        stream = io.StringIO()
        configure_logging("DEBUG", json=True, stream=stream)
        echoed = F.error(401, f"Incorrect API key provided: {key}.")
        fake_chat_completions_api.enqueue(echoed, F.error(503), F.error(503))
        try:
            async with OpenAIModel(
                "gpt-4o", api_key=key, base_url=fake_chat_completions_api.base_url
            ) as gpt:
                agent = LLMSubagent("a", gpt, retry=fast_retry(attempts=2))
                report = await Coordinator([agent]).run([Task(query="q1"), Task(query="q2")])
        finally:
            structlog.reset_defaults()
        produced = stream.getvalue() + report.to_json() + report.to_markdown()
        assert "route_decision" in stream.getvalue()
        assert key not in produced
        assert key[8:] not in produced


async def test_a_stream_cut_by_the_deadline_is_a_timeout(
    fake_chat_completions_api: FakeChatCompletionsAPI,
) -> None:
    """The whole call has a deadline, the stream's chunks included."""
    fake_chat_completions_api.handler = lambda request: F.slow(5, F.text("late"))
    async with OpenAIModel(
        "gpt-4o",
        api_key=API_KEY,
        base_url=fake_chat_completions_api.base_url,
        timeout=0.2,
        stream=True,
    ) as impatient:
        outcome = await LLMSubagent("a", impatient, retry=fast_retry(attempts=1)).run("hi")
    assert isinstance(outcome, ErrorEnvelope)
    assert (outcome.error_category, outcome.error_type) == (ErrorCategory.TRANSIENT, "timeout")
