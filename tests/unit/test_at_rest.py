"""A task's record at rest reads back exactly as it was, whatever it holds.

`compact_record` leaves out what the plan and the record already say; a resume puts it
back (`expanded_record`). Nothing may be lost on the way, for the common record (one
plain success) as for the unusual ones.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter

from agentmesh import ErrorCategory, ErrorEnvelope, PartialResults, Success, Task
from agentmesh._engine._at_rest import compact_record, expanded_record, usual_record
from agentmesh._redaction import redact_data
from agentmesh.report import CoverageStatus, Step, TaskRecord

_RECORD: TypeAdapter[TaskRecord] = TypeAdapter(TaskRecord)
TASK = Task(query="find the invoice")


def _success(**fields: Any) -> Success[Any]:
    given: dict[str, Any] = {"data": ["a line"], "source": "docs", "attempted_query": TASK.query}
    return Success(**(given | fields))


def _failure(**fields: Any) -> ErrorEnvelope:
    given: dict[str, Any] = {
        "error_category": ErrorCategory.TRANSIENT,
        "error_type": "timeout",
        "is_retryable": True,
        "message": "the index timed out",
        "attempted_query": TASK.query,
        "source": "docs",
        "attempts": 3,
    }
    return ErrorEnvelope(**(given | fields))


def _record(
    *steps: Step, status: CoverageStatus = CoverageStatus.COVERED, **more: Any
) -> TaskRecord:
    return TaskRecord("task-0", TASK, "docs", steps, status, **more)


def _step(outcome: Any, **fields: Any) -> Step:
    given: dict[str, Any] = {"subagent": "docs", "query": TASK.query, "decision": "Accept"}
    return Step(**(given | fields), outcome=outcome)


RECORDS = {
    "a plain success": _record(_step(_success())),
    "a success of a dict": _record(_step(_success(data={"total": 3, "ok": True}))),
    "an empty success": _record(_step(_success(data=[])), status=CoverageStatus.EMPTY),
    "a success after two attempts": _record(_step(_success(attempts=2))),
    "a success from another source": _record(_step(_success(source="cache"))),
    "a success of another query": _record(_step(_success(attempted_query="other"))),
    "a success of a structured query": _record(
        _step(_success(attempted_query={"sql": "select 1"}))
    ),
    "a success with a result of True": _record(_step(_success(data=True))),
    "a failure then a retry": _record(
        _step(_failure(), decision="RetryWithFeedback", reason="try again"),
        _step(_success(attempted_query="find the invoice 2"), query="find the invoice 2"),
    ),
    "a failure with progress": _record(
        _step(
            _failure(partial_results=PartialResults(findings=["x"], completed=["s1"])),
            decision="RecordGap",
            reason="gave up",
        ),
        status=CoverageStatus.PARTIAL,
        reason="gave up",
    ),
    "an alternative's step": _record(
        _step(_failure(), decision="TryAlternative", alternative="cache"),
        _step(_success(source="cache"), subagent="cache"),
    ),
    "a success of text": _record(_step(_success(data="the invoice is paid"))),
    "a success of text holding a key": _record(
        _step(_success(data="use api_key=sk-live-0123456789abcdef"))
    ),
    "a success of text, after two attempts": _record(_step(_success(data="paid", attempts=2))),
    "a success of text from another source": _record(_step(_success(data="paid", source="cache"))),
}


class TestRecordsAtRest:
    @pytest.mark.parametrize("name", list(RECORDS))
    def test_a_record_reads_back_as_it_was(self, name: str) -> None:
        """Compacted then expanded with the plan's task, the record is the same record."""
        record = RECORDS[name]
        stored = compact_record(record, "docs", planned=True)
        assert _RECORD.validate_python(expanded_record(stored, "task-0", TASK, "docs")) == record

    def test_a_plain_success_keeps_only_its_data(self) -> None:
        """The common record is its result's data and a few keys."""
        stored = compact_record(RECORDS["a plain success"], "docs", planned=True)
        assert stored == {"steps": [{"outcome": {"data": ["a line"]}}]}

    def test_a_task_that_is_not_the_plans_is_kept(self) -> None:
        """A record whose task differs from the plan's keeps its own."""
        record = RECORDS["a plain success"]
        stored = compact_record(record, "other", planned=False)
        assert _RECORD.validate_python(expanded_record(stored, "task-0", None, "other")) == record


class TestTheUsualRecord:
    @pytest.mark.parametrize("name", list(RECORDS))
    def test_built_directly_it_is_what_the_general_path_stores(self, name: str) -> None:
        """The usual record's direct path stores the same data, masked the same way; any
        other record (and text with a secret-shaped part) takes the general path."""
        record = RECORDS[name]
        general = redact_data(compact_record(record, "docs", planned=True))
        direct = usual_record(record, planned=True)
        assert direct is None or direct == general
        assert (direct is not None) == (name in {"a success of text"})

    def test_a_task_that_is_not_the_plans_is_not_usual(self) -> None:
        assert usual_record(RECORDS["a success of text"], planned=False) is None
