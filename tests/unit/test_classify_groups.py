"""Exception groups, unusable retry-after hints and named fields, as envelopes."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pydantic
import pytest

from agentmesh import (
    AgentError,
    BusinessError,
    Context,
    Coordinator,
    ErrorCategory,
    ErrorEnvelope,
    InvalidInput,
    RetryPolicy,
    Ruling,
    Success,
    Task,
    TransientError,
    subagent,
    tool,
)
from agentmesh.classify import Classifier, default_classifier
from agentmesh.envelope import PartialResults
from agentmesh.errors import CallFailed, PermissionDenied
from agentmesh.testing import FailTimes, RecordingSleep
from tests.retrying import fast_retry


def envelope_of(exc: BaseException, classifier: Classifier = default_classifier) -> ErrorEnvelope:
    return classifier.classify(exc, source="s", attempted_query="q", attempts=1)


def final(category: str, error_type: str, **fields: Any) -> CallFailed:
    return CallFailed(
        ErrorEnvelope(
            error_category=category,
            error_type=error_type,
            is_retryable=category == "transient",
            message=f"{error_type} at the tool",
            attempted_query="q",
            source="agent/tool",
            attempts=3,
            **fields,
        )
    )


class TestExceptionGroups:
    def test_a_wrapped_timeout_is_a_retryable_transient_timeout(self) -> None:
        """A TaskGroup's ExceptionGroup around one TimeoutError classifies as that timeout."""
        envelope = envelope_of(ExceptionGroup("unhandled", [TimeoutError("slow")]))

        assert envelope.error_category is ErrorCategory.TRANSIENT
        assert envelope.error_type == "timeout"
        assert envelope.is_retryable

    def test_all_retryable_leaves_give_the_type_most_of_them_share(self) -> None:
        """With every leaf retryable the group is retryable, of the most common error type."""
        group = ExceptionGroup(
            "many", [TimeoutError("t"), ConnectionError("c1"), ConnectionError("c2")]
        )

        envelope = envelope_of(group)

        assert (envelope.error_category, envelope.error_type) == ("transient", "unavailable")
        assert envelope.is_retryable

    def test_the_longest_retry_after_of_retryable_leaves_is_kept(self) -> None:
        """A retryable group waits as long as its most demanding leaf asks."""
        group = ExceptionGroup(
            "busy", [TransientError("a", retry_after=2), TransientError("b", retry_after=9)]
        )

        assert envelope_of(group).retry_after == 9

    @pytest.mark.parametrize(
        ("leaves", "category", "error_type"),
        [
            ([TimeoutError("t"), PermissionError("p"), InvalidInput("v")], "permission", None),
            (
                [InvalidInput("v"), BusinessError("b", error_type="shipped")],
                "business",
                "shipped",
            ),
            ([RuntimeError("r"), InvalidInput("v", error_type="bad_date")], "validation", None),
            ([TimeoutError("t"), RuntimeError("r")], "other", "unexpected_error"),
        ],
        ids=["permission", "business", "validation", "other"],
    )
    def test_the_strictest_non_retryable_leaf_decides(
        self, leaves: list[Exception], category: str, error_type: str | None
    ) -> None:
        """permission > business > validation > other decides a group that is not all retryable."""
        envelope = envelope_of(ExceptionGroup("mixed", leaves))

        assert envelope.error_category == category
        if error_type is not None:
            assert envelope.error_type == error_type
        assert not envelope.is_retryable

    def test_details_name_every_leaf_of_nested_groups(self) -> None:
        """Nested groups are flattened; details list each leaf with its classification."""
        group = ExceptionGroup(
            "outer",
            [ExceptionGroup("inner", [TimeoutError("slow read")]), PermissionError("no access")],
        )

        envelope = envelope_of(group)

        details = envelope.details or ""
        assert "2 failure(s)" in details
        assert "transient/timeout: TimeoutError: slow read" in details
        assert "permission/permission_denied: PermissionError: no access" in details
        assert "(and 1 more failures in the group)" in envelope.message

    def test_user_registrations_apply_to_the_leaves(self) -> None:
        """A Classifier's registration classifies a leaf as it would the bare exception."""

        class Declined(Exception):
            pass

        classifier = Classifier()
        classifier.register(Declined, lambda exc: BusinessError("declined", error_type="declined"))

        envelope = envelope_of(ExceptionGroup("g", [Declined(), TimeoutError()]), classifier)

        assert (envelope.error_category, envelope.error_type) == ("business", "declined")

    def test_a_mapper_for_the_group_class_itself_wins(self) -> None:
        """A mapper registered for ExceptionGroup is used instead of the leaves."""
        classifier = Classifier()
        classifier.register(ExceptionGroup, lambda exc: PermissionDenied("whole group"))

        envelope = envelope_of(ExceptionGroup("g", [TimeoutError()]), classifier)

        assert envelope.error_category is ErrorCategory.PERMISSION
        assert envelope.message == "whole group"

    @pytest.mark.parametrize(
        ("leaves", "expected"),
        [
            ([ConnectionRefusedError("refused")], False),
            ([ConnectionRefusedError("refused"), TimeoutError("t")], True),
            ([ExceptionGroup("inner", [ConnectionResetError("reset")])], True),
        ],
        ids=["never-sent", "one-ambiguous-leaf", "nested"],
    )
    def test_a_group_may_have_taken_effect_when_any_leaf_may(
        self, leaves: list[Exception], expected: bool
    ) -> None:
        """A non-idempotent call is not repeated when any leaf of its group is ambiguous."""
        group = ExceptionGroup("g", leaves)

        assert default_classifier.may_have_taken_effect(group) is expected

    def test_a_call_failed_leaf_is_final_and_keeps_its_ruling_and_progress(self) -> None:
        """A CallFailed leaf is final; its policy and partial results reach the group."""
        ruling = Ruling(action="escalate", reason="big refund", policy="refunds")
        partial = PartialResults(completed=("docs",), findings=("hit",))
        group = ExceptionGroup(
            "calls",
            [
                final("transient", "timeout", policy=ruling),
                final("transient", "unavailable", partial_results=partial),
            ],
        )

        envelope = envelope_of(group)

        assert envelope.error_category is ErrorCategory.TRANSIENT
        assert not envelope.is_retryable
        assert envelope.policy == ruling
        assert envelope.partial_results is not None
        assert envelope.partial_results.findings == ("hit",)
        assert "CallFailed: timeout at the tool (at agent/tool)" in (envelope.details or "")

    async def test_a_subagent_retries_a_timeout_wrapped_by_its_task_group(self) -> None:
        """A TimeoutError inside a body's TaskGroup is retried locally like a bare one."""
        sleep = RecordingSleep()
        flaky = FailTimes(1, lambda: TimeoutError("slow"))

        async def fetch() -> str:
            flaky()
            return "page"

        @subagent(retry=fast_retry(sleep, attempts=3))
        async def docs(task: Task, ctx: Context) -> list[str]:
            async with asyncio.TaskGroup() as group:
                pages = [group.create_task(fetch()) for _ in range(2)]
            return [page.result() for page in pages]

        outcome = await docs.run("q")

        assert isinstance(outcome, Success)
        assert outcome.data == ["page", "page"]
        assert len(sleep.delays) == 1

    async def test_failed_tool_calls_in_a_task_group_are_not_retried_again(self) -> None:
        """Tool calls that failed for good inside a TaskGroup end the task without a new round."""
        calls = FailTimes(100, lambda: ConnectionError("down"))
        sleep = RecordingSleep()

        @tool(idempotent=True)
        async def search(query: str) -> str:
            calls()
            return query

        @subagent(retry=fast_retry(sleep, attempts=2))
        async def docs(task: Task, ctx: Context) -> None:
            async with asyncio.TaskGroup() as group:
                group.create_task(ctx.call(search, query="a"))
                group.create_task(ctx.call(search, query="b"))

        outcome = await docs.run("q")

        assert isinstance(outcome, ErrorEnvelope)
        assert (outcome.error_category, outcome.error_type) == ("transient", "unavailable")
        assert outcome.attempts == 1
        assert calls.calls == 4  # two calls, each retried once at the tool, never again


