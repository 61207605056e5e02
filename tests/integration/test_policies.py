"""Deterministic policies hold whatever the retry loop or the task wants."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from agentmesh import (
    Context,
    ErrorCategory,
    ErrorEnvelope,
    PermissionDenied,
    RetryPolicy,
    Success,
    Task,
    ToolCallFailed,
    TransientError,
    UsageError,
    subagent,
    tool,
)
from agentmesh.policies import (
    Ruling,
    ToolCallEvent,
    ToolResultEvent,
    deny_after_permission_error,
    escalate_on,
    forbid_retry,
    post_tool_use,
    pre_tool_use,
)
from agentmesh.scope import RunScope
from agentmesh.testing import RecordingSleep
from tests.retrying import fast_retry


class TestPreToolUse:
    async def test_a_denied_call_is_never_run(self) -> None:
        """The tool body does not run; the caller gets a policy_blocked permission envelope."""
        refunds: list[int] = []

        @tool(impact="financial", idempotent=True)
        async def refund(order_id: str, amount: int) -> str:
            refunds.append(amount)
            return "refunded"

        @pre_tool_use(tool="refund")
        def cap_refunds(event: ToolCallEvent) -> Ruling | None:
            if event.arguments["amount"] > 500:
                return Ruling.deny("refunds over $500 need a supervisor")
            return None

        @subagent(policies=[cap_refunds])
        async def support(task: Task, ctx: Context) -> str:
            return await ctx.call(refund, order_id="#12345", amount=int(task.query))

        blocked = await support.run("900")
        assert isinstance(blocked, ErrorEnvelope)
        assert blocked.error_category is ErrorCategory.PERMISSION
        assert blocked.error_type == "policy_blocked"
        assert blocked.is_retryable is False
        assert blocked.attempts == 0
        assert blocked.policy is not None
        assert blocked.policy.policy == "cap_refunds"
        assert "supervisor" in blocked.message
        assert refunds == []

        allowed = await support.run("100")
        assert isinstance(allowed, Success)
        assert refunds == [100]

    async def test_allow_never_overrides_another_policys_deny(self) -> None:
        """A permissive policy cannot open what a strict one closed."""

        @tool(idempotent=True)
        async def delete_all() -> None:
            raise AssertionError("must not run")

        @pre_tool_use
        def permissive(event: ToolCallEvent) -> Ruling:
            return Ruling.allow()

        @pre_tool_use(tool="delete_all")
        def strict(event: ToolCallEvent) -> Ruling:
            return Ruling.deny("never")

        @subagent(policies=[permissive, strict])
        async def agent(task: Task, ctx: Context) -> None:
            await ctx.call(delete_all)

        outcome = await agent.run("q")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "policy_blocked"

    async def test_a_policy_that_raises_fails_closed(self) -> None:
        """A broken policy denies the call instead of letting it through."""

        @tool(idempotent=True)
        async def action() -> str:
            raise AssertionError("must not run")

        @pre_tool_use
        def broken(event: ToolCallEvent) -> Ruling | None:
            raise RuntimeError("bug in policy")

        @subagent(policies=[broken])
        async def agent(task: Task, ctx: Context) -> str:
            return await ctx.call(action)

        outcome = await agent.run("q")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "policy_blocked"
        assert "bug in policy" in outcome.message

    async def test_impact_selects_the_risky_tools(self) -> None:
        """A policy on impact="financial" sees the refund tool and not the search tool."""
        seen: list[str] = []

        @tool(impact="financial", idempotent=True)
        async def refund() -> str:
            return "ok"

        @tool(idempotent=True)
        async def search() -> str:
            return "ok"

        @pre_tool_use(impact="financial")
        def audit(event: ToolCallEvent) -> None:
            seen.append(event.tool)

        @subagent(policies=[audit])
        async def agent(task: Task, ctx: Context) -> list[str]:
            return [await ctx.call(refund), await ctx.call(search)]

        assert isinstance(await agent.run("q"), Success)
        assert seen == ["refund"]


class TestPostToolUse:
    async def test_forbid_retry_stops_the_local_retry_loop(self) -> None:
        """A transient failure of a guarded tool is not retried; the envelope names the policy."""
        sleep = RecordingSleep()
        calls = 0

        @tool(idempotent=True, impact="financial")
        async def refund(amount: int) -> str:
            nonlocal calls
            calls += 1
            raise TransientError("bank timeout", error_type="timeout")

        @subagent(retry=fast_retry(sleep, attempts=4), policies=[forbid_retry(tools="refund")])
        async def support(task: Task, ctx: Context) -> str:
            return await ctx.call(refund, amount=10)

        outcome = await support.run("refund 10")
        assert isinstance(outcome, ErrorEnvelope)
        assert calls == 1
        assert sleep.delays == []
        assert outcome.is_retryable is False
        assert outcome.policy is not None
        assert outcome.policy.action == "forbid_retry"
        assert outcome.details is not None
        assert "forbid_retry" in outcome.details

    async def test_escalate_on_permission_errors_of_financial_tools(self) -> None:
        """The seed's rule: a permission error on a refund tool forces escalation, no retry."""

        @tool(idempotent=True, impact="financial")
        async def refund(amount: int) -> str:
            raise PermissionDenied("agent lacks refund scope")

        @subagent(policies=[escalate_on(categories="permission", impact="financial")])
        async def support(task: Task, ctx: Context) -> str:
            return await ctx.call(refund, amount=10)

        outcome = await support.run("refund 10")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.policy is not None
        assert outcome.policy.action == "escalate"
        assert outcome.is_retryable is False

    async def test_the_strictest_post_decision_wins(self) -> None:
        """escalate beats forbid_retry whatever the order of the policies."""

        @tool(idempotent=True)
        async def flaky() -> None:
            raise TimeoutError("t")

        @subagent(policies=[forbid_retry(), escalate_on(categories="transient"), forbid_retry()])
        async def agent(task: Task, ctx: Context) -> None:
            await ctx.call(flaky)

        outcome = await agent.run("q")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.policy is not None
        assert outcome.policy.action == "escalate"

    async def test_deny_on_a_success_withholds_the_result(self) -> None:
        """A post-tool deny withholds a result the caller must not see: policy_blocked."""

        @tool(idempotent=True)
        async def lookup(customer: str) -> dict[str, str]:
            return {"customer": customer, "ssn": "123-45-6789"}

        @post_tool_use(tool="lookup")
        def no_ssn(event: ToolResultEvent) -> Ruling | None:
            if isinstance(event.outcome, Success) and "ssn" in event.outcome.data:
                return Ruling.deny("result contains an SSN")
            return None

        @subagent(policies=[no_ssn])
        async def agent(task: Task, ctx: Context) -> dict[str, str]:
            return await ctx.call(lookup, customer="c1")

        outcome = await agent.run("q")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "policy_blocked"
        assert "123-45-6789" not in outcome.to_json()

    async def test_deny_after_permission_error_holds_for_the_rest_of_the_run(self) -> None:
        """After a permission error, later calls of that tool in the same run are not made."""
        calls = 0

        @tool(idempotent=True)
        async def admin_api(op: str) -> str:
            nonlocal calls
            calls += 1
            raise PermissionDenied("token lacks admin scope")

        guard = deny_after_permission_error()
        state: dict[str, Any] = {}

        @subagent(policies=[guard])
        async def agent(task: Task, ctx: Context) -> str:
            return await ctx.call(admin_api, op=task.query)

        # Two standalone runs are one run when they share its scope (`state` is the user's).
        scope = RunScope("r1")
        first = await agent.run("list", state=state, scope=scope)
        second = await agent.run("delete", state=state, scope=scope)
        assert isinstance(first, ErrorEnvelope)
        assert first.error_type == "permission_denied"
        assert isinstance(second, ErrorEnvelope)
        assert second.error_type == "policy_blocked"
        assert calls == 1
        other_run = await agent.run("list", run_id="r2")
        assert isinstance(other_run, ErrorEnvelope)
        assert other_run.error_type == "permission_denied"
        assert calls == 2


