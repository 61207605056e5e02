"""`LLMSubagent`: a subagent whose body is Claude's tool-use loop.

Every `tool_use` goes through `ctx.call` (policies, validation, limits, local retry), so a
tool failure that local retry recovered never reaches the model, one that did not goes
back as an `is_error` tool result carrying the envelope, and a denied call is never run,
whatever the model or the task text says. The model ends the loop with plain text, with
`submit_result`, or with `report_failure`: the envelope's fields a model can honestly
fill; the framework adds the source, attempts, usage, retries, rulings and the partial
results it recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Unpack

import pydantic

from agentmesh._engine._task import engine_of
from agentmesh._limits import recorded
from agentmesh._numbers import whole
from agentmesh._signatures import spell_out
from agentmesh._tracing import record_outcome, tool_span
from agentmesh.context import Context
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, Outcome, PartialResults, Success
from agentmesh.errors import AgentError, CallFailed, UsageError
from agentmesh.models import Model, ModelResponse, ToolUseBlock, resolve_model
from agentmesh.subagents._base import Subagent
from agentmesh.subagents._options import SubagentKwargs, SubagentOptions
from agentmesh.subagents._output import (
    FAILURE_REPORT_FIELDS,
    OutputType,
    Submissions,
    failure_tool,
)
from agentmesh.subagents._tool_source import ToolSource
from agentmesh.task import Task
from agentmesh.tools import Tool
from agentmesh.usage import UsageLimits

__all__ = ["REPORT_FAILURE", "SUBMIT_RESULT", "LLMSubagent"]

SUBMIT_RESULT = "submit_result"
"""The tool an `LLMSubagent`'s model calls to hand in its result."""
REPORT_FAILURE = "report_failure"
"""The tool an `LLMSubagent`'s model calls to say how the task failed."""

_TURN_LIMIT_PROMPT = (
    "You have reached the turn limit for this task. Call report_failure now with what "
    "was tried, any partial results you really obtained, and alternatives that could work."
)


