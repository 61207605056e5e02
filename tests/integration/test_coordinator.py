"""The coordinator turns every outcome into a decision and reports coverage honestly."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from agentmesh import (
    BusinessError,
    Context,
    Coordinator,
    ErrorCategory,
    ErrorEnvelope,
    InvalidInput,
    PermissionDenied,
    RetryBudget,
    RetryPolicy,
    Success,
    Task,
    TransientError,
    UsageError,
    subagent,
    tool,
)
from agentmesh.coordinator import (
    CoverageStatus,
    RetryWithFeedback,
    Route,
    RouteContext,
    Router,
    TryAlternative,
)
from agentmesh.policies import (
    Ruling,
    ToolCallEvent,
    escalate_on,
    forbid_retry,
    pre_tool_use,
)
from agentmesh.testing import RecordingSleep
from tests.retrying import fast_retry

# Every wait on something that should already have happened is bounded by this, so a
# regression fails the test instead of hanging it.
GUARD = 2.0


class TestTimeoutThenModifiedQuery:
    async def test_a_registered_alternative_narrows_the_query_and_succeeds(self) -> None:
        """After local retries the handler gets the structured envelope; its narrower task works."""
        sleep = RecordingSleep()
        searched: list[str] = []
        seen: list[ErrorEnvelope] = []

        @tool(idempotent=True)
        async def search(query: str) -> list[str]:
            searched.append(query)
            if "2024" not in query:
                raise TimeoutError("search backend timed out")
            return [f"hit for {query}"]

        @subagent(name="web", retry=fast_retry(sleep), alternatives=["narrow_query_by_date_range"])
        async def web(task: Task, ctx: Context) -> list[str]:
            return await ctx.call(search, query=task.query)

        coordinator = Coordinator([web])

        @coordinator.alternative("narrow_query_by_date_range")
        async def narrow(task: Task, envelope: ErrorEnvelope) -> Task:
            seen.append(envelope)
            return task.with_query(f"{task.query} 2024", feedback=envelope)

        report = await coordinator.run([Task(query="rust async runtimes", topic="runtimes")])

        assert searched == ["rust async runtimes"] * 3 + ["rust async runtimes 2024"]
        assert sleep.delays == [0.1, 0.2]
        [envelope] = seen
        assert envelope.error_category is ErrorCategory.TRANSIENT
        assert envelope.error_type == "timeout"
        assert envelope.attempts == 3
        assert envelope.attempted_query == {
            "tool": "search",
            "arguments": {"query": "rust async runtimes"},
        }
        assert envelope.alternative_approaches == ("narrow_query_by_date_range",)

        [entry] = report.coverage
        assert entry.status is CoverageStatus.COVERED
        assert entry.attempted_query == "rust async runtimes 2024"
        assert [f.content for f in report.findings] == ["hit for rust async runtimes 2024"]
        [record] = report.records
        assert [(s.subagent, s.query, s.decision) for s in record.steps] == [
            ("web", "rust async runtimes", "TryAlternative"),
            ("web", "rust async runtimes 2024", "Accept"),
        ]
        assert isinstance(record.steps[0].outcome, ErrorEnvelope)
        assert isinstance(record.final, Success)

    async def test_a_sync_alternative_handler_is_accepted(self) -> None:
        """A plain function handler works like an async one."""

        @subagent(name="web", retry=RetryPolicy.never(), alternatives=["narrow"])
        async def web(task: Task, ctx: Context) -> list[str]:
            if task.query == "broad":
                raise TimeoutError("too slow")
            return [task.query]

        coordinator = Coordinator([web])

        @coordinator.alternative("narrow")
        def narrow(task: Task, envelope: ErrorEnvelope) -> Task:
            return task.with_query("narrow", feedback=envelope)

        report = await coordinator.run(["broad"])
        assert report.coverage[0].status is CoverageStatus.COVERED
        assert [f.content for f in report.findings] == ["narrow"]

    async def test_an_alternative_mapped_to_another_subagent_serves_the_same_task(self) -> None:
        """`alternatives={name: subagent}` routes the failed task to the other subagent."""
        sleep = RecordingSleep()
        web_calls = 0
        cache_queries: list[str] = []

        @subagent(name="web", retry=fast_retry(sleep), alternatives=["use_cached_snapshot"])
        async def web(task: Task, ctx: Context) -> list[str]:
            nonlocal web_calls
            web_calls += 1
            raise TimeoutError("web search timed out")

        @subagent(name="cache", retry=RetryPolicy.never())
        async def cache(task: Task, ctx: Context) -> list[str]:
            cache_queries.append(task.query)
            return [f"cached: {task.query}"]

        coordinator = Coordinator([web], alternatives={"use_cached_snapshot": cache})
        report = await coordinator.run([Task(query="tokio vs async-std", topic="runtimes")])

        assert web_calls == 3
        assert cache_queries == ["tokio vs async-std"]
        [entry] = report.coverage
        assert entry.status is CoverageStatus.COVERED
        assert entry.source == "web"
        [finding] = report.findings
        assert finding.source == "cache"
        assert finding.content == "cached: tokio vs async-std"
        [record] = report.records
        assert [(s.subagent, s.decision) for s in record.steps] == [
            ("web", "TryAlternative"),
            ("cache", "Accept"),
        ]

    async def test_an_alternative_is_tried_at_most_once(self) -> None:
        """A failing alternative is not tried again; the task ends as a retryable gap."""
        calls: list[str] = []

        @subagent(name="web", retry=RetryPolicy.never(), alternatives=["narrow"])
        async def web(task: Task, ctx: Context) -> None:
            calls.append(task.query)
            raise TimeoutError("slow")

        coordinator = Coordinator([web])

        @coordinator.alternative("narrow")
        async def narrow(task: Task, envelope: ErrorEnvelope) -> Task:
            return task.with_query(f"{task.query}!", feedback=envelope)

        report = await coordinator.run(["q"])
        assert calls == ["q", "q!"]
        [entry] = report.coverage
        assert entry.status is CoverageStatus.GAP
        assert entry.is_retryable is True


class TestEmptyIsNotAFailure:
    async def test_empty_result_and_access_failure_are_told_apart(self) -> None:
        """Nothing found is `empty` after one run; a refused connection is a retryable gap."""
        sleep = RecordingSleep()
        calls = {"orders": 0, "crm": 0}

        @subagent(name="orders", retry=fast_retry(sleep))
        async def orders(task: Task, ctx: Context) -> list[str]:
            calls["orders"] += 1
            return []

        @subagent(name="crm", retry=fast_retry(sleep))
        async def crm(task: Task, ctx: Context) -> list[str]:
            calls["crm"] += 1
            raise ConnectionError("crm refused the connection")

        report = await Coordinator([orders, crm]).run([Task(query="customer 42", topic="c42")])

        by_source = {entry.source: entry for entry in report.coverage}
        assert by_source["orders"].status is CoverageStatus.EMPTY
        assert by_source["orders"].is_retryable is False
        assert by_source["orders"].reason == "searched, nothing found"
        assert by_source["crm"].status is CoverageStatus.GAP
        assert by_source["crm"].is_retryable is True
        assert calls == {"orders": 1, "crm": 3}
        assert report.findings == ()
        markdown = report.to_markdown()
        assert "| c42 | orders | empty |" in markdown
        assert "| c42 | crm | gap |" in markdown

    async def test_a_router_asking_to_retry_an_empty_result_is_overruled(self) -> None:
        """An empty success is never retried, whatever a custom router wants."""
        calls = 0

        class Eager(Router):
            async def route(self, ctx: RouteContext) -> Route:
                return RetryWithFeedback(ctx.task.with_query(ctx.task.query + " again"))

        @subagent(name="orders")
        async def orders(task: Task, ctx: Context) -> list[str]:
            nonlocal calls
            calls += 1
            return []

        report = await Coordinator([orders], router=Eager()).run(["q"])
        assert calls == 1
        assert report.coverage[0].status is CoverageStatus.EMPTY


class TestValidationRetry:
    @pytest.mark.parametrize("is_async", [False, True])
    async def test_retried_once_with_the_rewriters_query(self, is_async: bool) -> None:
        """The rewriter's query is sent once, carrying the failed envelope as feedback."""
        received: list[Task] = []

        @subagent(name="sql", retry=RetryPolicy.never())
        async def sql(task: Task, ctx: Context) -> list[dict[str, int]]:
            received.append(task)
            if task.query != "SELECT id FROM orders":
                raise InvalidInput(f"unknown column in {task.query!r}")
            return [{"id": 1}]

        def fix(task: Task, envelope: ErrorEnvelope) -> str:
            return "SELECT id FROM orders"

        async def fix_async(task: Task, envelope: ErrorEnvelope) -> str:
            return fix(task, envelope)

        coordinator = Coordinator([sql], rewriter=fix_async if is_async else fix)
        report = await coordinator.run([Task(query="SELECT idd FROM orders", topic="orders")])

        assert [t.query for t in received] == ["SELECT idd FROM orders", "SELECT id FROM orders"]
        assert received[0].feedback is None
        feedback = received[1].feedback
        assert feedback is not None
        assert feedback.error_category is ErrorCategory.VALIDATION
        assert feedback.attempted_query == "SELECT idd FROM orders"
        [entry] = report.coverage
        assert entry.status is CoverageStatus.COVERED
        assert entry.attempted_query == "SELECT id FROM orders"
        assert [s.decision for s in report.records[0].steps] == ["RetryWithFeedback", "Accept"]

    async def test_a_rewriter_returning_the_same_query_does_not_loop(self) -> None:
        """A proposal already tried is never sent again: one run, then a gap."""
        runs = 0
        rewrites = 0

        @subagent(name="sql")
        async def sql(task: Task, ctx: Context) -> None:
            nonlocal runs
            runs += 1
            raise InvalidInput("bad query")

        def same(task: Task, envelope: ErrorEnvelope) -> str:
            nonlocal rewrites
            rewrites += 1
            return task.query

        report = await Coordinator([sql], rewriter=same).run(["SELECT *"])
        assert runs == 1
        assert rewrites == 1
        [entry] = report.coverage
        assert entry.status is CoverageStatus.GAP
        assert entry.is_retryable is False
        assert entry.reason is not None
        assert "already tried" in entry.reason

    async def test_a_rewriter_cycling_between_two_queries_stops(self) -> None:
        """Alternating proposals cannot ping-pong: each query is sent at most once."""
        received: list[str] = []

        @subagent(name="sql")
        async def sql(task: Task, ctx: Context) -> None:
            received.append(task.query)
            raise InvalidInput("bad query")

        def flip(task: Task, envelope: ErrorEnvelope) -> str:
            return "b" if task.query == "a" else "a"

        report = await Coordinator([sql], rewriter=flip, max_rounds=10).run(["a"])
        assert received == ["a", "b"]
        assert report.coverage[0].status is CoverageStatus.GAP

    @pytest.mark.parametrize("max_rounds", [0, 1, 3])
    async def test_rounds_are_bounded_by_max_rounds(self, max_rounds: int) -> None:
        """A rewriter with endless new ideas gets `max_rounds` rounds, then the task is a gap."""
        runs = 0
        rewrites = 0

        @subagent(name="sql")
        async def sql(task: Task, ctx: Context) -> None:
            nonlocal runs
            runs += 1
            raise InvalidInput("still bad")

        def endless(task: Task, envelope: ErrorEnvelope) -> str:
            nonlocal rewrites
            rewrites += 1
            return f"query v{rewrites}"

        coordinator = Coordinator([sql], rewriter=endless, max_rounds=max_rounds)
        report = await coordinator.run(["query v0"])
        assert rewrites == max_rounds
        assert runs == max_rounds + 1
        assert report.coverage[0].status is CoverageStatus.GAP

    async def test_a_rewriter_returning_none_gives_a_gap(self) -> None:
        """No corrected query means no retry."""
        runs = 0

        @subagent(name="sql")
        async def sql(task: Task, ctx: Context) -> None:
            nonlocal runs
            runs += 1
            raise InvalidInput("bad query")

        report = await Coordinator([sql], rewriter=lambda task, envelope: None).run(["q"])
        assert runs == 1
        assert report.coverage[0].status is CoverageStatus.GAP

    async def test_a_crashing_rewriter_becomes_a_gap_not_an_abort(self) -> None:
        """A broken rewriter costs its own task only."""

        @subagent(name="sql")
        async def sql(task: Task, ctx: Context) -> str:
            if task.query == "bad":
                raise InvalidInput("bad query")
            return "ok"

        def broken(task: Task, envelope: ErrorEnvelope) -> str:
            raise RuntimeError("rewriter bug")

        report = await Coordinator([sql], rewriter=broken).run(["bad", "good"])
        statuses = [entry.status for entry in report.coverage]
        assert statuses == [CoverageStatus.GAP, CoverageStatus.COVERED]
        assert report.coverage[0].reason is not None
        assert "rewriter bug" in report.coverage[0].reason


