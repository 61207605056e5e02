"""Typed output for `LLMSubagent`: the `submit_result` schema and check, from one type.

The type's JSON schema becomes `submit_result`'s input schema, so the model is told what
to send; its submission is validated by a pydantic `TypeAdapter`, so what the subagent
returns is an instance of the type, never JSON that merely looks like one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pydantic

from agentmesh._limits import recorded
from agentmesh.context import Context
from agentmesh.envelope import ErrorCategory, ErrorEnvelope
from agentmesh.errors import CallFailed, UsageError
from agentmesh.task import Task

__all__ = ["OutputType", "Submissions", "field_paths"]

SUBMIT_DESCRIPTION = (
    "Finish the task with its result. Use [] or null when you searched and found nothing: "
    "that is a valid answer, not a failure."
)
TYPED_SUBMIT_DESCRIPTION = (
    "Finish the task with its result, which must match the `result` schema exactly."
)


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
