"""Typed output for `LLMSubagent`: the `submit_result` schema and check, from one type.

The type's JSON schema becomes `submit_result`'s input schema, so the model is told what
to send; its submission is validated by a pydantic `TypeAdapter`, so what the subagent
returns is an instance of the type, never JSON that merely looks like one.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Final

import pydantic

from agentmesh._limits import recorded
from agentmesh.context import Context
from agentmesh.envelope import ErrorCategory, ErrorEnvelope
from agentmesh.errors import CallFailed, UsageError
from agentmesh.task import Task

__all__ = ["FAILURE_REPORT_FIELDS", "OutputType", "Submissions", "failure_tool", "field_paths"]

SUBMIT_DESCRIPTION = (
    "Finish the task with its result. Use [] or null when you searched and found nothing: "
    "that is a valid answer, not a failure."
)
TYPED_SUBMIT_DESCRIPTION = (
    "Finish the task with its result, which must match the `result` schema exactly."
)


FAILURE_DESCRIPTION = (
    "Report that the task could not be completed, as a structured error. Include "
    "partialResults only for work you really completed; never invent any."
)

_TEXTS: Final[dict[str, Any]] = {"type": "array", "items": {"type": "string"}}

# What a model can honestly say about its own failure, and nothing else: the source,
# the attempts, the usage, the local retries and any policy ruling are the framework's
# (an offer of `usage` invited models to invent token counts). Written out, not derived
# from `ErrorEnvelope.json_schema()`: that one describes the whole wire form, ~6 KB sent
# with every request; this is the part a model fills in.
_FAILURE_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "errorCategory": {
            "enum": [category.value for category in ErrorCategory],
            "description": "transient: may work later; validation: the input is wrong; "
            "business: a rule forbids it; permission: not allowed; other",
        },
        "errorType": {"type": "string", "description": "e.g. timeout, not_found"},
        "isRetryable": {"type": "boolean", "description": "can trying again succeed"},
        "message": {"type": "string"},
        "attemptedQuery": {
            "type": ["string", "object"],
            "description": "what you tried; the task itself if left out",
        },
        "partialResults": {
            "type": "object",
            "properties": {"completed": _TEXTS, "pending": _TEXTS, "findings": {"type": "array"}},
            "additionalProperties": False,
        },
        "alternativeApproaches": _TEXTS,
        "details": {"type": "string"},
        "userMessage": {"type": "string", "description": "for the customer"},
    },
    "required": ["errorCategory", "errorType", "isRetryable", "message"],
    "additionalProperties": False,
}

FAILURE_REPORT_FIELDS: Final = frozenset(_FAILURE_SCHEMA["properties"])
"""The envelope fields a model's failure report may set; the framework sets the rest."""


def failure_tool(name: str) -> dict[str, Any]:
    """The `report_failure` tool definition: only the fields a model can honestly fill."""
    schema = copy.deepcopy(_FAILURE_SCHEMA)  # each subagent's own: nobody edits a shared one
    return {"name": name, "description": FAILURE_DESCRIPTION, "input_schema": schema}


def _untyped_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"result": {"description": "the task's result, any JSON value"}},
        "required": ["result"],
    }


