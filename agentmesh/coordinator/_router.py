"""The router: a typed decision for every outcome, from a table you can override row by row."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from agentmesh.envelope import ErrorCategory, ErrorEnvelope, Outcome, Success
from agentmesh.errors import UsageError
from agentmesh.report import (
    Accept,
    AcceptEmpty,
    Escalate,
    RecordGap,
    RetryWithFeedback,
    Route,
    TryAlternative,
)
from agentmesh.task import Task

__all__ = ["Rewriter", "RouteContext", "Router", "RouterLike"]

Rewriter: TypeAlias = Callable[
    [Task, ErrorEnvelope],
    "str | Task | RecordGap | Awaitable[str | Task | RecordGap | None] | None",
]
"""`rewriter(task, envelope)` proposes a corrected query (or Task), or None for none.

A `RecordGap(reason)` instead of None says why there is no proposal: the gap's reason
then carries it.
"""


@dataclass(frozen=True, slots=True)
class RouteContext:
    """Everything a router may look at to decide about one outcome."""

    task: Task
    outcome: Outcome
    subagent: str
    rewrites: int
    max_rounds: int
    tried_queries: frozenset[str]
    tried_alternatives: frozenset[str]
    alternatives: frozenset[str]
    rewriter: Rewriter | None

    @property
    def envelope(self) -> ErrorEnvelope:
        assert isinstance(self.outcome, ErrorEnvelope)  # only error rows ask for it
        return self.outcome


class RouterLike(Protocol):
    """Anything with `async route(ctx) -> Route` can replace the default router."""

    async def route(self, ctx: RouteContext) -> Route: ...


class Router:
    """The default routing table; subclass and override one `on_*` method to change a row.

    | outcome           | decision                                                     |
    | ----------------- | ------------------------------------------------------------ |
    | success with data | Accept                                                       |
    | empty success     | AcceptEmpty ("searched, nothing found"; never retried)       |
    | validation        | RetryWithFeedback with the rewriter's query, else RecordGap  |
    | transient         | TryAlternative (first one with a handler), else RecordGap    |
    | business          | Escalate, with the envelope's userMessage                    |
    | permission        | Escalate                                                     |
    | other             | RecordGap, with details                                      |

    The coordinator enforces what no router may change: a policy's forbid_retry or
    escalate, the deadline, `max_rounds`, and never sending a query twice.
    """

    async def route(self, ctx: RouteContext) -> Route:
        outcome = ctx.outcome
        if isinstance(outcome, Success):
            return AcceptEmpty() if outcome.is_empty else Accept()
        rows: dict[ErrorCategory, Callable[[RouteContext], Awaitable[Route]]] = {
            ErrorCategory.VALIDATION: self.on_validation,
            ErrorCategory.TRANSIENT: self.on_transient,
            ErrorCategory.BUSINESS: self.on_business,
            ErrorCategory.PERMISSION: self.on_permission,
            ErrorCategory.OTHER: self.on_other,
        }
        return await rows[outcome.error_category](ctx)

    async def on_validation(self, ctx: RouteContext) -> Route:
        envelope = ctx.envelope
        if ctx.rewriter is None:
            return RecordGap(f"invalid query and no rewriter to correct it: {envelope.message}")
        if ctx.rewrites >= ctx.max_rounds:
            return RecordGap(f"still invalid after {ctx.rewrites} rewrites: {envelope.message}")
        proposal: Any = ctx.rewriter(ctx.task, envelope)
        if inspect.isawaitable(proposal):
            proposal = await proposal
        if proposal is None:
            return RecordGap(f"the rewriter had no corrected query: {envelope.message}")
        if isinstance(proposal, RecordGap):
            return RecordGap(
                f"the rewriter had no corrected query ({proposal.reason}): {envelope.message}"
            )
        if isinstance(proposal, str):
            new_task = ctx.task.with_query(proposal, feedback=envelope)
        elif isinstance(proposal, Task):
            new_task = (
                proposal
                if proposal.feedback
                else proposal.model_copy(update={"feedback": envelope})
            )
        else:
            raise UsageError(f"a rewriter returns a query, a Task or None; got {proposal!r}")
        if new_task.query in ctx.tried_queries:
            return RecordGap(f"the rewriter proposed a query already tried: {new_task.query!r}")
        return RetryWithFeedback(new_task)

    async def on_transient(self, ctx: RouteContext) -> Route:
        envelope = ctx.envelope
        for name in envelope.alternative_approaches or ():
            if name in ctx.alternatives and name not in ctx.tried_alternatives:
                return TryAlternative(name)
        return RecordGap(f"{envelope.error_type} after local retries: {envelope.message}")

    async def on_business(self, ctx: RouteContext) -> Route:
        envelope = ctx.envelope
        return Escalate(envelope.user_message or envelope.message)

    async def on_permission(self, ctx: RouteContext) -> Route:
        return Escalate(f"permission: {ctx.envelope.message}")

    async def on_other(self, ctx: RouteContext) -> Route:
        envelope = ctx.envelope
        return RecordGap(envelope.details or envelope.message)