class TestPolicyMisuse:
    def test_async_policies_are_refused(self) -> None:
        """Policies decide without waiting on anything; an async one is a usage error."""
        with pytest.raises(UsageError, match="async"):

            @pre_tool_use
            async def slow(event: ToolCallEvent) -> None:  # type: ignore[arg-type]
                return None

    def test_unknown_category_is_refused(self) -> None:
        """A typo in a category is caught at definition, not silently never matched."""
        with pytest.raises(UsageError, match="category"):
            forbid_retry(categories="transeint")

    def test_a_plain_function_is_not_a_policy(self) -> None:
        """Passing an undecorated function names the fix."""

        def rule(event: ToolCallEvent) -> None:
            return None

        with pytest.raises(UsageError, match="pre_tool_use"):

            @subagent(policies=[rule])  # type: ignore[list-item]
            async def agent(task: Task, ctx: Context) -> None:
                return None


class TestPolicyMistakesFailSafe:
    def test_an_impact_typo_is_refused(self) -> None:
        """impact="finance" would silently match nothing: refused at definition."""
        with pytest.raises(UsageError, match="impact"):

            @pre_tool_use(impact="finance")  # type: ignore[arg-type]
            def rule(event: ToolCallEvent) -> None:
                return None

        with pytest.raises(UsageError, match="impact"):
            escalate_on(impact="money")  # type: ignore[arg-type]

    async def test_a_tool_object_can_name_the_tool(self) -> None:
        """tool= accepts the @tool itself, not only its name."""

        @tool(idempotent=True)
        async def wipe() -> None:
            raise AssertionError("must not run")

        @pre_tool_use(tool=wipe)
        def never(event: ToolCallEvent) -> Ruling:
            return Ruling.deny("never")

        @subagent(policies=[never])
        async def agent(task: Task, ctx: Context) -> None:
            await ctx.call(wipe)

        outcome = await agent.run("q")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "policy_blocked"

    async def test_a_policy_returning_something_else_fails_closed(self) -> None:
        """Returning "allow" (a string) is a bug in the policy: the call is denied."""

        @tool(idempotent=True)
        async def send_email() -> None:
            raise AssertionError("must not run")

        @pre_tool_use
        def sloppy(event: ToolCallEvent) -> Any:
            return "allow"

        @subagent(policies=[sloppy])
        async def agent(task: Task, ctx: Context) -> None:
            await ctx.call(send_email)

        outcome = await agent.run("q")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "policy_blocked"
        assert "sloppy" in outcome.message