@dataclass(frozen=True, slots=True)
class OutputType:
    """The result type an `LLMSubagent` promises, or None for any JSON value."""

    type: Any
    adapter: pydantic.TypeAdapter[Any] | None

    @classmethod
    def of(cls, output_type: Any, *, owner: str) -> OutputType:
        if output_type is None:
            return cls(None, None)
        try:
            adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(output_type)
            adapter.json_schema()
        except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError) as exc:
            raise UsageError(
                f"LLMSubagent {owner}: output_type={output_type!r} is not a type pydantic can "
                f"validate and describe as JSON schema: {exc}"
            ) from None
        return cls(output_type, adapter)

    @property
    def name(self) -> str:
        return getattr(self.type, "__name__", None) or repr(self.type)

    def submit_tool(self, name: str) -> dict[str, Any]:
        """The `submit_result` tool definition; `result`'s schema is the type's."""
        if self.adapter is None:
            return {
                "name": name,
                "description": SUBMIT_DESCRIPTION,
                "input_schema": _untyped_schema(),
            }
        result = self.adapter.json_schema()
        # Refs in the type's schema point at `#/$defs/...`: the definitions move to the
        # root of the input schema, where those refs resolve.
        definitions = result.pop("$defs", None)
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {"result": result},
            "required": ["result"],
        }
        if definitions:
            schema["$defs"] = definitions
        return {"name": name, "description": TYPED_SUBMIT_DESCRIPTION, "input_schema": schema}

    def validate(self, value: Any) -> Any:
        """The submitted value as an instance of the type; raises pydantic's ValidationError."""
        if self.adapter is None:
            return value
        return self.adapter.validate_python(value)

    def rejection(
        self, error: pydantic.ValidationError, *, submitted: Any, source: str, left: int
    ) -> ErrorEnvelope:
        """What the model is told about an invalid submission, and how often it may retry."""
        return ErrorEnvelope(
            error_category=ErrorCategory.VALIDATION,
            error_type="invalid_output",
            is_retryable=False,
            message=(
                f"the result does not match {self.name}: {_problems(error)}. Call "
                f"submit_result with a corrected result ({left} more attempt(s))"
            ),
            attempted_query={"tool": "submit_result", "arguments": {"result": recorded(submitted)}},
            source=source,
            attempts=0,
        )

    def invalid(
        self,
        error: pydantic.ValidationError,
        *,
        submissions: int,
        source: str,
        query: Any,
        attempts: int,
    ) -> ErrorEnvelope:
        """The validation envelope once the model has used up its corrections."""
        fields = sorted(set(field_paths(error)))
        return ErrorEnvelope(
            error_category=ErrorCategory.VALIDATION,
            error_type="invalid_output",
            is_retryable=False,
            message=(
                f"the model's result did not match {self.name} after {submissions} "
                f"submission(s); invalid: {', '.join(fields)}"
            ),
            attempted_query=query,
            source=source,
            attempts=attempts,
            details=_problems(error)[:1000],
        )


class Submissions:
    """The results one run of the tool loop submitted, checked against the output type.

    An invalid one is answered with what is wrong, `retries` times; the next invalid
    one ends the task in a validation envelope (raised as `CallFailed`).
    """

    __slots__ = ("ctx", "output", "rejected", "retries", "source", "task", "value")

    def __init__(
        self, output: OutputType, *, retries: int, source: str, task: Task, ctx: Context
    ) -> None:
        self.output, self.retries, self.source = output, retries, source
        self.task, self.ctx = task, ctx
        self.rejected = 0
        self.value: Any = None

    def check(self, submitted: Any) -> ErrorEnvelope | None:
        """None when `submitted` is a valid result (then in `value`), else what is wrong."""
        try:
            self.value = self.output.validate(submitted)
        except pydantic.ValidationError as error:
            self.rejected += 1
            left = self.retries - self.rejected + 1
            self.ctx.log.info(
                "output_rejected", submission=self.rejected, errors=error.error_count()
            )
            if left <= 0:
                raise CallFailed(
                    self.output.invalid(
                        error,
                        submissions=self.rejected,
                        source=self.source,
                        query=self.task.query,
                        attempts=self.ctx.attempt,
                    )
                ) from None
            return self.output.rejection(
                error, submitted=submitted, source=f"{self.source}/submit_result", left=left
            )
        return None


def _problems(error: pydantic.ValidationError) -> str:
    return "; ".join(
        f"{path}: {item['msg']}"
        for path, item in zip(field_paths(error), error.errors(), strict=True)
    )


def field_paths(error: pydantic.ValidationError) -> list[str]:
    """Each error's location under `result`, as `result.items[2].year`."""
    paths = []
    for item in error.errors():
        path = "result"
        for part in item["loc"]:
            path += f"[{part}]" if isinstance(part, int) else f".{part}"
        paths.append(path)
    return paths
