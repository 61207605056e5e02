"""Properties that hold for any sequence of outcomes, policy rulings and routing decisions.

Hypothesis draws the sequences; examples are small and the runs derandomized, so the
suite stays fast and a failure reproduces. Each example is a whole run on a fresh loop.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from agentmesh import (
    BusinessError,
    Context,
    Coordinator,
    ErrorCategory,
    ErrorEnvelope,
    InvalidInput,
    Outcome,
    PartialResults,
    PermissionDenied,
    RetryPolicy,
    Ruling,
    Success,
    Task,
    ToolCallFailed,
    subagent,
    tool,
)
from agentmesh.coordinator import (
    Accept,
    AcceptEmpty,
    CoverageStatus,
    Escalate,
    RecordGap,
    RetryWithFeedback,
    Route,
    RouteContext,
    Router,
    TryAlternative,
)
from agentmesh.policies import ToolResultEvent, post_tool_use
from agentmesh.subagents import Subagent
from tests.retrying import fast_retry

PROPERTY = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    # The autouse secret scan is function-scoped on purpose: it spans every example.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

OUTCOME_KINDS = ["ok", "empty", "timeout", "refused", "invalid", "denied", "business", "bug"]


def raise_or_return(kind: str) -> list[str]:
    """What a tool or subagent does for one drawn outcome kind."""
    if kind == "ok":
        return ["found"]
    if kind == "empty":
        return []
    if kind == "timeout":
        raise TimeoutError("read timed out")
    if kind == "refused":
        raise ConnectionRefusedError("connection refused")
    if kind == "invalid":
        raise InvalidInput("malformed query")
    if kind == "denied":
        raise PermissionDenied("not allowed")
    if kind == "business":
        raise BusinessError("order already shipped", user_message="It has shipped.")
    raise RuntimeError("a bug")


# --- a forbidden retry is never executed -------------------------------------------------


class Pushy(Router):
    """A router that wants every failure tried again, one way or another."""

    def __init__(self, how: str) -> None:
        self.how = how

    async def route(self, ctx: RouteContext) -> Route:
        if isinstance(ctx.outcome, Success):
            return Accept()
        if self.how == "alternative" and "again" not in ctx.tried_alternatives:
            return TryAlternative("again")
        return RetryWithFeedback(ctx.task.with_query(f"{ctx.task.query} (try {ctx.rewrites})"))


class TestForbiddenRetries:
    @PROPERTY
    @given(
        script=st.lists(
            st.tuples(
                st.sampled_from(OUTCOME_KINDS),
                st.sampled_from([None, "allow", "forbid_retry", "escalate"]),
            ),
            min_size=1,
            max_size=6,
        ),
        max_attempts=st.integers(1, 4),
        body=st.sampled_from(["propagate", "call_again", "raise_transient", "swallow"]),
        router=st.sampled_from(["retry", "alternative"]),
    )
    def test_no_call_is_made_again_after_a_policy_ruled_no_more_attempts(
        self, script: list[tuple[str, str | None]], max_attempts: int, body: str, router: str
    ) -> None:
        """Not by the local loop, a body that insists, a subagent retry, nor a pushy router."""
        calls: list[str | None] = []  # the ruling on each call actually made

        @tool(idempotent=True)
        async def place_order(item: str) -> list[str]:
            kind, ruling = script[len(calls)] if len(calls) < len(script) else ("ok", None)
            calls.append(ruling)
            return raise_or_return(kind)

        @post_tool_use(tool="place_order")
        def rule(event: ToolResultEvent) -> Ruling | None:
            ruling = calls[-1]
            return None if ruling is None else Ruling(action=ruling)  # an action drawn above

        async def make_the_call(ctx: Context) -> list[str]:
            if body == "propagate":
                return await ctx.call(place_order, item="item-1")
            failure: ToolCallFailed | None = None
            for _ in range(3):
                try:
                    return await ctx.call(place_order, item="item-1")
                except ToolCallFailed as failed:
                    failure = failed
                    if body != "call_again":
                        break
            assert failure is not None
            if body == "raise_transient":
                raise TimeoutError("the order service is slow")
            if body == "swallow":
                return []
            raise failure

        policy = fast_retry(attempts=max_attempts)

        @subagent(name="orders", retry=policy, policies=[rule])
        async def orders(task: Task, ctx: Context) -> list[str]:
            return await make_the_call(ctx)

        @subagent(name="orders_again", retry=policy, policies=[rule])
        async def orders_again(task: Task, ctx: Context) -> list[str]:
            return await make_the_call(ctx)

        coordinator = Coordinator(
            [orders], router=Pushy(router), alternatives={"again": orders_again}, max_rounds=3
        )
        report = asyncio.run(coordinator.run([Task(query="buy", topic="order")]))

        ruled = [i for i, ruling in enumerate(calls) if ruling in ("forbid_retry", "escalate")]
        event("a policy ruled" if ruled else "no ruling")
        if ruled:
            assert len(calls) == ruled[0] + 1, f"calls after the ruling: {calls}"
        assert len(report.coverage) == 1

    async def test_a_withheld_result_is_not_fetched_again_by_an_insisting_body(self) -> None:
        """deny after the call: like forbid_retry, the same call is not made again."""
        sent: list[str] = []

        @tool(idempotent=True)
        async def send_report(to: str) -> str:
            sent.append(to)
            return "the customer's card number is ..."

        @post_tool_use(tool="send_report")
        def withhold(event: ToolResultEvent) -> Ruling | None:
            return Ruling.deny("the result holds card data")

        @subagent(name="reports", policies=[withhold])
        async def reports(task: Task, ctx: Context) -> str:
            for _ in range(3):
                try:
                    return await ctx.call(send_report, to="ops")
                except ToolCallFailed:
                    continue
            return "gave up"

        outcome = await reports.run("send it")
        assert sent == ["ops"]
        assert isinstance(outcome, Success)


# --- every task ends with exactly one coverage entry ----------------------------------------

DECISIONS = [
    "accept",
    "accept_empty",
    "retry_new",
    "retry_same",
    "alternative_known",
    "alternative_unknown",
    "escalate",
    "gap",
    "raise",
    "garbage",
]


class Erratic(Router):
    """A router that answers from a drawn list, valid or not, one decision after another."""

    def __init__(self, decisions: list[str]) -> None:
        self.decisions = decisions
        self.calls = 0

    async def route(self, ctx: RouteContext) -> Route:
        choice = self.decisions[self.calls % len(self.decisions)]
        self.calls += 1
        if choice == "accept":
            return Accept()
        if choice == "accept_empty":
            return AcceptEmpty()
        if choice == "retry_new":
            return RetryWithFeedback(ctx.task.with_query(f"{ctx.task.query}+"))
        if choice == "retry_same":
            return RetryWithFeedback(ctx.task)
        if choice == "alternative_known":
            return TryAlternative("fallback")
        if choice == "alternative_unknown":
            return TryAlternative("no-such-approach")
        if choice == "escalate":
            return Escalate("a human should look")
        if choice == "gap":
            return RecordGap("given up")
        if choice == "raise":
            raise RuntimeError("the router broke")
        return "retry please"  # type: ignore[return-value]  # a router returning garbage


class TestOneCoverageEntryPerTask:
    @PROPERTY
    @given(
        tasks=st.lists(
            st.tuples(
                st.lists(st.sampled_from(OUTCOME_KINDS), min_size=1, max_size=4), st.booleans()
            ),
            min_size=1,
            max_size=6,
        ),
        subagents=st.integers(1, 3),
        decisions=st.lists(st.sampled_from(DECISIONS), min_size=1, max_size=8),
        partial=st.booleans(),
    )
    def test_every_task_and_subagent_pair_gets_exactly_one_entry(
        self,
        tasks: list[tuple[list[str], bool]],
        subagents: int,
        decisions: list[str],
        partial: bool,
    ) -> None:
        """Whatever the outcomes and whatever the router says, nothing is lost or doubled."""
        dispatches: Counter[str] = Counter()

        def make(name: str) -> Subagent:
            @subagent(name=name, retry=fast_retry(attempts=2))
            async def run(task: Task, ctx: Context) -> list[str]:
                kinds = task.metadata["kinds"]
                key = f"{task.metadata['n']}/{name}"
                kind = kinds[dispatches[key] % len(kinds)]
                dispatches[key] += 1
                if partial:
                    ctx.record_partial([f"partial {key}"], completed="half")
                return raise_or_return(kind)

            return run

        spokes = [make(f"s{i}") for i in range(subagents)]
        fallback = make("fallback")
        plan = [
            Task(
                query=f"q{n}",
                topic=f"topic {n}",
                # Some tasks name their subagent, the others fan out to all.
                subagent="s0" if pinned else None,
                metadata={"kinds": kinds, "n": n},
            )
            for n, (kinds, pinned) in enumerate(tasks)
        ]
        coordinator = Coordinator(
            spokes,
            router=Erratic(decisions),
            alternatives={"fallback": fallback},
            rewriter=lambda task, envelope: f"{task.query}!",
            max_rounds=2,
        )
        report = asyncio.run(coordinator.run(plan))

        expected = Counter(
            (task.label, name)
            for task in plan
            for name in ([task.subagent] if task.subagent else [s.name for s in spokes])
        )
        event(f"{sum(dispatches.values()) - sum(expected.values())} extra dispatches")
        assert Counter((e.topic, e.source) for e in report.coverage) == expected
        assert len(report.records) == len(report.coverage)
        assert len({r.task_id for r in report.records}) == len(report.records)

    async def test_a_router_cannot_report_a_failure_as_covered_or_empty(self) -> None:
        """'I could not search' never becomes 'I searched and found nothing'."""

        class Lenient(Router):
            async def on_transient(self, ctx: RouteContext) -> Route:
                return AcceptEmpty()

            async def on_other(self, ctx: RouteContext) -> Route:
                return Accept()

        @subagent(name="down", retry=RetryPolicy.never())
        async def down(task: Task, ctx: Context) -> list[str]:
            raise ConnectionError("could not search")

        @subagent(name="broken", retry=RetryPolicy.never())
        async def broken(task: Task, ctx: Context) -> list[str]:
            raise RuntimeError("a bug")

        report = await Coordinator([down, broken], router=Lenient()).run(["q"])
        assert {e.source: e.status for e in report.coverage} == {
            "down": CoverageStatus.GAP,
            "broken": CoverageStatus.GAP,
        }
        assert report.coverage_ratio == 0.0


# --- JSON round trips are lossless ----------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
names = st.text(max_size=10)
queries = st.text(max_size=20) | st.dictionaries(st.text(max_size=6), json_values, max_size=3)

partials = st.fixed_dictionaries(
    {
        "completed": st.lists(names, max_size=3).map(tuple),
        "pending": st.lists(names, max_size=3).map(tuple),
        "findings": st.lists(json_values, max_size=3).map(tuple),
    }
).map(lambda fields: PartialResults(**fields))

rulings = st.fixed_dictionaries(
    {
        "action": st.sampled_from(["deny", "forbid_retry", "escalate"]),
        "reason": st.text(max_size=20),
        "policy": names,
    }
).map(lambda fields: Ruling(**fields))

envelopes = st.fixed_dictionaries(
    {
        "error_category": st.sampled_from(ErrorCategory),
        "error_type": names,
        "is_retryable": st.booleans(),
        "message": st.text(max_size=30),
        "attempted_query": queries,
        "source": names,
        "attempts": st.integers(0, 10),
        "partial_results": st.none() | partials,
        "alternative_approaches": st.none() | st.lists(names, max_size=3).map(tuple),
        "details": st.none() | st.text(max_size=20),
        "user_message": st.none() | st.text(max_size=20),
        "retry_after": st.none() | st.floats(0, 1e6),
        "policy": st.none() | rulings,
    }
).map(lambda fields: ErrorEnvelope(**fields))

OUTCOME: TypeAdapter[Outcome] = TypeAdapter(Outcome)


class TestJsonRoundTrips:
    @settings(PROPERTY, max_examples=300)
    @given(envelopes)
    def test_an_envelope_survives_its_json_and_its_dict(self, envelope: ErrorEnvelope) -> None:
        """to_json / to_dict and back, alone or as an Outcome, give the same envelope."""
        assert ErrorEnvelope.model_validate_json(envelope.to_json()) == envelope
        assert ErrorEnvelope.model_validate(envelope.to_dict()) == envelope
        assert OUTCOME.validate_json(envelope.to_json()) == envelope
        result = envelope.to_tool_result("toolu_1")
        assert ErrorEnvelope.model_validate_json(result["content"]) == envelope

    @settings(PROPERTY, max_examples=300)
    @given(json_values.filter(lambda value: value is not None), names, queries, st.integers(0, 9))
    def test_a_success_survives_its_json_and_its_dict(
        self, data: Any, source: str, query: Any, attempts: int
    ) -> None:
        """Read back as an Outcome, a success is the same success, emptiness included."""
        success: Success[Any] = Success(
            data=data, source=source, attempted_query=query, attempts=attempts
        )
        back = OUTCOME.validate_json(success.to_json())
        assert back == success
        assert back.is_empty == success.is_empty
        assert OUTCOME.validate_python(success.to_dict()) == success

    def test_an_empty_success_with_none_data_survives_its_json(self) -> None:
        """None is "searched, nothing found": it must survive the wire like [] does."""
        success: Success[None] = Success(data=None, source="docs", attempted_query="q")
        assert OUTCOME.validate_json(success.to_json()) == success
        assert OUTCOME.validate_python(success.to_dict()) == success