class _AlwaysRetry(Router):
    """A router that would retry or switch approach no matter what."""

    def __init__(self) -> None:
        self.calls = 0

    async def route(self, ctx: RouteContext) -> Route:
        self.calls += 1
        if isinstance(ctx.outcome, ErrorEnvelope) and ctx.alternatives:
            return TryAlternative(sorted(ctx.alternatives)[0])
        return RetryWithFeedback(ctx.task.with_query(f"{ctx.task.query} (retry {self.calls})"))


class TestEscalation:
    async def test_permission_error_is_escalated_without_retry_or_alternative(self) -> None:
        """Declared alternatives and a rewriter are not used for a permission error."""
        sleep = RecordingSleep()
        runs = 0
        alternative_runs = 0

        @subagent(name="hr", retry=fast_retry(sleep), alternatives=["use_cached_snapshot"])
        async def hr(task: Task, ctx: Context) -> None:
            nonlocal runs
            runs += 1
            raise PermissionDenied("no access to salaries")

        @subagent(name="snapshot")
        async def snapshot(task: Task, ctx: Context) -> list[str]:
            nonlocal alternative_runs
            alternative_runs += 1
            return ["stale salaries"]

        coordinator = Coordinator(
            [hr],
            alternatives={"use_cached_snapshot": snapshot},
            rewriter=lambda task, envelope: "another query",
        )
        report = await coordinator.run([Task(query="salaries", topic="pay")])

        assert runs == 1
        assert alternative_runs == 0
        assert sleep.delays == []
        [entry] = report.coverage
        assert entry.status is CoverageStatus.ESCALATED
        assert entry.is_retryable is False
        assert report.escalations == (entry,)
        assert [s.decision for s in report.records[0].steps] == ["Escalate"]
        assert "## Escalations" in report.to_markdown()

    async def test_business_error_escalates_with_its_user_message(self) -> None:
        """The customer-friendly text is the escalation's reason."""
        runs = 0

        @subagent(name="refunds")
        async def refunds(task: Task, ctx: Context) -> None:
            nonlocal runs
            runs += 1
            raise BusinessError(
                "refund exceeds the $500 limit", user_message="A supervisor will call you."
            )

        report = await Coordinator([refunds]).run([Task(query="refund #12345", topic="refund")])
        assert runs == 1
        [entry] = report.escalations
        assert entry.status is CoverageStatus.ESCALATED
        assert entry.reason == "A supervisor will call you."
        assert entry.user_message == "A supervisor will call you."
        assert "A supervisor will call you." in report.to_markdown()

    async def test_policy_escalate_beats_a_router_that_wants_to_retry(self) -> None:
        """A post-tool-use escalate ends the task; the router is not even asked."""
        sleep = RecordingSleep()
        tool_calls = 0
        alternative_runs = 0

        @tool(idempotent=True, impact="financial")
        async def refund(amount: int) -> str:
            nonlocal tool_calls
            tool_calls += 1
            raise TimeoutError("payment gateway timed out")

        @subagent(
            name="billing",
            retry=fast_retry(sleep),
            alternatives=["manual"],
            policies=[escalate_on(impact="financial")],
        )
        async def billing(task: Task, ctx: Context) -> str:
            return await ctx.call(refund, amount=100)

        @subagent(name="manual")
        async def manual(task: Task, ctx: Context) -> str:
            nonlocal alternative_runs
            alternative_runs += 1
            return "refunded by hand"

        router = _AlwaysRetry()
        coordinator = Coordinator([billing], router=router, alternatives={"manual": manual})
        report = await coordinator.run([Task(query="refund 100", topic="refund")])

        assert tool_calls == 1
        assert alternative_runs == 0
        assert router.calls == 0
        [entry] = report.coverage
        assert entry.status is CoverageStatus.ESCALATED
        assert entry.is_retryable is False
        assert entry.reason is not None
        assert "policy" in entry.reason

    async def test_policy_forbid_retry_beats_a_router_that_wants_an_alternative(self) -> None:
        """A forbid_retry ruling gives a gap with no new attempt of any kind."""
        sleep = RecordingSleep()
        runs = 0
        alternative_runs = 0

        @tool(idempotent=True)
        async def search(query: str) -> list[str]:
            raise TimeoutError("slow")

        @subagent(name="web", retry=fast_retry(sleep), alternatives=["cache"])
        async def web(task: Task, ctx: Context) -> list[str]:
            nonlocal runs
            runs += 1
            return await ctx.call(search, query=task.query)

        @subagent(name="cache")
        async def cache(task: Task, ctx: Context) -> list[str]:
            nonlocal alternative_runs
            alternative_runs += 1
            return ["cached"]

        router = _AlwaysRetry()
        coordinator = Coordinator(
            [web],
            router=router,
            alternatives={"cache": cache},
            policies=[forbid_retry(tools="search")],
        )
        report = await coordinator.run(["q"])

        assert runs == 1
        assert sleep.delays == []
        assert alternative_runs == 0
        assert router.calls == 0
        [entry] = report.coverage
        assert entry.status is CoverageStatus.GAP
        assert entry.is_retryable is False
        assert entry.reason is not None
        assert "forbidden by policy" in entry.reason

    async def test_without_a_policy_the_custom_router_is_followed(self) -> None:
        """The overruling above comes from the policy, not from the router being ignored."""
        alternative_runs = 0

        @subagent(name="web", retry=RetryPolicy.never())
        async def web(task: Task, ctx: Context) -> None:
            raise TimeoutError("slow")

        @subagent(name="cache")
        async def cache(task: Task, ctx: Context) -> list[str]:
            nonlocal alternative_runs
            alternative_runs += 1
            return ["cached"]

        router = _AlwaysRetry()
        coordinator = Coordinator([web], router=router, alternatives={"cache": cache})
        report = await coordinator.run(["q"])
        assert alternative_runs == 1
        assert report.coverage[0].status is CoverageStatus.COVERED
        assert [s.decision for s in report.records[0].steps] == ["TryAlternative", "Accept"]

    async def test_a_custom_router_cannot_exceed_max_rounds_or_resend_a_query(self) -> None:
        """The coordinator bounds a router that always wants another try."""
        received: list[str] = []

        class Stubborn(Router):
            async def route(self, ctx: RouteContext) -> Route:
                return RetryWithFeedback(ctx.task.with_query(f"v{ctx.rewrites + 1}"))

        class Repeats(Router):
            async def route(self, ctx: RouteContext) -> Route:
                return RetryWithFeedback(ctx.task)

        @subagent(name="sql")
        async def sql(task: Task, ctx: Context) -> None:
            received.append(task.query)
            raise InvalidInput("bad")

        await Coordinator([sql], router=Stubborn(), max_rounds=2).run(["v0"])
        assert received == ["v0", "v1", "v2"]
        received.clear()
        report = await Coordinator([sql], router=Repeats()).run(["v0"])
        assert received == ["v0"]
        assert report.coverage[0].reason is not None
        assert "already tried" in report.coverage[0].reason

    async def test_a_router_asking_to_retry_a_success_is_overruled_and_the_data_kept(
        self,
    ) -> None:
        """A success with data is accepted: a failed re-run could otherwise discard it."""
        runs: list[str] = []

        class Refine(Router):
            async def route(self, ctx: RouteContext) -> Route:
                return RetryWithFeedback(ctx.task.with_query(f"{ctx.task.query} refined"))

        @subagent(name="web", retry=RetryPolicy.never())
        async def web(task: Task, ctx: Context) -> list[str]:
            runs.append(task.query)
            if "refined" in task.query:
                raise ConnectionError("down")
            return ["precious"]

        report = await Coordinator([web], router=Refine()).run(["q"])
        assert runs == ["q"]
        assert report.coverage[0].status is CoverageStatus.COVERED
        assert [f.content for f in report.findings] == ["precious"]


