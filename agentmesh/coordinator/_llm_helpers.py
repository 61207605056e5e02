"""Coordinator helpers that think with a model: `LLMRewriter` here, `LLMSynthesizer` apart.

Both ask for one forced tool call (`propose_query`, `write_summary`; script them with
`ScriptedModel.propose_query(...)` / `ScriptedModel.write_summary(...)`) through
`call_model`, as a subagent makes a model turn: in a coordinator's run, the run's usage
limits admit the call and its usage is counted in the report (see `_helper_models`),
transient failures are retried locally, and no model failure (a refusal by a usage
limit included) escapes: the rewriter then has no proposal (the router records a gap saying what
the model did wrong) and the synthesizer returns the deterministic report with a note
that says so. What a model may not decide is decided in code: the
synthesizer's coverage, findings and escalations are the deterministic ones, and its
summary is refused when it cites anything that is not a numbered finding.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pydantic

from agentmesh._engine._model_calls import call_model
from agentmesh._logging import get_logger
from agentmesh._numbers import whole
from agentmesh.classify import Classifier, default_classifier
from agentmesh.coordinator._helper_models import REWRITER, HelperModels, helper_context
from agentmesh.envelope import ErrorCategory, ErrorEnvelope, ErrorType
from agentmesh.errors import CallFailed, UsageError
from agentmesh.models import Model, ModelResponse, resolve_model
from agentmesh.report import RecordGap
from agentmesh.retry import RetryPolicy
from agentmesh.scope import RunScope
from agentmesh.task import Task

if TYPE_CHECKING:
    from agentmesh._engine._task import TaskEngine

__all__ = ["PROPOSE_QUERY", "WRITE_SUMMARY", "LLMRewriter"]

PROPOSE_QUERY = "propose_query"
WRITE_SUMMARY = "write_summary"

# --- the model call, shared by both helpers --------------------------------------------


async def _forced_call(
    ctx: TaskEngine,
    model: Model,
    *,
    tool: Mapping[str, Any],
    system: str,
    prompt: str,
    max_tokens: int,
    attempted_query: dict[str, Any],
) -> dict[str, Any] | ErrorEnvelope:
    """The input of the model's call of `tool`, or the envelope saying why there is none.

    The helper's retry policy and classifier are `ctx`'s; a usage limit's refusal is
    an envelope like any failure of the call.
    """
    name = tool["name"]
    try:
        response = await call_model(
            ctx,
            model,
            messages=[{"role": "user", "content": prompt}],
            system=system,
            tools=[tool],
            tool_choice={"type": "tool", "name": name},
            max_tokens=max_tokens,
            attempted_query=attempted_query,
        )
    except CallFailed as failed:
        return failed.envelope
    call = next((c for c in response.tool_uses if c.name == name), None)
    if call is not None:
        return call.input
    usage = ctx.usage.summary()
    return ErrorEnvelope(
        error_category=ErrorCategory.OTHER,
        error_type=ErrorType.TOOL_NOT_CALLED,
        is_retryable=False,
        message=_what_instead(response, name),
        attempted_query={"model": model.name, **attempted_query},
        source=f"{ctx.subagent}/model",
        attempts=1 if usage is None else usage.model_calls,
        details=_short(response.text) or None,
    )


def _what_instead(response: ModelResponse, name: str) -> str:
    """What the model did instead of calling the forced tool `name`, said plainly."""
    if response.tool_uses:
        called = ", ".join(sorted({call.name for call in response.tool_uses}))
        return f"the model called {called} instead of {name}"
    if response.text.strip():
        return f"the model answered in text instead of calling {name}"
    return f"the model answered without calling {name} (stop reason {response.stop_reason!r})"


def _failure(envelope: ErrorEnvelope) -> str:
    """How a failed helper call reads in a log, a gap's reason or a report note."""
    if envelope.error_type == ErrorType.TOOL_NOT_CALLED:
        return envelope.message  # says what the model did wrong already
    return (
        f"the model call failed ({envelope.error_category.value} {envelope.error_type}: "
        f"{_short(envelope.message, 200)})"
    )


def _short(text: str, limit: int = 500) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def _check_options(helper: str, max_tokens: int, retry: RetryPolicy | None) -> RetryPolicy:
    whole(f"{helper}(max_tokens=)", max_tokens, at_least=1)
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise UsageError(f"{helper}(retry=) must be a RetryPolicy, got {retry!r}")
    return retry if retry is not None else RetryPolicy()


# --- LLMRewriter ----------------------------------------------------------------------

_PROPOSE_TOOL: dict[str, Any] = {
    "name": PROPOSE_QUERY,
    "description": "Propose the corrected query for the failed task, or null when the "
    "error shows that the information is not in this source.",
    "input_schema": {
        "type": "object",
        "properties": {
            "query": {
                "type": ["string", "null"],
                "description": "the corrected query, complete, exactly as the subagent should "
                "receive it; null when no rewording can find the information",
            },
            "reason": {"type": "string", "description": "one sentence: why"},
        },
        "required": ["query", "reason"],
    },
}

_REWRITER_SYSTEM = """\
You correct the queries of failed tasks in a multi-agent system. A subagent rejected a \
task's query as invalid; you get the task and the structured error it returned \
(attemptedQuery, message, errorType, details, alternativeApproaches).

Call propose_query exactly once.
- When the error is about the query's form (syntax, an unknown field or column, a wrong \
format, a missing or malformed parameter), give the corrected query: complete, in the \
same language and style as the original, changed only as much as the error requires.
- When the error shows that the information is simply not in this source (no such \
record, table or field holds it, out of the source's scope), set query to null. \
A retry fixes form and structure; it cannot create information that is not there, \
and a made-up query would only hide the gap.
- Never repeat the attempted query unchanged."""


