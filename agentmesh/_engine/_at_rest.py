"""A run's plan and task records at rest, without what can be derived.

A record as pydantic dumps it repeats what the plan already says (the task, its
subagent), what the record says elsewhere (a step's query is the task's, an outcome's
source is the step's subagent) and values that are nearly always the same (no reason,
one attempt, nothing empty). `compact_*` leaves out every key whose value is the one
`expanded_*` puts back, so a value reads back exactly as it was dumped: the saving is
lossless by construction. A value written in full (by an earlier agentmesh) has every key
and reads as it is; anything that is not the expected shape is left for validation to
refuse, naming the damaged row.

A finished one-line task then costs its plan entry (`{"task":{"query":...}}`) and a record
like `{"steps":[{"outcome":{"data":...}}]}`: its own data and a few dozen bytes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import pydantic_core

from agentmesh._redaction import redact_text
from agentmesh.envelope import Outcome, Success
from agentmesh.report import Step, TaskRecord

__all__ = [
    "compact_plan",
    "compact_record",
    "expanded_plan",
    "expanded_record",
    "usual_record",
]

# The value each key holds unless said otherwise: left out when it has it.
_TASK: Final[dict[str, Any]] = {
    "topic": None,
    "subagent": None,
    "metadata": {},
    "feedback": None,
    "id": None,
}
_RECORD: Final[dict[str, Any]] = {"status": "covered", "reason": None, "answers": []}
_STEP: Final[dict[str, Any]] = {"decision": "Accept", "reason": None, "alternative": None}
_COMMON: Final[dict[str, Any]] = {
    "policy": None,
    "rulings": None,
    "retries": None,
    "usage": None,
    "toolsLeftOut": None,
    "attempts": 1,
}
# A success says `isError: false` by leaving it out; a failure keeps `isError: true`.
_SUCCESS: Final[dict[str, Any]] = {**_COMMON, "isError": False, "isEmpty": False}
_FAILURE: Final[dict[str, Any]] = {
    **_COMMON,
    "partialResults": None,
    "alternativeApproaches": None,
    "details": None,
    "userMessage": None,
    "retryAfter": None,
}


def _outcome_usual(outcome: dict[str, Any]) -> dict[str, Any]:
    return _FAILURE if outcome.get("isError") is True else _SUCCESS


def _without(data: dict[str, Any], usual: dict[str, Any], derived: dict[str, Any]) -> None:
    """Drop from `data` (in place) the keys holding their usual or derived value."""
    for values in (usual, derived):
        for key, value in values.items():
            found = data.get(key, _ABSENT)
            # By type too: 1 == True in Python, and a record must read back as it was.
            if found == value and type(found) is type(value):
                del data[key]


_ABSENT: Final = object()


def _with(data: dict[str, Any], usual: dict[str, Any], derived: dict[str, Any]) -> None:
    """Put back into `data` (in place) the keys `_without` left out."""
    for key, value in (*usual.items(), *derived.items()):
        if key not in data:
            # A fresh empty dict or list each time: the usual values are shared.
            data[key] = type(value)() if isinstance(value, dict | list) else value


def compact_task(task: dict[str, Any]) -> dict[str, Any]:
    """A task's JSON without the fields at their defaults."""
    task = dict(task)
    _without(task, _TASK, {})
    return task


def compact_plan(jobs: Iterable[tuple[str, dict[str, Any], str]]) -> list[dict[str, Any]]:
    """The plan's jobs, `(task id, task, subagent)` each, as JSON data: a task id
    `task-<index>` and the subagent of the job before are left out. Tasks come without
    their defaults (`exclude_defaults`): `expanded_plan` puts those back too."""
    plan: list[dict[str, Any]] = []
    previous: str | None = None
    for index, (task_id, task, subagent) in enumerate(jobs):
        entry: dict[str, Any] = {} if task_id == f"task-{index}" else {"taskId": task_id}
        entry["task"] = task
        if subagent != previous:
            entry["subagent"] = previous = subagent
        plan.append(entry)
    return plan


def expanded_plan(value: Any) -> Any:
    """The plan's jobs as `compact_plan` had them; any other shape unchanged."""
    if not isinstance(value, list):
        return value
    expanded: list[Any] = []
    previous: Any = None
    for index, item in enumerate(value):
        if isinstance(item, dict):
            item = dict(item)
            derived = {"taskId": f"task-{index}"}
            if previous is not None:
                derived["subagent"] = previous
            _with(item, {"masked": False}, derived)
            if isinstance(item.get("task"), dict):
                item["task"] = dict(item["task"])
                _with(item["task"], _TASK, {})
            previous = item.get("subagent")
        expanded.append(item)
    return expanded


