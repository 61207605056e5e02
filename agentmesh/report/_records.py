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

__all__ = [
    "CAMEL",
    "CoverageEntry",
    "CoverageStatus",
    "Finding",
    "Step",
    "TaskRecord",
    "UsageStop",
]


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


@dataclass(frozen=True, slots=True)
class UsageStop:
    """How far a run got when a run-wide usage limit stopped it (`Report.usage_stop`).

    Every task is in the report: the ones the limit stopped keep their partial results,
    and the ones it kept from starting say so. `not_started` counts tasks the limit ended
    before they did any work (no model call made, nothing recorded); `stopped` those it
    ended part-way, with what they had found.
    """

    __pydantic_config__: ClassVar[ConfigDict] = CAMEL

    limit: str  # the limit that stopped the run: "max_cost_usd", "max_model_calls", ...
    reason: str  # the limit's refusal, as the tasks' envelopes say it
    tasks: int
    covered: int  # answered: covered or empty
    not_started: int
    stopped: int
    spent_usd: float | None = None  # what the run's model calls cost; None: unknown
    cap_usd: float | None = None  # the run's max_cost_usd, when it was set
    hard: bool = False  # whether that cap was hard (never passed)

    def headline(self) -> str:
        """One sentence: the limit, and how far the run got under it."""
        if self.limit == "max_cost_usd" and self.cap_usd is not None:
            cap = "hard cost cap" if self.hard else "cost cap"
            spent = "an unknown cost" if self.spent_usd is None else f"${self.spent_usd:.4f}"
            what = f"the {cap} at {spent} of ${self.cap_usd:g}"
        else:
            what = f"the usage limit {self.limit}"
        parts = [f"{self.covered} of {self.tasks} tasks covered"]
        if self.stopped:
            parts.append(f"{self.stopped} stopped with their partial results")
        parts.append(f"{self.not_started} not started")
        return f"Stopped by {what}: {', '.join(parts)}."
