"""Models as sources that fail over, are counted, and are bounded in code.

Save it as `models.py` and run `python models.py` (in a clone of the repository:
`python -m examples.howto.models`). Offline: two `ScriptedModel`s stand in for
Claude Sonnet and Claude Haiku (their names pick the list prices that cost the calls).

- The primary model is overloaded: the subagent's local retries are spent on it first,
  then the same request goes to the fallback model, which answers.
- The run has a budget of three model calls (`UsageLimits`). The first task spends all
  three; the second task is refused before any call, and the report says why.
- The report sums usage and cost by model and lists the fail-over.
"""

from __future__ import annotations

import asyncio

from agentmesh import Coordinator, RetryPolicy, Task, TransientError
from agentmesh.models import (
    FallbackModel,
    ModelResponse,
    ScriptedModel,
    TextBlock,
    Usage,
    UsageLimits,
)
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import RecordingSleep


def reply(text: str, model: str) -> ModelResponse:
    """A turn with the token counts a real response would carry."""
    usage = Usage(input_tokens=1_200, output_tokens=300)
    return ModelResponse(content=(TextBlock(text=text),), usage=usage, model=model)


def overloaded() -> TransientError:
    # What AnthropicModel raises for a 529, as far as routing is concerned.
    return TransientError("overloaded", error_type="overloaded")


sonnet = ScriptedModel([overloaded(), overloaded()], name="claude-sonnet-4-5")
haiku = ScriptedModel(
    [reply("Task.cancel() requests cancellation.", "claude-haiku-4-5")], name="claude-haiku-4-5"
)

docs = LLMSubagent(
    "docs",
    FallbackModel(sonnet, haiku),  # fails over on overloaded, rate_limited, unavailable, timeout
    system="Answer briefly.",
    retry=RetryPolicy(max_attempts=2, sleep=RecordingSleep()),  # no real waiting in a demo
)


async def main() -> None:
    coordinator = Coordinator(
        [docs],
        usage_limits=UsageLimits(max_model_calls=3),  # failed and retried calls count too
        max_concurrency=1,  # one task after the other, so the limit falls on the second
    )
    report = await coordinator.run(
        [
            Task(query="How do I cancel an asyncio task?", topic="cancel"),
            Task(query="What does asyncio.shield do?", topic="shield"),
        ]
    )
    for entry in report.coverage:
        print(f"{entry.topic:<7} {entry.status.value:<8} {entry.reason}")
    usage = report.usage
    assert usage is not None  # None only for a run that called no model
    # A model missing from the price table costs None: unknown, never a guess.
    cost = "unknown" if usage.cost_usd is None else f"${usage.cost_usd:.5f}"
    print(
        f"\nmodel calls: {usage.model_calls}, tokens in/out: "
        f"{usage.input_tokens}/{usage.output_tokens}, cost: {cost}"
    )
    for model, line in report.usage_by_model.items():
        print(f"  {model}: {line.model_calls} call(s)")
    for failover in usage.failovers:
        print(
            f"fail-over: {failover.model} ({failover.error_type} after "
            f"{failover.attempts} attempts) -> {failover.fallback}"
        )


if __name__ == "__main__":
    asyncio.run(main())