def compact_record(record: TaskRecord, subagent: str, planned: bool) -> dict[str, Any]:
    """A finished task's record as JSON data, without what the plan and the record say.

    `subagent`: the plan's for the task; `planned`: the record's task is the plan's
    (else the record keeps it). The same data `pydantic_core.to_jsonable_python(record,
    by_alias=True)` gives, less the keys `expanded_record` puts back, built directly:
    dumping the whole record costs more than the rest of saving it.
    """
    data: dict[str, Any] = {}
    if not planned:
        data["task"] = compact_task(_json(record.task))
    if record.subagent != subagent:
        data["subagent"] = record.subagent
    query = record.task.query
    data["steps"] = [_step(step, record.subagent, query) for step in record.steps]
    # Each key only when it differs from its usual value (`_RECORD`), as `_without` does.
    if record.status.value != "covered":
        data["status"] = record.status.value
    if record.reason is not None:
        data["reason"] = record.reason
    if record.answers:
        data["answers"] = _json(record.answers)
    return data


def usual_record(record: TaskRecord, planned: bool) -> dict[str, Any] | None:
    """The record of the usual finished task as `compact_record` has it, built directly:
    the plan's task, answered at once with text by its own subagent (one plain step,
    `{"steps":[{"outcome":{"data":text}}]}`), screened for secrets as `redact_data`
    would screen it (the text is its only value that is not a constant); None for any
    other record, and for a text with a secret-shaped part (the general path masks it).
    """
    steps = record.steps
    if not planned or len(steps) != 1 or record.status.value != "covered":
        return None
    step = steps[0]
    outcome = step.outcome
    if (
        type(outcome) is not Success
        or type(outcome.data) is not str
        or step.subagent != record.subagent
        or outcome.source != step.subagent
        or step.query != record.task.query
        or outcome.attempted_query != step.query
        or step.decision != "Accept"
        or step.reason is not None
        or step.alternative is not None
        or record.reason is not None
        or record.answers
    ):
        return None
    plain = _outcome(outcome, step.subagent, step.query)
    if len(plain) != 1 or redact_text(outcome.data) is not outcome.data:
        return None
    return {"steps": [{"outcome": plain}]}


def _step(step: Step, subagent: str, query: str) -> dict[str, Any]:
    """A step's JSON without its usual (`_STEP`) and derived keys."""
    entry: dict[str, Any] = {}
    if step.subagent != subagent:
        entry["subagent"] = step.subagent
    if step.query != query:
        entry["query"] = step.query
    entry["outcome"] = _outcome(step.outcome, step.subagent, step.query)
    if step.decision != "Accept":
        entry["decision"] = step.decision
    if step.reason is not None:
        entry["reason"] = step.reason
    if step.alternative is not None:
        entry["alternative"] = step.alternative
    return entry


def _outcome(outcome: Outcome, source: str, query: str) -> dict[str, Any]:
    """An outcome's JSON without its usual and derived (`source`, `attemptedQuery`)
    keys: a plain success, nothing unusual about it (most are), built from its fields;
    any other dumped whole, then the keys left out."""
    if (
        type(outcome) is Success
        and type(outcome.attempts) is int
        and outcome.attempts == 1
        and outcome.policy is None
        and outcome.rulings is None
        and outcome.retries is None
        and outcome.usage is None
        and outcome.tools_left_out is None
        and not outcome.is_empty
    ):
        value = outcome.data
        # A string is its own JSON (most results are text): no trip through pydantic.
        data: dict[str, Any] = {"data": value if type(value) is str else _json(value)}
        if outcome.source != source:
            data["source"] = outcome.source
        attempted = outcome.attempted_query
        if type(attempted) is not str or attempted != query:
            data["attemptedQuery"] = _json(attempted)
        return data
    data = _json(outcome)
    _without(data, _outcome_usual(data), {"source": source, "attemptedQuery": query})
    return data


def _json(value: Any) -> Any:
    return pydantic_core.to_jsonable_python(value, by_alias=True, fallback=str)


def expanded_record(value: Any, task_id: str, task: Any, subagent: str | None) -> Any:
    """A record as `compact_record` had it, with the plan's `task` and `subagent`
    (None when the plan has no such task); any other shape unchanged."""
    if not isinstance(value, dict):
        return value
    data = dict(value)
    derived: dict[str, Any] = {"task_id": task_id}
    if subagent is not None:
        derived["subagent"] = subagent
    if task is not None:
        derived["task"] = task
    _with(data, _RECORD, derived)
    if isinstance(data.get("task"), dict):
        data["task"] = dict(data["task"])
        _with(data["task"], _TASK, {})
    query = _query_of(data.get("task"))
    steps = data.get("steps")
    if isinstance(steps, list):
        data["steps"] = [_expanded_step(step, data.get("subagent"), query) for step in steps]
    return data


def _expanded_step(step: Any, subagent: Any, query: Any) -> Any:
    if not isinstance(step, dict):
        return step
    step = dict(step)
    derived = {
        key: value for key, value in (("subagent", subagent), ("query", query)) if value is not None
    }
    _with(step, _STEP, derived)
    if isinstance(step.get("outcome"), dict):
        outcome = step["outcome"] = dict(step["outcome"])
        derived = {"source": step.get("subagent"), "attemptedQuery": step.get("query")}
        derived = {key: value for key, value in derived.items() if value is not None}
        _with(outcome, _outcome_usual(outcome), derived)
    return step


def _query_of(task: Any) -> Any:
    if isinstance(task, dict):
        return task.get("query")
    return getattr(task, "query", None)
