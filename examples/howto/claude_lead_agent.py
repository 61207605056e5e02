"""A Claude lead agent that coordinates two subagents, each offered to it as a tool.

Save it as `claude_lead_agent.py` and run `python claude_lead_agent.py` (in a clone of the
repository: `python -m examples.howto.claude_lead_agent`); it needs the `testing` extra,
`pip install 'agentmesh-failwell[testing]'`. Offline by default: the official
`anthropic` SDK talks to `agentmesh.testing.FakeMessagesAPI` on 127.0.0.1, which plays a
script (an overload, a turn calling both subagents at once, the answer). With
`--live` and ANTHROPIC_API_KEY set, the same lead talks to the real API instead (and the
answer is Claude's own; set AGENTMESH_MODEL to pick the model).

The web subagent's search service is down: its envelope reaches Claude as an `is_error`
tool result with what was tried, so the model can answer from the docs and say what is
missing, rather than receive an empty list and believe there is nothing on the web.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from agentmesh import Context, Outcome, RetryPolicy, Success, Task, TransientError, subagent, tool
from agentmesh.models import AnthropicModel
from agentmesh.subagents import LLMSubagent
from agentmesh.testing import FakeMessagesAPI

QUESTION = "How do I cancel a running asyncio task, and what changed in Python 3.11?"
DOCS = ["Task.cancel() requests cancellation", "asyncio.timeout() (3.11) cancels on expiry"]


@tool(idempotent=True)
async def search_docs(query: str) -> list[str]:
    return [line for line in DOCS if any(word in line.lower() for word in query.lower().split())]


@subagent(name="docs")
async def docs_agent(task: Task, ctx: Context) -> list[str]:
    """Search the Python documentation; give a short query."""  # the tool's description
    print(f"  docs subagent asked: {task.query!r}")
    return await ctx.call(search_docs, query=task.query)


# Never retried here, so the demo does not wait; in real code keep the default backoff.
@subagent(name="web", retry=RetryPolicy.never())
async def web_agent(task: Task, ctx: Context) -> list[str]:
    """Search the web."""
    print(f"  web subagent asked: {task.query!r}")
    raise TransientError("web search is unavailable", error_type="unavailable")


def fake_script() -> list[Any]:
    """What the fake API answers, one reply per request, in order."""
    fake = FakeMessagesAPI
    both = fake.message(
        [
            "I'll check the docs and the web.",
            fake.tool_use_block("docs", {"query": "cancel"}),
            fake.tool_use_block("web", {"query": "asyncio 3.11 cancellation changes"}),
        ],
        stop_reason="tool_use",
    )
    answer = fake.text(
        "Call task.cancel(); since 3.11, asyncio.timeout() cancels on expiry. "
        "(The web search was unavailable, so changes beyond the docs are not covered.)"
    )
    # 529 first: the SDK's own retries are off, agentmesh's RetryPolicy makes the second try.
    return [fake.error(529), both, answer]


async def ask(model: AnthropicModel) -> Outcome:
    lead = LLMSubagent(
        "lead",
        model,
        system="Answer from your tools; say what you could not find.",
        tools=[docs_agent.as_tool(), web_agent.as_tool()],
        retry=RetryPolicy(max_attempts=3, initial_delay=0.05),
        max_turns=4,  # a bound in code on the loop, whatever the model does
    )
    async with model:
        return await lead.run(QUESTION)


def show(outcome: Outcome) -> None:
    if isinstance(outcome, Success):
        print(f"\nanswer: {outcome.data}")
    else:
        print(f"\nfailed: {outcome.error_type}: {outcome.message}")
    for retry in outcome.retries or ():  # None when nothing was retried
        print(f"local retries: {retry.source} {retry.error_type} x{retry.count}")
    if outcome.usage is not None:
        print(
            f"model calls: {outcome.usage.model_calls}, tokens in/out: "
            f"{outcome.usage.input_tokens}/{outcome.usage.output_tokens}"
        )


async def main() -> None:
    if "--live" in sys.argv:
        if not os.environ.get("ANTHROPIC_API_KEY"):
            sys.exit("--live needs ANTHROPIC_API_KEY in the environment")
        show(await ask(AnthropicModel(os.environ.get("AGENTMESH_MODEL", "claude-sonnet-4-5"))))
        return
    with FakeMessagesAPI(*fake_script()) as api:
        model = AnthropicModel("claude-test", api_key="sk-ant-fake", base_url=api.base_url)
        show(await ask(model))
        # What the SDK really sent back to the model after the tool turn.
        results = api.requests[-1].messages[-1]["content"]
        print(f"\nHTTP requests to the fake API: {api.request_count}")
        for block in results:
            flag = "is_error" if block.get("is_error") else "ok"
            print(f"tool_result ({flag}): {str(block['content'])[:90]}")


if __name__ == "__main__":
    asyncio.run(main())
