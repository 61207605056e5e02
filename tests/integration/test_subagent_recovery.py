"""A subagent recovers what it can locally and reports the rest honestly."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentmesh import (
    BusinessError,
    Context,
    ErrorCategory,
    ErrorEnvelope,
    InvalidInput,
    PermissionDenied,
    RetryBudget,
    RetryPolicy,
    Success,
    Task,
    TransientError,
    subagent,
    tool,
)
from agentmesh.testing import FailTimes, RecordingSleep
from tests.retrying import fast_retry


class TestLocalRecovery:
    async def test_transient_timeout_recovers_on_the_third_attempt_with_growing_delays(
        self,
    ) -> None:
        """Two timeouts are retried locally with growing backoff; the caller sees success."""
        sleep = RecordingSleep()
        flaky = FailTimes(2, lambda: TimeoutError("upstream timeout"))

        @subagent(name="docs", retry=fast_retry(sleep, attempts=4))
        async def docs(task: Task, ctx: Context) -> list[str]:
            flaky()
            return [f"hit for {task.query}"]

        outcome = await docs.run(Task(query="asyncio cancellation"))
        assert isinstance(outcome, Success)
        assert outcome.data == ["hit for asyncio cancellation"]
        assert outcome.attempts == 3
        assert sleep.delays == [0.1, 0.2]

    async def test_full_jitter_stays_within_the_growing_cap(self) -> None:
        """With full jitter each wait lies between 0 and the exponential cap."""
        sleep = RecordingSleep()
        always = FailTimes(10, lambda: TimeoutError("t"))

        @subagent(retry=fast_retry(sleep, attempts=5, jitter="full"))
        async def docs(task: Task, ctx: Context) -> None:
            always()

        await docs.run("q")
        caps = [0.1, 0.2, 0.4, 0.8]
        assert len(sleep.delays) == 4
        assert all(0 <= d <= cap for d, cap in zip(sleep.delays, caps, strict=True))

    async def test_persistent_timeout_gives_a_complete_envelope(self) -> None:
        """After local retries the envelope has every field, partial results and alternatives."""
        sleep = RecordingSleep()

        @subagent(
            name="web",
            retry=fast_retry(sleep, attempts=3),
            alternatives=["narrow_query_by_date_range"],
        )
        async def web(task: Task, ctx: Context) -> list[str]:
            ctx.record_partial(pending=["s1", "s2", "s3"])
            ctx.record_partial(["finding from s1"], completed="s1")
            ctx.record_partial(["finding from s2"], completed="s2")
            raise TransientError(
                "s3 timed out", error_type="timeout", alternative_approaches=["use_cached_snapshot"]
            )

        outcome = await web.run(Task(query="rust async runtimes", topic="runtimes"))
        assert isinstance(outcome, ErrorEnvelope)
        wire = outcome.to_dict()
        assert wire["isError"] is True
        assert wire["errorCategory"] == "transient"
        assert wire["errorType"] == "timeout"
        assert wire["isRetryable"] is True
        assert wire["message"] == "s3 timed out"
        assert wire["attemptedQuery"] == "rust async runtimes"
        assert wire["source"] == "web"
        assert wire["attempts"] == 3
        assert wire["partialResults"] == {
            "completed": ["s1", "s2"],
            "pending": ["s3"],
            "findings": ["finding from s1", "finding from s2"],
        }
        assert wire["alternativeApproaches"] == [
            "narrow_query_by_date_range",
            "use_cached_snapshot",
        ]
        assert "gave up after 3 attempts" in wire["details"]
        assert sleep.delays == [0.1, 0.2]

    async def test_no_partial_results_key_when_nothing_was_recorded(self) -> None:
        """A hard failure does not invent partial results."""

        @subagent(retry=RetryPolicy.never())
        async def web(task: Task, ctx: Context) -> None:
            raise ConnectionError("refused")

        outcome = await web.run("q")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "unavailable"
        assert "partialResults" not in outcome.to_dict()

    @pytest.mark.parametrize(
        ("error", "category"),
        [
            (
                InvalidInput("order_id must match #NNNNN; got 'last one'"),
                ErrorCategory.VALIDATION,
            ),
            (
                BusinessError(
                    "refund exceeds the $500 limit", user_message="A supervisor will call you."
                ),
                ErrorCategory.BUSINESS,
            ),
            (PermissionDenied("no refund scope"), ErrorCategory.PERMISSION),
            (PermissionError("read-only file system"), ErrorCategory.PERMISSION),
            (KeyError("surprise"), ErrorCategory.OTHER),
        ],
    )
    async def test_non_transient_errors_are_not_retried(
        self, error: Exception, category: ErrorCategory
    ) -> None:
        """Validation, business, permission and unknown errors are reported after one attempt."""
        sleep = RecordingSleep()
        calls = 0

        @subagent(retry=fast_retry(sleep, attempts=4))
        async def agent(task: Task, ctx: Context) -> None:
            nonlocal calls
            calls += 1
            raise error

        outcome = await agent.run("q")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is category
        assert outcome.is_retryable is False
        assert outcome.attempts == 1
        assert calls == 1
        assert sleep.delays == []

    async def test_unknown_errors_keep_the_exception_in_details(self) -> None:
        """An unclassified failure is `other`, never hidden."""

        @subagent
        async def agent(task: Task, ctx: Context) -> None:
            raise KeyError("missing column")

        outcome = await agent.run("q")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.details is not None
        assert "KeyError" in outcome.details
        assert "missing column" in outcome.details

    async def test_business_error_carries_the_user_message(self) -> None:
        """A business envelope keeps its customer-friendly text."""

        @subagent
        async def refunds(task: Task, ctx: Context) -> None:
            raise BusinessError("limit exceeded", user_message="A supervisor will call you.")

        outcome = await refunds.run("refund #12345")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.user_message == "A supervisor will call you."


class TestEmptyResults:
    @pytest.mark.parametrize("empty", [[], {}, None, ""])
    async def test_empty_result_is_a_success_and_never_retried(self, empty: Any) -> None:
        """ "Searched, nothing found" is an answer: one attempt, no error."""
        sleep = RecordingSleep()
        calls = 0

        @subagent(retry=fast_retry(sleep, attempts=4))
        async def orders(task: Task, ctx: Context) -> Any:
            nonlocal calls
            calls += 1
            return empty

        outcome = await orders.run("orders of customer 42")
        assert isinstance(outcome, Success)
        assert outcome.is_empty
        assert calls == 1
        assert sleep.delays == []


class TestToolsInsideSubagents:
    async def test_flaky_tool_is_retried_inside_the_subagent(self) -> None:
        """A tool's transient failures are retried at the tool; the subagent body runs once."""
        sleep = RecordingSleep()
        flaky = FailTimes(2, lambda: ConnectionResetError("reset"))
        body_runs = 0

        @tool(idempotent=True)
        async def search_docs(query: str, limit: int = 5) -> list[str]:
            flaky()
            return [query] * limit

        @subagent(retry=fast_retry(sleep, attempts=4))
        async def docs(task: Task, ctx: Context) -> list[str]:
            nonlocal body_runs
            body_runs += 1
            return await ctx.call(search_docs, query=task.query, limit=2)

        outcome = await docs.run("q")
        assert isinstance(outcome, Success)
        assert outcome.data == ["q", "q"]
        assert flaky.calls == 3
        assert body_runs == 1
        assert sleep.delays == [0.1, 0.2]

    async def test_tool_failure_is_final_and_not_retried_again_by_the_subagent(self) -> None:
        """Retries never multiply across layers: 4 tool attempts, not 4 x 4."""
        sleep = RecordingSleep()
        calls = 0

        @tool(idempotent=True)
        async def search_docs(query: str) -> list[str]:
            nonlocal calls
            calls += 1
            raise TimeoutError("slow")

        @subagent(
            name="docs", retry=fast_retry(sleep, attempts=4), alternatives=["use_cached_snapshot"]
        )
        async def docs(task: Task, ctx: Context) -> list[str]:
            ctx.record_partial(["cached hit"], completed="cache")
            return await ctx.call(search_docs, query=task.query)

        outcome = await docs.run("q")
        assert isinstance(outcome, ErrorEnvelope)
        assert calls == 4
        assert outcome.attempts == 4
        assert outcome.source == "docs/search_docs"
        assert outcome.attempted_query == {"tool": "search_docs", "arguments": {"query": "q"}}
        assert outcome.partial_results is not None
        assert outcome.partial_results.findings == ("cached hit",)
        assert outcome.alternative_approaches == ("use_cached_snapshot",)

    async def test_subagent_can_catch_a_tool_failure_and_go_on(self) -> None:
        """A failed source does not abort the others: the subagent reports what it found."""
        from agentmesh import ToolCallFailed

        @tool(idempotent=True)
        async def fetch(source: str) -> str:
            if source == "b":
                raise PermissionDenied("no access to b")
            return f"data from {source}"

        @subagent(retry=RetryPolicy.never())
        async def gather(task: Task, ctx: Context) -> dict[str, Any]:
            found: dict[str, Any] = {}
            for source in ("a", "b", "c"):
                try:
                    found[source] = await ctx.call(fetch, source=source)
                except ToolCallFailed as failed:
                    found[source] = failed.envelope.error_type
            return found

        outcome = await gather.run("q")
        assert isinstance(outcome, Success)
        assert outcome.data == {"a": "data from a", "b": "permission_denied", "c": "data from c"}

    async def test_non_idempotent_tool_is_not_reinvoked_after_a_timeout(self) -> None:
        """A charge that timed out may have happened: it is never repeated automatically."""
        sleep = RecordingSleep()
        charges = 0

        @tool(impact="financial")
        async def charge_card(amount: int) -> str:
            nonlocal charges
            charges += 1
            raise TimeoutError("gateway did not answer")

        @subagent(retry=fast_retry(sleep, attempts=4))
        async def billing(task: Task, ctx: Context) -> str:
            return await ctx.call(charge_card, amount=100)

        outcome = await billing.run("charge 100")
        assert isinstance(outcome, ErrorEnvelope)
        assert charges == 1
        assert outcome.is_retryable is False
        assert outcome.details is not None
        assert "not idempotent" in outcome.details
        assert sleep.delays == []

    async def test_non_idempotent_tool_is_retried_when_the_server_refused_before_acting(
        self,
    ) -> None:
        """A refused connection cannot have taken effect, so even a charge may be retried."""
        sleep = RecordingSleep()
        flaky = FailTimes(1, lambda: ConnectionRefusedError("refused"))

        @tool
        async def charge_card(amount: int) -> str:
            flaky()
            return "charged"

        @subagent(retry=fast_retry(sleep, attempts=4))
        async def billing(task: Task, ctx: Context) -> str:
            return await ctx.call(charge_card, amount=100)

        outcome = await billing.run("charge 100")
        assert isinstance(outcome, Success)
        assert flaky.calls == 2

    async def test_idempotency_key_lets_a_tool_be_retried_with_the_same_key(self) -> None:
        """Every attempt of one logical call gets the same key; another call gets another."""
        sleep = RecordingSleep()
        keys: list[str] = []

        @tool(impact="financial")
        async def charge_card(amount: int, idempotency_key: str) -> str:
            keys.append(idempotency_key)
            if len(keys) < 3:
                raise TimeoutError("gateway did not answer")
            return f"charged {amount}"

        @subagent(retry=fast_retry(sleep, attempts=4))
        async def billing(task: Task, ctx: Context) -> str:
            return await ctx.call(charge_card, amount=100)

        outcome = await billing.run("charge 100")
        assert isinstance(outcome, Success)
        assert outcome.data == "charged 100"
        assert len(keys) == 3
        assert len(set(keys)) == 1
        assert "idempotency_key" not in charge_card.input_schema["properties"]
        await billing.run("charge 100 again")
        assert keys[-1] != keys[0]

    async def test_bad_tool_input_gives_a_validation_envelope_without_running_the_tool(
        self,
    ) -> None:
        """The field is named and the tool body never runs."""
        runs = 0

        @tool(idempotent=True)
        async def search_docs(query: str, limit: int = 5) -> list[str]:
            nonlocal runs
            runs += 1
            return []

        @subagent
        async def docs(task: Task, ctx: Context) -> list[str]:
            return await ctx.call(search_docs, query=task.query, limit="many")  # type: ignore[arg-type]

        outcome = await docs.run("q")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.VALIDATION
        assert outcome.is_retryable is False
        assert "limit" in outcome.message
        assert runs == 0

    async def test_a_hanging_tool_is_cut_at_the_deadline(self) -> None:
        """The deadline bounds the whole task; the envelope says it timed out."""
        started = asyncio.Event()

        @tool(idempotent=True)
        async def hang() -> None:
            started.set()
            await asyncio.Event().wait()

        @subagent(retry=fast_retry(attempts=5))
        async def agent(task: Task, ctx: Context) -> None:
            ctx.record_partial(["early"], completed="first")
            await ctx.call(hang)

        outcome = await agent.run("q", timeout=0.05)
        assert started.is_set()
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "timeout"
        assert outcome.attempts == 1
        assert outcome.partial_results is not None
        assert outcome.partial_results.findings == ("early",)