class TestRulesHoldWhoeverAsksAgain:
    async def test_policies_see_the_values_the_tool_will_get(self) -> None:
        """A deny on an int field cannot be dodged by sending the number as a string."""
        deleted: list[int] = []

        @tool(idempotent=True)
        async def delete_users(ids: list[int]) -> int:
            deleted.extend(ids)
            return len(ids)

        @pre_tool_use(tool="delete_users")
        def protect_admin(event: ToolCallEvent) -> Ruling | None:
            return Ruling.deny("user 1 is the admin") if 1 in event.arguments["ids"] else None

        @subagent(policies=[protect_admin])
        async def agent(task: Task, ctx: Context) -> int:
            return await ctx.call(delete_users, ids=["1", "7"])  # type: ignore[list-item]

        outcome = await agent.run("q")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "policy_blocked"
        assert deleted == []

    async def test_a_forbidden_retry_is_refused_when_the_body_asks_again(self) -> None:
        """forbid_retry holds for a second identical call later in the run, not only locally."""
        calls = 0

        @tool(idempotent=True, impact="financial")
        async def refund(order: str) -> str:
            nonlocal calls
            calls += 1
            raise TransientError("bank timeout", error_type="timeout")

        @subagent(policies=[forbid_retry(tools="refund")], retry=RetryPolicy.never())
        async def stubborn(task: Task, ctx: Context) -> str:
            for _ in range(3):
                try:
                    return await ctx.call(refund, order="A7")
                except ToolCallFailed:
                    continue
            return "gave up"

        assert isinstance(await stubborn.run("q"), Success)
        assert calls == 1

    async def test_a_maybe_done_charge_is_refused_when_asked_again_in_the_run(self) -> None:
        """After an ambiguous failure of a non-idempotent tool, the same call is never made."""
        charges = 0

        @tool
        async def charge(amount: int) -> str:
            nonlocal charges
            charges += 1
            raise TimeoutError("gateway did not answer")

        @subagent(retry=RetryPolicy.never())
        async def billing(task: Task, ctx: Context) -> list[str]:
            answers = []
            for _ in range(2):
                try:
                    answers.append(await ctx.call(charge, amount=100))
                except ToolCallFailed as failed:
                    answers.append(failed.envelope.error_type)
            return answers

        outcome = await billing.run("q")
        assert isinstance(outcome, Success)
        assert outcome.data == ["timeout", "policy_blocked"]
        assert charges == 1

    async def test_an_escalation_survives_a_body_that_caught_it(self) -> None:
        """The ruling reaches the outcome even if the subagent then fails another way."""

        @tool(idempotent=True, impact="legal")
        async def file_claim() -> str:
            raise PermissionDenied("no legal scope")

        @subagent(policies=[escalate_on(impact="legal")])
        async def agent(task: Task, ctx: Context) -> None:
            with contextlib.suppress(ToolCallFailed):
                await ctx.call(file_claim)
            raise KeyError("later bug")

        outcome = await agent.run("q")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.policy is not None
        assert outcome.policy.action == "escalate"
        assert outcome.is_retryable is False