class _Proposal(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(frozen=True, defer_build=True)

    query: str | None
    reason: str = ""


class LLMRewriter:
    """A `Coordinator(rewriter=...)` that asks a model for a corrected query.

    The model is made to call the tool `propose_query` with `{"query": str | null,
    "reason": str}` (`PROPOSE_QUERY`; in tests, `ScriptedModel.propose_query(...)`).
    `await rewriter(task, envelope)` returns the corrected query, or a `RecordGap` whose
    reason says why there is none: the model says the information is not in the source,
    its proposal is empty or the failed query unchanged, it answered in text instead of
    calling `propose_query` or with malformed input, or the model call failed for good
    (after local retries). The router records that gap with the reason, and still
    refuses any query already tried. It never raises for a model failure.

    Args:
        model: any `Model` (`AnthropicModel`, `ScriptedModel`, ...), or a model string
            (see `resolve_model`).
        retry: local retries of the model call (default `RetryPolicy()`); its
            `deadline` bounds the whole call, attempts in flight included.
        max_tokens: for the model's answer.
        classifier: turns the model call's exceptions into envelopes.
    """

    def __init__(
        self,
        model: Model | str,
        *,
        retry: RetryPolicy | None = None,
        max_tokens: int = 512,
        classifier: Classifier | None = None,
    ) -> None:
        self.model = resolve_model(model)
        self.retry = _check_options("LLMRewriter", max_tokens, retry)
        self.max_tokens = max_tokens
        self.classifier = classifier or default_classifier

    async def __call__(self, task: Task, envelope: ErrorEnvelope) -> str | RecordGap:
        """The proposal for `task`, asked on its own (no run's limits; usage not kept)."""
        return await self._rewrite(task, envelope, None, task.id)

    def _in_run(self, helpers: HelperModels, task_id: str) -> _RunRewriter:
        """This rewriter for task `task_id` of a run: its model calls counted there.

        The coordinator hands this to its router: the run's usage limits admit the
        calls, and the report counts them under "rewriter".
        """
        return _RunRewriter(self, helpers, task_id)

    async def _rewrite(
        self,
        task: Task,
        envelope: ErrorEnvelope,
        helpers: HelperModels | None,
        task_id: str | None,
    ) -> str | RecordGap:
        log = get_logger(
            helper=REWRITER, model=self.model.name, task_id=task_id, subagent=envelope.source
        )
        options: dict[str, Any] = {
            "task": task,
            "task_id": task_id,
            "retry": self.retry,
            "classifier": self.classifier,
            "log": log,
        }
        ctx = (
            helper_context(RunScope(), REWRITER, **options)
            if helpers is None
            else helpers.context(REWRITER, **options)
        )
        answer = await _forced_call(
            ctx,
            self.model,
            tool=_PROPOSE_TOOL,
            system=_REWRITER_SYSTEM,
            prompt=_rewrite_prompt(task, envelope),
            max_tokens=self.max_tokens,
            attempted_query={"rewrite": task.query},
        )
        if isinstance(answer, ErrorEnvelope):
            reason = _failure(answer)
            log.warning("rewrite_failed", reason=reason, error_type=answer.error_type)
            return RecordGap(reason)
        try:
            proposal = _Proposal.model_validate(answer)
        except pydantic.ValidationError as exc:
            log.warning("rewrite_unusable", problems=exc.error_count(), answer=_short(str(answer)))
            return RecordGap(
                f"the model called {PROPOSE_QUERY} with malformed input "
                f"({exc.error_count()} problem(s))"
            )
        query = (proposal.query or "").strip()
        if not query:
            log.info("rewrite_declined", reason=proposal.reason)
            because = f": {proposal.reason}" if proposal.reason else ""
            return RecordGap(f"the model proposed no query{because}")
        if query in {task.query.strip(), _text_of(envelope.attempted_query)}:
            log.info("rewrite_unchanged", query=query, reason=proposal.reason)
            return RecordGap("the model proposed the failed query unchanged")
        log.info("rewrite_proposed", query=query, reason=proposal.reason)
        return query

    def __repr__(self) -> str:
        return f"LLMRewriter({self.model.name!r})"


class _RunRewriter:
    """An `LLMRewriter` as the router of one run calls it, for one task."""

    __slots__ = ("helpers", "rewriter", "task_id")

    def __init__(self, rewriter: LLMRewriter, helpers: HelperModels, task_id: str) -> None:
        self.rewriter, self.helpers, self.task_id = rewriter, helpers, task_id

    async def __call__(self, task: Task, envelope: ErrorEnvelope) -> str | RecordGap:
        return await self.rewriter._rewrite(task, envelope, self.helpers, self.task_id)

    def __repr__(self) -> str:
        return repr(self.rewriter)


def _rewrite_prompt(task: Task, envelope: ErrorEnvelope) -> str:
    error = envelope.to_dict()
    shown = {
        key: error[key]
        for key in (
            "errorCategory",
            "errorType",
            "message",
            "attemptedQuery",
            "details",
            "alternativeApproaches",
            "source",
        )
        if key in error
    }
    lines = [f"Task query: {task.query}"]
    if task.topic is not None:
        lines.append(f"Topic: {task.topic}")
    lines += ["", "The error it returned:", json.dumps(shown, indent=2, default=str)]
    return "\n".join(lines)


def _text_of(query: str | dict[str, Any]) -> str:
    return query.strip() if isinstance(query, str) else ""


# --- LLMSynthesizer -------------------------------------------------------------------
