"""`Context` as a subagent sees it: recorded progress, and `ctx.call` through a real @tool."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agentmesh import (
    BusinessError,
    Context,
    ErrorCategory,
    ErrorEnvelope,
    PartialResults,
    Success,
    Task,
    ToolCallFailed,
    TransientError,
    UsageError,
    subagent,
    tool,
)
from agentmesh.envelope import MAX_PARTIAL_JSON_BYTES
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use
from agentmesh.testing import FailTimes, RecordingSleep
from tests.retrying import fast_retry

Body = Callable[[Task, Context], Awaitable[Any]]


async def run(body: Body, *, attempts: int = 1, **options: Any) -> Success[Any] | ErrorEnvelope:
    """The outcome of a subagent made of `body`, retried `attempts` times without waiting."""
    return await subagent(name="agent", retry=fast_retry(attempts=attempts), **options)(body).run(
        "q"
    )


async def partials_of(body: Body, *, attempts: int = 1) -> PartialResults:
    """The partial results a subagent made of `body` hands on when it fails."""
    outcome = await run(body, attempts=attempts)
    assert isinstance(outcome, ErrorEnvelope), outcome
    assert outcome.partial_results is not None
    return outcome.partial_results


class TestRecordPartial:
    async def test_a_finding_recorded_twice_is_kept_once(self) -> None:
        """Equal findings, even as separate objects, appear once and in first-seen order."""

        async def body(task: Task, ctx: Context) -> None:
            ctx.record_partial([{"id": 1}, "b"])
            ctx.record_partial([{"id": 1}, "c", "b"])
            raise BusinessError("stop")

        assert (await partials_of(body)).findings == ({"id": 1}, "b", "c")

    async def test_progress_from_every_attempt_is_merged_without_duplicates(self) -> None:
        """A retried task keeps what each attempt found; repeats of earlier finds are dropped."""
        attempt = 0

        async def body(task: Task, ctx: Context) -> None:
            nonlocal attempt
            attempt += 1
            ctx.record_partial(["first"] if attempt == 1 else ["first", "second"])
            raise TransientError("down")

        partials = await partials_of(body, attempts=2)
        assert attempt == 2
        assert partials.findings == ("first", "second")

    async def test_a_dict_or_a_string_is_one_finding(self) -> None:
        """Neither is iterated into its keys or characters."""

        async def body(task: Task, ctx: Context) -> None:
            ctx.record_partial({"title": "x", "url": "y"})
            ctx.record_partial("one sentence")
            raise BusinessError("stop")

        assert (await partials_of(body)).findings == ({"title": "x", "url": "y"}, "one sentence")

    async def test_a_completed_source_leaves_pending_and_does_not_return(self) -> None:
        """Completed moves a source out of pending; naming it pending later changes nothing."""

        async def body(task: Task, ctx: Context) -> None:
            ctx.record_partial(pending=["web", "docs"])
            ctx.record_partial(["hit"], completed="web")
            ctx.record_partial(pending="web")
            raise BusinessError("stop")

        partials = await partials_of(body)
        assert partials.completed == ("web",)
        assert partials.pending == ("docs",)

    async def test_source_names_must_be_strings(self) -> None:
        """A list of non-names is refused by the argument's name."""
        seen: list[BaseException] = []

        async def body(task: Task, ctx: Context) -> None:
            try:
                ctx.record_partial(completed=[1, 2])  # type: ignore[list-item]
            except UsageError as exc:
                seen.append(exc)
            raise BusinessError("stop")

        await run(body)
        assert len(seen) == 1
        assert "completed" in str(seen[0])

    async def test_findings_beyond_the_bound_are_cut_and_the_cut_is_said(self) -> None:
        """Over MAX_PARTIAL_JSON_BYTES of JSON, the first findings stay and a marker ends them."""
        chunk = "x" * 100_000
        count = MAX_PARTIAL_JSON_BYTES // len(chunk) + 5

        async def body(task: Task, ctx: Context) -> None:
            ctx.record_partial(f"{n}{chunk}" for n in range(count))
            raise BusinessError("stop")

        findings = (await partials_of(body)).findings
        assert 1 < len(findings) < count
        assert findings[0] == f"0{chunk}"
        assert isinstance(findings[-1], str)
        assert "truncated" in findings[-1]

    async def test_nothing_recorded_is_no_partial_block(self) -> None:
        """A failure with no progress carries no partial results at all."""

        async def body(task: Task, ctx: Context) -> None:
            raise BusinessError("stop")

        outcome = await run(body)
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.partial_results is None


