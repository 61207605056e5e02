"""Online mode: Claude plans, picks the relevant passages and writes the summary, and a
`web` source searches the web with Anthropic's server-side web search tool.

It is on when `ANTHROPIC_API_KEY` is set (or `--model` is given) and `--offline` is not.
The offline sources stay. Claude is a fallback chain (`--model`, then `--fallback-model`,
claude-haiku-4-5 by default): a model that stays overloaded after its retries hands the
same request to the next. Every model call goes through the framework like any other
call that can fail (`ctx.call_model`, so its tokens and cost are counted): the planner
is a subagent (its failure falls back to the offline planner, and the report says so),
the passage selection is a tool inside each search subagent (its failure leaves a
`partial` entry with every passage read kept as preliminary), and `LLMRewriter` and
`LLMSynthesizer` never let a model failure escape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentmesh import (
    AgentError,
    Context,
    ErrorEnvelope,
    InvalidInput,
    RetryPolicy,
    Subagent,
    Task,
    TransientError,
    subagent,
    tool,
)
from agentmesh.models import (
    FallbackModel,
    Model,
    ModelResponse,
    OtherBlock,
    UsageSummary,
    resolve_model,
)

from .agents import CALL_TIMEOUT, Analyse, answer_within
from .injection import FaultInjector
from .options import qualified
from .planner import MAX_SUBTOPICS, Plan, Subtopic
from .sources import Passage

__all__ = [
    "DEFAULT_MODEL",
    "MODEL_RETRY",
    "claude",
    "close",
    "model_analysis",
    "plan_with_model",
    "web_agent",
]

DEFAULT_MODEL = "claude-sonnet-4-5"
# The SDK's own retries are off (AnthropicModel); these are the only ones.
MODEL_RETRY = RetryPolicy(max_attempts=3, initial_delay=0.5, max_delay=8.0)

_PLAN_TOOL: dict[str, Any] = {
    "name": "plan_research",
    "description": "Submit the research plan: 2 to 5 subtopics, each with a search query.",
    "input_schema": {
        "type": "object",
        "properties": {
            "subtopics": {
                "type": "array",
                "minItems": 2,
                "maxItems": 5,
                "items": {
                    "type": "object",
                    "properties": {
                        "title": {"type": "string", "description": "a few words"},
                        "query": {
                            "type": "string",
                            "description": 'keywords; put words that must appear in "quotes"',
                        },
                    },
                    "required": ["title", "query"],
                },
            }
        },
        "required": ["subtopics"],
    },
}
_PLAN_SYSTEM = (
    "You plan research about Python. Split the user's question into 2 to 5 distinct "
    "subtopics. For each, write a short keyword query for a BM25 search over Python's "
    "documentation, docstrings and package descriptions. Call plan_research once."
)
_SELECT_TOOL: dict[str, Any] = {
    "name": "keep_passages",
    "description": "Submit the numbers of the passages that help answer the query.",
    "input_schema": {
        "type": "object",
        "properties": {
            "keep": {
                "type": "array",
                "items": {"type": "integer"},
                "description": "passage numbers, most useful first; [] when none helps",
            }
        },
        "required": ["keep"],
    },
}
_WEB_SEARCH_TOOL: dict[str, Any] = {
    "type": "web_search_20250305",
    "name": "web_search",
    "max_uses": 2,
}


def claude(model: str, fallback: str | None) -> tuple[Model, tuple[Model, ...]]:
    """The run's model: `model`, failing over to `fallback` (if any); and what to close.

    Each is a model string (`"openai:gpt-5-mini"`, `"bedrock:<model id>"`, see
    `resolve_model`) or a bare Claude name (`claude-sonnet-4-5`). Raises `UsageError`
    for a string of no known form.
    """
    primary = resolve_model(qualified(model))
    if fallback is None or fallback == model:
        return primary, (primary,)
    backup = resolve_model(qualified(fallback))
    return FallbackModel(primary, backup), (primary, backup)


async def close(models: Sequence[Model]) -> None:
    """Close the models that hold a client (a `Model` need not)."""
    for model in models:
        aclose = getattr(model, "aclose", None)
        if aclose is not None:
            await aclose()


def _forced(name: str) -> dict[str, str]:
    return {"type": "tool", "name": name}


def _tool_input(response: ModelResponse, name: str) -> dict[str, Any]:
    call = next((c for c in response.tool_uses if c.name == name), None)
    if call is None:
        raise AgentError(
            f"the model answered without calling {name} (stop reason {response.stop_reason!r})",
            error_type="invalid_response",
        )
    return call.input


# --- planning ---------------------------------------------------------------------------


def planner_agent(model: Model) -> Subagent:
    """The planner as a subagent: its model call is retried and classified like any other."""

    @subagent(name="planner", retry=MODEL_RETRY)
    async def planner(task: Task, ctx: Context) -> list[Subtopic]:
        response = await ctx.call_model(
            model,
            messages=[{"role": "user", "content": task.query}],
            system=_PLAN_SYSTEM,
            tools=[_PLAN_TOOL],
            tool_choice=_forced("plan_research"),
            max_tokens=1024,
            retry=MODEL_RETRY,
        )
        items = _tool_input(response, "plan_research").get("subtopics")
        if not isinstance(items, list) or not 2 <= len(items) <= 5:
            raise InvalidInput("the plan must have 2 to 5 subtopics", error_type="invalid_plan")
        subtopics = []
        for item in items:
            title = str(item.get("title", "")).strip() if isinstance(item, dict) else ""
            query = str(item.get("query", "")).strip() if isinstance(item, dict) else ""
            if not title or not query or query.count('"') % 2:
                raise InvalidInput(f"unusable subtopic {item!r}", error_type="invalid_plan")
            subtopics.append(Subtopic(title=title, query=query))
        return subtopics

    return planner


async def plan_with_model(
    model: Model, question: str, fallback: Plan
) -> tuple[Plan, str | None, UsageSummary | None]:
    """Claude's plan, or `fallback` and a note saying why Claude's could not be used;
    and what planning used of the models."""
    outcome = await planner_agent(model).run(Task(query=question, topic="plan"))
    if isinstance(outcome, ErrorEnvelope):
        note = (
            f"Claude could not plan ({outcome.error_category.value} {outcome.error_type}: "
            f"{outcome.message}); the offline planner's plan was used."
        )
        return fallback, note, outcome.usage
    # The whole question stays one of the queries, as in the offline plan.
    whole = fallback.subtopics[0]
    subtopics = (whole, *outcome.data[: MAX_SUBTOPICS - 1])
    return Plan(question=question, subtopics=subtopics), None, outcome.usage


# --- analysis ---------------------------------------------------------------------------


def model_analysis(model: Model, *, keep: int = 4) -> Analyse:
    """Analysis by Claude, as a tool inside the search subagent (retried, classified)."""

    @tool(name="keep_passages", idempotent=True, retry=MODEL_RETRY)
    async def keep_passages(query: str, passages: list[str], ctx: Context) -> list[int]:
        """Ask the model which numbered passages help answer `query`."""
        numbered = "\n\n".join(f"[{n}] {text}" for n, text in enumerate(passages))
        response = await ctx.call_model(
            model,
            messages=[{"role": "user", "content": f"Query: {query}\n\nPassages:\n{numbered}"}],
            system="Keep only the passages that help answer the query. Call keep_passages.",
            tools=[_SELECT_TOOL],
            tool_choice=_forced("keep_passages"),
            max_tokens=256,
            retry=MODEL_RETRY,
        )
        chosen = _tool_input(response, "keep_passages").get("keep")
        if not isinstance(chosen, list):
            raise AgentError("keep_passages without a list", error_type="invalid_response")
        # A number the model made up is dropped, never guessed at.
        return [n for n in dict.fromkeys(chosen) if isinstance(n, int) and 0 <= n < len(passages)]

    async def analyse(ctx: Context, query: str, passages: Sequence[Passage]) -> list[Passage]:
        if not passages:
            return []
        chosen = await ctx.call(keep_passages, query=query, passages=[p["text"] for p in passages])
        return [passages[n] for n in chosen[:keep]]

    return analyse


# --- the web source ---------------------------------------------------------------------

# What a failed server-side search says, as the error a client-side one would raise.
_WEB_ERRORS: Mapping[str, type[AgentError]] = {
    "too_many_requests": TransientError,
    "unavailable": TransientError,
    "max_uses_exceeded": InvalidInput,
    "query_too_long": InvalidInput,
    "invalid_tool_input": InvalidInput,
}


def web_agent(model: Model, faults: FaultInjector) -> Subagent:
    """The `web` source: Claude runs Anthropic's server-side web search; results are cited
    by title and URL (their page text stays encrypted in the API's answer)."""

    @tool(name="search_web", idempotent=True, retry=MODEL_RETRY)
    async def search_web(query: str, ctx: Context) -> list[Passage]:
        """Search the web through Claude's server-side web_search tool."""
        plain = " ".join(query.replace('"', " ").split())
        # A hung web backend (an injected `timeout`) is given up as a search source's is,
        # not waited for until the run's deadline.
        call = f"search {plain}"
        if await answer_within(
            CALL_TIMEOUT, "web", lambda: faults.strike("web", call, plain_query=True)
        ):
            return []
        response = await ctx.call_model(
            model,
            messages=[{"role": "user", "content": f"Search the web for: {plain}"}],
            system="Search the web once for the user's query, then answer in one sentence.",
            tools=[_WEB_SEARCH_TOOL],
            max_tokens=1024,
            retry=MODEL_RETRY,
        )
        return _web_passages(response)

    @subagent(name="web", retry=MODEL_RETRY, checkpoint=True)
    async def web(task: Task, ctx: Context) -> list[Passage]:
        if "web_search" in ctx.partials.completed:  # searched by the run being resumed
            return list(ctx.partials.findings)
        found = await ctx.call(search_web, query=task.query)
        ctx.record_partial(found, completed="web_search")
        return found

    web.description = "Searches the web with Anthropic's server-side web search tool."
    return web


def _web_passages(response: ModelResponse) -> list[Passage]:
    passages: list[Passage] = []
    for block in response.content:
        if not isinstance(block, OtherBlock) or block.type != "web_search_tool_result":
            continue
        content = (block.model_extra or {}).get("content")
        if isinstance(content, dict):  # web_search_tool_result_error
            code = str(content.get("error_code", "unknown"))
            raise _WEB_ERRORS.get(code, AgentError)(f"web search failed: {code}", error_type=code)
        for result in content or ():
            if isinstance(result, dict) and result.get("url"):
                title = str(result.get("title") or result["url"])
                age = f" ({result['page_age']})" if result.get("page_age") else ""
                passages.append(
                    Passage(
                        source="web",
                        id=f"web:{result['url']}",
                        document=title,
                        section=str(result["url"]),
                        text=f"{title}{age}",
                        score=0.0,
                    )
                )
    return passages