class TestPartialSynthesis:
    async def test_one_of_five_fails_after_three_sources_and_is_reported_partial(self) -> None:
        """Four covered, the fifth partial with completed, pending and preliminary findings."""
        sleep = RecordingSleep()
        sources = ["s1", "s2", "s3", "s4", "s5"]

        def make(name: str, *, fails: bool) -> Any:
            @subagent(name=name, retry=fast_retry(sleep, attempts=2))
            async def agent(task: Task, ctx: Context) -> list[str]:
                ctx.record_partial(pending=sources)
                found: list[str] = []
                for source in sources:
                    if fails and source == "s4":
                        raise TransientError(f"{source} unavailable", error_type="unavailable")
                    item = f"{name} finding from {source}"
                    found.append(item)
                    ctx.record_partial([item], completed=source)
                return found

            return agent

        agents = [make(f"agent{i}", fails=i == 5) for i in range(1, 6)]
        report = await Coordinator(agents).run([Task(query="llm evals", topic="evals")])

        statuses = {entry.source: entry.status for entry in report.coverage}
        assert statuses == {
            "agent1": CoverageStatus.COVERED,
            "agent2": CoverageStatus.COVERED,
            "agent3": CoverageStatus.COVERED,
            "agent4": CoverageStatus.COVERED,
            "agent5": CoverageStatus.PARTIAL,
        }
        [partial_entry] = report.gaps
        assert partial_entry.is_retryable is True
        assert partial_entry.partial is not None
        assert partial_entry.partial.completed == ("s1", "s2", "s3")
        assert partial_entry.partial.pending == ("s4", "s5")
        assert partial_entry.partial.findings == tuple(
            f"agent5 finding from s{i}" for i in (1, 2, 3)
        )
        preliminary = [f for f in report.findings if f.preliminary]
        assert [f.content for f in preliminary] == list(partial_entry.partial.findings)
        assert all(f.source == "agent5" for f in preliminary)
        assert len([f for f in report.findings if not f.preliminary]) == 4 * 5

        markdown = report.to_markdown()
        assert "### Partial: evals (agent5)" in markdown
        assert "- completed: s1, s2, s3" in markdown
        assert "- pending: s4, s5" in markdown
        for item in partial_entry.partial.findings:
            assert f"  - {item}" in markdown
        assert "| evals | agent5 | partial |" in markdown
        assert "s4 unavailable" in markdown
        assert "80% of 5 entries answered." in markdown