looked_up: list[int] = []


@tool(idempotent=True)
async def lookup(order_id: int) -> dict[str, int]:
    """Look up an order."""
    looked_up.append(order_id)
    return {"id": order_id}


async def call_lookup(**arguments: Any) -> Success[Any] | ErrorEnvelope:
    """The outcome of a subagent that calls `lookup(**arguments)`."""
    looked_up.clear()

    async def body(task: Task, ctx: Context) -> dict[str, int]:
        return await ctx.call(lookup, **arguments)

    return await run(body)


class TestCallValidation:
    async def test_a_wrongly_typed_argument_never_reaches_the_tool(self) -> None:
        """The tool's schema is checked at call time; the caller gets a validation envelope."""
        outcome = await call_lookup(order_id="not a number")
        assert looked_up == []
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.VALIDATION
        assert not outcome.is_retryable
        assert outcome.source == "agent/lookup"

    async def test_an_unknown_argument_is_a_validation_envelope(self) -> None:
        """Arguments that do not bind to the tool's signature are refused before it runs."""
        outcome = await call_lookup(order=1)
        assert looked_up == []
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.VALIDATION
        assert outcome.attempts == 0

    async def test_the_tool_gets_coerced_values_and_its_data_comes_back(self) -> None:
        """Arguments are coerced to the schema; ctx.call returns the tool's own value."""
        outcome = await call_lookup(order_id="7")
        assert looked_up == [7]
        assert isinstance(outcome, Success)
        assert outcome.data == {"id": 7}

    async def test_a_plain_function_is_a_usage_error(self) -> None:
        """ctx.call takes a @tool; anything else is a mistake named at once."""
        seen: list[BaseException] = []

        async def plain() -> str:
            return "x"

        async def body(task: Task, ctx: Context) -> None:
            try:
                await ctx.call(plain)  # type: ignore[arg-type]
            except UsageError as exc:
                seen.append(exc)

        await run(body)
        assert len(seen) == 1
        assert "@tool" in str(seen[0])


class TestCallPolicies:
    async def test_a_denied_call_is_not_made_and_says_which_policy(self) -> None:
        """A pre-tool deny ends the call with a permission envelope carrying the ruling."""
        refunds: list[int] = []

        @tool(idempotent=True)
        async def refund(amount: int) -> str:
            """Refund an amount."""
            refunds.append(amount)
            return "ok"

        @pre_tool_use(tool="refund")
        def cap(event: ToolCallEvent) -> Ruling | None:
            return Ruling.deny("too much") if event.arguments["amount"] > 500 else None

        async def body(task: Task, ctx: Context) -> str:
            return await ctx.call(refund, amount=900)

        outcome = await run(body, policies=[cap])
        assert refunds == []
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.PERMISSION
        assert outcome.policy is not None
        assert outcome.policy.action == "deny"
        assert outcome.attempts == 0


