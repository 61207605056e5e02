"""The records of a report: findings, steps, task histories, coverage entries."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Final

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, WrapSerializer
from pydantic.alias_generators import to_camel

from agentmesh.approvals import AnsweredApproval
from agentmesh.envelope import CarriedRuling, Outcome, PartialResults, RetryCount
from agentmesh.task import Task

__all__ = ["CAMEL", "CoverageEntry", "CoverageStatus", "Finding", "Step", "TaskRecord"]


class CoverageStatus(enum.StrEnum):
    """How well one task (topic x subagent) was covered."""

    COVERED = "covered"
    EMPTY = "empty"  # searched, nothing found: an answer, not a gap
    PARTIAL = "partial"
    GAP = "gap"
    ESCALATED = "escalated"


# camelCase in JSON, as the envelope's wire form: one convention in a report's JSON.
# Schemas are built when a report is first validated or serialized, not at import.
CAMEL: Final = ConfigDict(
    arbitrary_types_allowed=True,
    alias_generator=to_camel,
    populate_by_name=True,
    defer_build=True,
)


# The records below are plain frozen dataclasses: the framework builds several per task
# from outcomes already validated, so validating them again would change nothing (one
# object each, little for the garbage collector to walk). Pydantic still reads them at the
# boundary: `Report.model_validate`, `to_dict()`, the JSON schema, through
# `__pydantic_config__`, which gives them the report's camelCase keys.


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing found, with where it came from and what was asked."""

    __pydantic_config__: ClassVar[ConfigDict] = CAMEL

    topic: str
    source: str
    attempted_query: str | dict[str, Any]
    content: Any
    preliminary: bool = False  # from the partial results of a failed attempt


def _wire_form(outcome: Outcome, handler: SerializerFunctionWrapHandler) -> Any:
    """The outcome in JSON as `to_dict()` writes it: absent optional fields left out."""
    data = handler(outcome)
    if not isinstance(data, dict):
        return data
    optional = _optional_keys(type(outcome))
    return {key: value for key, value in data.items() if value is not None or key not in optional}


@dataclass(frozen=True, slots=True)
class Step:
    """One dispatch of a task and the route taken on its outcome.

    `decision` names the route (`"RetryWithFeedback"`), under the key the JSON has always had.
    """

    __pydantic_config__: ClassVar[ConfigDict] = CAMEL

    subagent: str
    query: str
    outcome: Annotated[Outcome, WrapSerializer(_wire_form, when_used="json")]
    decision: str
    reason: str | None = None
    # The alternative approach this step's route tried (a `TryAlternative`).
    alternative: str | None = None


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """The history of one task for one subagent: every step and the final outcome."""

    __pydantic_config__: ClassVar[ConfigDict] = CAMEL

    task_id: str
    task: Task
    subagent: str
    steps: tuple[Step, ...]
    status: CoverageStatus
    reason: str | None = None
    # A person's answers the task used (`agentmesh.approvals`), oldest first.
    answers: tuple[AnsweredApproval, ...] = ()

    @property
    def final(self) -> Outcome:
        return self.steps[-1].outcome


@dataclass(frozen=True, slots=True)
class CoverageEntry:
    """Coverage of one topic by one source, and if it is missing, why.

    `source` is the subagent the task was for; `answered_by` names the alternative (or
    the subagent) that answered instead, and `reason` the path ("timeout at search →
    answered by cache"). `reason` also names every policy ruling and the local retries
    on the way, which `rulings` and `retries` hold as data: an answer obtained after a
    denied call stays `covered`, but never silently.
    """

    __pydantic_config__: ClassVar[ConfigDict] = CAMEL

    topic: str
    source: str
    status: CoverageStatus
    reason: str | None
    attempted_query: str | dict[str, Any]
    is_retryable: bool
    partial: PartialResults | None = None
    user_message: str | None = None
    answered_by: str | None = None
    rulings: tuple[CarriedRuling, ...] | None = None
    retries: tuple[RetryCount, ...] | None = None


_OPTIONAL_KEYS: dict[type[BaseModel], frozenset[str]] = {}


def _optional_keys(cls: type[BaseModel]) -> frozenset[str]:
    """Names and JSON keys of the fields the wire form leaves out when None."""
    try:
        return _OPTIONAL_KEYS[cls]
    except KeyError:
        keys = frozenset(
            key
            for name, info in cls.model_fields.items()
            if info.default is None
            for key in (name, info.alias or name)
        )
        _OPTIONAL_KEYS[cls] = keys
        return keys
