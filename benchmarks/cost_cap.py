"""A cost cap under fan-out: the hard cap beside the soft one, in the same rounds.

N tasks over one `LLMSubagent` on `claude-haiku-4-5` (list prices), 64 tasks in flight,
`UsageLimits(max_cost_usd=0.05)` soft (the default) and `hard=True`. Each model call
takes 5-25 ms and answers with the input tokens a pessimistic tokenizer counts in its
request and 100-400 output tokens (`max_tokens=512`), seeded per round so that both
contenders see the same calls. The soft cap admits every call while the spend is under
the cap, so the calls in flight pass it; the hard cap reserves each call's worst case
first and never passes it. `run()` is also what the `overload` section calls.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentmesh import Coordinator, Task
from agentmesh.models import ModelHealth, ModelResponse, UsageLimits
from agentmesh.models._base import TextBlock, Usage
from agentmesh.report import CoverageStatus, Report
from agentmesh.subagents import LLMSubagent
from benchmarks._harness import Samples, rotated, spread, table

MODEL = "claude-haiku-4-5"
MAX_TOKENS = 512
CAP = 0.05
IN_FLIGHT = 64

_PIECE = re.compile(r"[A-Za-z]{1,4}|\d{1,3}|[^\sA-Za-z\d]{1,3}|\s+")


@dataclass
class CapRow:
    """One contender's samples over the rounds."""

    name: str
    spent_usd: Samples = field(default_factory=Samples)
    covered: Samples = field(default_factory=Samples)
    not_started: Samples = field(default_factory=Samples)
    peak_in_flight: Samples = field(default_factory=Samples)
    seconds: Samples = field(default_factory=Samples)
    headline: str = ""

    @property
    def never_over(self) -> bool:
        """Whether the spend stayed at or under the cap in every round."""
        return all(value <= CAP for value in self.spent_usd.values)

    def to_json(self) -> dict[str, Any]:
        return {
            "spent_usd": self.spent_usd.to_json(),
            "covered": self.covered.to_json(),
            "not_started": self.not_started.to_json(),
            "peak_model_calls_in_flight": self.peak_in_flight.to_json(),
            "seconds": self.seconds.to_json(),
            "spend_never_over_cap": self.never_over,
            "last_report_line": self.headline,
        }


class _Haiku:
    """A stand-in for claude-haiku-4-5: latency, and the usage a real answer reports."""

    def __init__(self, seed: int) -> None:
        self.name = MODEL
        self.in_flight = 0
        self.peak = 0
        self._random = random.Random(seed)

    async def create(
        self,
        *,
        messages: Sequence[Mapping[str, Any]],
        system: str | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        tool_choice: Mapping[str, Any] | None = None,
        max_tokens: int = 1024,
    ) -> ModelResponse:
        # Drawn when the call starts: both contenders' n-th calls look alike.
        latency = self._random.uniform(0.005, 0.025)
        output = self._random.randint(100, min(400, max_tokens))
        request = {
            "system": system,
            "messages": messages,
            "tools": tools,
            "tool_choice": tool_choice,
        }
        pieces = len(_PIECE.findall(json.dumps(request, separators=(",", ":"))))
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(latency)
        finally:
            self.in_flight -= 1
        return ModelResponse(
            content=(TextBlock(text="answer"),),
            stop_reason="end_turn",
            usage=Usage(input_tokens=pieces, output_tokens=output),
        )


async def _one(tasks: int, in_flight: int, hard: bool, seed: int) -> tuple[Report, int, float]:
    model = _Haiku(seed)
    coordinator = Coordinator(
        [LLMSubagent("worker", model, max_tokens=MAX_TOKENS)],
        max_concurrency=in_flight,
        usage_limits=UsageLimits(max_cost_usd=CAP, hard=hard),
        # A healthy model: its window of calls in flight starts open, so `in_flight`
        # calls are really in flight at once (the cap, not the window, holds them).
        model_health=ModelHealth(initial_concurrency=in_flight),
    )
    loop = asyncio.get_running_loop()
    started = loop.time()
    report = await coordinator.run([Task(query=f"question {n}") for n in range(tasks)])
    return report, model.peak, loop.time() - started


def run(rounds: int, *, tasks: int = 200, in_flight: int = IN_FLIGHT) -> list[CapRow]:
    """The soft and the hard cap, alternating round by round on the same seeds."""
    rows = {"soft cap (default)": CapRow("soft cap (default)"), "hard cap": CapRow("hard cap")}
    for number in range(rounds):
        for name in rotated(list(rows), number):
            row = rows[name]
            report, peak, seconds = asyncio.run(
                _one(tasks, in_flight, hard=name == "hard cap", seed=number)
            )
            usage, stop = report.usage, report.usage_stop
            row.spent_usd.add(0.0 if usage is None else usage.cost_usd or 0.0)
            answered = (CoverageStatus.COVERED, CoverageStatus.EMPTY)
            row.covered.add(sum(record.status in answered for record in report.records))
            row.not_started.add(0 if stop is None else stop.not_started)
            row.peak_in_flight.add(peak)
            row.seconds.add(seconds)
            row.headline = "" if stop is None else stop.headline()
            print(".", end="", flush=True)
    print()
    return list(rows.values())


def print_table(rows: Sequence[CapRow], tasks: int = 200, in_flight: int = IN_FLIGHT) -> None:
    lines = [
        [
            row.name,
            spread(row.spent_usd, "${:.4f}"),
            "yes" if row.never_over else "NO",
            spread(row.covered, "{:.0f}"),
            spread(row.not_started, "{:.0f}"),
            spread(row.peak_in_flight, "{:.0f}"),
            spread(row.seconds, "{:.2f}"),
        ]
        for row in rows
    ]
    print(
        table(
            ["cap", "spent", "≤ cap every round", "covered", "not started", "peak calls", "s"],
            lines,
            f"Cost cap: {tasks} tasks, {in_flight} in flight, max_cost_usd=${CAP} on {MODEL}",
        )
    )
    for row in rows:
        if row.headline:
            print(f"{row.name}: {row.headline}")
    print()
