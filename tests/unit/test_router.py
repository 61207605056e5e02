"""The default router's decision table, row by row, on outcomes real subagents returned."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from agentmesh import (
    AgentError,
    BusinessError,
    Context,
    ErrorEnvelope,
    InvalidInput,
    Outcome,
    PermissionDenied,
    Task,
    TransientError,
    UsageError,
    subagent,
)
from agentmesh.coordinator import (
    Accept,
    AcceptEmpty,
    Escalate,
    RecordGap,
    RetryWithFeedback,
    Rewriter,
    RouteContext,
    Router,
    TryAlternative,
)
from tests.retrying import fast_retry

TASK = Task(query="orders in march", topic="orders")


async def outcome_of(result: object, alternatives: Iterable[str] = ()) -> Outcome:
    """What a subagent that returns `result`, or raises it when it is an exception, ends in."""

    @subagent(name="orders", retry=fast_retry(attempts=1), alternatives=alternatives)
    async def orders(task: Task, ctx: Context) -> object:
        if isinstance(result, BaseException):
            raise result
        return result

    return await orders.run(TASK)


def route_context(
    outcome: Outcome,
    *,
    rewriter: Rewriter | None = None,
    rewrites: int = 0,
    max_rounds: int = 2,
    tried_queries: Iterable[str] = (),
    tried_alternatives: Iterable[str] = (),
    alternatives: Iterable[str] = (),
) -> RouteContext:
    return RouteContext(
        task=TASK,
        outcome=outcome,
        subagent="orders",
        rewrites=rewrites,
        max_rounds=max_rounds,
        tried_queries=frozenset({TASK.query, *tried_queries}),
        tried_alternatives=frozenset(tried_alternatives),
        alternatives=frozenset(alternatives),
        rewriter=rewriter,
    )


async def route(outcome: Outcome, **options: Any) -> object:
    return await Router().route(route_context(outcome, **options))


class TestSuccessRows:
    async def test_a_success_with_data_is_accepted(self) -> None:
        """Data covers the topic."""
        assert await route(await outcome_of(["order 1"])) == Accept()

    async def test_an_empty_success_is_accepted_as_empty(self) -> None:
        """ "Searched, nothing found" is an answer, not a failure to retry."""
        assert await route(await outcome_of([])) == AcceptEmpty()


class TestValidationRow:
    async def test_without_a_rewriter_it_is_a_gap(self) -> None:
        """Nobody can correct the query, so the task is given up and reported."""
        decision = await route(await outcome_of(InvalidInput("bad date")))
        assert isinstance(decision, RecordGap)

    async def test_a_rewritten_query_is_retried_with_the_failure_as_feedback(self) -> None:
        """The new task carries the rewriter's query and the envelope that asked for it."""
        outcome = await outcome_of(InvalidInput("bad date", field="date"))
        decision = await route(outcome, rewriter=lambda task, envelope: "orders in 2026-03")
        assert isinstance(decision, RetryWithFeedback)
        assert decision.task.query == "orders in 2026-03"
        assert decision.task.feedback == outcome

    async def test_an_async_rewriter_returning_a_task_gets_the_feedback_attached(self) -> None:
        """A proposed Task without feedback is sent with the failed attempt as its feedback."""
        outcome = await outcome_of(InvalidInput("bad date"))

        async def rewriter(task: Task, envelope: ErrorEnvelope) -> Task:
            return Task(query="orders since 2026-03-01", topic=task.topic)

        decision = await route(outcome, rewriter=rewriter)
        assert isinstance(decision, RetryWithFeedback)
        assert decision.task.query == "orders since 2026-03-01"
        assert decision.task.feedback == outcome

    async def test_no_rewrite_is_tried_once_the_rounds_are_spent(self) -> None:
        """`max_rounds` rewrites and the rewriter is not asked again."""
        asked: list[Task] = []

        def rewriter(task: Task, envelope: ErrorEnvelope) -> str:
            asked.append(task)
            return "another query"

        outcome = await outcome_of(InvalidInput("bad date"))
        decision = await route(outcome, rewriter=rewriter, rewrites=2, max_rounds=2)
        assert isinstance(decision, RecordGap)
        assert asked == []

    async def test_a_rewriter_without_a_proposal_is_a_gap(self) -> None:
        """None from the rewriter means no corrected query."""
        outcome = await outcome_of(InvalidInput("bad date"))
        decision = await route(outcome, rewriter=lambda task, envelope: None)
        assert isinstance(decision, RecordGap)

    async def test_a_rewriters_own_gap_reason_is_kept(self) -> None:
        """RecordGap(reason) from the rewriter says in the gap why there was no proposal."""
        outcome = await outcome_of(InvalidInput("bad date"))
        decision = await route(
            outcome, rewriter=lambda task, envelope: RecordGap("the model declined")
        )
        assert isinstance(decision, RecordGap)
        assert "the model declined" in decision.reason

    async def test_a_query_already_tried_is_never_sent_again(self) -> None:
        """A proposal equal to an earlier query ends the task instead of looping."""
        outcome = await outcome_of(InvalidInput("bad date"))
        decision = await route(
            outcome,
            rewriter=lambda task, envelope: "orders in q1",
            tried_queries=["orders in q1"],
        )
        assert isinstance(decision, RecordGap)

    async def test_a_rewriter_returning_something_else_is_a_usage_error(self) -> None:
        """Neither a query, a Task nor None: the mistake is named, not routed."""
        outcome = await outcome_of(InvalidInput("bad date"))
        with pytest.raises(UsageError, match="rewriter"):
            await route(outcome, rewriter=lambda task, envelope: 42)


