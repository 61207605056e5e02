"""The tool options: one checked value, the same from `@tool` and `Tool`."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from agentmesh import CircuitBreaker, RetryPolicy, Tool, UsageError, tool
from agentmesh._tool_options import ToolKwargs
from agentmesh.tools import ToolOptions


async def lookup(query: str) -> str:
    """Look a thing up."""
    return query


class TestToolOptions:
    def test_decorator_and_class_keep_the_same_options(self) -> None:
        """`@tool(...)` and `Tool(fn, ...)` turn the same keywords into equal options."""
        retry, breaker = RetryPolicy(max_attempts=2), CircuitBreaker()
        given: dict[str, Any] = {
            "name": "find",
            "description": "Find it.",
            "idempotent": True,
            "impact": "financial",
            "retry": retry,
            "rate_limit": (5, 1),
            "max_concurrency": 2,
            "breaker": breaker,
        }
        decorated, made = tool(**given)(lookup), Tool(lookup, **given)
        assert decorated.options == made.options == ToolOptions(**given)
        assert (made.name, made.description, made.idempotent) == ("find", "Find it.", True)
        assert (made.impact, made.retry, made.limiter.max_concurrency) == ("financial", retry, 2)
        assert breaker.name == "find"  # an unnamed breaker takes its tool's name

    def test_defaults_come_from_the_function(self) -> None:
        """Without keywords the options are the defaults; name and docstring are the function's."""
        made = tool(lookup)
        assert made.options == ToolOptions()
        assert (made.name, made.description) == ("lookup", "Look a thing up.")
        assert made.idempotent is False
        assert made.limiter.is_unlimited

    @pytest.mark.parametrize(
        ("options", "named"),
        [
            ({"impact": "moral"}, "impact="),
            ({"retry": 3}, "retry="),
            ({"breaker": "open"}, "breaker="),
            ({"rate_limit": (0, 1)}, "rate_limit="),
            ({"max_concurrency": 0}, "max_concurrency="),
            ({"idempotnet": True}, "'idempotnet'"),
        ],
    )
    def test_misuse_names_the_argument(self, options: dict[str, Any], named: str) -> None:
        """A wrong or unknown option raises UsageError naming it, when the tool is made."""
        with pytest.raises(UsageError, match=named):
            tool(**options)(lookup)

    def test_keywords_and_fields_are_the_same_set(self) -> None:
        """Each option is a keyword of `@tool` and `Tool` and a field of the value, no more."""
        fields = {field.name for field in dataclasses.fields(ToolOptions)}
        assert set(ToolKwargs.__annotations__) == fields