class TestIsolationAndConcurrency:
    @pytest.mark.parametrize("error", [RuntimeError("boom"), KeyError("missing")])
    async def test_a_crashing_subagent_does_not_abort_the_others(self, error: Exception) -> None:
        """An unexpected exception is an `other` gap; the other subagents' work is kept."""

        @subagent(name="crashy")
        async def crashy(task: Task, ctx: Context) -> None:
            raise error

        @subagent(name="steady")
        async def steady(task: Task, ctx: Context) -> list[str]:
            await asyncio.sleep(0)
            return [f"steady: {task.query}"]

        report = await Coordinator([crashy, steady]).run(["a", "b"])
        statuses = [(e.topic, e.source, e.status) for e in report.coverage]
        assert statuses == [
            ("a", "crashy", CoverageStatus.GAP),
            ("a", "steady", CoverageStatus.COVERED),
            ("b", "crashy", CoverageStatus.GAP),
            ("b", "steady", CoverageStatus.COVERED),
        ]
        assert [f.content for f in report.findings] == ["steady: a", "steady: b"]
        reason = report.coverage[0].reason
        assert reason is not None
        assert type(error).__name__ in reason

    async def test_tasks_really_run_concurrently(self) -> None:
        """Every task waits on one barrier that opens only once all of them have started."""
        n = 8
        barrier = asyncio.Barrier(n)

        @subagent(name="agent", retry=RetryPolicy.never())
        async def agent(task: Task, ctx: Context) -> str:
            async with asyncio.timeout(GUARD):
                await barrier.wait()
            return task.query

        report = await Coordinator([agent]).run([f"q{i}" for i in range(n)])
        assert all(e.status is CoverageStatus.COVERED for e in report.coverage)
        assert len(report.coverage) == n

    async def test_max_concurrency_bounds_runs_in_flight(self) -> None:
        """No more than `max_concurrency` subagent runs are in flight at once."""
        in_flight = 0
        peak = 0

        @subagent(name="agent")
        async def agent(task: Task, ctx: Context) -> str:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            for _ in range(3):
                await asyncio.sleep(0)
            in_flight -= 1
            return task.query

        report = await Coordinator([agent], max_concurrency=3).run([f"q{i}" for i in range(20)])
        assert peak == 3
        assert len(report.coverage) == 20

    async def test_a_hanging_subagent_is_cut_at_the_deadline(self) -> None:
        """The run ends near its deadline; the hung task is a timeout with its partial kept."""
        sleep = RecordingSleep()

        @subagent(name="hangs", retry=fast_retry(sleep))
        async def hangs(task: Task, ctx: Context) -> None:
            ctx.record_partial(["found before hanging"], completed="s1", pending="s2")
            await asyncio.Event().wait()

        @subagent(name="hangs_bare", retry=fast_retry(sleep))
        async def hangs_bare(task: Task, ctx: Context) -> None:
            await asyncio.Event().wait()

        @subagent(name="quick")
        async def quick(task: Task, ctx: Context) -> list[str]:
            return ["quick answer"]

        coordinator = Coordinator([hangs, hangs_bare, quick], timeout=0.2)
        started = time.monotonic()
        async with asyncio.timeout(GUARD):
            report = await coordinator.run([Task(query="q", topic="t")])
        assert time.monotonic() - started < GUARD

        by_source = {entry.source: entry for entry in report.coverage}
        assert by_source["quick"].status is CoverageStatus.COVERED
        for name in ("hangs", "hangs_bare"):
            final = next(r for r in report.records if r.subagent == name).final
            assert isinstance(final, ErrorEnvelope)
            assert final.error_category is ErrorCategory.TRANSIENT
            assert final.error_type == "timeout"
            assert by_source[name].is_retryable is True
            assert by_source[name] in report.gaps
        assert by_source["hangs_bare"].status is CoverageStatus.GAP
        hung = by_source["hangs"]
        assert hung.status is CoverageStatus.PARTIAL
        assert hung.partial is not None
        assert hung.partial.findings == ("found before hanging",)
        assert "found before hanging" in [f.content for f in report.findings]
        assert sleep.delays == []

    async def test_the_deadline_bounds_backoff(self) -> None:
        """A backoff that would pass the run's deadline is not slept: the task gives up."""
        sleep = RecordingSleep()
        calls = 0

        @subagent(name="down", retry=fast_retry(sleep, initial_delay=30.0, max_delay=60.0))
        async def down(task: Task, ctx: Context) -> None:
            nonlocal calls
            calls += 1
            raise ConnectionError("down")

        report = await Coordinator([down], timeout=5.0).run(["q"])
        assert calls == 1
        assert sleep.delays == []
        final = report.records[0].final
        assert isinstance(final, ErrorEnvelope)
        assert final.details is not None
        assert "deadline" in final.details
        assert report.coverage[0].is_retryable is True

    async def test_a_hanging_rewriter_is_cut_at_the_deadline(self) -> None:
        """Coordinator-side user code is bounded by the run's deadline too."""

        @subagent(name="sql")
        async def sql(task: Task, ctx: Context) -> None:
            raise InvalidInput("bad")

        @subagent(name="other")
        async def other(task: Task, ctx: Context) -> str:
            return "fine"

        async def hangs(task: Task, envelope: ErrorEnvelope) -> str:
            await asyncio.Event().wait()
            return "never"

        coordinator = Coordinator([sql, other], rewriter=hangs, timeout=0.1)
        async with asyncio.timeout(GUARD):
            report = await coordinator.run(["q"])
        by_source = {entry.source: entry for entry in report.coverage}
        assert by_source["other"].status is CoverageStatus.COVERED
        assert by_source["sql"].status is CoverageStatus.GAP
        assert by_source["sql"].reason is not None
        assert "deadline" in by_source["sql"].reason

    async def test_a_hanging_alternative_handler_is_cut_at_the_deadline(self) -> None:
        """A handler that never returns leaves a retryable gap, not a hung run."""

        @subagent(name="web", retry=RetryPolicy.never(), alternatives=["narrow"])
        async def web(task: Task, ctx: Context) -> None:
            ctx.record_partial(["early hit"], completed="s1")
            raise TimeoutError("slow")

        coordinator = Coordinator([web], timeout=0.1)

        @coordinator.alternative("narrow")
        async def narrow(task: Task, envelope: ErrorEnvelope) -> Task:
            await asyncio.Event().wait()
            return task

        async with asyncio.timeout(GUARD):
            report = await coordinator.run(["q"])
        [entry] = report.coverage
        assert entry.status is CoverageStatus.PARTIAL
        assert entry.is_retryable is True
        assert [f.content for f in report.findings] == ["early hit"]

    async def test_cancelling_a_run_leaves_no_task_behind(self) -> None:
        """Every subagent is cancelled, its `finally` runs, and no asyncio task survives."""
        n = 5
        started = 0
        all_started = asyncio.Event()
        cleaned_up = 0

        @subagent(name="slow")
        async def slow(task: Task, ctx: Context) -> None:
            nonlocal started, cleaned_up
            started += 1
            if started == n:
                all_started.set()
            try:
                await asyncio.Event().wait()
            finally:
                cleaned_up += 1

        before = asyncio.all_tasks()
        run = asyncio.create_task(Coordinator([slow]).run([f"q{i}" for i in range(n)]))
        async with asyncio.timeout(GUARD):
            await all_started.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        assert cleaned_up == n
        assert asyncio.all_tasks() == before


