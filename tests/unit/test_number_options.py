"""Every number option refuses NaN, senseless infinities, bools and non-numbers by name.

`nan <= 0` is false, so a comparison alone lets NaN through (`Coordinator(timeout=nan)`
made every task a gap), and `"5" <= 0` raises a bare TypeError: each option is checked
by the one shared check and a `UsageError` names it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any, cast

import pytest

from agentmesh import (
    CircuitBreaker,
    Coordinator,
    RetryBudget,
    RetryPolicy,
    Subagent,
    Task,
    UsageError,
    subagent,
    tool,
)
from agentmesh.checkpoints import MemoryStore, PostgresStore, SQLiteStore
from agentmesh.context import Context
from agentmesh.coordinator import LLMRewriter, LLMSynthesizer
from agentmesh.executors import RayExecutor
from agentmesh.mcp import MCPServer
from agentmesh.models import AnthropicModel, ModelPrice, ScriptedModel, UsageLimits
from agentmesh.subagents import LLMSubagent
from agentmesh.throttle import Limiter


@subagent(name="echo")
async def echo(task: Task, ctx: Context) -> str:
    return task.query


async def _search(query: str) -> list[str]:
    return []


def _server(**options: Any) -> MCPServer:
    return MCPServer.stdio("true", name="probe", **options)


def _price(field: str) -> Callable[[Any], object]:
    prices: dict[str, Any] = {"input": 1, "output": 1, "cache_write": 1, "cache_read": 1}
    return lambda value: ModelPrice(**(prices | {field: value}))


def _stream(value: Any) -> object:
    return Coordinator([echo]).stream(["a"], buffer=value)


def _resume_stream(value: Any) -> object:
    return Coordinator([echo], store=MemoryStore()).resume_stream("run-1", buffer=value)


# An int option, a finite number, or a number for which infinity means "no limit".
INT, FINITE, INF_OK = "int", "finite", "inf_ok"

OPTIONS: list[tuple[str, str, Callable[[Any], object]]] = [
    ("Coordinator(max_concurrency=)", INT, lambda v: Coordinator([echo], max_concurrency=v)),
    ("Coordinator(timeout=)", FINITE, lambda v: Coordinator([echo], timeout=v)),
    ("Coordinator(max_rounds=)", INT, lambda v: Coordinator([echo], max_rounds=v)),
    ("Coordinator(min_coverage=)", FINITE, lambda v: Coordinator([echo], min_coverage=v)),
    ("Coordinator.stream(buffer=)", INT, _stream),
    ("Coordinator.resume_stream(buffer=)", INT, _resume_stream),
    ("rate_limit=(n, per_seconds): n", INT, lambda v: subagent(rate_limit=(v, 1.0))(echo.fn)),
    (
        "rate_limit=(n, per_seconds): per_seconds",
        FINITE,
        lambda v: subagent(rate_limit=(1, v))(echo.fn),
    ),
    ("max_concurrency=", INT, lambda v: subagent(max_concurrency=v)(echo.fn)),
    ("tool _search: max_concurrency=", INT, lambda v: tool(max_concurrency=v)(_search)),
    ("tool _search: rate_limit=", FINITE, lambda v: tool(rate_limit=(2, v))(_search)),
    ("Limiter", FINITE, lambda v: Limiter(name="Limiter", rate_limit=(2, v))),
    ("max_turns=", INT, lambda v: LLMSubagent("a", ScriptedModel([]), max_turns=v)),
    ("max_tokens=", INT, lambda v: LLMSubagent("a", ScriptedModel([]), max_tokens=v)),
    ("output_retries=", INT, lambda v: LLMSubagent("a", ScriptedModel([]), output_retries=v)),
    ("RetryPolicy(max_attempts=)", INT, lambda v: RetryPolicy(max_attempts=v)),
    ("RetryPolicy(initial_delay=)", FINITE, lambda v: RetryPolicy(initial_delay=v)),
    ("RetryPolicy(max_delay=)", FINITE, lambda v: RetryPolicy(max_delay=v)),
    ("RetryPolicy(multiplier=)", FINITE, lambda v: RetryPolicy(multiplier=v)),
    ("RetryPolicy(timeout=)", FINITE, lambda v: RetryPolicy(timeout=v)),
    ("RetryBudget(ratio=)", FINITE, lambda v: RetryBudget(ratio=v)),
    ("RetryBudget(reserve=)", INF_OK, lambda v: RetryBudget(reserve=v)),
    (
        "CircuitBreaker(failure_threshold=)",
        INT,
        lambda v: CircuitBreaker(failure_threshold=v),
    ),
    ("CircuitBreaker(reset_after=)", FINITE, lambda v: CircuitBreaker(reset_after=v)),
    ("MCPServer(timeout=)", FINITE, lambda v: _server(timeout=v)),
    ("MCPServer(connect_timeout=)", FINITE, lambda v: _server(connect_timeout=v)),
    ("MCPServer.tool(timeout=)", FINITE, lambda v: _server().tool("t", timeout=v)),
    ("AnthropicModel(timeout=)", FINITE, lambda v: AnthropicModel("m", timeout=v)),
    ("UsageLimits(max_input_tokens=)", INT, lambda v: UsageLimits(max_input_tokens=v)),
    ("UsageLimits(max_output_tokens=)", INT, lambda v: UsageLimits(max_output_tokens=v)),
    ("UsageLimits(max_total_tokens=)", INT, lambda v: UsageLimits(max_total_tokens=v)),
    ("UsageLimits(max_model_calls=)", INT, lambda v: UsageLimits(max_model_calls=v)),
    ("UsageLimits(max_cost_usd=)", FINITE, lambda v: UsageLimits(max_cost_usd=v)),
    ("ModelPrice(input=)", FINITE, _price("input")),
    ("ModelPrice(cache_read=)", FINITE, _price("cache_read")),
    ("LLMRewriter(max_tokens=)", INT, lambda v: LLMRewriter(ScriptedModel([]), max_tokens=v)),
    (
        "LLMSynthesizer(max_tokens=)",
        INT,
        lambda v: LLMSynthesizer(ScriptedModel([]), max_tokens=v),
    ),
    ("SQLiteStore(busy_timeout=)", FINITE, lambda v: SQLiteStore(":memory:", busy_timeout=v)),
    (
        "PostgresStore(max_connections=)",
        INT,
        lambda v: PostgresStore("", max_connections=v),
    ),
    ("PostgresStore(timeout=)", FINITE, lambda v: PostgresStore("", timeout=v)),
    ("RayExecutor(num_cpus=)", INT, lambda v: RayExecutor(num_cpus=v)),
    ("RayExecutor(cancel_grace=)", FINITE, lambda v: RayExecutor(cancel_grace=v)),
    ("RayExecutor(budget_batch=)", INT, lambda v: RayExecutor(budget_batch=v)),
    ("RayExecutor(state_refresh=)", FINITE, lambda v: RayExecutor(state_refresh=v)),
]

NOT_NUMBERS: list[object] = [math.nan, -math.inf, True, "5", Decimal("1"), [1]]
BAD: dict[str, list[object]] = {
    INT: [*NOT_NUMBERS, math.inf, 1.5, 2.0],
    FINITE: [*NOT_NUMBERS, math.inf],
    INF_OK: NOT_NUMBERS,
}
CASES = [
    pytest.param(make, option, value, id=f"{option}-{value!r}")
    for option, kind, make in OPTIONS
    for value in BAD[kind]
]


class TestEveryNumberOption:
    @pytest.mark.parametrize(("make", "option", "value"), CASES)
    def test_a_value_that_is_no_usable_number_is_refused_by_name(
        self, make: Callable[[object], object], option: str, value: object
    ) -> None:
        """NaN, a senseless infinity, a bool or a non-number: a UsageError naming the option."""
        with pytest.raises(UsageError, match=r"must be .*, got ") as refused:
            make(value)
        assert option in str(refused.value)

    @pytest.mark.parametrize(("option", "kind", "make"), OPTIONS, ids=[o[0] for o in OPTIONS])
    def test_an_ordinary_number_is_still_accepted(
        self, option: str, kind: str, make: Callable[[object], object]
    ) -> None:
        """The check refuses what is unusable only: 1 is a good value of every option."""
        make(1)

    def test_fractions_and_ints_are_numbers_too(self) -> None:
        """Any real number is accepted where a float is asked for, as a float."""
        half: Any = Fraction(1, 2)
        assert Coordinator([echo], timeout=half).timeout == 0.5
        assert RetryBudget(reserve=math.inf).reserve == math.inf


class TestTheSymptoms:
    def test_a_nan_timeout_is_refused_before_any_task_runs(self) -> None:
        """`Coordinator(timeout=nan)` used to make every task a silent gap."""
        with pytest.raises(UsageError, match=r"Coordinator\(timeout=\) .*nan"):
            Coordinator([echo], timeout=math.nan)

    def test_a_string_timeout_names_the_option_not_a_type_error(self) -> None:
        """`timeout="5"` used to raise a bare TypeError from a comparison."""
        with pytest.raises(UsageError, match=r"Coordinator\(timeout=\) .*'5'"):
            Coordinator([echo], timeout=cast(Any, "5"))

    async def test_a_subagent_run_refuses_a_nan_timeout(self) -> None:
        """`Subagent.run(timeout=nan)` is refused by name instead of running with no deadline."""
        with pytest.raises(UsageError, match=r"echo\.run\(timeout=\)"):
            await echo.run("q", timeout=math.nan)

    def test_a_subclass_is_checked_like_the_decorator(self) -> None:
        """A Subagent subclass takes the same options through the same check."""

        class Plain(Subagent):
            async def handle(self, task: Task, ctx: Context) -> str:
                return task.query

        with pytest.raises(UsageError, match="max_concurrency="):
            Plain(max_concurrency=cast(Any, math.nan))
