"""A hard cost cap: each call reserves its worst case first, so the cap is never passed."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import pytest

from agentmesh import Coordinator, ErrorEnvelope, Task, UsageError, tool
from agentmesh.coordinator import CoverageStatus, Report
from agentmesh.models import (
    AnthropicModel,
    FallbackModel,
    ModelHealth,
    ModelPrice,
    ModelResponse,
    ScriptedModel,
    UsageLimits,
)
from agentmesh.models._base import TextBlock, Usage
from agentmesh.retry import RetryPolicy
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeMessagesAPI, RecordedRequest, Reply
from agentmesh.usage._estimate import estimated_input_tokens

API_KEY = "sk-ant-test-0123456789abcdef"
CAP = 0.05
# A cheap model: 64 worst cases fit under the cap at once, a few hundred calls do not.
PRICE = ModelPrice(input=0.25, output=1.25, cache_write=0.3, cache_read=0.03)
PRICES = {"metered": PRICE}
MAX_TOKENS = 200

_PIECE = re.compile(r"[A-Za-z]{1,4}|\d{1,3}|[^\sA-Za-z\d]{1,3}|\s+")


@tool(idempotent=True)
async def lookup(query: str) -> list[str]:
    """Look a query up."""
    return [f"found {query}"]


def tokens_of(request: Mapping[str, Any]) -> int:
    """A stand-in for Claude's tokenizer, on its pessimistic side: word pieces of at most
    4 letters, numbers of at most 3 digits, runs of at most 3 other characters."""
    parts = {key: request.get(key) for key in ("system", "messages", "tools", "tool_choice")}
    return len(_PIECE.findall(json.dumps(parts, separators=(",", ":"))))


class MeteredModel:
    """A model whose first `together` calls meet at a barrier (so that many are in flight
    at once), answering with the tokens a pessimistic tokenizer counts in the request."""

    def __init__(self, *, together: int, output_tokens: int = 150, fail: bool = False) -> None:
        self.name = "metered"
        self.calls = 0
        self.in_flight = 0
        self.peak = 0
        self.estimates: list[tuple[int, int]] = []  # (actual, estimated) input tokens
        self._together = together
        self._barrier = asyncio.Barrier(together)
        self._output = output_tokens
        self._fail = fail

    async def create(
        self,
        *,
        messages: Sequence[Mapping[str, Any]],
        system: str | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        tool_choice: Mapping[str, Any] | None = None,
        max_tokens: int = 1024,
    ) -> ModelResponse:
        request = {
            "messages": messages,
            "system": system,
            "tools": tools,
            "tool_choice": tool_choice,
            "max_tokens": max_tokens,
        }
        self.calls += 1
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            if self.calls <= self._together:
                await self._barrier.wait()
            await asyncio.sleep(0.001)
            if self._fail:
                raise TimeoutError("read timed out")  # a failure that opens no breaker
            actual = tokens_of(request)
            self.estimates.append((actual, estimated_input_tokens(request)))
            return ModelResponse(
                content=(TextBlock(text="answer"),),
                stop_reason="end_turn",
                usage=Usage(input_tokens=actual, output_tokens=self._output),
            )
        finally:
            self.in_flight -= 1


def tasks(count: int) -> list[Task]:
    return [Task(query=f"question {n}", topic=f"t{n}") for n in range(count)]


async def run_capped(model: MeteredModel, count: int, *, hard: bool) -> Report:
    coordinator = Coordinator(
        [LLMSubagent("a", model, max_tokens=MAX_TOKENS)],
        max_concurrency=64,
        usage_limits=UsageLimits(max_cost_usd=CAP, hard=hard),
        prices=PRICES,
        # The model's window of calls in flight starts open: the cap alone holds calls.
        model_health=ModelHealth(initial_concurrency=64),
    )
    return await coordinator.run(tasks(count))


def spent(report: Report) -> float:
    assert report.usage is not None
    assert report.usage.cost_usd is not None
    return report.usage.cost_usd


class TestHardCap:
    async def test_never_passed_with_64_calls_in_flight(self) -> None:
        """64 calls meet at a barrier, 400 tasks: the spend stays at or under $0.05."""
        model = MeteredModel(together=64)
        report = await run_capped(model, 400, hard=True)
        assert model.peak == 64
        assert spent(report) <= CAP
        assert len(report.coverage) == 400  # nothing dropped
        covered = [e for e in report.coverage if e.status is CoverageStatus.COVERED]
        refused = [e for e in report.coverage if e.status is CoverageStatus.GAP]
        assert len(covered) == model.calls
        assert len(covered) + len(refused) == 400
        assert refused, "the cap must have stopped the run for this test to mean anything"
        assert all(e.reason and "max_cost_usd=0.05 (hard) reached" in e.reason for e in refused)

    async def test_the_soft_cap_is_unchanged_and_passed_by_calls_in_flight(self) -> None:
        """The default cap admits calls while under it: the calls in flight pass it."""
        model = MeteredModel(together=64)
        report = await run_capped(model, 400, hard=False)
        assert spent(report) > CAP
        assert report.usage_stop is not None
        assert not report.usage_stop.hard

    async def test_the_estimate_is_conservative_for_the_requests_used(self) -> None:
        """Every request's estimate is at least what the pessimistic tokenizer counted."""
        model = MeteredModel(together=64)
        await run_capped(model, 200, hard=True)
        assert model.estimates
        assert all(actual <= estimate for actual, estimate in model.estimates)

    async def test_reservations_are_released_when_calls_fail(self) -> None:
        """Failed calls (no usage) release what they reserved: room for one call at a time,
        40 tasks, every one gets its call made and none is refused by the cap."""
        model = MeteredModel(together=1, fail=True)
        sub = LLMSubagent("a", model, max_tokens=MAX_TOKENS, retry=RetryPolicy(max_attempts=1))
        one_call = 0.0009  # above one worst case (~$0.0007), below two
        coordinator = Coordinator(
            [sub],
            max_concurrency=40,
            usage_limits=UsageLimits(max_cost_usd=one_call, hard=True),
            prices=PRICES,
        )
        report = await coordinator.run(tasks(40))
        assert model.calls == 40
        assert model.peak == 1  # the cap held the others until each failed call settled
        finals = [record.final for record in report.records]
        failed = [f for f in finals if isinstance(f, ErrorEnvelope)]
        assert len(failed) == 40
        assert not any(f.error_type == "usage_limit_exceeded" for f in failed)
        assert report.usage_stop is None

    async def test_a_call_that_cannot_fit_is_refused_saying_reserved_and_spent(self) -> None:
        """A cap below one call's worst case: refused before any call, amounts in the envelope."""
        model = MeteredModel(together=1)
        coordinator = Coordinator(
            [LLMSubagent("a", model, max_tokens=MAX_TOKENS)],
            usage_limits=UsageLimits(max_cost_usd=0.0001, hard=True),
            prices=PRICES,
        )
        report = await coordinator.run(tasks(3))
        assert model.calls == 0
        final = report.records[0].final
        assert isinstance(final, ErrorEnvelope)
        assert final.error_type == "usage_limit_exceeded"
        assert not final.is_retryable
        assert "this call reserves up to $0.000" in final.message
        assert "$0.000000 is spent" in final.message