class TestManyTasks:
    async def test_three_thousand_mixed_tasks_are_each_accounted_for_once(self) -> None:
        """Every task gets one entry with the right status; no partial finding is lost."""
        sleep = RecordingSleep()
        kinds = ["success", "empty", "validation", "transient", "permission", "partial"]
        expected_status = {
            "success": CoverageStatus.COVERED,
            "empty": CoverageStatus.EMPTY,
            "validation": CoverageStatus.GAP,
            "transient": CoverageStatus.GAP,
            "permission": CoverageStatus.ESCALATED,
            "partial": CoverageStatus.PARTIAL,
        }
        recorded: list[str] = []

        @subagent(name="worker", retry=fast_retry(sleep, attempts=2))
        async def worker(task: Task, ctx: Context) -> Any:
            kind = task.metadata["kind"]
            await asyncio.sleep(0)
            if kind == "success":
                return [f"result {task.topic}"]
            if kind == "empty":
                return []
            if kind == "validation":
                raise InvalidInput("malformed")
            if kind == "transient":
                raise ConnectionError("down")
            if kind == "permission":
                raise PermissionDenied("forbidden")
            finding = f"partial {task.topic}"
            if ctx.attempt == 1:
                recorded.append(finding)
            ctx.record_partial([finding], completed="first", pending="second")
            raise TransientError("second source down")

        tasks = [
            Task(query=f"q{i}", topic=f"t{i}", metadata={"kind": kinds[i % len(kinds)]})
            for i in range(3000)
        ]
        report = await Coordinator([worker], retry_budget=RetryBudget.unlimited()).run(tasks)

        assert len(report.coverage) == 3000
        assert len(report.records) == 3000
        assert len({record.task_id for record in report.records}) == 3000
        assert [entry.topic for entry in report.coverage] == [t.topic for t in tasks]
        for task, entry in zip(tasks, report.coverage, strict=True):
            assert entry.status is expected_status[task.metadata["kind"]], task
        retryable = {e.topic for e in report.coverage if e.is_retryable}
        assert retryable == {
            t.topic for t in tasks if t.metadata["kind"] in ("transient", "partial")
        }
        assert len(report.escalations) == 500
        assert len(recorded) == 500
        contents = {f.content for f in report.findings}
        assert set(recorded) <= contents
        assert len([f for f in report.findings if f.preliminary]) == 500
        assert len([f for f in report.findings if not f.preliminary]) == 500


