"""Synthesis: task records -> Report. The default is deterministic; a model-backed one plugs in."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import pydantic_core

from agentmesh.coordinator._report import (
    CoverageEntry,
    CoverageStatus,
    Finding,
    Report,
    TaskRecord,
)
from agentmesh.envelope import ErrorEnvelope, PartialResults, Success

__all__ = ["DeterministicSynthesizer", "Synthesizer", "latest_partial"]


class Synthesizer(Protocol):
    """Turns the run's task records into a Report."""

    async def synthesize(
        self, records: Sequence[TaskRecord], *, run_id: str, min_coverage: float | None
    ) -> Report: ...


class DeterministicSynthesizer:
    """Merges every success and every partial result, with provenance; no model involved.

    A list result is split into one finding per item; findings of failed attempts'
    partial results are kept and marked preliminary. Coverage is computed from the task
    records alone, so a later model-written summary can never hide a gap.
    """

    async def synthesize(
        self, records: Sequence[TaskRecord], *, run_id: str, min_coverage: float | None
    ) -> Report:
        findings: list[Finding] = []
        coverage: list[CoverageEntry] = []
        for record in records:
            findings += _findings(record)
            coverage.append(_coverage(record))
        return Report(
            run_id=run_id,
            findings=tuple(findings),
            coverage=tuple(coverage),
            escalations=tuple(e for e in coverage if e.status is CoverageStatus.ESCALATED),
            records=tuple(records),
            min_coverage=min_coverage,
        )


def _findings(record: TaskRecord) -> list[Finding]:
    topic = record.task.label
    confirmed: dict[bytes, Finding] = {}
    final = record.final
    if isinstance(final, Success) and not final.is_empty:
        items = final.data if isinstance(final.data, list | tuple) else [final.data]
        for item in items:
            confirmed.setdefault(
                _key(item),
                Finding(
                    topic=topic,
                    source=final.source,
                    attempted_query=final.attempted_query,
                    content=item,
                ),
            )
    # Partial findings of failed attempts are kept, marked preliminary, unless confirmed.
    preliminary: dict[bytes, Finding] = {}
    for step in record.steps:
        outcome = step.outcome
        if not isinstance(outcome, ErrorEnvelope) or outcome.partial_results is None:
            continue
        for item in outcome.partial_results.findings:
            key = _key(item)
            if key not in confirmed:
                preliminary.setdefault(
                    key,
                    Finding(
                        topic=topic,
                        source=outcome.source,
                        attempted_query=outcome.attempted_query,
                        content=item,
                        preliminary=True,
                    ),
                )
    return [*confirmed.values(), *preliminary.values()]


def _key(item: Any) -> bytes:
    return pydantic_core.to_json(item, fallback=repr)


def latest_partial(record: TaskRecord) -> PartialResults | None:
    """The most recent partial-completion block among the record's failed steps."""
    for step in reversed(record.steps):
        outcome = step.outcome
        if isinstance(outcome, ErrorEnvelope) and outcome.partial_results is not None:
            return outcome.partial_results
    return None


def _coverage(record: TaskRecord) -> CoverageEntry:
    final = record.final
    envelope = final if isinstance(final, ErrorEnvelope) else None
    return CoverageEntry(
        topic=record.task.label,
        source=record.subagent,
        status=record.status,
        reason=record.reason,
        attempted_query=final.attempted_query,
        is_retryable=envelope.is_retryable if envelope is not None else False,
        partial=latest_partial(record) if record.status is CoverageStatus.PARTIAL else None,
        user_message=envelope.user_message if envelope is not None else None,
    )
