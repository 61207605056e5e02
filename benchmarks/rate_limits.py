"""A fan-out against a rate-limited API: 200 tasks, 60 requests and 30,000 input tokens
a minute.

Every task makes one model call through the real `anthropic` SDK to a `FakeMessagesAPI`
on loopback whose token buckets are those of the issue (60 requests, 30,000 input tokens
a minute), with the minute scaled down (`MINUTE` seconds) so that a round takes seconds.
Each prompt is long enough (about 500 input tokens as the fake counts them) that both
limits bind alike. Two contenders, alternating round by round:

* **naive**: `asyncio.gather` of the SDK's own calls, 64 in flight, the SDK's retries
  raised to 6 (it honours `retry-after`): every task meets the limits on its own;
* **agentmesh**: a `Coordinator` of one `LLMSubagent` over `AnthropicModel`, 64 in
  flight: the run's `ModelHealth` reads the rate-limit headers and holds each call until
  one request, its estimated input and its `max_tokens` fit.

Reported: the total time beside the buckets' own minimum (what the limits allow at best
for the contender's requests, from full buckets), the share of requests answered 429,
and the tasks that failed.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentmesh import Coordinator, RetryPolicy, Success, Task
from agentmesh.models import AnthropicModel
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeMessagesAPI
from benchmarks._harness import Samples, rotated, spread, table, time_call

TASKS, IN_FLIGHT = 200, 64
REQUESTS_PER_MINUTE, INPUT_PER_MINUTE = 60, 30_000
MINUTE = 0.5  # seconds a minute lasts on the fake
MAX_TOKENS = 64
API_KEY = "sk-ant-bench-0123456789abcdef"
MODEL = "claude-haiku-4-5"
# About 500 input tokens as the fake counts them (four characters a token).
PROMPT = "Summarise the rate-limit behaviour of the fan-out. " * 38
NAMES = {
    "naive": "naive: gather of SDK calls, its retries (6) on retry-after",
    "gated": "agentmesh: the run's ModelHealth reads the headers",
}


@dataclass(slots=True)
class RateRow:
    """One contender's samples over the rounds."""

    name: str
    seconds: Samples = field(default_factory=Samples)
    refused_share: Samples = field(default_factory=Samples)
    failed: Samples = field(default_factory=Samples)
    # The buckets' own minimum for this contender's requests (its prompts differ: an
    # `LLMSubagent` sends its system prompt too).
    minimum: Samples = field(default_factory=Samples)

    def to_json(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds.to_json(),
            "buckets_minimum_seconds": self.minimum.to_json(),
            "share_429": self.refused_share.to_json(),
            "failed": self.failed.to_json(),
        }


def charged(body: Mapping[str, Any]) -> int:
    """The input tokens the fake charges a request: its prompt as JSON, 4 characters a token."""
    prompt = {key: body[key] for key in ("system", "messages", "tools") if key in body}
    return math.ceil(len(json.dumps(prompt)) / 4)


def bucket_minimum(tasks: int, input_per_task: int) -> float:
    """Seconds the buckets need at best for `tasks` calls, starting full."""
    requests = max(0, tasks - REQUESTS_PER_MINUTE) / REQUESTS_PER_MINUTE
    inputs = max(0, tasks * input_per_task - INPUT_PER_MINUTE) / INPUT_PER_MINUTE
    return max(requests, inputs) * MINUTE


def _fake() -> FakeMessagesAPI:
    fake = FakeMessagesAPI().start()
    fake.rate_limit(
        requests_per_minute=REQUESTS_PER_MINUTE,
        input_tokens_per_minute=INPUT_PER_MINUTE,
        minute=MINUTE,
    )
    fake.handler = lambda request: FakeMessagesAPI.text(
        "ok", input_tokens=charged(request.body), output_tokens=8
    )
    return fake


async def _naive(fake: FakeMessagesAPI, tasks: int) -> int:
    """The tasks that failed."""
    import anthropic

    async with anthropic.AsyncAnthropic(
        api_key=API_KEY, base_url=fake.base_url, max_retries=6
    ) as client:
        slots = asyncio.Semaphore(IN_FLIGHT)

        async def one(number: int) -> bool:
            async with slots:
                try:
                    await client.messages.create(
                        model=MODEL,
                        max_tokens=MAX_TOKENS,
                        messages=[{"role": "user", "content": f"{number}: {PROMPT}"}],
                    )
                except anthropic.APIStatusError:
                    return False
                return True

        answered = await asyncio.gather(*(one(number) for number in range(tasks)))
    return answered.count(False)


async def _gated(fake: FakeMessagesAPI, tasks: int) -> int:
    """The tasks that failed."""
    async with AnthropicModel(MODEL, api_key=API_KEY, base_url=fake.base_url) as model:
        agent = LLMSubagent("a", model, max_tokens=MAX_TOKENS, retry=RetryPolicy(max_attempts=6))
        coordinator = Coordinator([agent], max_concurrency=IN_FLIGHT)
        report = await coordinator.run(
            [Task(query=f"{number}: {PROMPT}", topic="t") for number in range(tasks)]
        )
    return sum(not isinstance(record.final, Success) for record in report.records)


def run(rounds: int, tasks: int = TASKS) -> list[RateRow]:
    """Alternate the contenders for `rounds` rounds."""
    rows = {key: RateRow(name) for key, name in NAMES.items()}
    for round_number in range(rounds):
        for key in rotated(list(NAMES), round_number):
            fake = _fake()
            try:
                contender = _naive if key == "naive" else _gated

                async def runner(fake: FakeMessagesAPI = fake, contender: Any = contender) -> Any:
                    return await contender(fake, tasks)

                timing = time_call(runner)
                requests = fake.requests
            finally:
                fake.close()
            row = rows[key]
            row.seconds.add(timing.wall)
            row.failed.add(timing.result)
            input_per_task = max(charged(request.body) for request in requests)
            row.minimum.add(bucket_minimum(tasks, input_per_task))
            answered = tasks - timing.result
            row.refused_share.add((len(requests) - answered) / len(requests))
    return list(rows.values())


def print_table(rows: Sequence[RateRow], tasks: int = TASKS) -> None:
    lines = [
        [
            row.name,
            spread(row.seconds, "{:.2f}"),
            f"{row.minimum.median:.2f}",
            spread(row.refused_share, "{:.0%}"),
            spread(row.failed, "{:.0f}"),
        ]
        for row in rows
    ]
    print(
        table(
            ["contender", "s", "buckets' minimum s", "429 share", "failed"],
            lines,
            f"Rate limits: {tasks} tasks, {IN_FLIGHT} in flight, {REQUESTS_PER_MINUTE} requests "
            f"and {INPUT_PER_MINUTE:,} input tokens a minute (a minute of {MINUTE} s)",
        )
    )
    print()
