"""The outcome model: wire shape, schema, tool results."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import TypeAdapter

from agentmesh import ErrorCategory, ErrorEnvelope, Outcome, PartialResults, Success


def make_envelope(**overrides: Any) -> ErrorEnvelope:
    fields: dict[str, Any] = {
        "error_category": ErrorCategory.TRANSIENT,
        "error_type": "timeout",
        "is_retryable": True,
        "message": "upstream timeout after 30s",
        "attempted_query": "asyncio cancellation",
        "source": "docs",
        "attempts": 3,
    }
    fields.update(overrides)
    return ErrorEnvelope(**fields)


class TestErrorEnvelopeWire:
    def test_camel_case_json_round_trips_to_an_equal_envelope(self) -> None:
        """The JSON form uses the literature's camelCase keys and reads back unchanged."""
        envelope = make_envelope(
            partial_results=PartialResults(completed=("a",), pending=("b",), findings=({"x": 1},)),
            alternative_approaches=("narrow_query",),
            retry_after=2.5,
        )
        wire = envelope.to_dict()
        assert wire["isError"] is True
        assert wire["errorCategory"] == "transient"
        assert wire["attemptedQuery"] == "asyncio cancellation"
        assert wire["partialResults"] == {
            "completed": ["a"],
            "pending": ["b"],
            "findings": [{"x": 1}],
        }
        assert wire["alternativeApproaches"] == ["narrow_query"]
        assert wire["retryAfter"] == 2.5
        assert ErrorEnvelope.model_validate(json.loads(json.dumps(wire))) == envelope

    def test_absent_optional_fields_are_left_out(self) -> None:
        """An envelope without partial results says nothing about them, not an empty list."""
        wire = make_envelope().to_dict()
        assert "partialResults" not in wire
        assert "alternativeApproaches" not in wire
        assert "retryAfter" not in wire

    def test_schema_requires_exactly_the_always_present_fields(self) -> None:
        """partialResults and the other optional fields are not required by the schema."""
        schema = ErrorEnvelope.json_schema()
        assert set(schema["required"]) == {
            "isError",
            "errorCategory",
            "errorType",
            "isRetryable",
            "message",
            "attemptedQuery",
            "source",
            "attempts",
        }
        assert "partialResults" in schema["properties"]

    def test_error_category_is_an_enum_with_other(self) -> None:
        """errorCategory is a closed enum whose escape hatch is `other`."""
        assert {c.value for c in ErrorCategory} == {
            "transient",
            "validation",
            "business",
            "permission",
            "other",
        }
        with pytest.raises(ValueError, match="error_category"):
            make_envelope(error_category="flaky")

    def test_attempted_query_may_be_a_json_object(self) -> None:
        """A tool call is recorded as its name and arguments."""
        query = {"tool": "search", "arguments": {"q": "x", "limit": 5}}
        assert make_envelope(attempted_query=query).to_dict()["attemptedQuery"] == query

    def test_envelopes_are_frozen(self) -> None:
        """An outcome cannot be altered after the fact."""
        with pytest.raises(ValueError, match="frozen"):
            make_envelope().message = "changed"  # type: ignore[misc]


class TestToolResults:
    def test_error_becomes_an_is_error_tool_result_with_the_envelope(self) -> None:
        """The model sees is_error: true and the whole envelope as JSON."""
        block = make_envelope().to_tool_result("toolu_01")
        assert block["type"] == "tool_result"
        assert block["tool_use_id"] == "toolu_01"
        assert block["is_error"] is True
        assert json.loads(block["content"])["errorType"] == "timeout"

    @pytest.mark.parametrize("data", [[], {}, None, "", [{"id": 1}]])
    def test_success_has_no_is_error_even_when_empty(self, data: Any) -> None:
        """An empty result is an answer, not an error."""
        block = Success(data=data, source="db", attempted_query="q").to_tool_result("t1")
        assert "is_error" not in block
        assert json.loads(block["content"]) == data

    def test_mcp_shapes(self) -> None:
        """Both outcomes cross to MCP whole: isError and the outcome's JSON in structuredContent."""
        error = make_envelope().to_mcp_result()
        assert error["isError"] is True
        assert error["structuredContent"] == make_envelope().to_dict()
        assert "transient" in error["content"][0]["text"]
        success = Success(data={"orders": [1]}, source="db", attempted_query="q").to_mcp_result()
        assert success["isError"] is False
        assert success["structuredContent"]["data"] == {"orders": [1]}
        assert json.loads(success["content"][0]["text"]) == {"orders": [1]}
        empty = Success(data=[], source="db", attempted_query="q").to_mcp_result()
        assert empty["structuredContent"]["isEmpty"] is True
        assert "found nothing" in empty["content"][0]["text"]

    def test_served_text_is_the_text_block_as_it_is(self) -> None:
        """A string result is the MCP text block itself, not its JSON-escaped form."""
        text = 'line 1\nline 2 "q"'
        served = Success(data=text, source="db", attempted_query="q").to_mcp_result()
        assert served["content"][0]["text"] == text
        assert served["structuredContent"]["data"] == text


class TestSuccess:
    @pytest.mark.parametrize("data", [[], {}, None, ""])
    def test_empty_values_are_empty(self, data: Any) -> None:
        """[], {}, None and "" mean "searched, nothing found"."""
        assert Success(data=data, source="s", attempted_query="q").is_empty

    @pytest.mark.parametrize("data", [[0], {"a": None}, 0, False, "x"])
    def test_other_values_are_not_empty(self, data: Any) -> None:
        """Zero and False are answers, not emptiness."""
        assert not Success(data=data, source="s", attempted_query="q").is_empty

    def test_outcome_union_reads_both_kinds_from_json(self) -> None:
        """An Outcome read from JSON comes back as the right class."""
        adapter: TypeAdapter[Any] = TypeAdapter(Outcome)
        envelope = make_envelope()
        success = Success(data=[1], source="s", attempted_query="q")
        assert adapter.validate_python(envelope.to_dict()) == envelope
        read = adapter.validate_python(success.to_dict())
        assert isinstance(read, Success)
        assert read.data == [1]
