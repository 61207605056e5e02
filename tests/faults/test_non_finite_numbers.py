"""NaN and infinities never reach a tool or a policy unless the tool asks for them.

`float("nan") > 500` is false, so a rule such as `amount > 500` would let one through:
number inputs refuse them by default, at every depth, from code and from a model alike.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any

import pydantic
import pytest
from pydantic import AllowInfNan, BaseModel, ConfigDict, Field

from agentmesh import (
    Context,
    ErrorCategory,
    ErrorEnvelope,
    Task,
    subagent,
    tool,
)
from agentmesh.models import ModelResponse, ScriptedModel, ToolUseBlock
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use
from agentmesh.subagents import LLMSubagent
from tests.retrying import fast_retry

NON_FINITE = ["NaN", "nan", "-nan", "inf", "-Infinity", "Infinity", float("nan"), float("-inf")]


class Line(BaseModel):
    amount: float
    fees: dict[str, float] = {}


class Order(BaseModel):
    lines: list[Line]


class Reading(BaseModel):
    model_config = ConfigDict(allow_inf_nan=True)

    value: float


paid: list[dict[str, Any]] = []


@tool(impact="financial")
async def pay(
    amount: float,
    extras: list[float] | None = None,
    limits: dict[str, float] | None = None,
    exact: Decimal | None = None,
    order: Order | None = None,
) -> str:
    """Pay an amount."""
    paid.append({"amount": amount, "extras": extras, "limits": limits, "order": order})
    return "paid"


@tool(idempotent=True)
async def measure(
    level: Annotated[float, AllowInfNan()],
    ratio: Annotated[float, Field(allow_inf_nan=True)] = 0.0,
    reading: Reading | None = None,
) -> float:
    """Record a measurement where NaN means "no signal"."""
    return level


@pytest.fixture(autouse=True)
def _no_payments() -> None:
    paid.clear()


seen_by_policy: list[float] = []


@pre_tool_use(tool="pay")
def no_big_payments(event: ToolCallEvent) -> Ruling | None:
    seen_by_policy.append(event.arguments["amount"])
    if event.arguments["amount"] > 500:
        return Ruling.deny("payments over 500 need approval")
    return None


async def call_pay(**arguments: Any) -> ErrorEnvelope:
    """The envelope of `ctx.call(pay, **arguments)` under the payment policy."""
    seen_by_policy.clear()

    @subagent(name="payer", retry=fast_retry(attempts=1), policies=[no_big_payments])
    async def payer(task: Task, ctx: Context) -> str:
        return await ctx.call(pay, **arguments)

    outcome = await payer.run("pay the invoice")
    assert isinstance(outcome, ErrorEnvelope), outcome
    return outcome


class TestFloatParameters:
    @pytest.mark.parametrize("amount", NON_FINITE)
    async def test_non_finite_amount_is_refused_before_policies_and_the_tool(
        self, amount: object
    ) -> None:
        """NaN and infinities give a validation envelope naming the field; nothing runs."""
        envelope = await call_pay(amount=amount)
        assert envelope.error_category is ErrorCategory.VALIDATION
        assert envelope.error_type == "invalid_input"
        assert envelope.is_retryable is False
        assert "amount" in envelope.message
        assert paid == []
        assert seen_by_policy == []

    async def test_finite_amounts_still_reach_the_policy_and_the_tool(self) -> None:
        """A finite number is validated and ruled on as before."""
        denied = await call_pay(amount="900")
        assert denied.error_type == "policy_blocked"
        assert seen_by_policy == [900.0]
        assert paid == []

    def test_decimal_parameters_refuse_them_too(self) -> None:
        """A Decimal parameter refuses "NaN" and "Infinity" by name."""
        for value in ("NaN", "Infinity", "-inf"):
            with pytest.raises(pydantic.ValidationError, match="exact"):
                pay.validate({"amount": 1, "exact": value})


class TestNestedNumbers:
    @pytest.mark.parametrize(
        ("arguments", "field"),
        [
            ({"extras": [1.0, "nan"]}, "extras.1"),
            ({"limits": {"daily": "inf"}}, "limits.daily"),
            ({"order": {"lines": [{"amount": "-Infinity"}]}}, "order.lines.0.amount"),
            (
                {"order": {"lines": [{"amount": 1, "fees": {"vat": "NaN"}}]}},
                "order.lines.0.fees.vat",
            ),
        ],
    )
    async def test_numbers_in_containers_and_models_are_refused_by_path(
        self, arguments: dict[str, Any], field: str
    ) -> None:
        """Lists, dicts and nested models are checked too; the envelope names the path."""
        envelope = await call_pay(amount=1, **arguments)
        assert envelope.error_category is ErrorCategory.VALIDATION
        assert field in envelope.message
        assert paid == []


class TestOptingIn:
    def test_a_parameter_marked_allow_inf_nan_accepts_them(self) -> None:
        """`AllowInfNan()` or `Field(allow_inf_nan=True)` on a parameter lets NaN through."""
        validated = measure.validate({"level": "nan", "ratio": "inf"})
        assert validated["level"] != validated["level"]
        assert validated["ratio"] == float("inf")

    def test_a_nested_model_that_allows_them_decides_for_itself(self) -> None:
        """A model with `allow_inf_nan=True` in its own config keeps its NaN."""
        validated = measure.validate({"level": 0, "reading": {"value": "-inf"}})
        assert validated["reading"].value == float("-inf")


def tool_call(name: str, arguments: dict[str, Any]) -> ModelResponse:
    return ModelResponse(
        content=(ToolUseBlock(id="t1", name=name, input=arguments),), stop_reason="tool_use"
    )


class TestFromAModel:
    async def test_a_model_asking_to_pay_nan_gets_a_validation_error_back(self) -> None:
        """An LLMSubagent's tool input goes through the same check: an is_error result."""
        model = ScriptedModel(
            [tool_call("pay", {"amount": "NaN"}), ModelResponse.of_text("could not pay")]
        )
        agent = LLMSubagent(
            "payer", model, tools=[pay], policies=[no_big_payments], retry=fast_retry(attempts=1)
        )
        seen_by_policy.clear()
        await agent.run("pay it")
        [result] = [
            block
            for block in model.requests[1].messages[-1]["content"]
            if block["type"] == "tool_result"
        ]
        assert result["is_error"] is True
        envelope = ErrorEnvelope.model_validate_json(result["content"])
        assert envelope.error_category is ErrorCategory.VALIDATION
        assert "amount" in envelope.message
        assert paid == []
        assert seen_by_policy == []


class TestDirectValidation:
    def test_validate_raises_pydantic_validation_error_for_nested_nan(self) -> None:
        """`Tool.validate` refuses a nested NaN with the same error type as any bad input."""
        with pytest.raises(pydantic.ValidationError, match=r"order\.lines\.0\.amount"):
            pay.validate({"amount": 1, "order": {"lines": [{"amount": float("nan")}]}})


@pydantic.dataclasses.dataclass
class Point:
    """A pydantic dataclass: it has a config of its own, silent on allow_inf_nan."""

    x: float


@tool(idempotent=True)
async def plot(point: Point) -> float:
    return point.x


class TestPydanticDataclasses:
    def test_a_pydantic_dataclass_parameter_refuses_nan_too(self) -> None:
        """A number inside a pydantic dataclass is refused like one inside a model."""
        with pytest.raises(pydantic.ValidationError) as refused:
            plot.validate({"point": {"x": "nan"}})
        assert "point.x" in str(refused.value)
        assert plot.validate({"point": {"x": 1.5}})["point"].x == 1.5