BAD_HINTS = [math.nan, math.inf, -1.0, "soon", True]
BAD_IDS = ["nan", "inf", "negative", "string", "bool"]


class TestUnusableRetryAfter:
    @pytest.mark.parametrize("hint", [float("inf"), float("nan"), -1.0], ids=["inf", "nan", "neg"])
    def test_an_envelope_read_from_outside_refuses_it(self, hint: float) -> None:
        """A retryAfter from outside that is not a finite number >= 0 is invalid input."""
        wire = {
            "errorCategory": "transient",
            "errorType": "rate_limited",
            "isRetryable": True,
            "message": "slow down",
            "attemptedQuery": "q",
            "source": "remote",
            "attempts": 1,
            "retryAfter": hint,
        }
        with pytest.raises(pydantic.ValidationError):
            ErrorEnvelope.model_validate(wire)

    @pytest.mark.parametrize("hint", BAD_HINTS, ids=BAD_IDS)
    def test_agent_error_accepts_it_and_the_envelope_has_no_hint(self, hint: Any) -> None:
        """A bad retry_after is no hint: no retryAfter, the category kept, said in details."""
        envelope = envelope_of(TransientError("busy", retry_after=hint))

        assert envelope.error_category is ErrorCategory.TRANSIENT
        assert envelope.is_retryable
        assert envelope.retry_after is None
        assert "ignored: not a finite number of seconds >= 0" in (envelope.details or "")

    @pytest.mark.parametrize("hint", BAD_HINTS, ids=BAD_IDS)
    def test_a_mapper_returning_a_bad_hint_is_treated_the_same(self, hint: Any) -> None:
        """A classifier mapper whose error carries a bad retry_after gives a transient envelope."""

        class Busy(Exception):
            pass

        def mapper(exc: Busy) -> AgentError:
            error = TransientError("busy", error_type="rate_limited")
            error.retry_after = hint
            return error

        classifier = Classifier()
        classifier.register(Busy, mapper)

        envelope = envelope_of(Busy(), classifier)

        assert (envelope.error_type, envelope.retry_after) == ("rate_limited", None)

    async def test_subagent_run_returns_a_transient_envelope(self) -> None:
        """Subagent.run never raises for a NaN hint; the failure stays transient and retried."""
        sleep = RecordingSleep()

        @subagent(retry=fast_retry(sleep, attempts=2))
        async def docs(task: Task, ctx: Context) -> None:
            raise TransientError("busy", retry_after=math.nan)

        outcome = await docs.run("q")

        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.TRANSIENT
        assert outcome.attempts == 2
        assert len(sleep.delays) == 1

    async def test_a_tool_failure_stays_transient_through_the_coordinator(self) -> None:
        """A tool's NaN hint neither becomes invalid_input nor an "invalid query" in the report."""

        @tool(idempotent=True, retry=RetryPolicy.never())
        async def search(query: str) -> str:
            raise TransientError("busy", retry_after=math.nan)

        @subagent(name="docs", retry=RetryPolicy.never())
        async def docs(task: Task, ctx: Context) -> str:
            return await ctx.call(search, query=task.query)

        report = await Coordinator([docs]).run(["q"])

        outcome = report.records[0].final
        assert isinstance(outcome, ErrorEnvelope)
        assert (outcome.error_category, outcome.source) == ("transient", "docs/search")
        assert "invalid" not in (report.coverage[0].reason or "")


class TestFieldNames:
    def test_validation_error_names_its_field_in_details(self) -> None:
        """InvalidInput(..., field="date") is accepted and its envelope names the field."""
        envelope = envelope_of(InvalidInput("bad date", field="date", details="not ISO 8601"))

        assert envelope.error_category is ErrorCategory.VALIDATION
        assert envelope.details == "field: date; not ISO 8601"

    def test_every_agent_error_takes_a_field(self) -> None:
        """field= works on every AgentError, e.g. a business rule about one input."""
        envelope = envelope_of(BusinessError("too much", field="amount"))

        assert envelope.details == "field: amount"

    async def test_a_subagent_raising_it_gets_a_validation_envelope(self) -> None:
        """Raised in a body, it is a validation envelope, not an `other` TypeError."""

        @subagent(retry=RetryPolicy.never())
        async def dates(task: Task, ctx: Context) -> None:
            raise InvalidInput("bad date", field="date")

        outcome = await dates.run("q")

        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.VALIDATION
        assert outcome.details == "field: date"