class TestHowFar:
    async def test_the_report_says_how_far_the_run_got(self) -> None:
        """Markdown and JSON name the cap, the spend and the tasks covered and not started."""
        model = MeteredModel(together=64)
        report = await run_capped(model, 400, hard=True)
        stop = report.usage_stop
        assert stop is not None
        assert (stop.limit, stop.hard, stop.cap_usd, stop.tasks) == ("max_cost_usd", True, CAP, 400)
        assert stop.covered == model.calls
        assert stop.covered + stop.not_started + stop.stopped == 400
        assert stop.not_started > 0
        headline = (
            f"Stopped by the hard cost cap at ${spent(report):.4f} of $0.05: "
            f"{stop.covered} of 400 tasks covered, {stop.not_started} not started."
        )
        assert f"**{headline}**" in report.to_markdown()
        data = report.to_dict()["usageStop"]
        assert data["notStarted"] == stop.not_started
        assert data["spentUsd"] == pytest.approx(spent(report))
        assert Report.model_validate(report.to_dict()).usage_stop == stop

    async def test_a_run_no_limit_stopped_keeps_its_json_shape(self) -> None:
        """No limit reached: no usageStop key, no line in the markdown."""
        model = MeteredModel(together=1)
        report = await run_capped(model, 1, hard=True)
        assert report.usage_stop is None
        assert "usageStop" not in report.to_dict()
        assert "Stopped by" not in report.to_markdown()

    async def test_a_call_limit_stop_counts_tasks_not_started(self) -> None:
        """max_model_calls is exact (counted when a call starts): 10 calls, 10 covered."""
        model = MeteredModel(together=10)
        coordinator = Coordinator(
            [LLMSubagent("a", model, max_tokens=MAX_TOKENS)],
            max_concurrency=64,
            usage_limits=UsageLimits(max_model_calls=10),
            prices=PRICES,
            model_health=ModelHealth(initial_concurrency=64),
        )
        report = await coordinator.run(tasks(50))
        assert model.calls == 10
        stop = report.usage_stop
        assert stop is not None
        assert (stop.limit, stop.covered, stop.not_started) == ("max_model_calls", 10, 40)
        assert "Stopped by the usage limit max_model_calls: 10 of 50 tasks covered, 40 not" in (
            report.to_markdown()
        )


