"""A model's health shared by the tasks of a run (issue 26): breakers that open and probe,
sticky fail-over, quotas that take a model out, and a window of calls that adapts.

In-process models play the overloaded primary (a `TransientError` of type `overloaded`,
what the SDK mapping makes of a 529); one end-to-end test goes through the real anthropic
SDK against the fake Messages API.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from agentmesh import BusinessError, Coordinator, Report, Success, Task, TransientError, tool
from agentmesh.breaker import BreakerState
from agentmesh.classify import default_classifier
from agentmesh.events import AttemptFailed
from agentmesh.models import (
    AnthropicModel,
    FallbackModel,
    ModelHealth,
    ModelResponse,
    UsageLimits,
)
from agentmesh.report import CoverageStatus
from agentmesh.scope import RunScope
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeMessagesAPI, RecordedRequest, RecordingSleep, Reply
from tests.retrying import fast_retry

F = FakeMessagesAPI


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Model:
    """An in-process model: `behaviour()` answers or raises; calls and concurrency counted."""

    def __init__(self, name: str, behaviour: Callable[[], ModelResponse]) -> None:
        self.name = name
        self.behaviour = behaviour
        self.calls = 0
        self.in_flight = 0
        self.most_in_flight = 0
        self.hold: asyncio.Event | None = None  # set: every call waits for it

    async def create(
        self,
        *,
        messages: Sequence[Mapping[str, Any]],
        system: str | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        tool_choice: Mapping[str, Any] | None = None,
        max_tokens: int = 1024,
    ) -> ModelResponse:
        self.calls += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.001)  # a call takes time: others start meanwhile
            if self.hold is not None:
                await self.hold.wait()
            return self.behaviour()
        finally:
            self.in_flight -= 1


def overloaded() -> ModelResponse:
    raise TransientError("Overloaded", error_type="overloaded")


def answer() -> ModelResponse:
    return ModelResponse.of_text("from the model")


def down_and_up() -> tuple[Model, Model, FallbackModel]:
    primary, backup = Model("sonnet", overloaded), Model("haiku", answer)
    return primary, backup, FallbackModel(primary, backup)


def tasks(n: int) -> list[Task]:
    return [Task(query=f"q{i}", topic=f"t{i}") for i in range(n)]


class TestBreaker:
    async def test_overload_opens_it_and_later_tasks_skip_the_primary(self) -> None:
        """After 2 overloads the primary is out: the other 8 tasks go straight to haiku."""
        primary, backup, chain = down_and_up()
        health = ModelHealth(failure_threshold=2)
        agent = LLMSubagent("a", chain, retry=fast_retry(attempts=1))
        report = await Coordinator([agent], max_concurrency=1, model_health=health).run(tasks(10))
        assert report.coverage_ratio == 1.0
        assert primary.calls == 2
        assert backup.calls == 10
        assert health.state(primary) is BreakerState.OPEN
        lines = report.to_markdown().splitlines()
        skipped = [line for line in lines if line.startswith("- skipped:")]
        assert len(skipped) == 1
        assert skipped[0].startswith("- skipped: sonnet overloaded since ")
        assert skipped[0].endswith(": 8 calls went to haiku")
        assert report.usage is not None
        assert [f.attempts for f in report.usage.failovers if f.skipped] == [0] * 8

    async def test_no_local_retry_is_spent_on_an_open_model(self) -> None:
        """With 4 attempts allowed, a task after the breaker opened sleeps not once."""
        primary, _backup, chain = down_and_up()
        health = ModelHealth(failure_threshold=3)
        scope = RunScope(model_health=health)
        first, second = RecordingSleep(), RecordingSleep()
        await LLMSubagent("a", chain, retry=fast_retry(first, attempts=4)).run("q1", scope=scope)
        assert primary.calls == 3  # 3 opened it: no 4th attempt, and no wait for one
        assert first.delays == [0.1, 0.2]
        outcome = await LLMSubagent("a", chain, retry=fast_retry(second, attempts=4)).run(
            "q2", scope=scope
        )
        assert isinstance(outcome, Success)
        assert primary.calls == 3
        assert second.delays == []
        assert outcome.usage is not None
        assert [line.model for line in outcome.usage.by_model] == ["haiku"]  # no usage on it

    async def test_exactly_one_task_probes_and_the_others_keep_to_the_fallback(self) -> None:
        """Half-open: of 20 tasks at once one probes the primary; 19 go to haiku meanwhile."""
        clock = Clock()
        primary, backup, chain = down_and_up()
        health = ModelHealth(failure_threshold=1, reset_after=10, clock=clock)
        scope = RunScope(model_health=health)
        agent = LLMSubagent("a", chain, retry=fast_retry(attempts=1))
        await agent.run("opens it", scope=scope)
        assert health.state(primary) is BreakerState.OPEN
        clock.now += 11
        primary.behaviour, primary.hold = answer, asyncio.Event()
        done = asyncio.Event()

        async def one(i: int) -> Any:
            outcome = await agent.run(f"q{i}", scope=scope)
            if backup.calls == 1 + 19:
                done.set()
            return outcome

        running = [asyncio.create_task(one(i)) for i in range(20)]
        await asyncio.wait_for(done.wait(), 5)
        assert primary.calls == 2  # the one that opened it, and one probe still in flight
        primary.hold.set()  # the probe answers
        outcomes = await asyncio.gather(*running)
        assert all(isinstance(outcome, Success) for outcome in outcomes)
        assert health.state(primary) is BreakerState.CLOSED
        await agent.run("after the probe", scope=scope)
        assert primary.calls == 3  # back to the primary

    async def test_a_failed_probe_keeps_it_out(self) -> None:
        """A probe answered 529 opens the breaker again for another cool-down."""
        clock = Clock()
        primary, _backup, chain = down_and_up()
        health = ModelHealth(failure_threshold=1, reset_after=10, clock=clock)
        scope = RunScope(model_health=health)
        agent = LLMSubagent("a", chain, retry=fast_retry(attempts=1))
        await agent.run("opens it", scope=scope)
        clock.now += 11
        await agent.run("probes", scope=scope)
        assert primary.calls == 2
        assert health.state(primary) is BreakerState.OPEN
        await agent.run("skips", scope=scope)
        assert primary.calls == 2

    async def test_validation_errors_never_open_it(self) -> None:
        """A bad request is the caller's fault: 5 of them leave the primary's breaker closed."""

        def invalid() -> ModelResponse:
            raise BusinessError("no such thing", error_type="invalid_request")

        primary = Model("sonnet", invalid)
        health = ModelHealth(failure_threshold=1)
        scope = RunScope(model_health=health)
        agent = LLMSubagent("a", FallbackModel(primary, Model("haiku", answer)))
        for i in range(5):
            await agent.run(f"q{i}", scope=scope)
        assert primary.calls == 5
        assert health.state(primary) is BreakerState.CLOSED


@tool
async def lookup(query: str) -> str:
    """Look `query` up."""
    return f"found {query}"


class TestEvents:
    async def test_a_streamed_run_says_each_skip_and_why(self) -> None:
        """Each skip is an AttemptFailed whose envelope says the model is out and why."""
        primary, _backup, chain = down_and_up()
        agent = LLMSubagent("a", chain, retry=fast_retry(attempts=1))
        coordinator = Coordinator(
            [agent], max_concurrency=1, model_health=ModelHealth(failure_threshold=1)
        )
        async with coordinator.stream(tasks(3)) as events:
            seen = [event async for event in events]
        skips = [
            event.envelope
            for event in seen
            if isinstance(event, AttemptFailed) and "is out" in event.envelope.message
        ]
        assert len(skips) == 2
        assert all(envelope.error_type == "overloaded" for envelope in skips)
        assert all("model sonnet is out (overloaded since" in e.message for e in skips)
        assert primary.calls == 1


class TestWireShape:
    async def test_new_keys_only_where_there_is_something_to_say(self) -> None:
        """A called model's fail-over keeps its JSON keys; a skip adds outSince; the report
        adds modelConcurrency; and the JSON reads back into the same report."""
        _primary, _backup, chain = down_and_up()
        agent = LLMSubagent("a", chain, retry=fast_retry(attempts=1))
        coordinator = Coordinator(
            [agent], max_concurrency=1, model_health=ModelHealth(failure_threshold=1)
        )
        report = await coordinator.run(tasks(2))
        data = report.to_dict()
        failed, skipped = data["usage"]["failovers"]
        assert set(failed) == {"model", "errorType", "attempts", "fallback"}
        assert set(skipped) == {"model", "errorType", "attempts", "fallback", "outSince"}
        assert data["modelConcurrency"] == {"sonnet": 2, "haiku": 4}
        assert Report.model_validate(data).usage == report.usage


class TestStickyFailover:
    async def test_turn_two_goes_straight_to_the_fallback(self) -> None:
        """A tool loop whose turn 1 failed over does not ask the primary again in turn 2."""
        primary = Model("sonnet", overloaded)
        turns = iter(
            [ModelResponse.of_tool_calls(("lookup", {"query": "x"})), ModelResponse.of_text("done")]
        )
        backup = Model("haiku", lambda: next(turns))
        agent = LLMSubagent(
            "a", FallbackModel(primary, backup), tools=[lookup], retry=fast_retry(attempts=3)
        )
        outcome = await agent.run("q", scope=RunScope(model_health=ModelHealth()))
        assert isinstance(outcome, Success)
        assert outcome.data == "done"
        assert (primary.calls, backup.calls) == (3, 2)
        assert outcome.usage is not None
        kinds = [(f.attempts, f.skipped) for f in outcome.usage.failovers]
        assert kinds == [(3, False), (0, True)]


class TestQuota:
    @staticmethod
    def quota(retry_after: float | None) -> Callable[[], ModelResponse]:
        def exhausted() -> ModelResponse:
            raise BusinessError(
                "monthly usage limit reached", error_type="quota_exhausted", retry_after=retry_after
            )

        return exhausted

    async def test_the_model_is_out_until_its_quota_resets(self) -> None:
        """Quota with a reset in an hour: fails over, no call for an hour, then called again."""
        clock = Clock()
        primary, backup = Model("sonnet", self.quota(3600)), Model("haiku", answer)
        health = ModelHealth(clock=clock)
        scope = RunScope(model_health=health)
        agent = LLMSubagent("a", FallbackModel(primary, backup), retry=fast_retry(attempts=3))
        first = await agent.run("q1", scope=scope)
        assert isinstance(first, Success)
        assert primary.calls == 1  # business: not retried
        for i in range(5):
            await agent.run(f"q{i}", scope=scope)
        assert primary.calls == 1
        assert health.back_in(primary) == pytest.approx(3600)
        clock.now += 3601
        primary.behaviour = answer
        await agent.run("after the reset", scope=scope)
        assert primary.calls == 2

    async def test_without_a_reset_time_it_is_out_for_the_rest_of_the_run(self) -> None:
        """No reset said: out for the run; alone (no fallback) the task says why, not called."""
        clock = Clock()
        primary = Model("sonnet", self.quota(None))
        scope = RunScope(model_health=ModelHealth(clock=clock))
        agent = LLMSubagent("a", primary, retry=fast_retry(attempts=3))
        await agent.run("q1", scope=scope)
        clock.now += 10 * 24 * 3600
        outcome = await agent.run("q2", scope=scope)
        assert primary.calls == 1
        assert not isinstance(outcome, Success)
        assert outcome.error_type == "quota_exhausted"
        assert outcome.error_category.value == "business"
        assert "not called" in outcome.message


class TestWindow:
    async def test_64_tasks_never_have_more_than_the_window_in_flight(self) -> None:
        """Slow start: 4 calls at first, however many tasks ask at once."""
        primary, _backup, chain = down_and_up()
        agent = LLMSubagent("a", chain, retry=fast_retry(attempts=1))
        await Coordinator([agent], max_concurrency=64).run(tasks(64))
        assert primary.most_in_flight <= 4
        assert primary.calls <= 4

    async def test_it_shrinks_on_overload_and_grows_back(self) -> None:
        """Halved by a 529, grown by one per answer while full; bounded by max_concurrency."""
        health = ModelHealth(initial_concurrency=8, max_concurrency=10, failure_threshold=99)
        model = Model("sonnet", answer)
        claims = [health.claim(model) for _ in range(9)]
        assert claims[8] is None  # the ninth waits
        tickets = [claim for claim in claims if isinstance(claim, int)]
        overload = TransientError("Overloaded", error_type="overloaded")
        envelope = default_classifier.classify(
            overload, source="m", attempted_query="q", attempts=1
        )
        health.release(model, tickets[0], envelope)
        health.release(model, tickets[1], envelope)  # same round: not halved twice
        assert health.concurrency() == {"sonnet": 4}
        for ticket in tickets[2:]:
            health.release(model, ticket, None)
        sizes = []
        for _ in range(40):
            batch = [health.claim(model) for _ in range(health.concurrency()["sonnet"])]
            for ticket in batch:
                assert isinstance(ticket, int)
                health.release(model, ticket, None)
            sizes.append(health.concurrency()["sonnet"])
        assert sizes[-1] == 10  # back up, and no further than the bound
        assert sizes == sorted(sizes)

    async def test_a_waiter_gets_the_freed_slot(self) -> None:
        """A full window parks the next call until one in flight ends."""
        health = ModelHealth(initial_concurrency=1)
        model = Model("sonnet", answer)
        first = health.claim(model)
        assert isinstance(first, int)
        assert health.claim(model) is None
        waiting = asyncio.create_task(health.wait(model))
        await asyncio.sleep(0)
        assert not waiting.done()
        health.release(model, first, None)
        await asyncio.wait_for(waiting, 1)
        assert isinstance(health.claim(model), int)

    async def test_a_cancelled_probe_lets_another_task_probe(self) -> None:
        """A probe that ends without a verdict (cancelled) gives the probe back."""
        clock = Clock()
        health = ModelHealth(failure_threshold=1, reset_after=5, clock=clock)
        model = Model("sonnet", answer)
        ticket = health.claim(model)
        assert isinstance(ticket, int)
        down = default_classifier.classify(
            TransientError("Overloaded", error_type="overloaded"),
            source="m",
            attempted_query="q",
            attempts=1,
        )
        health.release(model, ticket, down)
        clock.now += 6
        probe = health.claim(model)
        assert isinstance(probe, int)
        assert health.claim(model) == "overloaded"
        health.cancel(model, probe)
        assert isinstance(health.claim(model), int)

    async def test_two_tasks_racing_for_the_probe_one_wins(self) -> None:
        """Half-open, 50 tasks past a barrier claim at once: one ticket, 49 told it is out."""
        clock = Clock()
        health = ModelHealth(failure_threshold=1, reset_after=5, clock=clock)
        model = Model("sonnet", answer)
        ticket = health.claim(model)
        assert isinstance(ticket, int)
        down = default_classifier.classify(
            TransientError("Overloaded", error_type="overloaded"),
            source="m",
            attempted_query="q",
            attempts=1,
        )
        health.release(model, ticket, down)
        clock.now += 6
        barrier = asyncio.Barrier(50)

        async def claim() -> int | str | None:
            await barrier.wait()
            return health.claim(model)

        claims = await asyncio.gather(*(claim() for _ in range(50)))
        assert sum(isinstance(claim, int) for claim in claims) == 1
        assert claims.count("overloaded") == 49


class TestFiftyTasksUnderOverload:
    async def test_48_of_50_covered_with_60_calls_and_64_in_flight(self) -> None:
        """The issue's run: the primary always 529, 60 model calls for 50 tasks, 64 at once."""
        primary, _backup, chain = down_and_up()
        agent = LLMSubagent("a", chain, retry=fast_retry(attempts=3))
        coordinator = Coordinator(
            [agent], max_concurrency=64, usage_limits=UsageLimits(max_model_calls=60)
        )
        report = await coordinator.run(tasks(50))
        covered = sum(entry.status is CoverageStatus.COVERED for entry in report.coverage)
        assert covered >= 48
        assert primary.calls <= 10
        assert report.model_concurrency["sonnet"] >= 1
        assert "- skipped: sonnet overloaded since" in report.to_markdown()

    async def test_through_the_real_sdk(self, fake_messages_api: FakeMessagesAPI) -> None:
        """The same against the fake Messages API: 529 for sonnet, haiku answers."""

        def handler(request: RecordedRequest) -> Reply:
            if request.model == "claude-sonnet-4-5":
                return F.error(529)
            return F.text("from haiku")

        fake_messages_api.handler = handler
        url = fake_messages_api.base_url
        async with (
            AnthropicModel("claude-sonnet-4-5", api_key="sk-ant-test", base_url=url) as sonnet,
            AnthropicModel("claude-haiku-4-5", api_key="sk-ant-test", base_url=url) as haiku,
        ):
            agent = LLMSubagent("a", FallbackModel(sonnet, haiku), retry=fast_retry(attempts=3))
            coordinator = Coordinator(
                [agent], max_concurrency=64, usage_limits=UsageLimits(max_model_calls=60)
            )
            report = await coordinator.run(tasks(50))
        covered = sum(entry.status is CoverageStatus.COVERED for entry in report.coverage)
        assert covered >= 48
        asked = [request.model for request in fake_messages_api.requests]
        assert asked.count("claude-sonnet-4-5") <= 10