class TestPlanning:
    async def test_a_task_without_subagent_fans_out_to_every_subagent(self) -> None:
        """Two subagents give two coverage entries for one task."""

        @subagent(name="docs")
        async def docs(task: Task, ctx: Context) -> list[str]:
            return ["from docs"]

        @subagent(name="web")
        async def web(task: Task, ctx: Context) -> list[str]:
            return ["from web"]

        report = await Coordinator([docs, web]).run([Task(query="q", topic="t")])
        assert [(e.topic, e.source, e.status) for e in report.coverage] == [
            ("t", "docs", CoverageStatus.COVERED),
            ("t", "web", CoverageStatus.COVERED),
        ]
        assert len({record.task_id for record in report.records}) == 2

    async def test_a_task_naming_a_subagent_goes_only_to_it(self) -> None:
        """`Task.subagent` picks one of several subagents."""
        calls: list[str] = []

        @subagent(name="docs")
        async def docs(task: Task, ctx: Context) -> str:
            calls.append("docs")
            return "d"

        @subagent(name="web")
        async def web(task: Task, ctx: Context) -> str:
            calls.append("web")
            return "w"

        report = await Coordinator([docs, web]).run([Task(query="q", subagent="web")])
        assert calls == ["web"]
        assert [e.source for e in report.coverage] == ["web"]

    async def test_an_unknown_subagent_name_fails_before_anything_runs(self) -> None:
        """A typo in a task is a UsageError, and no other task has started."""
        calls = 0

        @subagent(name="docs")
        async def docs(task: Task, ctx: Context) -> str:
            nonlocal calls
            calls += 1
            return "d"

        coordinator = Coordinator([docs])
        with pytest.raises(UsageError, match="dcos"):
            await coordinator.run([Task(query="fine"), Task(query="q", subagent="dcos")])
        assert calls == 0


