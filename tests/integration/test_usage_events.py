"""`UsageUpdated`: a streamed run says what each model call used and the run so far."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from agentmesh import Coordinator, Task
from agentmesh.events import Event, RunFinished, UsageUpdated, parse_event
from agentmesh.models import AnthropicModel
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeMessagesAPI
from tests.retrying import fast_retry

API_KEY = "sk-ant-test-0123456789abcdef"
F = FakeMessagesAPI
SONNET = "claude-sonnet-4-5"  # $3 in, $15 out per million


@pytest.fixture
async def sonnet(fake_messages_api: FakeMessagesAPI) -> AsyncIterator[AnthropicModel]:
    async with AnthropicModel(
        SONNET, api_key=API_KEY, base_url=fake_messages_api.base_url, timeout=10
    ) as model:
        yield model


async def streamed(coordinator: Coordinator, tasks: list[Task]) -> list[Event]:
    async with coordinator.stream(tasks, run_id="r1") as events:
        return [event async for event in events]


class TestUsageUpdated:
    async def test_each_settled_call_reports_its_usage_and_the_runs_total(
        self, fake_messages_api: FakeMessagesAPI, sonnet: AnthropicModel
    ) -> None:
        """A 529 then two answers: three events, the failed call with no tokens, totals growing."""
        fake_messages_api.enqueue(
            F.error(529),
            F.text("one", input_tokens=15, output_tokens=5),
            F.text("two", input_tokens=30, output_tokens=10),
        )
        agent = LLMSubagent("a", sonnet, retry=fast_retry(attempts=2))
        coordinator = Coordinator([agent], max_concurrency=1)
        events = await streamed(coordinator, [Task(query="q1", id="t1"), Task(query="q2", id="t2")])

        updates = [event for event in events if isinstance(event, UsageUpdated)]
        assert [(u.task_id, u.subagent, u.model) for u in updates] == [
            ("t1", "a", SONNET),
            ("t1", "a", SONNET),
            ("t2", "a", SONNET),
        ]
        assert [u.usage.total_tokens for u in updates] == [0, 20, 40]
        assert [u.usage.model_calls for u in updates] == [1, 1, 1]
        assert [(u.total.model_calls, u.total.total_tokens) for u in updates] == [
            (1, 0),
            (2, 20),
            (3, 60),
        ]
        assert updates[-1].total.cost_usd == pytest.approx((45 * 3 + 15 * 15) / 1e6)
        finished = events[-1]
        assert isinstance(finished, RunFinished)
        assert finished.report.usage is not None
        assert finished.report.usage.model_dump() == {
            **updates[-1].total.model_dump(),
            "failovers": (),
        }

    async def test_a_usage_event_round_trips_through_json(
        self, fake_messages_api: FakeMessagesAPI, sonnet: AnthropicModel
    ) -> None:
        """Its JSON form has camelCase keys, and `parse_event` gives back an equal event."""
        fake_messages_api.enqueue(F.text("one", input_tokens=15, output_tokens=5))
        events = await streamed(Coordinator([LLMSubagent("a", sonnet)]), [Task(query="q")])
        [update] = [event for event in events if isinstance(event, UsageUpdated)]
        data = json.loads(update.to_json())
        assert data["event"] == "UsageUpdated"
        assert data["usage"]["inputTokens"] == 15
        assert data["total"]["modelCalls"] == 1
        assert parse_event(update.to_json()) == update