class TestTransientRow:
    async def test_the_first_alternative_with_a_handler_is_tried(self) -> None:
        """Alternatives are taken in the envelope's order, skipping those nobody handles."""
        outcome = await outcome_of(TimeoutError("slow"), alternatives=["mirror", "cache"])
        decision = await route(outcome, alternatives=["cache", "archive"])
        assert decision == TryAlternative("cache")

    async def test_an_alternative_already_tried_is_not_tried_again(self) -> None:
        """Once each alternative has had its turn, the task is a gap."""
        outcome = await outcome_of(TimeoutError("slow"), alternatives=["cache"])
        decision = await route(outcome, alternatives=["cache"], tried_alternatives=["cache"])
        assert isinstance(decision, RecordGap)

    async def test_without_alternatives_it_is_a_gap(self) -> None:
        """Local retries were the only recovery; the gap is reported."""
        outcome = await outcome_of(TransientError("down"))
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.is_retryable
        assert isinstance(await route(outcome), RecordGap)


class TestEscalationRows:
    async def test_a_business_failure_escalates_with_its_user_message(self) -> None:
        """A domain rule is a person's call; the customer-facing text goes with it."""
        outcome = await outcome_of(
            BusinessError("order shipped", user_message="Your order has already shipped.")
        )
        assert await route(outcome) == Escalate("Your order has already shipped.")

    async def test_a_business_failure_without_user_message_escalates_with_the_message(
        self,
    ) -> None:
        """Without a userMessage the envelope's message is the reason."""
        outcome = await outcome_of(BusinessError("order shipped"))
        assert await route(outcome) == Escalate("order shipped")

    async def test_a_permission_failure_escalates(self) -> None:
        """Retrying does not grant a permission; a person must."""
        decision = await route(await outcome_of(PermissionDenied("no access to payroll")))
        assert isinstance(decision, Escalate)


class TestOtherRow:
    async def test_an_unclassified_failure_is_a_gap(self) -> None:
        """Neither retried nor escalated: reported, with its details."""
        outcome = await outcome_of(AgentError("odd", details="upstream said 418"))
        assert isinstance(outcome, ErrorEnvelope)
        decision = await route(outcome)
        assert isinstance(decision, RecordGap)
        assert "upstream said 418" in decision.reason


class TestOverridingARow:
    async def test_a_subclass_changes_one_row_and_keeps_the_others(self) -> None:
        """Overriding `on_permission` leaves the rest of the table as it was."""

        class Lenient(Router):
            async def on_permission(self, ctx: RouteContext) -> RecordGap:
                return RecordGap("skipped")

        denied = await outcome_of(PermissionDenied("no"))
        found = await outcome_of(["row"])
        assert await Lenient().route(route_context(denied)) == RecordGap("skipped")
        assert await Lenient().route(route_context(found)) == Accept()