class TestRetryAfter:
    async def test_retry_after_is_never_undercut(self) -> None:
        """The wait is at least what the server asked for."""
        sleep = RecordingSleep()
        flaky = FailTimes(
            1, lambda: TransientError("slow down", error_type="rate_limited", retry_after=1.5)
        )

        @subagent(retry=fast_retry(sleep, attempts=4))
        async def agent(task: Task, ctx: Context) -> str:
            flaky()
            return "ok"

        assert isinstance(await agent.run("q"), Success)
        assert sleep.delays == [1.5]

    async def test_retry_after_beyond_max_delay_gives_up_at_once(self) -> None:
        """retry-after: 3600 is not slept on; the envelope keeps retryAfter."""
        sleep = RecordingSleep()

        @subagent(retry=fast_retry(sleep, attempts=4, max_delay=5.0))
        async def agent(task: Task, ctx: Context) -> None:
            raise TransientError("overloaded", error_type="rate_limited", retry_after=3600)

        outcome = await agent.run("q")
        assert isinstance(outcome, ErrorEnvelope)
        assert sleep.delays == []
        assert outcome.attempts == 1
        assert outcome.retry_after == 3600
        assert outcome.details is not None
        assert "3600" in outcome.details

    async def test_retry_after_beyond_the_deadline_gives_up_at_once(self) -> None:
        """A wait that would pass the deadline is not started."""
        sleep = RecordingSleep()

        @subagent(retry=fast_retry(sleep, attempts=4, max_delay=60.0))
        async def agent(task: Task, ctx: Context) -> None:
            raise TransientError("later", error_type="rate_limited", retry_after=30)

        outcome = await agent.run("q", timeout=2.0)
        assert isinstance(outcome, ErrorEnvelope)
        assert sleep.delays == []
        assert outcome.details is not None
        assert "deadline" in outcome.details