class TestSideEffectsAcrossRetries:
    async def test_a_completed_charge_is_not_repeated_by_the_subagents_own_retry(self) -> None:
        """Without any store, a retried subagent replays the charge it already made."""
        sleep = RecordingSleep()
        charges: list[int] = []
        failures = iter([ConnectionError("later step failed"), ConnectionError("again")])

        @tool
        async def charge(amount: int) -> str:
            charges.append(amount)
            return f"charged {amount}"

        @subagent(retry=fast_retry(sleep, attempts=4))
        async def billing(task: Task, ctx: Context) -> str:
            receipt = await ctx.call(charge, amount=100)
            failure = next(failures, None)
            if failure is not None:
                raise failure
            return receipt

        outcome = await billing.run("q")
        assert isinstance(outcome, Success)
        assert outcome.data == "charged 100"
        assert outcome.attempts == 3
        assert charges == [100]


class TestSecretsInEnvelopes:
    async def test_secret_arguments_are_masked_in_the_attempted_query(self) -> None:
        """A key passed to a tool does not travel into envelopes or reports."""
        from agentmesh import Coordinator

        @tool(idempotent=True)
        async def fetch(url: str, api_key: str) -> str:
            raise ConnectionError("refused")

        @subagent(retry=RetryPolicy.never())
        async def agent(task: Task, ctx: Context) -> str:
            return await ctx.call(fetch, url="https://x.test", api_key="sk-ant-api03-SECRET123")

        report = await Coordinator([agent]).run(["q"])
        produced = report.to_json() + report.to_markdown()
        assert "SECRET123" not in produced
        assert "https://x.test" in produced


class TestEscalationOfResults:
    async def test_escalating_a_result_keeps_the_data_and_the_coordinator_escalates(
        self,
    ) -> None:
        """A refund that went through but needs a human: the evidence is kept, flagged."""
        from agentmesh import Coordinator
        from agentmesh.coordinator import CoverageStatus

        @tool(impact="financial", idempotent=True)
        async def refund(amount: int) -> dict[str, int]:
            return {"refunded": amount}

        @post_tool_use(impact="financial")
        def big_refunds_need_review(event: ToolResultEvent) -> Ruling | None:
            if isinstance(event.outcome, Success) and event.arguments["amount"] > 500:
                return Ruling.escalate("refunds over $500 are reviewed by a supervisor")
            return None

        @subagent(name="support", policies=[big_refunds_need_review])
        async def support(task: Task, ctx: Context) -> dict[str, int]:
            return await ctx.call(refund, amount=int(task.query))

        outcome = await support.run("900")
        assert isinstance(outcome, Success)
        assert outcome.data == {"refunded": 900}
        assert outcome.policy is not None
        assert outcome.policy.action == "escalate"

        report = await Coordinator([support]).run(["900", "100"])
        assert [e.status for e in report.coverage] == [
            CoverageStatus.ESCALATED,
            CoverageStatus.COVERED,
        ]
        assert {"refunded": 900} in [f.content for f in report.findings]
        assert "supervisor" in (report.escalations[0].reason or "")
