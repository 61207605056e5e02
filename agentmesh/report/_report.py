"""The Report: findings with provenance, coverage topic by topic, escalations, history."""

from __future__ import annotations

import json
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

import pydantic_core
from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from agentmesh._redaction import redact, redact_text
from agentmesh.approvals import AnsweredApproval, ApprovalKind, PendingApproval
from agentmesh.report._records import (
    CAMEL,
    CoverageEntry,
    CoverageStatus,
    Finding,
    TaskRecord,
    UsageStop,
)
from agentmesh.usage import ModelUsage, UsageSummary

__all__ = ["Report"]


class _Value(BaseModel):
    # A report is validated once per run at most: its schema is built then, not at import.
    model_config = ConfigDict(frozen=True, **CAMEL)


class Report(_Value):
    """What a run found and, honestly, what it could not."""

    run_id: str
    findings: tuple[Finding, ...]
    coverage: tuple[CoverageEntry, ...]
    escalations: tuple[CoverageEntry, ...]
    records: tuple[TaskRecord, ...] = Field(repr=False)
    min_coverage: float | None = None
    summary: str | None = None
    # Why there is no model-written summary when one was asked for (e.g. the model call
    # failed and the deterministic synthesis was used); None otherwise.
    synthesis_note: str | None = None
    # Questions waiting for a person (`agentmesh.approvals`): `Coordinator.resume` answers.
    # JSON written before 0.3 named it `pendingDecisions`: still read, for one release.
    pending_approvals: tuple[PendingApproval, ...] = Field(
        default=(),
        validation_alias=AliasChoices(
            "pendingApprovals", "pending_approvals", "pendingDecisions", "pending_decisions"
        ),
    )
    # What the coordinator's own model helpers used, by helper ("rewriter", "synthesizer").
    helper_usage: dict[str, UsageSummary] = Field(default_factory=dict)
    # How far the run got when a run-wide usage limit stopped it; None when none did.
    usage_stop: UsageStop | None = None
    # The calls in flight each model's window settled at by the end of the run (see
    # `ModelHealth`): what the run could ask of each model at once.
    model_concurrency: dict[str, int] = Field(default_factory=dict)

    @property
    def answered_approvals(self) -> tuple[AnsweredApproval, ...]:
        """Every answer a person gave that the run's tasks used: approvals, rejections, edits."""
        return tuple(answer for record in self.records for answer in record.answers)

    @property
    def pending_decisions(self) -> tuple[PendingApproval, ...]:
        """Deprecated: `pending_approvals`; the old name goes in the next release."""
        _renamed("pending_decisions", "pending_approvals")
        return self.pending_approvals

    @property
    def answered_decisions(self) -> tuple[AnsweredApproval, ...]:
        """Deprecated: `answered_approvals`; the old name goes in the next release."""
        _renamed("answered_decisions", "answered_approvals")
        return self.answered_approvals

    @property
    def coverage_ratio(self) -> float:
        """Share of entries answered (covered or empty); 1.0 for an empty run."""
        if not self.coverage:
            return 1.0
        # Counted in C over a list of statuses: a run reads its ratio a few times (its
        # log line, its repr, the caller), and a generator costs ~0.5 us per entry each.
        statuses = [entry.status for entry in self.coverage]
        answered = statuses.count(CoverageStatus.COVERED) + statuses.count(CoverageStatus.EMPTY)
        return answered / len(statuses)

    @property
    def sufficient(self) -> bool:
        """False when a minimum coverage was asked for and not reached."""
        return self.min_coverage is None or self.coverage_ratio >= self.min_coverage

    @property
    def usage(self) -> UsageSummary | None:
        """What the run's model calls used: every step of every task, and the helpers'.

        None when no model was called.
        """
        steps = (step.outcome.usage for record in self.records for step in record.steps)
        return _summed((*steps, *self.helper_usage.values()))

    @property
    def usage_by_subagent(self) -> Mapping[str, UsageSummary]:
        """The run's model usage by the subagent that made the calls (alternatives too).

        A read-only mapping, as `usage_by_model`. The coordinator's own helpers have a
        line each, under "rewriter" and "synthesizer" (`helper_usage`).
        """
        by: dict[str, list[UsageSummary | None]] = {}
        for record in self.records:
            for step in record.steps:
                if step.outcome.usage is not None:
                    by.setdefault(step.subagent, []).append(step.outcome.usage)
        for helper, usage in self.helper_usage.items():
            by.setdefault(helper, []).append(usage)
        return MappingProxyType(
            {name: summary for name, items in by.items() if (summary := _summed(items))}
        )

    @property
    def usage_by_model(self) -> Mapping[str, ModelUsage]:
        """The run's model usage by model name, in the order first used (read-only).

        Empty when no model was called; `usage.by_model` holds the same lines as a tuple.
        """
        usage = self.usage
        lines = () if usage is None else usage.by_model
        return MappingProxyType({line.model: line for line in lines})

    @property
    def gaps(self) -> tuple[CoverageEntry, ...]:
        return tuple(
            e for e in self.coverage if e.status in (CoverageStatus.GAP, CoverageStatus.PARTIAL)
        )

    def __repr__(self) -> str:
        # Short: `asyncio.run()` formats its result's repr on the way out, and a walk of
        # every record costs microseconds per task once per run for nothing.
        return (
            f"Report(run_id={self.run_id!r}, findings={len(self.findings)}, "
            f"coverage={len(self.coverage)}, escalations={len(self.escalations)}, "
            f"records={len(self.records)}, coverage_ratio={self.coverage_ratio:.2f}, "
            f"sufficient={self.sufficient})"
        )

    __str__ = __repr__

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data; values JSON cannot hold become their `str()`.

        Keys are camelCase throughout (`runId`, `coverageRatio`, `isRetryable`), and each
        step's outcome is its wire form, as `ErrorEnvelope.to_dict()` writes it.
        `Report.model_validate(data)` reads it back.
        """
        # A subagent may return any object; `model_dump(mode="json")` would raise on it.
        data: dict[str, Any] = pydantic_core.to_jsonable_python(self, by_alias=True, fallback=str)
        if not self.pending_approvals:
            # A run that waits for nobody keeps the shape its JSON always had.
            del data["pendingApprovals"]
        if not self.helper_usage:
            del data["helperUsage"]  # the same for a run whose helpers called no model
        if self.usage_stop is None:
            del data["usageStop"]  # and for a run no usage limit stopped
        if not self.model_concurrency:
            del data["modelConcurrency"]  # and for a run that called no model
        answered = [record.pop("answers") for record in data["records"]]
        for record, answers in zip(data["records"], answered, strict=True):
            if answers:  # a task nobody answered for keeps the shape its JSON always had
                record["answers"] = answers
        if any(answered):
            data["answeredApprovals"] = [answer for answers in answered for answer in answers]
        data["coverageRatio"] = self.coverage_ratio
        data["sufficient"] = self.sufficient
        usage = self.usage
        if usage is not None:
            data["usage"] = {
                **usage.model_dump(mode="json", by_alias=True),
                "bySubagent": {
                    name: summary.model_dump(mode="json", by_alias=True)
                    for name, summary in self.usage_by_subagent.items()
                },
            }
        # A report leaves the process: secrets pasted into a question are masked here too.
        return redact(data)  # type: ignore[no-any-return]

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=str)

    def to_markdown(self) -> str:
        """Findings by topic, then a Coverage section naming every gap and partial block.

        Findings are numbered `[1]`, `[2]`, ... in `findings` order, the numbers a summary
        written by `LLMSynthesizer` cites.
        """
        lines = ["# Report", ""]
        if self.summary:
            lines += [self.summary, ""]
        if self.synthesis_note:
            lines += [f"*{self.synthesis_note}*", ""]
        if self.usage_stop is not None:
            lines += [f"**{self.usage_stop.headline()}**", "", f"*{self.usage_stop.reason}*", ""]
        if not self.sufficient:
            lines += [
                f"**Insufficient coverage: {self.coverage_ratio:.0%} answered, "
                f"{self.min_coverage:.0%} required.**",
                "",
            ]
        lines += _findings_markdown(self.findings)
        lines += _coverage_markdown(self)
        if self.escalations:
            lines += ["## Escalations", ""]
            for entry in self.escalations:
                lines.append(f"- {entry.topic} ({entry.source}): {entry.reason}")
            lines.append("")
        lines += _pending_markdown(self.pending_approvals)
        lines += _answered_markdown(self.answered_approvals)
        lines += _usage_lines(self)
        return redact_text("\n".join(lines))


def _findings_markdown(findings: tuple[Finding, ...]) -> list[str]:
    """The Findings section: by topic, each numbered as a summary cites it."""
    lines = ["## Findings", ""]
    # Numbered in `findings` order across topics, as LLMSynthesizer's prompt numbers
    # them: a summary's [n] names the finding shown as [n] here.
    by_topic: dict[str, list[tuple[int, Finding]]] = {}
    for number, finding in enumerate(findings, start=1):
        by_topic.setdefault(finding.topic, []).append((number, finding))
    if not by_topic:
        lines += ["No findings.", ""]
    for topic, numbered in by_topic.items():
        lines += [f"### {topic}", ""]
        for number, finding in numbered:
            mark = " (preliminary)" if finding.preliminary else ""
            lines.append(f"- [{number}] {_text(finding.content)} — *{finding.source}*{mark}")
        lines.append("")
    return lines


def _coverage_markdown(report: Report) -> list[str]:
    """The Coverage section: every entry in a table, then each partial block."""
    lines = [
        "## Coverage",
        "",
        f"{report.coverage_ratio:.0%} of {len(report.coverage)} entries answered.",
        "",
    ]
    lines += [
        "| topic | source | status | reason | retry could help |",
        "| --- | --- | --- | --- | --- |",
    ]
    for entry in report.coverage:
        helps = "yes" if entry.is_retryable else "no"
        lines.append(
            f"| {_cell(entry.topic)} | {_cell(entry.source)} | {entry.status.value} "
            f"| {_cell(entry.reason or '')} | {helps} |"
        )
    lines.append("")
    for entry in report.coverage:
        if entry.status is CoverageStatus.PARTIAL and entry.partial is not None:
            partial = entry.partial
            lines += [f"### Partial: {entry.topic} ({entry.source})", ""]
            lines.append(f"- completed: {', '.join(partial.completed) or 'none'}")
            lines.append(f"- pending: {', '.join(partial.pending) or 'none'}")
            lines.append("- preliminary findings:")
            lines += [f"  - {_text(item)}" for item in partial.findings] or ["  - none"]
            lines.append("")
    return lines


def _usage_lines(report: Report) -> list[str]:
    """The Usage section: by model and by subagent, then the run's total and fail-overs."""
    usage = report.usage
    if usage is None:
        return []
    header = [
        "| {} | model calls | input | output | cache write | cache read | cost |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines = ["## Usage", "", header[0].format("model"), header[1]]
    lines += [_usage_row(line.model, line) for line in usage.by_model]
    lines += ["", header[0].format("subagent"), header[1]]
    lines += [_usage_row(name, summary) for name, summary in report.usage_by_subagent.items()]
    lines += [
        "",
        f"Total: {usage.model_calls} model calls, {usage.total_tokens} tokens, {_cost_of(usage)}.",
        "",
    ]
    if usage.unknown_token_calls:
        lines += [_unknown_tokens_note(usage.unknown_token_calls), ""]
    # One line per kind of fail-over, with its count: a chain down for a whole run fails
    # over the same way in every task, and 32 identical lines hide the one that differs.
    for failover, count in Counter(item for item in usage.failovers if not item.skipped).items():
        lines.append(
            f"- failed over: {failover.model} ({failover.error_type} after "
            f"{failover.attempts} attempts) → {failover.fallback}{_times(count)}"
        )
    lines += _skipped_lines(usage)
    if usage.failovers:
        lines.append("")
    if report.model_concurrency:
        shown = ", ".join(f"{name} {size}" for name, size in report.model_concurrency.items())
        lines += [f"Calls in flight per model at the end (adapted to overload): {shown}.", ""]
    return lines


def _skipped_lines(usage: UsageSummary) -> list[str]:
    """One line per outage of a model: since when, why, and where its calls went."""
    outages = Counter(
        (item.model, item.error_type, item.out_since, item.out_until, item.fallback)
        for item in usage.failovers
        if item.skipped
    )
    lines = []
    for (model, why, since, until, fallback), count in outages.items():
        assert since is not None  # only skips are counted here
        back = f" (until {until:%H:%M:%S})" if until is not None else ""
        calls = "1 call" if count == 1 else f"{count} calls"
        lines.append(
            f"- skipped: {model} {why} since {since:%H:%M:%S}{back}: {calls} went to {fallback}"
        )
    return lines


def _usage_row(name: str, usage: ModelUsage | UsageSummary) -> str:
    return (
        f"| {_cell(name)} | {usage.model_calls} | {usage.input_tokens} | {usage.output_tokens} "
        f"| {usage.cache_creation_tokens} | {usage.cache_read_tokens} "
        f"| {_cost_of(usage)} |"
    )


def _cost_of(usage: ModelUsage | UsageSummary) -> str:
    if usage.cost_usd is None and usage.unknown_token_calls:
        return "unknown (token counts missing)"
    return format_cost(usage.cost_usd)


def _unknown_tokens_note(calls: int) -> str:
    """Why the totals leave some tokens out: the answers' own counts were unusable."""
    some = "1 model call" if calls == 1 else f"{calls} model calls"
    return (
        f"Token counts unknown for {some}: the answer reported counts that cannot be "
        "(negative or absurd); they are not in these totals."
    )


def _times(count: int) -> str:
    """The count after a line that stands for `count` identical ones (nothing for one)."""
    return "" if count == 1 else f", {count} times"


def format_cost(cost: float | None) -> str:
    """A cost in US dollars as a report shows it; "unknown" when a price is missing."""
    return "unknown (no price for a model used)" if cost is None else f"${cost:.4f}"


def _renamed(old: str, new: str) -> None:
    warnings.warn(
        f"Report.{old} is now Report.{new} (a person's answer is an approval); "
        f"the old name goes in the next release",
        DeprecationWarning,
        stacklevel=3,
    )


def _pending_markdown(pending: tuple[PendingApproval, ...]) -> list[str]:
    if not pending:
        return []
    lines = [
        "## Pending approvals",
        "",
        "| id | task | tool | arguments | reason | policy |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for item in pending:
        arguments = "" if item.arguments is None else _text(item.arguments)
        lines.append(
            f"| `{item.id}` | {_cell(item.task_id)} | {_cell(item.tool or item.kind.value)} "
            f"| {_cell(arguments)} | {_cell(item.reason)} | {_cell(item.policy)} |"
        )
    return [*lines, ""]


def _answered_markdown(answered: tuple[AnsweredApproval, ...]) -> list[str]:
    if not answered:
        return []
    lines = [
        "## Answered approvals",
        "",
        "| id | task | answer | asked about | made as | why asked | reason given |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for item in answered:
        if item.kind is ApprovalKind.TOOL_CALL:
            asked = item.call_text()
            made = "" if item.answer == "reject" else item.call_text(as_made=True)
        else:
            asked = f"escalation: {_text(item.query)}"
            made = "" if item.edited_query is None else f"query: {_text(item.edited_query)}"
        lines.append(
            f"| `{item.id}` | {_cell(item.task_id)} | {item.answer} | {_cell(asked)} "
            f"| {_cell(made)} | {_cell(f'{item.reason} (policy {item.policy})')} "
            f"| {_cell(item.answer_reason or '')} |"
        )
    return [*lines, ""]


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return " ".join(text.split())


def _cell(value: str) -> str:
    return _text(value).replace("|", "\\|")


def _summed(summaries: Iterable[UsageSummary | None]) -> UsageSummary | None:
    """The sum of the summaries given; None when none of them is a summary."""
    present = [item for item in summaries if item is not None]
    if not present:
        return None
    return UsageSummary.of(
        (line for item in present for line in item.by_model),
        (failover for item in present for failover in item.failovers),
    )