class TestConcurrencyAndBudget:
    async def test_concurrent_runs_keep_their_attempt_counts_apart(self) -> None:
        """1,000 concurrent runs of one subagent share the policy, never the retry state."""
        sleep = RecordingSleep()
        failures_left: dict[str, int] = {}

        @subagent(retry=fast_retry(sleep, attempts=5))
        async def agent(task: Task, ctx: Context) -> int:
            left = failures_left[task.query]
            if left:
                failures_left[task.query] = left - 1
                await asyncio.sleep(0)
                raise TimeoutError("t")
            return ctx.attempt

        for i in range(1000):
            failures_left[str(i)] = i % 4
        outcomes = await asyncio.gather(*(agent.run(str(i)) for i in range(1000)))
        for i, outcome in enumerate(outcomes):
            assert isinstance(outcome, Success)
            assert outcome.attempts == i % 4 + 1
            assert outcome.data == i % 4 + 1

    async def test_retry_storm_is_held_by_the_budget(self) -> None:
        """Against a source down 100%, a shared budget caps attempts at 1.3x first attempts."""
        sleep = RecordingSleep()
        attempts = 0

        @subagent(retry=fast_retry(sleep, attempts=5))
        async def agent(task: Task, ctx: Context) -> None:
            nonlocal attempts
            attempts += 1
            raise ConnectionError("down")

        budget = RetryBudget(ratio=0.2, reserve=100)
        outcomes = await asyncio.gather(*(agent.run(str(i), budget=budget) for i in range(1000)))
        assert all(isinstance(o, ErrorEnvelope) and o.is_retryable for o in outcomes)
        assert attempts <= 1.3 * 1000
        assert budget.denied > 0
        spent = [
            o for o in outcomes if isinstance(o, ErrorEnvelope) and "budget" in (o.details or "")
        ]
        assert spent

        unbudgeted = 0

        @subagent(retry=fast_retry(sleep, attempts=5))
        async def reckless(task: Task, ctx: Context) -> None:
            nonlocal unbudgeted
            unbudgeted += 1
            raise ConnectionError("down")

        await asyncio.gather(*(reckless.run(str(i)) for i in range(1000)))
        assert unbudgeted == 5000


