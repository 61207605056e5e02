"""The attempt loop every layer shares, seen through subagents, tools and the retry budget."""

from __future__ import annotations

import asyncio
from typing import Any

from agentmesh import (
    BusinessError,
    CallFailed,
    Context,
    Coordinator,
    ErrorCategory,
    ErrorEnvelope,
    InvalidInput,
    RetryBudget,
    Success,
    Task,
    TransientError,
    subagent,
    tool,
)
from agentmesh.testing import FailTimes, RecordingSleep
from tests.retrying import fast_retry


def always(make_error: Any) -> FailTimes:
    return FailTimes(1_000, make_error)


async def outcome_after(failing: FailTimes, *, attempts: int = 3, **retry: Any) -> Any:
    """The outcome of a subagent whose body calls `failing` on every attempt."""

    @subagent(name="agent", retry=fast_retry(attempts=attempts, **retry))
    async def agent(task: Task, ctx: Context) -> str:
        failing()
        return "ok"

    return await agent.run("q")


class TestRetryableVersusFinal:
    async def test_a_transient_failure_is_attempted_until_it_succeeds(self) -> None:
        """Each retryable failure earns another attempt, counted on the success."""
        flaky = FailTimes(2, lambda: TransientError("blip"))
        outcome = await outcome_after(flaky, attempts=3)
        assert isinstance(outcome, Success)
        assert outcome.attempts == 3
        assert flaky.calls == 3

    async def test_a_transient_failure_stops_at_max_attempts(self) -> None:
        """The last envelope is handed on, still retryable, after exactly max_attempts."""
        down = always(lambda: TransientError("down"))
        outcome = await outcome_after(down, attempts=4)
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.is_retryable
        assert outcome.attempts == 4
        assert down.calls == 4

    async def test_failures_that_retrying_cannot_fix_are_attempted_once(self) -> None:
        """Validation, business and explicitly non-retryable failures end the loop at once."""
        makers = [
            lambda: InvalidInput("bad date"),
            lambda: BusinessError("order shipped"),
            lambda: TransientError("gone for good", retryable=False),
        ]
        for make in makers:
            failing = always(make)
            outcome = await outcome_after(failing, attempts=5)
            assert isinstance(outcome, ErrorEnvelope)
            assert not outcome.is_retryable
            assert outcome.attempts == 1
            assert failing.calls == 1

    async def test_the_waits_between_attempts_follow_the_policy(self) -> None:
        """One wait per retry, growing by the multiplier; none after the last attempt."""
        sleep = RecordingSleep()
        await outcome_after(always(lambda: TransientError("down")), attempts=4, sleep=sleep)
        assert sleep.delays == [0.1, 0.2, 0.4]


class TestCallFailedIsPassedOn:
    async def test_a_raised_envelope_is_the_outcome_and_is_not_retried(self) -> None:
        """CallFailed(envelope) ends the call with that envelope, even a retryable one."""
        envelope = ErrorEnvelope(
            error_category=ErrorCategory.TRANSIENT,
            error_type="unavailable",
            is_retryable=True,
            message="retried elsewhere already",
            attempted_query="q",
            source="upstream",
            attempts=4,
        )
        raised: list[int] = []

        @subagent(name="agent", retry=fast_retry(attempts=3))
        async def agent(task: Task, ctx: Context) -> str:
            raised.append(1)
            raise CallFailed(envelope)

        outcome = await agent.run("q")
        assert raised == [1]
        assert outcome == envelope

    async def test_a_tools_final_failure_is_not_retried_again_by_its_subagent(self) -> None:
        """Retries do not multiply across layers: the tool's attempts are all there are."""
        down = always(lambda: TransientError("down"))

        @tool(idempotent=True, retry=fast_retry(attempts=3))
        async def search(query: str) -> str:
            """Search."""
            down()
            return "hit"

        @subagent(name="agent", retry=fast_retry(attempts=4))
        async def agent(task: Task, ctx: Context) -> str:
            return await ctx.call(search, query=task.query)

        outcome = await agent.run("q")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.source == "agent/search"
        assert outcome.attempts == 3
        assert down.calls == 3


