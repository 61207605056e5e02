"""Type-checked, never run: the public API's types as a user sees them."""

from __future__ import annotations

import datetime
from typing import Any

from agentmesh import (
    Context,
    ErrorEnvelope,
    Outcome,
    RetryPolicy,
    Subagent,
    Success,
    Task,
    Tool,
    subagent,
    tool,
)
from agentmesh.classify import is_strict, set_strict, strict
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use


@tool(idempotent=True)
async def search_docs(query: str, limit: int = 5) -> list[dict[str, Any]]:
    return [{"query": query}] * limit


typed_tool: Tool[[str, int], list[dict[str, Any]]] = search_docs


@pre_tool_use(tool="search_docs")
def no_empty_queries(event: ToolCallEvent) -> Ruling | None:
    return Ruling.deny("empty query") if not event.arguments.get("query") else None


@subagent(name="docs", retry=RetryPolicy(max_attempts=4), policies=[no_empty_queries])
async def docs_agent(task: Task, ctx: Context) -> list[dict[str, Any]]:
    hits: list[dict[str, Any]] = await ctx.call(search_docs, query=task.query, limit=3)
    ctx.record_partial(hits, completed="docs")
    return hits


agent: Subagent = docs_agent


async def use() -> None:
    outcome: Outcome = await docs_agent.run(Task(query="q"))
    if isinstance(outcome, ErrorEnvelope):
        retry: bool = outcome.is_retryable
        # What a policy returned is what the outcome carries: one type, `Ruling`.
        ruling: Ruling | None = outcome.policy
        print(retry, ruling, [r.tool for r in outcome.rulings or ()])
    else:
        success: Success[Any] = outcome
        print(success.is_empty)


async def claude_path() -> None:
    from agentmesh import Coordinator, Report
    from agentmesh.coordinator import LLMRewriter, LLMSynthesizer
    from agentmesh.models import AnthropicModel, Model, ModelResponse, ScriptedModel
    from agentmesh.subagents import LLMSubagent

    scripted: Model = ScriptedModel([ModelResponse.of_text("ok")])
    async with AnthropicModel("claude-test") as claude:
        model: Model = claude
        lead = LLMSubagent("lead", model, tools=[docs_agent.as_tool(), search_docs])
        typed = LLMSubagent("typed", scripted, output_type=list[int], output_retries=1)
        uncached: Model = AnthropicModel("claude-test", prompt_caching=False)
        print(typed.output_retries, uncached.name)
        coordinator = Coordinator(
            [lead], rewriter=LLMRewriter(scripted), synthesizer=LLMSynthesizer(scripted)
        )
        report: Report = await coordinator.run([Task(query="q", topic="t")])
        print((await coordinator.run(Task(query="q"))).sufficient)  # a lone task is one task
        print(report.to_markdown(), report.coverage[0].status.value)


async def model_strings_and_clouds() -> None:
    import anthropic

    from agentmesh.coordinator import LLMRewriter, LLMSynthesizer
    from agentmesh.models import AnthropicModel, FallbackModel, Model, resolve_model
    from agentmesh.subagents import LLMSubagent

    by_name: Model = resolve_model("anthropic:claude-sonnet-4-5")
    chain = FallbackModel("bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0", by_name)
    agent = LLMSubagent("a", "vertex:claude-sonnet-4-5@20250929")
    print(chain.models, agent.model.name, LLMRewriter("anthropic:x"), LLMSynthesizer("anthropic:x"))
    bedrock = AnthropicModel("m", client=anthropic.AsyncAnthropicBedrock(aws_region="us-east-1"))
    vertex = AnthropicModel("m", client=anthropic.AsyncAnthropicVertex(region="us-east5"))
    provider: str = bedrock.provider
    print(provider, vertex.endpoint)


@tool
async def charge(amount: int, idempotency_key: str, ctx: Context) -> str:
    return f"{amount} {idempotency_key} {ctx.run_id}"


@subagent
async def billing(task: Task, ctx: Context) -> str:
    receipt: str = await ctx.call(charge, amount=5)  # injected parameters are not passed
    return receipt


def develop() -> bool:
    set_strict(None)  # None: follow AGENTMESH_STRICT again
    with strict():
        on: bool = is_strict()
    return on


