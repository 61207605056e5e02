"""Circuit breakers: fail fast while a source is down, probe it, close on success."""

from __future__ import annotations

import asyncio

import pytest

from agentmesh import (
    BreakerState,
    CircuitBreaker,
    Context,
    ErrorCategory,
    ErrorEnvelope,
    InvalidInput,
    PermissionDenied,
    RetryPolicy,
    Success,
    Task,
    UsageError,
    subagent,
    tool,
)
from agentmesh.testing import RecordingSleep
from tests.retrying import fast_retry


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Source:
    """A flaky service: `down` decides whether a call fails; `calls` counts real calls."""

    def __init__(self) -> None:
        self.down = True
        self.calls = 0


def setup(threshold: int = 3) -> tuple[FakeClock, Source, CircuitBreaker, object]:
    clock = FakeClock()
    source = Source()
    breaker = CircuitBreaker(failure_threshold=threshold, reset_after=30, clock=clock)

    @tool(idempotent=True, breaker=breaker)
    async def fetch(query: str) -> str:
        source.calls += 1
        if source.down:
            raise ConnectionError("service down")
        return f"result for {query}"

    @subagent(retry=RetryPolicy.never())
    async def agent(task: Task, ctx: Context) -> str:
        return await ctx.call(fetch, query=task.query)

    return clock, source, breaker, agent


class TestCircuitBreaker:
    async def test_opens_after_consecutive_transient_failures_and_fails_fast(self) -> None:
        """While open, nothing reaches the source; the envelope says when it will probe."""
        clock, source, breaker, agent = setup(threshold=3)
        for _ in range(3):
            await agent.run("q")  # type: ignore[attr-defined]
        assert breaker.state is BreakerState.OPEN
        assert source.calls == 3
        clock.now += 10
        outcome = await agent.run("q")  # type: ignore[attr-defined]
        assert source.calls == 3
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.TRANSIENT
        assert outcome.error_type == "unavailable"
        assert "circuit breaker for fetch is open" in outcome.message
        assert outcome.retry_after == pytest.approx(20)

    async def test_probes_once_after_the_cool_down_and_closes_on_success(self) -> None:
        """Half-open lets exactly one call through; its success closes the breaker."""
        clock = FakeClock()
        breaker = CircuitBreaker(failure_threshold=2, reset_after=30, clock=clock)
        release = asyncio.Event()
        calls = 0

        @tool(idempotent=True, breaker=breaker)
        async def fetch(query: str) -> str:
            nonlocal calls
            calls += 1
            if calls <= 2:
                raise ConnectionError("down")
            await release.wait()  # the probe is in flight while the others arrive
            return query

        @subagent(retry=RetryPolicy.never())
        async def agent(task: Task, ctx: Context) -> str:
            return await ctx.call(fetch, query=task.query)

        for _ in range(2):
            await agent.run("q")
        clock.now += 30
        assert breaker.state is BreakerState.HALF_OPEN
        probe = asyncio.create_task(agent.run("probe"))
        await asyncio.sleep(0.01)
        others = await asyncio.gather(*(agent.run(str(i)) for i in range(4)))
        assert all(isinstance(o, ErrorEnvelope) and o.error_type == "unavailable" for o in others)
        release.set()
        assert isinstance(await probe, Success)
        assert calls == 3
        assert breaker.state is BreakerState.CLOSED
        assert isinstance(await agent.run("after"), Success)
        assert calls == 4

    async def test_a_failed_probe_opens_it_again_for_a_full_cool_down(self) -> None:
        """The probe's failure restarts the wait."""
        clock, source, breaker, agent = setup(threshold=2)
        for _ in range(2):
            await agent.run("q")  # type: ignore[attr-defined]
        clock.now += 30
        await agent.run("probe")  # type: ignore[attr-defined]
        assert source.calls == 3
        assert breaker.state is BreakerState.OPEN
        assert breaker.probe_in() == pytest.approx(30)

    @pytest.mark.parametrize(
        "error", [InvalidInput("bad query"), PermissionDenied("no"), KeyError("bug")]
    )
    async def test_only_transient_failures_trip_it(self, error: Exception) -> None:
        """Bad input or a refusal says nothing about the source's health."""
        breaker = CircuitBreaker(failure_threshold=1, reset_after=30)

        @tool(idempotent=True, breaker=breaker)
        async def fetch() -> None:
            raise error

        @subagent
        async def agent(task: Task, ctx: Context) -> None:
            await ctx.call(fetch)

        for _ in range(3):
            await agent.run("q")
        assert breaker.state is BreakerState.CLOSED

    async def test_the_local_retry_loop_does_not_wait_out_a_long_cool_down(self) -> None:
        """An open breaker probing in 30 s beyond max_delay: the call gives up at once."""
        sleep = RecordingSleep()
        clock = FakeClock()
        breaker = CircuitBreaker(failure_threshold=1, reset_after=30, clock=clock)
        calls = 0

        @tool(idempotent=True, breaker=breaker)
        async def fetch() -> None:
            nonlocal calls
            calls += 1
            raise TimeoutError("slow")

        @subagent(retry=fast_retry(sleep, attempts=5, max_delay=2))
        async def agent(task: Task, ctx: Context) -> None:
            await ctx.call(fetch)

        outcome = await agent.run("q")
        assert isinstance(outcome, ErrorEnvelope)
        assert calls == 1
        assert len(sleep.delays) == 1  # one backoff, then the breaker's answer ends it
        assert outcome.retry_after == pytest.approx(30)

    async def test_a_subagent_can_have_its_own_breaker(self) -> None:
        """The same rules for a subagent that keeps timing out."""
        breaker = CircuitBreaker(failure_threshold=2, reset_after=60)
        runs = 0

        @subagent(name="web", breaker=breaker, retry=RetryPolicy.never())
        async def web(task: Task, ctx: Context) -> None:
            nonlocal runs
            runs += 1
            raise TimeoutError("t")

        for _ in range(4):
            await web.run("q")
        assert runs == 2
        assert breaker.name == "web"

    def test_bad_settings_name_the_argument(self) -> None:
        """Misconfiguration fails at definition."""
        with pytest.raises(UsageError, match="failure_threshold"):
            CircuitBreaker(failure_threshold=0)
        with pytest.raises(UsageError, match="reset_after"):
            CircuitBreaker(reset_after=0)
