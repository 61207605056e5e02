"""Synthesis: task records -> Report. The default is deterministic; a model-backed one plugs in."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import Any, Protocol

import pydantic_core

from agentmesh.coordinator._answers import answer_notes, asked_and_answered
from agentmesh.envelope import (
    ErrorEnvelope,
    PartialResults,
    RetryCount,
    Ruling,
    Success,
    ToolsLeftOut,
)
from agentmesh.report import (
    CoverageEntry,
    CoverageStatus,
    Finding,
    Report,
    TaskRecord,
)
from agentmesh.usage import UsageSummary

__all__ = ["DeterministicSynthesizer", "Synthesizer", "coverage_entry", "latest_partial"]

_STATUS = attrgetter("status")


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
        # Picked in C (no bytecode per entry): most runs escalate nothing.
        escalated = map(is_, map(_STATUS, coverage), repeat(CoverageStatus.ESCALATED))
        # Built from validated records: validating 4 x N items again would change nothing.
        return Report.model_construct(
            run_id=run_id,
            findings=tuple(findings),
            coverage=tuple(coverage),
            escalations=tuple(compress(coverage, escalated)),
            records=tuple(records),
            min_coverage=None if min_coverage is None else float(min_coverage),
        )


def _findings(record: TaskRecord) -> list[Finding]:
    topic = record.task.label
    final = record.final
    items: list[Any] | tuple[Any, ...] = ()
    if isinstance(final, Success) and not final.is_empty:
        items = final.data if isinstance(final.data, list | tuple) else [final.data]
    partials = [
        step.outcome
        for step in record.steps
        if isinstance(step.outcome, ErrorEnvelope) and step.outcome.partial_results is not None
    ]
    if len(items) == 1 and not partials:
        # The common case, one result and nothing to deduplicate it against: no JSON keys.
        assert isinstance(final, Success)  # items is non-empty only for a success
        return [_finding(topic, final.source, final.attempted_query, items[0], False)]
    confirmed: dict[bytes, Finding] = {}
    if items:
        assert isinstance(final, Success)
        for item in items:
            key = _key(item)
            if key not in confirmed:
                confirmed[key] = _finding(topic, final.source, final.attempted_query, item, False)
    # Partial findings of failed attempts are kept, marked preliminary, unless confirmed.
    preliminary: dict[bytes, Finding] = {}
    for outcome in partials:
        assert outcome.partial_results is not None  # filtered above
        for item in outcome.partial_results.findings:
            key = _key(item)
            if key not in confirmed and key not in preliminary:
                preliminary[key] = _finding(
                    topic, outcome.source, outcome.attempted_query, item, True
                )
    return [*confirmed.values(), *preliminary.values()]


def _finding(
    topic: str, source: str, attempted_query: str | dict[str, Any], content: Any, preliminary: bool
) -> Finding:
    return Finding(topic, source, attempted_query, content, preliminary)


def _key(item: Any) -> bytes:
    return pydantic_core.to_json(item, fallback=repr)


def latest_partial(record: TaskRecord) -> PartialResults | None:
    """The most recent partial-completion block among the record's failed steps."""
    for step in reversed(record.steps):
        outcome = step.outcome
        if isinstance(outcome, ErrorEnvelope) and outcome.partial_results is not None:
            return outcome.partial_results
    return None


def coverage_entry(record: TaskRecord) -> CoverageEntry:
    """The coverage entry of one task, as the deterministic report holds it."""
    return _coverage(record)


def _coverage(record: TaskRecord) -> CoverageEntry:
    final = record.final
    envelope = final if isinstance(final, ErrorEnvelope) else None
    answered_by, reason = _answered(record)
    if record.answers:
        # What a person's answers changed, in place of the question they answered.
        reason = "; ".join(filter(None, [reason, *answer_notes(record.answers)]))
    rulings, retries = _on_the_way(record)
    if rulings is not None or retries is not None:
        notes = [reason]
        if rulings is not None:
            notes.append(_rulings_note(rulings, final.policy, record))
        if retries is not None:
            notes.append(_retries_note(retries))
        reason = "; ".join(filter(None, notes))
    if final.usage is not None and final.usage.failovers:
        reason = "; ".join(filter(None, [reason, _failover_note(final.usage)]))
    if final.tools_left_out:
        reason = "; ".join(filter(None, [reason, _left_out_note(final.tools_left_out)]))
    return CoverageEntry(
        topic=record.task.label,
        source=record.subagent,
        status=record.status,
        reason=reason or None,
        attempted_query=final.attempted_query,
        is_retryable=envelope.is_retryable if envelope is not None else False,
        partial=latest_partial(record) if record.status is CoverageStatus.PARTIAL else None,
        user_message=envelope.user_message if envelope is not None else None,
        answered_by=answered_by,
        rulings=rulings,
        retries=retries,
    )


