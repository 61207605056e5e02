"""Fan-out under overload: 50 tasks, 64 in flight, the primary model always 529.

Every task asks a fallback chain (primary, then a healthy fallback) for one answer;
the run may make 60 model calls in all (`UsageLimits(max_model_calls=60)`). Three
contenders, alternating round by round:

* **naive**: each task on its own, as tenacity users write it: 3 attempts with
  exponential backoff and jitter on the primary, then the fallback, every call counted
  against the same 60 (a call past the 60th is refused and the task fails);
* **agentmesh, health per task**: the framework with the run's `ModelHealth` made
  powerless (a breaker that never opens, a window of 64): every task pays its own
  retries on the primary, as before issue 26;
* **agentmesh**: the run's `ModelHealth` as it comes: a slow-start window of calls in
  flight, a breaker that opens after 3 overloads, and every later turn skipping the
  primary at once.

Both models are in-process (a 5 ms call; the primary raises what the SDK mapping makes
of a 529): the figure is calls and coverage, not the network.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Full jitter: `wait_random_exponential(multiplier=)` reads alike in every tenacity 9
# (`wait_exponential_jitter` renamed its first argument in 9.2; google-genai pins < 9.2).
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from agentmesh import Coordinator, RetryPolicy, Task, TransientError
from agentmesh.models import FallbackModel, ModelHealth, ModelResponse, UsageLimits
from agentmesh.report import CoverageStatus
from agentmesh.subagents import LLMSubagent
from benchmarks._harness import Samples, rotated, time_call

TASKS, IN_FLIGHT, MAX_CALLS, ATTEMPTS = 50, 64, 60, 3
LATENCY = 0.005
# The same backoff for every contender: short, so that a round takes well under a second.
INITIAL_DELAY, MAX_DELAY = 0.01, 0.1
NAMES = {
    "naive": "naive: tenacity per task, then the fallback",
    "per_task": "agentmesh, health per task (before issue 26)",
    "shared": "agentmesh, the run's ModelHealth",
}


class _LimitReached(Exception):
    """The naive loop's own usage limit: no call past the 60th."""


class _Model:
    """An in-process model: 5 ms a call; the primary always overloaded."""

    def __init__(self, name: str, *, down: bool) -> None:
        self.name = name
        self.down = down
        self.calls = 0

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
        await asyncio.sleep(LATENCY)
        if self.down:
            raise TransientError("529 Overloaded", error_type="overloaded")
        return ModelResponse.of_text("an answer")


@dataclass
class OverloadRow:
    """One contender's samples over the rounds."""

    name: str
    covered: Samples = field(default_factory=Samples)
    primary_calls: Samples = field(default_factory=Samples)
    seconds: Samples = field(default_factory=Samples)
    concurrency: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "covered": self.covered.to_json(),
            "primary_calls": self.primary_calls.to_json(),
            "seconds": self.seconds.to_json(),
            **({"settled_concurrency": self.concurrency} if self.concurrency else {}),
        }


async def _naive(primary: _Model, fallback: _Model) -> int:
    """Covered tasks of the naive fan-out: each task retries and fails over by itself."""
    spent = 0

    async def one(query: str) -> bool:
        nonlocal spent

        async def call(model: _Model) -> ModelResponse:
            nonlocal spent
            if spent >= MAX_CALLS:
                raise _LimitReached
            spent += 1
            return await model.create(messages=[{"role": "user", "content": query}])

        for model in (primary, fallback):
            retrying = AsyncRetrying(
                stop=stop_after_attempt(ATTEMPTS),
                wait=wait_random_exponential(multiplier=INITIAL_DELAY, max=MAX_DELAY),
                retry=retry_if_exception_type(TransientError),
                reraise=True,
            )
            try:
                await retrying(call, model)
            except TransientError:
                continue  # fail over to the next model
            except _LimitReached:
                return False
            return True
        return False

    gate = asyncio.Semaphore(IN_FLIGHT)

    async def bounded(query: str) -> bool:
        async with gate:
            return await one(query)

    done = await asyncio.gather(*(bounded(f"q{i}") for i in range(TASKS)))
    return sum(done)


def _coordinator(primary: _Model, fallback: _Model, health: ModelHealth) -> Coordinator:
    agent = LLMSubagent(
        "writer",
        FallbackModel(primary, fallback),
        retry=RetryPolicy(max_attempts=ATTEMPTS, initial_delay=INITIAL_DELAY, max_delay=MAX_DELAY),
    )
    return Coordinator(
        [agent],
        max_concurrency=IN_FLIGHT,
        usage_limits=UsageLimits(max_model_calls=MAX_CALLS),
        model_health=health,
    )


def run(rounds: int) -> list[OverloadRow]:
    """Alternate the contenders for `rounds` rounds of the 50-task run."""
    rows = {key: OverloadRow(name) for key, name in NAMES.items()}
    tasks = [Task(query=f"q{i}", topic=f"t{i}") for i in range(TASKS)]
    random.seed(26)  # tenacity's jitter
    for round_number in range(rounds):
        for key in rotated(list(NAMES), round_number):
            primary, fallback = _Model("primary", down=True), _Model("fallback", down=False)
            row = rows[key]
            if key == "naive":

                async def runner(primary: _Model = primary, fallback: _Model = fallback) -> Any:
                    return await _naive(primary, fallback)

                timing = time_call(runner)
                row.covered.add(timing.result)
            else:
                health = (
                    ModelHealth(failure_threshold=10**6, initial_concurrency=IN_FLIGHT)
                    if key == "per_task"
                    else ModelHealth()
                )
                coordinator = _coordinator(primary, fallback, health)

                async def runner(coordinator: Coordinator = coordinator) -> Any:
                    return await coordinator.run(tasks)

                timing = time_call(runner)
                report = timing.result
                row.covered.add(
                    sum(entry.status is CoverageStatus.COVERED for entry in report.coverage)
                )
                if key == "shared":
                    row.concurrency = dict(report.model_concurrency)
            row.primary_calls.add(primary.calls)
            row.seconds.add(timing.wall)
    return list(rows.values())
