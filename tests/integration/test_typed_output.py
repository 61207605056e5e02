"""Typed output: LLMSubagent(output_type=...) through the real SDK against FakeMessagesAPI."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel

from agentmesh import Coordinator, ErrorCategory, ErrorEnvelope, Success, Task, UsageError
from agentmesh.models import AnthropicModel, ScriptedModel
from agentmesh.subagents import SUBMIT_RESULT, LLMSubagent
from agentmesh.testing import FakeMessagesAPI, RecordedRequest

API_KEY = "sk-ant-test-0123456789abcdef"
F = FakeMessagesAPI


class Author(BaseModel):
    name: str
    born: int


class Book(BaseModel):
    title: str
    year: int
    authors: list[Author]


@dataclasses.dataclass
class Point:
    x: float
    y: float


GOOD = {"title": "Dune", "year": 1965, "authors": [{"name": "Frank Herbert", "born": 1920}]}
BAD = {"title": "Dune", "year": "nineteen sixty-five", "authors": [{"name": "Frank Herbert"}]}


@pytest.fixture
async def model(fake_messages_api: FakeMessagesAPI) -> AsyncIterator[AnthropicModel]:
    async with AnthropicModel(
        "claude-test", api_key=API_KEY, base_url=fake_messages_api.base_url, timeout=5
    ) as claude:
        yield claude


def submit_tool(request: RecordedRequest) -> dict[str, Any]:
    [definition] = [t for t in request.body["tools"] if t["name"] == SUBMIT_RESULT]
    return definition  # type: ignore[no-any-return]


def last_tool_result(request: RecordedRequest) -> dict[str, Any]:
    [block] = [b for b in request.messages[-1]["content"] if b["type"] == "tool_result"]
    return block  # type: ignore[no-any-return]


class TestSchema:
    async def test_submit_result_takes_the_types_json_schema(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """`result` is described by the type's schema; nested models resolve through $defs."""
        fake_messages_api.enqueue(F.tool_use(SUBMIT_RESULT, {"result": GOOD}))
        await LLMSubagent("books", model, output_type=Book).run("find Dune")
        schema = submit_tool(fake_messages_api.requests[0])["input_schema"]
        assert schema["required"] == ["result"]
        result = schema["properties"]["result"]
        assert set(result["required"]) == {"title", "year", "authors"}
        assert result["properties"]["year"]["type"] == "integer"
        assert result["properties"]["authors"]["items"] == {"$ref": "#/$defs/Author"}
        assert set(schema["$defs"]["Author"]["properties"]) == {"name", "born"}

    async def test_without_an_output_type_result_is_any_json(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """The default schema puts no constraint on `result`, and its value comes back as sent."""
        fake_messages_api.enqueue(F.tool_use(SUBMIT_RESULT, {"result": BAD}))
        outcome = await LLMSubagent("books", model).run("find Dune")
        assert isinstance(outcome, Success)
        assert outcome.data == BAD
        result = submit_tool(fake_messages_api.requests[0])["input_schema"]["properties"]["result"]
        assert "type" not in result


class TestValidation:
    async def test_a_valid_submission_is_the_validated_instance(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """Success.data is a Book, its nested authors Author instances."""
        fake_messages_api.enqueue(F.tool_use(SUBMIT_RESULT, {"result": GOOD}))
        outcome = await LLMSubagent("books", model, output_type=Book).run("find Dune")
        assert isinstance(outcome, Success)
        assert outcome.data == Book.model_validate(GOOD)
        assert isinstance(outcome.data.authors[0], Author)

    async def test_an_invalid_submission_goes_back_with_the_errors_then_is_corrected(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """The model sees an is_error tool_result naming each invalid field, and may fix it."""
        fake_messages_api.enqueue(
            F.tool_use(SUBMIT_RESULT, {"result": BAD}, id="toolu_bad"),
            F.tool_use(SUBMIT_RESULT, {"result": GOOD}, id="toolu_good"),
        )
        outcome = await LLMSubagent("books", model, output_type=Book).run("find Dune")
        assert isinstance(outcome, Success)
        assert outcome.data.year == 1965
        result = last_tool_result(fake_messages_api.requests[1])
        assert result["tool_use_id"] == "toolu_bad"
        assert result["is_error"] is True
        envelope = json.loads(result["content"])
        assert envelope["errorCategory"] == "validation"
        assert envelope["errorType"] == "invalid_output"
        assert "result.year" in envelope["message"]
        assert "result.authors[0].born" in envelope["message"]

    async def test_after_output_retries_the_task_ends_in_a_validation_envelope(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """Two corrections by default; the third invalid result names the fields, not retried."""
        fake_messages_api.enqueue(*(F.tool_use(SUBMIT_RESULT, {"result": BAD}) for _ in range(3)))
        outcome = await LLMSubagent("books", model, output_type=Book).run("find Dune")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_category is ErrorCategory.VALIDATION
        assert outcome.error_type == "invalid_output"
        assert outcome.is_retryable is False
        assert "result.authors[0].born" in outcome.message
        assert "result.year" in outcome.message
        assert fake_messages_api.request_count == 3

    async def test_output_retries_zero_ends_at_the_first_invalid_result(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """No correction is asked for when output_retries=0."""
        fake_messages_api.enqueue(F.tool_use(SUBMIT_RESULT, {"result": BAD}))
        agent = LLMSubagent("books", model, output_type=Book, output_retries=0)
        outcome = await agent.run("find Dune")
        assert isinstance(outcome, ErrorEnvelope)
        assert outcome.error_type == "invalid_output"
        assert fake_messages_api.request_count == 1

    async def test_any_type_a_type_adapter_validates_works(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """A list of dataclasses comes back as dataclass instances."""
        fake_messages_api.enqueue(
            F.tool_use(SUBMIT_RESULT, {"result": [{"x": 1, "y": 2.5}, {"x": 0, "y": 0}]})
        )
        outcome = await LLMSubagent("geo", model, output_type=list[Point]).run("two points")
        assert isinstance(outcome, Success)
        assert outcome.data == [Point(1.0, 2.5), Point(0.0, 0.0)]

    async def test_a_plain_text_answer_that_is_not_the_type_is_sent_back(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """Text cannot stand in for a Book: the model is told so and then submits one."""
        fake_messages_api.enqueue(
            F.text("Dune, 1965."), F.tool_use(SUBMIT_RESULT, {"result": GOOD})
        )
        outcome = await LLMSubagent("books", model, output_type=Book).run("find Dune")
        assert isinstance(outcome, Success)
        assert isinstance(outcome.data, Book)
        feedback = fake_messages_api.requests[1].messages[-1]
        assert feedback["role"] == "user"
        assert "submit_result" in str(feedback["content"])


class TestReport:
    async def test_the_reports_json_serialises_the_typed_result(
        self, fake_messages_api: FakeMessagesAPI, model: AnthropicModel
    ) -> None:
        """A typed result is a finding whose JSON holds its fields."""
        fake_messages_api.enqueue(F.tool_use(SUBMIT_RESULT, {"result": GOOD}))
        agent = LLMSubagent("books", model, output_type=Book)
        report = await Coordinator([agent]).run([Task(query="find Dune", topic="dune")])
        assert report.coverage[0].status.value == "covered"
        assert json.dumps(GOOD) in json.dumps(json.loads(report.to_json()))


class TestMisuse:
    def test_a_value_that_is_not_a_type_is_refused(self) -> None:
        """output_type must be something pydantic can validate; the error names it."""
        with pytest.raises(UsageError, match="output_type"):
            LLMSubagent("x", ScriptedModel([]), output_type=object())

    def test_negative_output_retries_are_refused(self) -> None:
        """output_retries counts corrections: it cannot be negative."""
        with pytest.raises(UsageError, match="output_retries"):
            LLMSubagent("x", ScriptedModel([]), output_type=Book, output_retries=-1)