def _answered(record: TaskRecord) -> tuple[str | None, str | None]:
    """Who answered a task its own subagent failed, and the path: (answered_by, reason)."""
    steps, final = record.steps, record.final
    if len(steps) < 2 or not isinstance(final, Success):
        return None, record.reason
    via = steps[-2]
    answered_by = via.alternative or steps[-1].subagent
    if answered_by == record.subagent and via.alternative is None:
        # Answered by the same subagent, to a rewritten query: no one else to name.
        return None, record.reason
    path = [
        f"{step.outcome.error_type} at {step.subagent}"
        for step in steps[:-1]
        if isinstance(step.outcome, ErrorEnvelope)
    ]
    reason = " → ".join([*path, f"answered by {answered_by}"])
    return answered_by, "; ".join(filter(None, [reason, record.reason]))


def _on_the_way(
    record: TaskRecord,
) -> tuple[tuple[Ruling, ...] | None, tuple[RetryCount, ...] | None]:
    """Every policy ruling and the local retries of all the task's steps, or None."""
    for step in record.steps:
        if step.outcome.rulings is not None or step.outcome.retries is not None:
            break
    else:
        return None, None  # the common case: no dicts built per entry
    if len(record.steps) == 1:
        # One step (a task retried locally, then answered): its own tuples, when they
        # are already what merging would build (no repeats), instead of new records.
        only = record.steps[0].outcome
        kept = _distinct(only.rulings, only.retries)
        if kept is not None:
            return kept
    rulings: dict[Ruling, None] = {}
    retries: dict[tuple[str, str, bool], int] = {}
    for step in record.steps:
        rulings.update(dict.fromkeys(step.outcome.rulings or ()))
        for item in step.outcome.retries or ():
            key = (item.source, item.error_type, item.gave_up)
            retries[key] = retries.get(key, 0) + item.count
    return (
        tuple(rulings) or None,
        tuple(
            RetryCount(source=source, error_type=error_type, count=count, gave_up=gave_up)
            for (source, error_type, gave_up), count in retries.items()
        )
        or None,
    )


def _distinct(
    rulings: tuple[Ruling, ...] | None, retries: tuple[RetryCount, ...] | None
) -> tuple[tuple[Ruling, ...] | None, tuple[RetryCount, ...] | None] | None:
    """`(rulings, retries)` as `_on_the_way` merges them, when they are that already.

    None when merging would change them: a ruling repeated, or two counts of the same
    source, error type and ending (a wire form from elsewhere may hold either).
    """
    if rulings and len(set(rulings)) != len(rulings):
        return None
    keys = {(item.source, item.error_type, item.gave_up) for item in retries or ()}
    if retries and len(keys) != len(retries):
        return None
    return rulings or None, retries or None


def _rulings_note(
    rulings: tuple[Ruling, ...], final: Ruling | None, record: TaskRecord
) -> str | None:
    """The rulings a reader has not been told of yet: not the final one (the decision's),
    nor a question a person answered (the answer's note says what happened instead)."""
    told = None if final is None else (final.action, final.policy, final.reason)
    shown = [
        f"{ruling.action} by policy {ruling.policy} on {ruling.tool}: {ruling.reason}"
        for ruling in rulings
        if (ruling.action, ruling.policy, ruling.reason) != told
        and not (record.answers and asked_and_answered(ruling, record.answers))
    ]
    return f"policy rulings: {'; '.join(shown)}" if shown else None


def _failover_note(usage: UsageSummary) -> str:
    """Which models of a fallback chain failed, why, and which answered (if one did)."""
    failed = ", ".join(
        f"{item.model} skipped ({item.error_type} since {item.out_since:%H:%M:%S})"
        if item.out_since is not None
        else f"{item.model} {item.error_type} after {item.attempts} attempts"
        for item in usage.failovers
    )
    answered = usage.answered_by
    return f"models failed over: {failed}" + (
        f"; answered by model {answered[-1]}" if answered else ""
    )


def _left_out_note(left_out: tuple[ToolsLeftOut, ...]) -> str:
    shown = "; ".join(f"{item.source}: {item.reason}" for item in left_out)
    return f"went on without the tools of {shown}"


def _retries_note(retries: tuple[RetryCount, ...]) -> str:
    """The local retries, and whether the calls retried recovered or gave up in the end."""
    total = sum(item.count for item in retries)
    counted = f"{total} local {'retry' if total == 1 else 'retries'}"
    endings = {item.gave_up for item in retries}
    if len(endings) == 1:
        shown = ", ".join(f"{item.source} {item.error_type} x{item.count}" for item in retries)
        if True in endings:
            return f"{counted}, gave up: {shown}"
        return f"recovered after {counted}: {shown}"
    shown = ", ".join(
        f"{item.source} {item.error_type} x{item.count} "
        f"({'gave up' if item.gave_up else 'recovered'})"
        for item in retries
    )
    return f"{counted}: {shown}"
