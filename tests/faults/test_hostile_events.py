"""`parse_event` reads events from outside (a file, a socket): any input, two errors.

Its docstring promises a `UsageError` (not JSON, too deep, not an event) or pydantic's
`ValidationError` (the fields do not fit); never a `TypeError` or `RecursionError` from
inside. Hypothesis feeds it arbitrary JSON-ish values, text and bytes, and real events
with one field replaced, removed or added.
"""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmesh import (
    Context,
    Coordinator,
    PermissionDenied,
    RetryPolicy,
    Task,
    TransientError,
    UsageError,
    subagent,
    tool,
)
from agentmesh.events import Event, parse_event
from agentmesh.models import ModelResponse, ScriptedModel
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use
from agentmesh.subagents import LLMSubagent

DOCUMENTED = (UsageError, pydantic.ValidationError)

PROPERTY = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)


@functools.cache
def sample_events() -> tuple[dict[str, Any], ...]:
    """The JSON form of one event of every kind, from a real run."""

    @tool
    async def refund(order: str) -> str:
        return order

    @pre_tool_use(tool="refund")
    def never(event: ToolCallEvent) -> Ruling:
        return Ruling.deny("refunds are not automated")

    @subagent(name="flaky", retry=RetryPolicy.never())
    async def flaky(task: Task, ctx: Context) -> list[str]:
        ctx.record_partial(["page 1"], completed="page1", pending="page2")
        raise TransientError("page 2 timed out", error_type="timeout")

    @subagent(name="refunds", retry=RetryPolicy.never(), policies=[never])
    async def refunds(task: Task, ctx: Context) -> str:
        await ctx.call(refund, order="o-1")
        raise PermissionDenied("unreachable")

    model = ScriptedModel([ModelResponse.of_text("Paris")])
    writer = LLMSubagent("writer", model, retry=RetryPolicy.never())
    coordinator = Coordinator([flaky, refunds, writer])
    tasks = [
        Task(query="q", subagent="flaky"),
        Task(query="r", subagent="refunds"),
        Task(query="w", subagent="writer"),
    ]

    async def run() -> list[Event]:
        async with coordinator.stream(tasks) as stream:
            return [event async for event in stream]

    events = asyncio.run(run())
    kinds = {type(event).__name__: event.to_dict() for event in events}
    assert len(kinds) == 10, f"the sample run must show every kind of event, got {sorted(kinds)}"
    return tuple(kinds.values())


@pytest.fixture(autouse=True)
def _samples_first() -> None:
    """The sample run happens before Hypothesis draws: its jitter uses `random`."""
    sample_events()


@st.composite
def mutated_events(draw: st.DrawFn) -> dict[str, Any]:
    """A real event with one value somewhere in it replaced, removed, or a key added."""
    event: dict[str, Any] = json.loads(json.dumps(draw(st.sampled_from(sample_events()))))
    node: Any = event
    # Walk down a random path of dicts and lists, then change something there.
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            break
        key = draw(st.sampled_from(keys))
        child = node[key]
        if isinstance(child, dict | list) and child and draw(st.booleans()):
            node = child
            continue
        how = draw(st.sampled_from(["replace", "remove", "add"]))
        if how == "replace":
            node[key] = draw(JSON_VALUES)
        elif how == "remove":
            del node[key]
        elif isinstance(node, dict):
            node[draw(st.text(max_size=10))] = draw(JSON_VALUES)
        else:
            node.append(draw(JSON_VALUES))
        break
    return event


def parses_or_refuses(data: Any) -> None:
    """`parse_event(data)` gives an event or raises one of the documented errors."""
    try:
        event = parse_event(data)
    except DOCUMENTED:
        return
    assert event.to_dict()["event"] == type(event).__name__


ANY_INPUT = (
    JSON_VALUES
    | st.dictionaries(st.just("event"), JSON_VALUES, min_size=1)
    | st.text()
    | st.binary()
    | mutated_events()
)


class TestParseEventOnHostileInput:
    @PROPERTY
    @given(data=ANY_INPUT)
    def test_any_value_is_an_event_or_a_documented_error(self, data: Any) -> None:
        """Given as data, as JSON text or as bytes: an event, a UsageError or a ValidationError."""
        parses_or_refuses(data)
        try:
            text = json.dumps(data)
        except (TypeError, ValueError):
            return  # bytes are no JSON value; they were given as they are above
        parses_or_refuses(text)
        parses_or_refuses(text.encode())

    @PROPERTY
    @given(event=mutated_events())
    def test_a_damaged_event_is_an_event_or_a_documented_error(self, event: dict[str, Any]) -> None:
        """Every kind of event, with one field changed anywhere inside: never a traceback."""
        parses_or_refuses(event)
        parses_or_refuses(json.dumps(event))

    def test_every_sample_event_reads_back(self) -> None:
        """The samples the properties damage are real events: they read back unchanged."""
        for data in sample_events():
            assert parse_event(json.dumps(data)).to_dict() == data

    @pytest.mark.parametrize(
        ("data", "error"),
        [
            ('{"event": []}', UsageError),
            ('{"event": {"a": 1}}', UsageError),
            ("[" * 50_000 + "]" * 50_000, UsageError),
            ('{"event": "RunStarted", "tasks": ' + "[" * 50_000 + "]" * 50_000 + "}", UsageError),
            (b"\xff\xfe\x00", UsageError),
            ('{"event": "RunStarted"', UsageError),
        ],
    )
    def test_the_reported_inputs_are_usage_errors(self, data: str | bytes, error: type) -> None:
        """An unhashable event name, 50,000 nested brackets or broken JSON: a UsageError."""
        with pytest.raises(error, match=r"parse_event\(data=\)"):
            parse_event(data)

    @pytest.mark.parametrize(
        "decision",
        [
            {"type": "Escalate", "reason": "x", "extra": 1},
            {"type": "Escalate", "reason": 5},
            {"type": "TryAlternative"},
            {"type": ["Accept"]},
            {"type": "RetryWithFeedback", "task": []},
        ],
    )
    def test_a_wrong_routing_decision_is_a_validation_error(self, decision: Any) -> None:
        """An extra key, a wrong type or a missing field in a decision: a ValidationError."""
        routed = next(e for e in sample_events() if e["event"] == "Routed")
        with pytest.raises(pydantic.ValidationError, match="decision"):
            parse_event({**routed, "decision": decision})
