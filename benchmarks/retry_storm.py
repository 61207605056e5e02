"""Retry storm: what a source that is down for good receives, with and without a budget.

N tasks through `Coordinator.run`, every attempt failing with a `TransientError`, a
`RetryPolicy` of 4 attempts that never sleeps. Without a budget every task makes all 4
attempts: the outage gets 4x the load. With the run's default `RetryBudget` (20% of
first attempts plus a reserve of 100) the retries stop when the budget is spent. A bare
tenacity loop is the reference: it knows nothing of the other calls.
"""

from __future__ import annotations

import asyncio
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

from agentmesh import Coordinator, RetryBudget, RetryPolicy, Task, TransientError, subagent
from agentmesh.context import Context
from agentmesh.report import CoverageStatus
from benchmarks._harness import Samples, rotated, time_call
from benchmarks.dispatch import no_sleep

ATTEMPTS = 4


@dataclass
class StormRow:
    """One contender's samples over the rounds."""

    name: str
    attempts_per_first: Samples = field(default_factory=Samples)
    gaps: int = 0
    tasks: int = 0
    us_per_task: Samples = field(default_factory=Samples)

    def to_json(self) -> dict[str, Any]:
        return {
            "attempts_per_first_attempt": self.attempts_per_first.to_json(),
            "tasks": self.tasks,
            "reported_as_gap": self.gaps,
            "us_per_task": self.us_per_task.to_json(),
        }


class _DownSource:
    def __init__(self) -> None:
        self.attempts = 0

    async def call(self, query: str) -> str:
        self.attempts += 1
        raise TransientError(f"{query}: source unavailable", error_type="unavailable")


def _coordinator(source: _DownSource, budget: RetryBudget | None) -> Coordinator:
    @subagent(name="down", retry=RetryPolicy(max_attempts=ATTEMPTS, sleep=no_sleep))
    async def down(task: Task, ctx: Context) -> str:
        return await source.call(task.query)

    return Coordinator([down], retry_budget=budget)


async def _tenacity(source: _DownSource, queries: list[str]) -> int:
    async def call(query: str) -> str:
        retrying = AsyncRetrying(
            stop=stop_after_attempt(ATTEMPTS),
            wait=wait_random_exponential(multiplier=0.5, max=10.0),
            retry=retry_if_exception_type(TransientError),
            sleep=no_sleep,
            reraise=True,
        )
        result: str = await retrying(source.call, query)
        return result

    results = await asyncio.gather(*(call(q) for q in queries), return_exceptions=True)
    return sum(isinstance(result, TransientError) for result in results)


def run(n: int, rounds: int) -> list[StormRow]:
    """Alternate the contenders for `rounds` rounds of `n` tasks each."""
    queries = [f"q{i}" for i in range(n)]
    tasks = [Task(query=q) for q in queries]
    names = {
        "budget": "agentmesh, default RetryBudget",
        "unlimited": "agentmesh, RetryBudget.unlimited()",
        "tenacity": "tenacity alone (no budget)",
    }
    rows = {key: StormRow(name) for key, name in names.items()}
    for round_number in range(rounds):
        for key in rotated(list(names), round_number):
            source = _DownSource()
            if key == "tenacity":

                async def runner(source: _DownSource = source) -> Any:
                    return await _tenacity(source, queries)

            else:
                budget = RetryBudget() if key == "budget" else RetryBudget.unlimited()
                coordinator = _coordinator(source, budget)

                async def runner(coordinator: Coordinator = coordinator) -> Any:
                    report = await coordinator.run(tasks)
                    return sum(entry.status is CoverageStatus.GAP for entry in report.coverage)

            timing = time_call(runner)
            row = rows[key]
            row.attempts_per_first.add(source.attempts / n)
            row.gaps, row.tasks = timing.result, n
            row.us_per_task.add(1e6 * timing.wall / n)
    return list(rows.values())