class TestLimitsAndDeadlines:
    async def test_waiting_for_a_rate_limit_slot_respects_the_deadline(self) -> None:
        """A run queued behind a rate limit is cut at its deadline, not when the slot frees."""

        @subagent(rate_limit=(1, 30.0), retry=RetryPolicy.never())
        async def limited(task: Task, ctx: Context) -> str:
            return task.query

        loop = asyncio.get_running_loop()
        started = loop.time()
        first, second = await asyncio.gather(
            limited.run("a", timeout=0.2), limited.run("b", timeout=0.2)
        )
        # A real clock: the slot frees after 30 s, so 5 s tells "cut at the deadline" apart
        # from "waited for the slot" with ample room for a loaded machine.
        assert loop.time() - started < 5
        outcomes = sorted([first, second], key=lambda o: isinstance(o, ErrorEnvelope))
        assert isinstance(outcomes[0], Success)
        assert isinstance(outcomes[1], ErrorEnvelope)
        assert outcomes[1].error_type == "timeout"


class TestBudgetUnderConcurrency:
    async def test_fast_failures_see_the_share_of_slow_first_attempts_in_flight(self) -> None:
        """First attempts deposit when they start, so a fast failure is not starved."""
        sleep = RecordingSleep()
        release = asyncio.Event()
        failed_once: set[str] = set()

        @subagent(retry=fast_retry(sleep, attempts=2))
        async def agent(task: Task, ctx: Context) -> str:
            if task.query.startswith("slow"):
                await release.wait()
                return task.query
            if task.query not in failed_once:
                failed_once.add(task.query)
                raise ConnectionError("blip")
            return task.query

        budget = RetryBudget(ratio=0.2, reserve=0)
        slow = [asyncio.create_task(agent.run(f"slow{i}", budget=budget)) for i in range(90)]
        await asyncio.sleep(0)
        fast = await asyncio.gather(*(agent.run(f"fast{i}", budget=budget) for i in range(10)))
        release.set()
        await asyncio.gather(*slow)
        assert all(isinstance(o, Success) for o in fast)
        assert budget.retries == 10
        assert budget.denied == 0


class TestHugeProgress:
    async def test_progress_beyond_the_bound_is_cut_with_a_marker(self) -> None:
        """A subagent's own 20 MB of findings reach the envelope cut to 1 MiB, saying so."""
        from agentmesh.envelope import MAX_PARTIAL_JSON_BYTES

        @subagent(retry=RetryPolicy.never())
        async def hoarder(task: Task, ctx: Context) -> None:
            ctx.record_partial([{"doc": n, "text": "z" * 10_000} for n in range(2_000)])
            raise TimeoutError("slow")

        outcome = await hoarder.run("q")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.partial_results is not None
        findings = outcome.partial_results.findings
        assert 0 < len(findings) < 2_001
        assert findings[0] == {"doc": 0, "text": "z" * 10_000}
        assert "truncated" in findings[-1]
        assert len(outcome.partial_results.to_json()) <= MAX_PARTIAL_JSON_BYTES