class TestCallRetries:
    async def test_a_transient_failure_is_retried_and_the_data_returned(self) -> None:
        """The tool's own policy retries it; the caller sees only the data."""
        sleep = RecordingSleep()
        flaky = FailTimes(2, lambda: TransientError("blip"))

        @tool(idempotent=True, retry=fast_retry(sleep, attempts=3))
        async def search(query: str) -> list[str]:
            """Search."""
            flaky()
            return [query]

        async def body(task: Task, ctx: Context) -> list[str]:
            return await ctx.call(search, query=task.query)

        outcome = await run(body)
        assert isinstance(outcome, Success)
        assert outcome.data == ["q"]
        assert flaky.calls == 3
        assert sleep.delays == [0.1, 0.2]

    async def test_a_final_failure_raises_tool_call_failed_with_its_envelope(self) -> None:
        """A business failure is not retried; the caller can catch it and go on."""
        caught: list[ErrorEnvelope] = []
        calls = FailTimes(99, lambda: BusinessError("order shipped"))

        @tool(idempotent=True, retry=fast_retry(attempts=3))
        async def cancel(order_id: str) -> str:
            """Cancel an order."""
            calls()
            return "cancelled"

        async def body(task: Task, ctx: Context) -> str:
            try:
                return await ctx.call(cancel, order_id="A1")
            except ToolCallFailed as failed:
                caught.append(failed.envelope)
                return "went on"

        outcome = await run(body)
        assert isinstance(outcome, Success)
        assert outcome.data == "went on"
        assert calls.calls == 1
        assert [envelope.error_category for envelope in caught] == [ErrorCategory.BUSINESS]

    async def test_an_uncaught_tool_failure_is_the_subagents_outcome(self) -> None:
        """Let ToolCallFailed propagate and its envelope ends the subagent unchanged."""

        @tool(idempotent=True)
        async def cancel(order_id: str) -> str:
            """Cancel an order."""
            raise BusinessError("order shipped", user_message="Already shipped.")

        async def body(task: Task, ctx: Context) -> str:
            return await ctx.call(cancel, order_id="A1")

        outcome = await run(body, attempts=3)
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.source == "agent/cancel"
        assert outcome.user_message == "Already shipped."
        assert outcome.attempts == 1

    async def test_a_non_idempotent_call_that_may_have_acted_is_not_repeated(self) -> None:
        """A timeout may have charged the card: no retry, and no identical call later in the run."""
        charges: list[int] = []

        @tool(retry=fast_retry(attempts=3))
        async def charge(amount: int) -> str:
            """Charge a card."""
            charges.append(amount)
            raise TimeoutError("read timed out")

        envelopes: list[ErrorEnvelope] = []

        async def body(task: Task, ctx: Context) -> None:
            for _ in range(2):
                try:
                    await ctx.call(charge, amount=10)
                except ToolCallFailed as failed:
                    envelopes.append(failed.envelope)

        await run(body)
        assert charges == [10]
        first, second = envelopes
        assert not first.is_retryable
        assert second.policy is not None
        assert second.policy.action == "forbid_retry"
        assert second.attempts == 0


# What a body uses of its `Context`; the engine's own steps are not on it.
BODY_FACE = {
    "attempt",
    "budget",
    "call",
    "call_model",
    "deadline",
    "log",
    "partials",
    "record_partial",
    "remaining",
    "run_id",
    "save_partials",
    "scope",
    "state",
    "subagent",
    "task",
    "task_id",
}
ENGINE_STEPS = {
    "adopt",
    "annotate",
    "ask_counts",
    "deposit_for_call",
    "escalations",
    "leave_out",
    "misuse",
    "pending_decision",
    "restore_partials",
    "retries",
    "rulings",
    "start_attempt",
}


class TestContextFace:
    async def test_a_body_sees_what_it_uses_and_none_of_the_engines_steps(self) -> None:
        """The public names of a body's `ctx` are the body's tools, none of the engine's."""
        seen: set[str] = set()

        async def body(task: Task, ctx: Context) -> str:
            seen.update(name for name in dir(ctx) if not name.startswith("_"))
            return "ok"

        assert isinstance(await run(body), Success)
        assert seen == BODY_FACE
        assert not seen & ENGINE_STEPS

    def test_the_context_module_exports_no_engine_helper(self) -> None:
        """`agentmesh.context.__all__` names `Context` and the type of `ctx.partials`, no
        helper of the engine (`apply_verdict`, `merge_partials`)."""
        import agentmesh.context

        assert agentmesh.context.__all__ == ["Context", "PartialRecorder"]