class TestStopReasons:
    async def test_running_out_of_attempts_is_said_in_the_details(self) -> None:
        """A retryable envelope that was given up on says after how many attempts."""
        outcome = await outcome_after(always(lambda: TransientError("down")), attempts=3)
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.details is not None
        assert "3 attempts" in outcome.details

    async def test_the_failures_own_details_come_first(self) -> None:
        """The stop reason is added to what the failure said, not put in its place."""
        outcome = await outcome_after(
            always(lambda: TransientError("down", details="pool exhausted")), attempts=2
        )
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.details is not None
        assert outcome.details.startswith("pool exhausted")
        assert "2 attempts" in outcome.details

    async def test_a_retry_after_beyond_max_delay_stops_at_once_and_says_so(self) -> None:
        """The server's wait is not slept on; the details name it."""
        sleep = RecordingSleep()
        outcome = await outcome_after(
            always(lambda: TransientError("slow down", retry_after=600)),
            attempts=5,
            max_delay=5.0,
            sleep=sleep,
        )
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.attempts == 1
        assert sleep.delays == []
        assert outcome.details is not None
        assert "max_delay" in outcome.details

    async def test_a_spent_budget_stops_the_retries_and_says_so(self) -> None:
        """With no tokens left, a retryable failure is handed on instead of retried."""
        down = always(lambda: TransientError("down"))

        @subagent(name="agent", retry=fast_retry(attempts=5))
        async def agent(task: Task, ctx: Context) -> str:
            down()
            return "ok"

        report = await Coordinator([agent], retry_budget=RetryBudget(ratio=0, reserve=0)).run(["q"])
        final = report.records[0].final
        assert isinstance(final, ErrorEnvelope)
        assert final.attempts == 1
        assert down.calls == 1
        assert final.details is not None
        assert "budget" in final.details

    async def test_a_final_failure_gets_no_stop_reason(self) -> None:
        """Nothing was given up on, so nothing is added to the details."""
        outcome = await outcome_after(always(lambda: BusinessError("order shipped")))
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.details is None


class TestDeposit:
    async def test_a_task_and_its_first_tool_call_deposit_once(self) -> None:
        """The subagent's run and the tool call it makes are one first attempt, not two."""
        budget = RetryBudget()

        @tool(idempotent=True)
        async def search(query: str) -> str:
            """Search."""
            return "hit"

        @subagent(name="agent")
        async def agent(task: Task, ctx: Context) -> str:
            return await ctx.call(search, query=task.query)

        await Coordinator([agent], retry_budget=budget).run(["q"])
        assert budget.first_attempts == 1

    async def test_every_further_tool_call_deposits_its_own(self) -> None:
        """Three calls in one task are three first attempts: each may earn retries."""
        budget = RetryBudget()

        @tool(idempotent=True)
        async def search(query: str) -> str:
            """Search."""
            return "hit"

        @subagent(name="agent")
        async def agent(task: Task, ctx: Context) -> list[str]:
            return [await ctx.call(search, query=f"{task.query}{n}") for n in range(3)]

        await Coordinator([agent], retry_budget=budget).run(["q"])
        assert budget.first_attempts == 3

    async def test_each_retry_spends_a_token(self) -> None:
        """Retries are paid from the budget; first attempts are not."""
        budget = RetryBudget()
        flaky = FailTimes(2, lambda: TransientError("blip"))

        @subagent(name="agent", retry=fast_retry(attempts=3))
        async def agent(task: Task, ctx: Context) -> str:
            flaky()
            return "ok"

        await Coordinator([agent], retry_budget=budget).run(["q"])
        assert budget.first_attempts == 1
        assert budget.retries == 2


class TestRetriesSayHowTheCallEnded:
    async def test_retries_of_a_call_that_succeeded_are_marked_recovered(self) -> None:
        """Two failures then a result: the counts say the call recovered."""
        outcome = await outcome_after(FailTimes(2, lambda: TransientError("blip")))
        assert isinstance(outcome, Success)
        [count] = outcome.retries or ()
        assert (count.source, count.count, count.gave_up) == ("agent", 2, False)

    async def test_retries_of_a_call_that_failed_for_good_are_marked_gave_up(self) -> None:
        """Failures until the attempts run out: the counts say the call gave up."""
        outcome = await outcome_after(always(lambda: TransientError("down")))
        assert isinstance(outcome, ErrorEnvelope)
        [count] = outcome.retries or ()
        assert (count.source, count.count, count.gave_up) == ("agent", 2, True)

    async def test_retries_of_a_call_cut_short_by_the_deadline_are_marked_gave_up(self) -> None:
        """A tool call cancelled by the task's timeout while retrying did not recover."""
        flaky = FailTimes(1, lambda: TimeoutError("slow"))

        @tool(idempotent=True, retry=fast_retry(attempts=3))
        async def search(query: str) -> str:
            flaky()
            await asyncio.Event().wait()  # the second attempt never answers
            return query

        @subagent(name="agent", retry=fast_retry(attempts=1))
        async def agent(task: Task, ctx: Context) -> str:
            return await ctx.call(search, query=task.query)

        outcome = await agent.run("q", timeout=0.3)  # room for the 0.1 s backoff
        assert isinstance(outcome, ErrorEnvelope)
        [count] = outcome.retries or ()
        assert (count.source, count.count, count.gave_up) == ("agent/search", 1, True)
