"""A run's model health and usage limits hold for the whole cluster, as they do locally.

Eight tasks at once on a local Ray instance (each on a quarter of a CPU, so in eight
worker processes), against the fake Messages API served by this process: the breaker
of an overloaded model opens once for the run, a hard cost cap is never passed and a
cap on model calls never overshot, however the calls are spread over the workers; and
a worker's claim whose answer comes too late gives its slot back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from agentmesh import Coordinator, RetryPolicy, Task
from agentmesh.coordinator import CoverageStatus
from agentmesh.executors import RayExecutor, _ray_models
from agentmesh.executors._ray_models import ClusterModelHealth, ModelTerms, Outbox
from agentmesh.models import AnthropicModel, FallbackModel, ScriptedModel, UsageLimits
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeMessagesAPI, RecordedRequest, Reply
from tests.ray.conftest import LocalRay

F = FakeMessagesAPI
SONNET, HAIKU = "claude-sonnet-4-5", "claude-haiku-4-5"
KEY = "sk-ant-test"
# Backoff short enough for a test, long enough that the calls of eight tasks overlap.
RETRY = RetryPolicy(max_attempts=3, initial_delay=0.05, jitter="none")


@pytest.fixture(scope="module")
def eight_at_once(local_ray: LocalRay) -> Iterator[RayExecutor]:
    """Eight tasks in flight on the session's two CPUs, with an actor of their own.

    One for the module: starting its workers takes seconds, and each test's run keeps
    its model health and usage in the actor under its own run id, as a user's runs on
    one executor do.
    """
    local_ray.start()
    executor = RayExecutor(task_options={"num_cpus": 0.25}).connect()
    try:
        yield executor
    finally:
        executor.close()


@pytest.fixture
async def fake() -> AsyncIterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as api:
        yield api


def tasks(n: int) -> list[Task]:
    return [Task(query=f"q{i}", topic=f"t{i}") for i in range(n)]


def covered(coverage: list[CoverageStatus]) -> int:
    return sum(status is CoverageStatus.COVERED for status in coverage)


class TestOneBreakerForTheCluster:
    async def test_the_overloaded_primary_is_skipped_by_every_worker(
        self, eight_at_once: RayExecutor, fake: FakeMessagesAPI
    ) -> None:
        """Sonnet always 529: its breaker opens once, for the run, and the later tasks on
        every worker go to haiku at once. Sonnet is asked about as often as locally
        (`tests/integration/test_model_health.py`), not three times per task; and the
        run's 40 model calls are never overshot."""

        def handler(request: RecordedRequest) -> Reply:
            if request.model == SONNET:
                return F.slow(0.05, F.error(529))
            return F.slow(0.05, F.text("from haiku"))

        fake.handler = handler
        sonnet = AnthropicModel(SONNET, api_key=KEY, base_url=fake.base_url)
        haiku = AnthropicModel(HAIKU, api_key=KEY, base_url=fake.base_url)
        agent = LLMSubagent("a", FallbackModel(sonnet, haiku), retry=RETRY)
        coordinator = Coordinator(
            [agent],
            executor=eight_at_once,
            max_concurrency=8,
            usage_limits=UsageLimits(max_model_calls=40),
        )

        report = await coordinator.run(tasks(32))

        assert covered([entry.status for entry in report.coverage]) >= 30
        asked = [request.model for request in fake.requests]
        assert asked.count(SONNET) <= 10  # per task, it would be up to 3 x 32
        assert len(asked) <= 40
        assert "- skipped: claude-sonnet-4-5 overloaded since" in report.to_markdown()