class TestTasksArgument:
    @staticmethod
    def echo() -> Any:
        @subagent(name="echo")
        async def echo(task: Task, ctx: Context) -> str:
            return task.query

        return echo

    async def test_a_bare_string_is_one_task_never_one_per_character(self) -> None:
        """`run("asyncio")` runs one task with that query, as `Subagent.run` does."""
        report = await Coordinator([self.echo()]).run("asyncio")
        assert [record.task.query for record in report.records] == ["asyncio"]
        assert [finding.content for finding in report.findings] == ["asyncio"]

    async def test_a_lone_task_is_one_task(self) -> None:
        """A Task passed without a list is run as it is, not iterated as a model."""
        report = await Coordinator([self.echo()]).run(Task(query="asyncio", topic="aio"))
        assert [(entry.topic, entry.status) for entry in report.coverage] == [
            ("aio", CoverageStatus.COVERED)
        ]

    async def test_a_generator_of_strings_is_one_task_each(self) -> None:
        """Any iterable of queries works, a generator included."""
        queries = (query for query in ["a", "b"])
        report = await Coordinator([self.echo()]).run(queries)
        assert [finding.content for finding in report.findings] == ["a", "b"]

    @pytest.mark.parametrize(
        ("tasks", "kind"),
        [
            (b"asyncio", "bytes"),
            (bytearray(b"asyncio"), "bytearray"),
            ({"asyncio": "aio"}, "dict"),
            (42, "int"),
            (None, "NoneType"),
        ],
    )
    async def test_what_is_not_a_sequence_of_tasks_is_refused_before_anything_runs(
        self, tasks: Any, kind: str
    ) -> None:
        """Bytes, a mapping or a non-iterable is a UsageError naming `tasks`, not split up."""
        calls: list[str] = []

        @subagent(name="echo")
        async def echo(task: Task, ctx: Context) -> str:
            calls.append(task.query)
            return task.query

        with pytest.raises(UsageError, match=rf"run\(tasks=\).*got a {kind}$"):
            await Coordinator([echo]).run(tasks)
        assert calls == []


class TestReport:
    async def test_below_min_coverage_the_report_is_insufficient(self) -> None:
        """The report says it is insufficient instead of pretending."""

        @subagent(name="agent", retry=RetryPolicy.never())
        async def agent(task: Task, ctx: Context) -> str:
            if task.query == "down":
                raise ConnectionError("down")
            return task.query

        coordinator = Coordinator([agent], min_coverage=0.8)
        report = await coordinator.run(["up", "down"])
        assert report.coverage_ratio == 0.5
        assert report.sufficient is False
        assert "Insufficient coverage: 50% answered, 80% required." in report.to_markdown()

        full = await coordinator.run(["up", "also up"])
        assert full.sufficient is True
        assert "Insufficient" not in full.to_markdown()

    async def test_empty_counts_as_answered_for_min_coverage(self) -> None:
        """Nothing found is an answer, so it does not lower coverage."""

        @subagent(name="agent")
        async def agent(task: Task, ctx: Context) -> list[str]:
            return []

        report = await Coordinator([agent], min_coverage=1.0).run(["a", "b"])
        assert report.sufficient is True

    async def test_to_dict_is_json_serialisable(self) -> None:
        """Every kind of entry survives `json.dumps`, partials and envelopes included."""

        @subagent(name="agent", retry=RetryPolicy.never())
        async def agent(task: Task, ctx: Context) -> Any:
            if task.query == "partial":
                ctx.record_partial([{"title": "half"}], completed="a", pending="b")
                raise ConnectionError("b down")
            if task.query == "escalate":
                raise BusinessError("no", user_message="Sorry.")
            return [{"title": task.query, "score": 0.5}]

        report = await Coordinator([agent], min_coverage=0.5).run(["ok", "partial", "escalate"])
        data = json.loads(json.dumps(report.to_dict()))
        assert [e["status"] for e in data["coverage"]] == ["covered", "partial", "escalated"]
        assert data["sufficient"] is False
        assert data["coverage"][1]["partial"]["pending"] == ["b"]
        assert json.loads(report.to_json()) == data

    async def test_to_dict_survives_results_json_cannot_hold(self) -> None:
        """A subagent may return any object; the report still serialises it, as text."""

        class Hit:
            def __str__(self) -> str:
                return "a hit"

        @subagent(name="agent", retry=RetryPolicy.never())
        async def agent(task: Task, ctx: Context) -> Any:
            if task.query == "partial":
                ctx.record_partial([Hit()], completed="a")
                raise ConnectionError("down")
            return [Hit(), {3, 1}]

        report = await Coordinator([agent]).run(["ok", "partial"])
        data = json.loads(json.dumps(report.to_dict()))
        assert [f["content"] for f in data["findings"]] == ["a hit", [1, 3], "a hit"]
        assert json.loads(report.to_json()) == data