async def spend() -> None:
    from agentmesh import Coordinator
    from agentmesh.coordinator import UsageStop
    from agentmesh.models import (
        FallbackModel,
        Model,
        ModelHealth,
        ModelPrice,
        ScriptedModel,
        UsageLimits,
        UsageSummary,
    )
    from agentmesh.subagents import LLMSubagent

    chain: Model = FallbackModel(ScriptedModel([]), ScriptedModel([]), on={"overloaded"})
    lead = LLMSubagent("lead", chain, usage_limits=UsageLimits(max_model_calls=10))
    coordinator = Coordinator(
        [lead],
        usage_limits=UsageLimits(max_total_tokens=100_000, max_cost_usd=1.5),
        prices={"my-model": ModelPrice(input=1, output=2, cache_write=1.25, cache_read=0.1)},
    )
    report = await coordinator.run(["q"])
    # One health for every run of this coordinator (and of any given the same object).
    health = ModelHealth(reset_after=60, max_concurrency=8)
    shared = Coordinator([lead], model_health=health)
    later = await shared.run(["q"])
    settled: dict[str, int] = later.model_concurrency
    print(settled, health.concurrency(), health.state(chain).value, health.back_in(chain))
    for failover in later.usage.failovers if later.usage is not None else ():
        since: datetime.datetime | None = failover.out_since
        print(failover.skipped, since, failover.out_until)
    usage: UsageSummary | None = report.usage
    if usage is not None:
        cost: float | None = usage.cost_usd
        print(cost, usage.total_tokens, report.usage_by_subagent["lead"].model_calls)
    # Both breakdowns are read-only mappings, by subagent name and by model name.
    for model, line in report.usage_by_model.items():
        print(model, line.model_calls)
    # A hard cost cap, and how far a run a usage limit stopped got.
    capped = Coordinator([lead], usage_limits=UsageLimits(max_cost_usd=0.05, hard=True))
    stop: UsageStop | None = (await capped.run(["q"])).usage_stop
    if stop is not None:
        spent: float | None = stop.spent_usd
        print(stop.headline(), stop.covered, stop.not_started, stop.stopped, spent)
    # A person's answers the run used: what was asked, the answer, the arguments after.
    for answered in report.answered_approvals:
        print(answered.id, answered.answer, answered.tool, answered.edited_arguments)


async def crowded_server() -> None:
    from agentmesh.envelope import ErrorType
    from agentmesh.models import AnthropicModel
    from agentmesh.subagents import LLMSubagent
    from agentmesh.testing import FakeMessagesAPI, RecordingSleep

    with FakeMessagesAPI() as api:
        api.rate_limit(requests_per_minute=60, input_tokens_per_minute=30_000, minute=0.5)
        api.overload(3, model="claude-busy", retry_after=1.5)
        api.overload(share=0.25, seconds=2.0)
        api.exhaust_quota(resets_in=3600, error_code=None, retry_after=False)
        sleep = RecordingSleep(advance=api.advance)
        async with AnthropicModel("claude-test", base_url=api.base_url) as claude:
            agent = LLMSubagent("a", claude, retry=RetryPolicy(sleep=sleep))
            outcome = await agent.run("q")
        if isinstance(outcome, ErrorEnvelope) and outcome.error_type == ErrorType.QUOTA_EXHAUSTED:
            wait: float | None = outcome.retry_after
            print(wait, outcome.details, sleep.delays)


async def openai_path() -> None:
    from agentmesh.models import FallbackModel, Model, OpenAIModel
    from agentmesh.subagents import LLMSubagent
    from agentmesh.testing import ChatReply, FakeChatCompletionsAPI, RecordedRequest

    F = FakeChatCompletionsAPI

    def answer(request: RecordedRequest) -> ChatReply:
        return F.text("ok") if request.stream else F.error(503, retry_after=1.5)

    with FakeChatCompletionsAPI(
        F.tool_call("search", {"q": "x"}), F.refusal(), handler=answer
    ) as api:
        api.enqueue(F.stream_cut(after_chunks=1, error=F.error(500)), F.garbage())
        async with OpenAIModel("gpt-5-mini", api_key="sk-test", base_url=api.base_url) as gpt:
            local: Model = OpenAIModel(
                "llama3.1", base_url=api.base_url, stream=True, max_tokens_param="max_tokens"
            )
            chain: Model = FallbackModel(gpt, local)
            outcome = await LLMSubagent("a", chain, output_type=list[str]).run("q")
            print(outcome, gpt.endpoint, api.requests[0].body, api.request_count)
