"""`@tool`: schemas from type hints, validation before the body, clear misuse errors."""

from __future__ import annotations

from typing import Literal

import pydantic
import pytest

from agentmesh import Tool, UsageError, tool


@tool(idempotent=True)
async def search_docs(
    query: str, limit: int = 5, kind: Literal["api", "guide"] = "api"
) -> list[str]:
    """Search the documentation."""
    return [query] * limit


class TestSchema:
    def test_input_schema_comes_from_type_hints(self) -> None:
        """Required parameters, defaults and enums appear in the JSON schema."""
        schema = search_docs.input_schema
        assert schema["type"] == "object"
        assert schema["required"] == ["query"]
        assert schema["properties"]["query"]["type"] == "string"
        assert schema["properties"]["limit"] == {"default": 5, "title": "Limit", "type": "integer"}
        assert schema["properties"]["kind"]["enum"] == ["api", "guide"]

    def test_anthropic_tool_definition(self) -> None:
        """The Messages API definition carries the name, the docstring and the schema."""
        definition = search_docs.to_anthropic_tool()
        assert definition["name"] == "search_docs"
        assert definition["description"] == "Search the documentation."
        assert definition["input_schema"] == search_docs.input_schema

    def test_flags(self) -> None:
        """idempotent and impact are kept on the tool."""
        assert search_docs.idempotent is True
        assert search_docs.impact is None
        assert isinstance(search_docs, Tool)


class TestValidation:
    def test_coerces_and_fills_defaults(self) -> None:
        """Valid input comes back typed, with defaults."""
        assert search_docs.validate({"query": "x", "limit": "3"}) == {
            "query": "x",
            "limit": 3,
            "kind": "api",
        }

    @pytest.mark.parametrize(
        ("arguments", "field"),
        [
            ({}, "query"),
            ({"query": "x", "limit": "many"}, "limit"),
            ({"query": "x", "kind": "video"}, "kind"),
            ({"query": "x", "colour": "red"}, "colour"),
        ],
    )
    def test_bad_input_names_the_field(self, arguments: dict[str, object], field: str) -> None:
        """Missing, mistyped, out-of-enum and unexpected fields are all refused by name."""
        with pytest.raises(pydantic.ValidationError, match=field):
            search_docs.validate(arguments)

    async def test_direct_call_runs_the_function(self) -> None:
        """Calling the tool object runs the body as written, for the tool's own tests."""
        assert await search_docs("x", limit=2) == ["x", "x"]


class TestMisuse:
    def test_sync_functions_are_refused(self) -> None:
        """A blocking tool would stall every agent: the error says how to wrap it."""
        with pytest.raises(UsageError, match=r"async def.*to_thread"):

            @tool
            def blocking(query: str) -> str:  # type: ignore[arg-type]
                return query

    def test_var_kwargs_are_refused(self) -> None:
        """A schema cannot describe **kwargs."""
        with pytest.raises(UsageError, match="kwargs"):

            @tool
            async def loose(**kwargs: str) -> None:
                return None

    def test_unknown_impact_is_refused(self) -> None:
        """A typo in impact would silently escape impact policies."""
        with pytest.raises(UsageError, match="impact"):

            @tool(impact="money")  # type: ignore[arg-type]
            async def pay(amount: int) -> None:
                return None