class TestOneRateGateForTheCluster:
    async def test_the_headers_one_worker_heard_hold_every_worker_s_calls(
        self, eight_at_once: RayExecutor, fake: FakeMessagesAPI
    ) -> None:
        """6 requests a (one-second) minute, 24 tasks on eight workers: the first answers'
        headers reach the actor's gate, and the later calls wait for the refill instead of
        meeting 429s (with a gate per task, each task's first call would go blind)."""
        fake.rate_limit(requests_per_minute=6, minute=1.0)
        fake.handler = lambda request: F.text("ok")
        haiku = AnthropicModel(HAIKU, api_key=KEY, base_url=fake.base_url)
        agent = LLMSubagent("a", haiku, retry=RetryPolicy(max_attempts=6))
        coordinator = Coordinator([agent], executor=eight_at_once, max_concurrency=8)

        report = await coordinator.run(tasks(24))

        assert covered([entry.status for entry in report.coverage]) == 24
        refused = fake.request_count - 24
        assert refused <= 3, refused  # before the first answer, no limit is known


class TestUsageLimitsForTheCluster:
    async def test_a_hard_cost_cap_is_never_passed(
        self, eight_at_once: RayExecutor, fake: FakeMessagesAPI
    ) -> None:
        """Each call reserves its worst case in the actor before it starts: eight in
        flight on eight workers never spend past the cap, and the run says what stopped
        it."""
        fake.handler = lambda request: F.slow(0.1, F.text("ok", output_tokens=1000))
        haiku = AnthropicModel(HAIKU, api_key=KEY, base_url=fake.base_url)
        agent = LLMSubagent("a", haiku, retry=RETRY, max_tokens=1024)
        cap = 0.03  # each call costs about $0.005, and reserves a little more
        coordinator = Coordinator(
            [agent],
            executor=eight_at_once,
            max_concurrency=8,
            usage_limits=UsageLimits(max_cost_usd=cap, hard=True),
        )

        report = await coordinator.run(tasks(24))

        assert report.usage is not None
        assert report.usage.cost_usd is not None
        assert report.usage.cost_usd <= cap
        assert covered([entry.status for entry in report.coverage]) >= 4
        assert report.usage_stop is not None
        assert report.usage_stop.limit == "max_cost_usd"

    async def test_max_model_calls_is_never_overshot(
        self, eight_at_once: RayExecutor, fake: FakeMessagesAPI
    ) -> None:
        """Ten calls for 24 tasks, eight at once: exactly ten reach the model."""
        fake.handler = lambda request: F.slow(0.05, F.text("ok"))
        haiku = AnthropicModel(HAIKU, api_key=KEY, base_url=fake.base_url)
        agent = LLMSubagent("a", haiku, retry=RETRY)
        coordinator = Coordinator(
            [agent],
            executor=eight_at_once,
            max_concurrency=8,
            usage_limits=UsageLimits(max_model_calls=10),
        )

        report = await coordinator.run(tasks(24))

        assert fake.request_count == 10
        assert covered([entry.status for entry in report.coverage]) == 10


# -- a claim whose answer comes too late -------------------------------------------------
# The worker stops waiting after `_ACTOR_TIMEOUT`; the actor may still grant the claim. A
# ticket granted to nobody would hold a slot of the model's window for the rest of the run.

ONE_SLOT = (3, 30.0, 1, 1)  # one call in flight at a time: a leaked ticket blocks the next


class TestAClaimThatTimesOut:
    async def test_gives_its_ticket_back_and_the_next_claim_gets_the_slot(
        self, ray_executor: RayExecutor, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The claim raises `TimeoutError` in the task (it waits no time at all); the actor,
        which granted it the only slot after all, frees it, so the next claim is granted."""
        actor = ray_executor.connect()._actor  # the executor's run-state actor
        model = ScriptedModel([], name="m")
        terms = ModelTerms(ONE_SLOT, None, None)
        health = ClusterModelHealth(Outbox(actor, "claim-timeout"), "claim-timeout", "c", terms)
        monkeypatch.setattr(_ray_models, "_ACTOR_TIMEOUT", 0)

        with pytest.raises(TimeoutError):
            health.claim(model)

        monkeypatch.setattr(_ray_models, "_ACTOR_TIMEOUT", 30.0)
        assert isinstance(health.claim(model), int)  # leaked, the window would be full