class TestStoppedPartWay:
    async def test_a_task_the_cap_stops_part_way_keeps_its_partial_results(self) -> None:
        """Turn 1 calls a tool; turn 2 (a longer request) no longer fits: the task ends with
        the tool's result as partial results, and the report counts it as stopped."""
        turn_1 = ModelResponse.of_tool_calls(("lookup", {"query": "x"})).model_copy(
            update={"usage": Usage(input_tokens=500, output_tokens=150)}
        )
        model = ScriptedModel([turn_1], name="metered")
        coordinator = Coordinator(
            [LLMSubagent("a", model, tools=[lookup], max_tokens=MAX_TOKENS)],
            usage_limits=UsageLimits(max_cost_usd=0.0008, hard=True),  # one worst case
            prices=PRICES,
        )
        report = await coordinator.run(tasks(1))
        assert len(model.requests) == 1
        final = report.records[0].final
        assert isinstance(final, ErrorEnvelope)
        assert final.error_type == "usage_limit_exceeded"
        assert final.partial_results is not None
        assert final.partial_results.findings[0]["result"] == ["found x"]
        stop = report.usage_stop
        assert stop is not None
        assert (stop.covered, stop.stopped, stop.not_started) == (0, 1, 0)
        assert "1 stopped with their partial results" in stop.headline()


class TestEstimate:
    def test_other_characters_count_every_byte(self) -> None:
        """A CJK character is 3 UTF-8 bytes: 3 tokens, never fewer than a tokenizer makes."""
        ascii_only = estimated_input_tokens({"messages": [{"role": "user", "content": "ab"}]})
        cjk = estimated_input_tokens({"messages": [{"role": "user", "content": "ab漢字"}]})
        assert cjk - ascii_only == 6

    def test_tools_add_the_tool_use_prompt(self) -> None:
        """Tools given: the API's tool-use system prompt is reserved too."""
        request: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}
        without = estimated_input_tokens(request)
        tool = {"name": "t", "input_schema": {"type": "object"}}
        assert estimated_input_tokens({**request, "tools": [tool]}) >= without + 600


class TestMisuse:
    def test_an_unpriced_model_under_a_hard_cap_is_refused_up_front(self) -> None:
        """Its calls could never be reserved: the Coordinator says so when it is built."""
        model = MeteredModel(together=1)
        backup = MeteredModel(together=1)
        backup.name = "claude-haiku-4-5"
        with pytest.raises(UsageError, match=r"model 'metered' has no known price.*hard"):
            Coordinator(
                [LLMSubagent("a", FallbackModel(backup, model))],
                usage_limits=UsageLimits(max_cost_usd=CAP, hard=True),
            )

    def test_a_subagent_hard_cap_is_checked_too(self) -> None:
        """A subagent's own hard cap needs its model's price as much as the run's does."""
        limits = UsageLimits(max_cost_usd=CAP, hard=True)
        with pytest.raises(UsageError, match="no known price"):
            Coordinator([LLMSubagent("a", MeteredModel(together=1), usage_limits=limits)])

    def test_hard_needs_a_cost_cap(self) -> None:
        with pytest.raises(UsageError, match=r"hard=True.*max_cost_usd"):
            UsageLimits(max_model_calls=3, hard=True)

    def test_hard_is_a_bool(self) -> None:
        with pytest.raises(UsageError, match="hard="):
            UsageLimits(max_cost_usd=1.0, hard="yes")  # type: ignore[arg-type]


@pytest.fixture
async def haiku(fake_messages_api: FakeMessagesAPI) -> AsyncIterator[AnthropicModel]:
    async with AnthropicModel(
        "claude-3-haiku", api_key=API_KEY, base_url=fake_messages_api.base_url, timeout=10
    ) as claude:
        yield claude


class TestThroughTheSDK:
    async def test_the_hard_cap_holds_through_the_real_sdk(
        self, fake_messages_api: FakeMessagesAPI, haiku: AnthropicModel
    ) -> None:
        """The real SDK on loopback, 64 tasks at once: the spend stays under the cap, and
        every request's estimate covers what the server counted."""
        counted: list[tuple[int, int]] = []

        def answer(request: RecordedRequest) -> Reply:
            actual = tokens_of(request.body)
            counted.append((actual, estimated_input_tokens(request.body)))
            return FakeMessagesAPI.text("answer", input_tokens=actual, output_tokens=150)

        fake_messages_api.handler = answer
        coordinator = Coordinator(
            [LLMSubagent("a", haiku, max_tokens=MAX_TOKENS)],
            max_concurrency=64,
            usage_limits=UsageLimits(max_cost_usd=0.01, hard=True),
        )
        report = await coordinator.run(tasks(100))
        assert spent(report) <= 0.01
        assert report.usage is not None
        assert fake_messages_api.request_count == len(counted) == report.usage.model_calls
        assert all(actual <= estimate for actual, estimate in counted)
        stop = report.usage_stop
        assert stop is not None
        assert stop.covered + stop.not_started + stop.stopped == 100
        assert stop.not_started > 0
