"""The run's coverage grid as AG-UI state: one snapshot, then JSON Patch operations.

The state is `{"runId": ..., "tasks": n, "subagents": [...], "coverage": {task id: row}}`;
a row is the task's coverage entry as the report writes it (topic, source, status,
reason, ...), with status "running" while the task goes on. Every change is one `add`
operation on `/coverage/<task id>` (RFC 6902: on an object member, an add replaces),
so a delta always applies to the state the consumer holds.
"""

from __future__ import annotations

import copy
from typing import Any

from ag_ui.core import StateDeltaEvent, StateSnapshotEvent
from ag_ui.core.events import BaseEvent

from agentmesh.report import Report

__all__ = ["Grid", "pointer"]


def pointer(*parts: str) -> str:
    """An RFC 6901 JSON Pointer to `parts` ("~" and "/" in a part escaped)."""
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in parts)


class Grid:
    """The coverage grid one AG-UI run shows, as the run's events change it."""

    def __init__(self, run_id: str, held: Any = None) -> None:
        coverage: dict[str, Any] = {}
        if isinstance(held, dict) and held.get("runId") == run_id:
            rows = held.get("coverage")
            coverage = copy.deepcopy(rows) if isinstance(rows, dict) else {}
        self.state: dict[str, Any] = {"runId": run_id, "coverage": coverage}

    def snapshot(self, timestamp: int | None, **fields: Any) -> StateSnapshotEvent:
        """The whole state (with `fields` set at its top), for a consumer to start from."""
        self.state.update(fields)
        return StateSnapshotEvent(snapshot=copy.deepcopy(self.state), timestamp=timestamp)

    def row(self, task_id: str, row: dict[str, Any], timestamp: int | None) -> StateDeltaEvent:
        """Set the row of `task_id`: the delta that says so."""
        self.state["coverage"][task_id] = row
        operation = {"op": "add", "path": pointer("coverage", task_id), "value": row}
        return StateDeltaEvent.model_validate({"delta": [operation], "timestamp": timestamp})

    def final(self, report: Report, timestamp: int | None) -> BaseEvent:
        """The grid as the report holds it (every task, also those a resume did not run)."""
        entries = report.to_dict()["coverage"]
        if len(entries) == len(report.records):
            self.state["coverage"] = {
                record.task_id: entry for record, entry in zip(report.records, entries, strict=True)
            }
        return self.snapshot(timestamp)