class TestSharedRetryBudget:
    async def test_one_budget_bounds_retries_across_the_whole_run(self) -> None:
        """Against a source that is down for good, attempts stay within 1.2 x tasks + 100."""
        sleep = RecordingSleep()
        attempts = 0

        @subagent(name="down", retry=fast_retry(sleep, attempts=5))
        async def down(task: Task, ctx: Context) -> None:
            nonlocal attempts
            attempts += 1
            raise ConnectionError("source is down")

        report = await Coordinator([down]).run([f"q{i}" for i in range(200)])
        assert attempts <= 1.2 * 200 + 100
        assert attempts > 200  # the budget allowed some retries, just not 5 x 200
        assert all(e.status is CoverageStatus.GAP for e in report.coverage)
        assert all(e.is_retryable for e in report.coverage)

    async def test_a_budget_passed_in_is_the_one_spent(self) -> None:
        """`retry_budget=` is shared by every subagent of the run."""
        sleep = RecordingSleep()

        @subagent(name="a", retry=fast_retry(sleep, attempts=4))
        async def a(task: Task, ctx: Context) -> None:
            raise ConnectionError("down")

        @subagent(name="b", retry=fast_retry(sleep, attempts=4))
        async def b(task: Task, ctx: Context) -> None:
            raise ConnectionError("down")

        budget = RetryBudget(ratio=0, reserve=3)
        await Coordinator([a, b], retry_budget=budget).run(["q1", "q2"])
        assert budget.first_attempts == 4
        assert budget.retries == 3
        assert len(sleep.delays) == 3


class TestCoordinatorPolicies:
    async def test_a_coordinator_policy_applies_to_a_subagent_without_policies(self) -> None:
        """A coordinator-level pre_tool_use deny blocks the tool; it never runs."""
        deletes = 0

        @tool(idempotent=True)
        async def delete_records(table: str) -> str:
            nonlocal deletes
            deletes += 1
            return "deleted"

        @tool(idempotent=True)
        async def read_records(table: str) -> list[str]:
            return [f"row of {table}"]

        @pre_tool_use(tool="delete_records")
        def no_deletes(event: ToolCallEvent) -> Ruling | None:
            return Ruling.deny("deletes are not allowed in research runs")

        @subagent(name="cleaner")
        async def cleaner(task: Task, ctx: Context) -> str:
            return await ctx.call(delete_records, table=task.query)

        @subagent(name="reader")
        async def reader(task: Task, ctx: Context) -> list[str]:
            return await ctx.call(read_records, table=task.query)

        coordinator = Coordinator([cleaner, reader], policies=[no_deletes])
        report = await coordinator.run([Task(query="users", topic="users")])

        assert deletes == 0
        by_source = {entry.source: entry for entry in report.coverage}
        assert by_source["reader"].status is CoverageStatus.COVERED
        blocked = by_source["cleaner"]
        assert blocked.status is CoverageStatus.ESCALATED
        assert blocked.reason is not None
        assert "deletes are not allowed" in blocked.reason
        final = next(r for r in report.records if r.subagent == "cleaner").final
        assert isinstance(final, ErrorEnvelope)
        assert final.error_type == "policy_blocked"
        assert final.policy is not None
        assert final.policy.policy == "no_deletes"


class TestDecisionLog:
    async def test_every_decision_is_a_structlog_event(self) -> None:
        """Each routing decision is logged with the run, the task and the subagent."""

        @subagent(name="web", retry=RetryPolicy.never(), alternatives=["narrow"])
        async def web(task: Task, ctx: Context) -> list[str]:
            if task.query == "broad":
                raise TimeoutError("slow")
            return [task.query]

        coordinator = Coordinator([web])

        @coordinator.alternative("narrow")
        async def narrow(task: Task, envelope: ErrorEnvelope) -> Task:
            return task.with_query("narrow", feedback=envelope)

        try:
            with capture_logs() as logs:
                await coordinator.run([Task(query="broad", id="t1")], run_id="run-7")
        finally:
            structlog.reset_defaults()
        decisions = [
            (entry["run_id"], entry["task_id"], entry["subagent"], entry["decision"])
            for entry in logs
            if entry["event"] == "route_decision"
        ]
        assert decisions == [
            ("run-7", "t1", "web", "TryAlternative"),
            ("run-7", "t1", "web", "Accept"),
        ]


class TestRulesNoRouterChanges:
    @pytest.mark.parametrize("error", [PermissionDenied("no scope"), BusinessError("shipped")])
    async def test_permission_and_business_errors_escalate_whatever_the_router_says(
        self, error: Exception
    ) -> None:
        """A custom router cannot turn a permission or business error into another attempt."""
        runs = 0

        @subagent(name="guarded", alternatives=["other_way"])
        async def guarded(task: Task, ctx: Context) -> str:
            nonlocal runs
            runs += 1
            raise error

        class Eager(Router):
            async def route(self, ctx: RouteContext) -> Route:
                return TryAlternative("other_way")

        coordinator = Coordinator([guarded], router=Eager())

        @coordinator.alternative("other_way")
        async def other_way(task: Task, envelope: ErrorEnvelope) -> Task:
            return task.with_query(task.query + " differently")

        report = await coordinator.run(["q"])
        assert runs == 1
        assert report.coverage[0].status is CoverageStatus.ESCALATED