class LLMSubagent(Subagent):
    """A subagent that thinks with a model and acts through tools.

    Args:
        name: the subagent's name.
        model: any `Model` (`AnthropicModel`, `ScriptedModel`, ...), or a model string
            (`"anthropic:claude-sonnet-4-5"`, `"openai:gpt-5-mini"`; see `resolve_model`).
        system: the system prompt.
        tools: the tools the model may call (`@tool` objects, or `subagent.as_tool()`),
            and sources of tools such as an `agentmesh.mcp.MCPServer`: all of a source's
            tools are offered, listed when a task starts. A source that cannot be
            listed is left out of that task (said in its outcome and report) unless it
            is `required=True` or no other tool is left.
        max_turns: model turns before the model is made to report a failure.
        max_tokens: per model turn.
        usage_limits: limits on what this subagent's model calls use in a run (all its
            tasks together), on top of the run's own (`Coordinator(usage_limits=)`).
        output_type: the result's type (a pydantic model, a dataclass, `list[int]`, any
            type a pydantic `TypeAdapter` validates): `submit_result` takes its JSON
            schema, and the result is the validated instance. None: any JSON value.
        output_retries: invalid results sent back to the model, with the validation
            errors, before the task ends in a `validation` envelope naming the fields.
        **options: as for `Subagent`; `retry` also governs the model calls.
    """

    def __init__(
        self,
        name: str,
        model: Model | str,
        system: str = "",
        tools: Sequence[Tool[Any, Any] | ToolSource] = (),
        *,
        max_turns: int = 8,
        max_tokens: int = 1024,
        output_type: Any = None,
        output_retries: int = 2,
        usage_limits: UsageLimits | None = None,
        **options: Unpack[SubagentKwargs],
    ) -> None:
        super().__init__(name, **options)
        if usage_limits is not None and not isinstance(usage_limits, UsageLimits):
            raise UsageError(
                f"LLMSubagent {name}: usage_limits= takes UsageLimits, got {usage_limits!r}"
            )
        self.usage_limits = usage_limits
        max_turns = whole(f"LLMSubagent {name}: max_turns=", max_turns, at_least=1)
        max_tokens = whole(f"LLMSubagent {name}: max_tokens=", max_tokens, at_least=1)
        output_retries = whole(f"LLMSubagent {name}: output_retries=", output_retries, at_least=0)
        # A source (even one that is also a Tool) is listed at run time, with its schema.
        self._sources = [t for t in tools if isinstance(t, ToolSource)]
        fixed: list[Tool[Any, Any]] = []
        for candidate in tools:
            if isinstance(candidate, ToolSource):
                continue
            if not isinstance(candidate, Tool):
                raise UsageError(
                    f"LLMSubagent {name}: {candidate!r} is not a @tool nor a source of tools"
                )
            fixed.append(candidate)
        _check_names(name, fixed)
        self.model = resolve_model(model)
        self.system = system
        self.tools: dict[str, Tool[Any, Any]] = {t.name: t for t in fixed}
        self.max_turns = max_turns
        self.max_tokens = max_tokens
        self._output = OutputType.of(output_type, owner=name)
        self.output_type = output_type
        self.output_retries = output_retries
        self._tool_definitions = [
            *(t.to_anthropic_tool() for t in fixed),
            self._output.submit_tool(SUBMIT_RESULT),
            failure_tool(REPORT_FAILURE),
        ]

    async def _offered(
        self, ctx: Context
    ) -> tuple[dict[str, Tool[Any, Any]], list[dict[str, Any]]]:
        """The tools of this task and their definitions: the fixed ones and the sources'.

        A source that cannot be listed fails the task when it is required
        (`required=True`) or when the model would be left without any tool; otherwise
        its tools are left out of this task, which says so (`TaskEngine.leave_out`).
        """
        if not self._sources:
            return self.tools, self._tool_definitions
        # All at once: servers start in parallel. A bug (not an AgentError) is raised as is.
        listings = await asyncio.gather(*(_listing(source) for source in self._sources))
        listed: list[Tool[Any, Any]] = []
        failures: list[tuple[ToolSource, AgentError]] = []
        for source, result in zip(self._sources, listings, strict=True):
            if isinstance(result, AgentError):
                failures.append((source, result))
            else:
                listed.extend(result)
        for source, failure in failures:
            if getattr(source, "required", False) or not (listed or self.tools):
                raise failure
        for source, failure in failures:
            ctx.log.warning(
                "tool_source_left_out", source=source.name, error_type=failure.error_type
            )
            engine_of(ctx).leave_out(source.name, failure.error_type, failure.message)
        _check_names(self.name, [*self.tools.values(), *listed])
        tools = {**self.tools, **{t.name: t for t in listed}}
        definitions = [
            *self._tool_definitions[: len(self.tools)],
            *(t.to_anthropic_tool() for t in listed),
            *self._tool_definitions[len(self.tools) :],
        ]
        return tools, definitions

    async def handle(self, task: Task, ctx: Context) -> Any:
        messages: list[dict[str, Any]] = [{"role": "user", "content": _prompt(task)}]
        results = Submissions(
            self._output, retries=self.output_retries, source=self.name, task=task, ctx=ctx
        )
        tools, definitions = await self._offered(ctx)
        for turn in range(1, self.max_turns + 1):
            response = await self._turn(ctx, messages, turn=turn, definitions=definitions)
            messages.append(response.to_message())
            if response.stop_reason == "max_tokens":
                # A cut-off answer is not an answer, and cut-off tool input is not safe to run.
                raise CallFailed(self._cut_off(task, ctx, response))
            calls = response.tool_uses
            if not calls:
                if response.stop_reason == "pause_turn":
                    continue  # a server-side tool paused the turn: let the model go on
                if response.stop_reason == "refusal":
                    raise CallFailed(self._refused(task, ctx, response))
                if not response.text.strip():
                    raise CallFailed(self._empty(task, ctx))
                rejection = results.check(response.text)
                if rejection is None:
                    return results.value
                messages.append({"role": "user", "content": rejection.message})
                continue
            finishing = [c for c in calls if _finishes(c)]
            answered: dict[str, dict[str, Any]] = {}
            if finishing and finishing[0].name == REPORT_FAILURE:
                return self._finish(finishing[0], task, ctx)
            if finishing:
                rejection = results.check(finishing[0].input["result"])
                if rejection is None:
                    return results.value
                answered[finishing[0].id] = rejection.to_tool_result(finishing[0].id)
            content = await self._run_tools(calls, ctx, tools, answered=answered)
            messages.append({"role": "user", "content": content})
        messages.append({"role": "user", "content": _TURN_LIMIT_PROMPT})
        response = await self._turn(
            ctx,
            messages,
            turn=self.max_turns + 1,
            tool_choice={"type": "tool", "name": REPORT_FAILURE},
            definitions=definitions,
        )
        report = next((c for c in response.tool_uses if c.name == REPORT_FAILURE), None)
        if report is not None:
            return self._finish(report, task, ctx)
        raise CallFailed(
            ErrorEnvelope(
                error_category=ErrorCategory.OTHER,
                error_type="turn_limit",
                is_retryable=False,
                message=f"no result after {self.max_turns} turns and no failure report",
                attempted_query=task.query,
                source=self.name,
                attempts=ctx.attempt,
            )
        )

    async def _turn(
        self,
        ctx: Context,
        messages: list[dict[str, Any]],
        *,
        turn: int,
        tool_choice: dict[str, Any] | None = None,
        definitions: list[dict[str, Any]] | None = None,
    ) -> ModelResponse:
        """One model call, retried locally, failed over, counted and limited (`call_model`)."""
        response = await ctx.call_model(
            self.model,
            messages=messages,
            system=self.system or None,
            tools=self._tool_definitions if definitions is None else definitions,
            tool_choice=tool_choice,
            max_tokens=self.max_tokens,
            retry=self.retry,
            usage_limits=self.usage_limits,
            attempted_query={"turn": turn, "task": ctx.task.query},
        )
        log = ctx.log.bind(model=self.model.name, turn=turn)
        log.debug("model_turn", stop_reason=response.stop_reason, tool_uses=len(response.tool_uses))
        return response

    async def _run_tools(
        self,
        calls: Sequence[ToolUseBlock],
        ctx: Context,
        tools: Mapping[str, Tool[Any, Any]] | None = None,
        *,
        answered: dict[str, dict[str, Any]] | None = None,
    ) -> list[dict[str, Any]]:
        """Run the turn's tool calls concurrently; one tool_result per call, in order.

        A task group, so that if one call breaks (a bug, not a tool failure: those are
        results) its siblings are cancelled rather than left acting after we return.
        A call in `answered` (a rejected submission) is not run: its result is given.
        """
        answered = answered or {}
        async with asyncio.TaskGroup() as group:
            running = {
                call.id: group.create_task(self._run_tool(call, ctx, tools))
                for call in calls
                if call.id not in answered
            }
        return [answered.get(call.id) or running[call.id].result() for call in calls]

    async def _run_tool(
        self, call: ToolUseBlock, ctx: Context, tools: Mapping[str, Tool[Any, Any]] | None
    ) -> dict[str, Any]:
        with tool_span(call.name, call.id) as current:
            outcome = await self._tool_outcome(call, ctx, self.tools if tools is None else tools)
            record_outcome(current, outcome)
        return outcome.to_tool_result(call.id)

    async def _tool_outcome(
        self, call: ToolUseBlock, ctx: Context, offered: Mapping[str, Tool[Any, Any]]
    ) -> Outcome:
        if call.name == SUBMIT_RESULT:  # here only when its input lacks `result`
            return ErrorEnvelope(
                error_category=ErrorCategory.VALIDATION,
                error_type="invalid_input",
                is_retryable=False,
                message="submit_result needs a `result` field (use [] or null for nothing found)",
                attempted_query={"tool": call.name, "arguments": recorded(call.input)},
                source=f"{self.name}/{call.name}",
                attempts=0,
            )
        tool = offered.get(call.name)
        if tool is None:
            return ErrorEnvelope(
                error_category=ErrorCategory.VALIDATION,
                error_type="unknown_tool",
                is_retryable=False,
                message=f"there is no tool named {call.name!r}; available: {sorted(offered)}",
                attempted_query={"tool": call.name, "arguments": recorded(call.input)},
                source=f"{self.name}/{call.name}",
                attempts=0,
            )
        try:
            data = await ctx.call(tool, **call.input)
        except CallFailed as failed:
            return failed.envelope
        # Completed tool work survives a later failure of the loop as partial results.
        ctx.record_partial(
            [{"tool": call.name, "input": recorded(call.input), "result": data}],
            completed=f"{call.name}:{call.id}",
        )
        success: Success[Any] = Success(
            data=data, source=f"{self.name}/{call.name}", attempted_query=call.input
        )
        return success

    def _finish(self, call: ToolUseBlock, task: Task, ctx: Context) -> Any:
        if call.name == SUBMIT_RESULT:
            return call.input["result"]
        raise CallFailed(self._reported_failure(call.input, task, ctx))

    def _reported_failure(self, report: dict[str, Any], task: Task, ctx: Context) -> ErrorEnvelope:
        """The model's failure report as an envelope; an invalid report is said to be one."""
        # What the framework knows for certain is not left to the model: of its report,
        # only the fields it was offered are read (never a policy's ruling, retries,
        # usage, the source or the attempts).
        claimed = {k: v for k, v in report.items() if k in FAILURE_REPORT_FIELDS}
        if len(claimed) < len(report):
            ctx.log.info("failure_report_fields_ignored", fields=sorted(set(report) - set(claimed)))
        fields = {
            "attemptedQuery": task.query,
            **claimed,
            "isError": True,
            "source": self.name,
            "attempts": ctx.attempt,
        }
        try:
            return ErrorEnvelope.model_validate(fields)
        except pydantic.ValidationError as exc:
            return ErrorEnvelope(
                error_category=ErrorCategory.OTHER,
                error_type="invalid_failure_report",
                is_retryable=False,
                message="the model reported a failure that is not a valid error envelope",
                attempted_query=task.query,
                source=self.name,
                attempts=ctx.attempt,
                details=f"{exc.error_count()} problem(s): {_short(str(exc))}",
            )

    def _cut_off(self, task: Task, ctx: Context, response: ModelResponse) -> ErrorEnvelope:
        text = response.text
        return ErrorEnvelope(
            error_category=ErrorCategory.OTHER,
            error_type="truncated",
            is_retryable=False,
            message=(
                f"the model's answer was cut off at max_tokens={self.max_tokens}; "
                "raise max_tokens or narrow the task"
            ),
            attempted_query=task.query,
            source=self.name,
            attempts=ctx.attempt,
            partial_results=PartialResults(findings=(text,)) if text else None,
        )

    def _empty(self, task: Task, ctx: Context) -> ErrorEnvelope:
        return ErrorEnvelope(
            error_category=ErrorCategory.OTHER,
            error_type="empty_response",
            is_retryable=False,
            message="the model ended its turn without an answer or a result",
            attempted_query=task.query,
            source=self.name,
            attempts=ctx.attempt,
        )

    def _refused(self, task: Task, ctx: Context, response: ModelResponse) -> ErrorEnvelope:
        # A refusal (Claude's `refusal`, a provider's content filter or safety block) is
        # the same answer however often it is asked: business, never retried. The text is
        # the model's or the provider's reason.
        return ErrorEnvelope(
            error_category=ErrorCategory.BUSINESS,
            error_type="refused",
            is_retryable=False,
            message=response.text or "the model declined the task",
            attempted_query=task.query,
            source=self.name,
            attempts=ctx.attempt,
        )


async def _listing(source: ToolSource) -> list[Tool[Any, Any]] | AgentError:
    """The source's tools, or why it cannot list them (a server that cannot start, ...)."""
    try:
        return await source.list_tools()
    except AgentError as failure:
        return failure


def _check_names(subagent: str, tools: Sequence[Tool[Any, Any]]) -> None:
    names = [t.name for t in tools]
    clashes = sorted(
        {n for n in names if names.count(n) > 1} | {SUBMIT_RESULT, REPORT_FAILURE} & set(names)
    )
    if clashes:
        raise UsageError(
            f"LLMSubagent {subagent}: tool names must be unique and not reserved: {clashes}"
        )


def _finishes(call: ToolUseBlock) -> bool:
    """A call that ends the loop: a failure report, or a result that has its `result`."""
    return call.name == REPORT_FAILURE or (call.name == SUBMIT_RESULT and "result" in call.input)


def _prompt(task: Task) -> str:
    if task.feedback is None:
        return task.query
    return (
        f"{task.query}\n\nAn earlier attempt at this task failed with this error; "
        f"take it into account:\n{task.feedback.to_json()}"
    )


def _short(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


spell_out(LLMSubagent.__init__, SubagentKwargs, SubagentOptions)
