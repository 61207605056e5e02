"""The report as Markdown, JSON and a self-contained HTML page.

All three show the same things: the plan, the summary, each finding with its citation
(source, document, section, the query that found it), and the coverage of every
subtopic by every source with the reason for each gap.
"""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentmesh import Report
from agentmesh.models import UsageSummary
from agentmesh.report import CoverageEntry, CoverageStatus, Finding

from . import passages
from .merge import UNSURE
from .planner import Plan

__all__ = [
    "RunInfo",
    "answered_html",
    "failover_lines",
    "run_usage",
    "searched",
    "to_html",
    "to_json",
    "to_markdown",
    "usage_line",
]


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What the report alone does not say: the question, its plan, and how it was run."""

    plan: Plan
    sources: tuple[str, ...]
    mode: str
    seed: int
    faults: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # e.g. why Claude's plan could not be used
    resumed: bool = False  # --resume: the run went on from its checkpoints
    # Each source's tool calls in this invocation: a resume repeats none it restored.
    tool_calls: dict[str, int] = field(default_factory=dict)
    # What Claude's planning used: it runs before the coordinator, outside its report.
    planning_usage: UsageSummary | None = None

    def line(self, run_id: str) -> str:
        parts = [
            f"run {run_id}",
            self.mode,
            f"seed {self.seed}",
            f"sources {', '.join(self.sources)}",
        ]
        if self.resumed:
            parts.insert(1, "resumed")
        if self.faults:
            parts.append(f"injected {', '.join(self.faults)}")
        return " · ".join(parts)


def to_json(report: Report, info: RunInfo) -> str:
    """The Report's own JSON (`Report.to_dict()`), with the question and plan added.

    Its keys are camelCase like the report's own, so the document has one convention.
    """
    data = {
        "question": info.plan.question,
        "plan": [{"topic": s.title, "query": s.query} for s in info.plan.subtopics],
        "mode": info.mode,
        "seed": info.seed,
        "faults": list(info.faults),
        "notes": list(info.notes),
        "resumed": info.resumed,
        "toolCalls": info.tool_calls,
        **report.to_dict(),
    }
    if info.planning_usage is not None:
        data["planningUsage"] = info.planning_usage.model_dump(mode="json", by_alias=True)
    return json.dumps(data, indent=2, default=str, ensure_ascii=False)


def to_markdown(report: Report, info: RunInfo) -> str:
    lines = [f"# {info.plan.question.strip()}", "", f"*{info.line(report.run_id)}*", ""]
    lines += [f"> {note}\n" for note in info.notes]
    lines += ["## Plan", ""]
    lines += [f"{n}. {s.title} — query `{s.query}`" for n, s in enumerate(info.plan.subtopics, 1)]
    if info.plan.dropped:
        lines.append(f"\nNot searched (more than five subtopics): {', '.join(info.plan.dropped)}")
    lines.append("")
    if report.summary:
        lines += ["## Summary", "", report.summary, ""]
    if report.synthesis_note:
        lines += [f"*{report.synthesis_note}*", ""]
    lines += ["## Findings", ""]
    if report.findings:
        lines += ["Most relevant first, across subtopics and sources.", ""]
    else:
        lines += ["No findings.", ""]
    for number, finding in enumerate(report.findings, start=1):
        mark = " *(preliminary: from a failed attempt's partial results)*"
        lines.append(f"**[{number}]** {passages.to_markdown(_passage_text(finding))}")
        where, query = citation(finding)
        cited = f"{' · '.join(where)} · subtopic *{finding.topic}* · query `{query}`"
        lines.append(f"> {cited}{mark if finding.preliminary else ''}")
        lines.append("")
    lines += ["## Coverage", "", coverage_line(report), ""]
    lines += [
        "| subtopic | source | status | reason | retry could help |",
        "| --- | --- | --- | --- | --- |",
    ]
    for entry in report.coverage:
        lines.append(
            f"| {_cell(entry.topic)} | {entry.source} | {entry.status.value} "
            f"| {_cell(reason(entry))} | {'yes' if entry.is_retryable else 'no'} |"
        )
    lines.append("")
    for entry in report.coverage:
        if entry.status is CoverageStatus.PARTIAL and entry.partial is not None:
            partial = entry.partial
            lines += [f"### Partial: {entry.topic} × {entry.source}", ""]
            lines.append(f"- documents read: {', '.join(partial.completed) or 'none'}")
            lines.append(f"- not read: {', '.join(partial.pending) or 'none'}")
            lines.append(f"- passages kept as preliminary findings: {len(partial.findings)}")
            lines.append("")
    if report.escalations:
        lines += ["## Escalations", ""]
        lines += [f"- {e.topic} × {e.source}: {e.reason}" for e in report.escalations]
        lines.append("")
    usage = run_usage(report, info)
    if usage is not None:
        lines += [
            "## Usage",
            "",
            "| model | calls | input | output | cost |",
            "| --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| {line.model} | {line.model_calls} | {line.input_tokens} | {line.output_tokens} "
            f"| {_cost(line.cost_usd)} |"
            for line in usage.by_model
        ]
        lines += ["", f"{usage_line(report, info)}", ""]
        lines += [f"- {line}" for line in failover_lines(usage)]
    return "\n".join(lines)


def failover_lines(usage: UsageSummary) -> list[str]:
    """One line per kind of fail-over, with how many times it happened when more than once.

    A fallback chain whose first model is down fails over the same way in every task:
    one line with a count, not one line per task.
    """
    lines = []
    for f, count in Counter(usage.failovers).items():
        times = "" if count == 1 else f", {count} times"
        if f.out_since is not None:  # the run knew the model was out: not called
            lines.append(
                f"{f.model} skipped ({f.error_type} since {f.out_since:%H:%M:%S}) "
                f"for {f.fallback}{times}"
            )
            continue
        lines.append(
            f"{f.model} failed over ({f.error_type} after {f.attempts} attempts) "
            f"to {f.fallback}{times}"
        )
    return lines


def run_usage(report: Report, info: RunInfo) -> UsageSummary | None:
    """What the run's model calls used: planning and research together; None offline."""
    parts = [part for part in (info.planning_usage, report.usage) if part is not None]
    if not parts:
        return None
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def usage_line(report: Report, info: RunInfo) -> str | None:
    """One line: the run's model calls, tokens and cost (None when no model was used)."""
    usage = run_usage(report, info)
    if usage is None:
        return None
    unpriced = [line.model for line in usage.by_model if line.cost_usd is None]
    cost = _cost(usage.cost_usd)
    if unpriced:
        cost += f" (no price for {', '.join(unpriced)})"
    return f"usage: {usage.model_calls} model calls, {usage.total_tokens} tokens, cost {cost}"


def _cost(cost: float | None) -> str:
    return "unknown" if cost is None else f"${cost:.4f}"


def coverage_line(report: Report) -> str:
    """How many entries relevant passages answered, found passages that may not answer
    (partial, "unsure"), found nothing relevant, or failed."""
    count = Counter(entry.status for entry in report.coverage)
    covered, empty = count[CoverageStatus.COVERED], count[CoverageStatus.EMPTY]
    unsure = sum(map(is_unsure, report.coverage))
    failed = len(report.coverage) - covered - empty - unsure
    found = f"{unsure} with passages that may not answer; " if unsure else ""
    return (
        f"{covered} of {len(report.coverage)} entries answered with relevant passages; "
        f"{found}{empty} searched with nothing relevant found; {failed} not answered."
    )


def citation(finding: Finding) -> tuple[list[str], str]:
    """Where a finding is from (source, document, section) and the query that found it."""
    content = finding.content if isinstance(finding.content, dict) else {}
    where = [str(content.get("source", finding.source)), str(content.get("document", "?"))]
    if content.get("section"):
        where.append(str(content["section"]))
    return where, query_text(finding.attempted_query)


def query_text(query: str | dict[str, Any]) -> str:
    """A task query as written, or a tool call (a failed attempt's) as `tool(arg=value)`."""
    if isinstance(query, str):
        return query
    arguments = ", ".join(f"{k}={v!r}" for k, v in query.get("arguments", {}).items())
    return f"{query.get('tool', '?')}({arguments})"


def is_unsure(entry: CoverageEntry) -> bool:
    """Partial because the passages it found may not answer (`merge.UNSURE`), not
    because a search failed: nothing is missing, only the answer is in doubt."""
    return entry.status is CoverageStatus.PARTIAL and (entry.reason or "").startswith(UNSURE)


def reason(entry: CoverageEntry) -> str:
    if entry.status is CoverageStatus.COVERED:
        return ""
    return entry.reason or ""


def searched(report: Report, sources: Sequence[str]) -> list[str]:
    """The coverage's columns: `sources`, then any other source the report has an entry
    of (the openings route, which searches every local source by meaning)."""
    return list(dict.fromkeys([*sources, *(e.source for e in report.coverage)]))


def _topics(report: Report) -> list[str]:
    return list(dict.fromkeys(e.topic for e in report.coverage))


def _passage_text(finding: Finding) -> str:
    content = finding.content
    return str(content.get("text", "")) if isinstance(content, dict) else str(content)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


# --- HTML -----------------------------------------------------------------------------

_COLOURS = {
    CoverageStatus.COVERED: ("#2e7d32", "passages found"),
    CoverageStatus.EMPTY: ("#1565c0", "searched, nothing relevant"),
    CoverageStatus.PARTIAL: ("#f9a825", "failed, some documents read"),
    CoverageStatus.GAP: ("#c62828", "failed, nothing read"),
    CoverageStatus.ESCALATED: ("#8e24aa", "needs a person (not retried)"),
}
# A partial entry that is unsure of its passages (`is_unsure`) did not fail: its own
# colour and label, not the failures' amber.
_UNSURE = ("unsure", "#827717", "passages found that may not answer (partial, not a failure)")


def _look(entry: CoverageEntry) -> tuple[str, str]:
    """An entry's label and colour on the page."""
    if is_unsure(entry):
        return _UNSURE[0], _UNSURE[1]
    return entry.status.value, _COLOURS[entry.status][0]


def _legend() -> list[tuple[str, str, str]]:
    """(label, colour, meaning) of every look a cell can have, unsure after covered."""
    looks = [(status.value, colour, meaning) for status, (colour, meaning) in _COLOURS.items()]
    return [looks[0], _UNSURE, *looks[1:]]


_CSS = """
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
h1{font-size:1.5rem} .meta{color:#555} table{border-collapse:collapse;margin:.5rem 0}
th,td{border:1px solid #ccc;padding:.3rem .6rem;text-align:left;vertical-align:top}
td.status{color:#fff;font-weight:600;text-align:center}
.legend span{display:inline-block;margin-right:1rem} .swatch{display:inline-block;width:.9rem;
height:.9rem;margin-right:.3rem;vertical-align:middle;border-radius:2px}
.finding{margin:.8rem 0} .cite{color:#555;font-size:.9rem;border-left:3px solid #ccc;
padding-left:.5rem} .prelim{color:#b26a00} code{background:#f3f3f3;padding:0 .2rem}
pre{background:#f6f6f6;padding:.5rem;overflow-x:auto} pre code{background:none;padding:0}
"""


def to_html(report: Report, info: RunInfo) -> str:
    """A self-contained page: inline CSS, no script, no external asset."""
    e = html.escape
    topics = _topics(report)
    status = {(c.topic, c.source): c for c in report.coverage}
    columns = searched(report, info.sources)
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(info.plan.question)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{e(info.plan.question)}</h1>",
        f'<p class="meta">{e(info.line(report.run_id))}</p>',
        *(f'<p class="note">{e(note)}</p>' for note in info.notes),
        '<h2>Coverage</h2><table id="coverage"><thead><tr><th>subtopic</th>',
        *(f"<th>{e(s)}</th>" for s in columns),
        "</tr></thead><tbody>",
    ]
    for topic in topics:
        out.append(f"<tr><th>{e(topic)}</th>")
        for source in columns:
            entry = status.get((topic, source))
            if entry is None:
                out.append("<td>-</td>")
                continue
            label, colour = _look(entry)
            # The status first: the class a reader (or a test) looks for; then the look.
            look = f" {label}" if label != entry.status.value else ""
            out.append(
                f'<td class="status {entry.status.value}{look}" style="background:{colour}" '
                f'title="{e(reason(entry))}">{label}</td>'
            )
        out.append("</tr>")
    out.append('</tbody></table><p class="legend">')
    for label, colour, meaning in _legend():
        out.append(
            f'<span><i class="swatch" style="background:{colour}"></i>'
            f"<b>{label}</b>: {e(meaning)}</span>"
        )
    out.append(f"</p><p>{e(coverage_line(report))}</p>")
    if report.summary:
        out.append(f'<h2>Summary</h2><div id="summary">{_summary_html(report.summary)}</div>')
    out.append('<h2>Findings</h2><div id="findings">')
    numbered = list(enumerate(report.findings, start=1))
    for number, finding in numbered:
        prelim = (
            ' <span class="prelim">(preliminary: from a failed attempt)</span>'
            if finding.preliminary
            else ""
        )
        where, query = citation(finding)
        out.append(
            f'<div class="finding" id="f{number}"><b>[{number}]</b> '
            f"{passages.to_html(_passage_text(finding))}"
            f'<p class="cite">{e(" · ".join(where))} · subtopic <i>{e(finding.topic)}</i>'
            f" · query <code>{e(query)}</code>{prelim}</p></div>"
        )
    if not numbered:
        out.append("<p>No findings.</p>")
    out.append('</div><h2>Gaps and escalations</h2><table id="gaps"><thead><tr><th>subtopic</th>')
    out.append(
        "<th>source</th><th>status</th><th>reason</th><th>retry could help</th></tr></thead><tbody>"
    )
    problems = [
        c for c in report.coverage if c.status not in (CoverageStatus.COVERED, CoverageStatus.EMPTY)
    ]
    for entry in problems:
        label = entry.status.value + (" (unsure)" if is_unsure(entry) else "")
        out.append(
            f"<tr><td>{e(entry.topic)}</td><td>{e(entry.source)}</td><td>{label}</td>"
            f"<td>{e(reason(entry))}</td><td>{'yes' if entry.is_retryable else 'no'}</td></tr>"
        )
    if not problems:
        out.append(
            '<tr><td colspan="5">None: every subtopic was answered by every source.</td></tr>'
        )
    out.append("</tbody></table>")
    out += pending_html(report)
    out += answered_html(report)
    out += _usage_html(report, info)
    out.append("</body></html>")
    return "\n".join(out)


def pending_html(report: Report) -> list[str]:
    """The approvals waiting for a person (`Report.pending_approvals`), as a table."""
    if not report.pending_approvals:
        return []
    e = html.escape
    out = [
        '<h2>Pending approvals</h2><table id="pending"><thead><tr><th>id</th><th>task</th>'
        "<th>tool</th><th>arguments</th><th>reason</th><th>policy</th></tr></thead><tbody>"
    ]
    for item in report.pending_approvals:
        arguments = "" if item.arguments is None else json.dumps(item.arguments, default=str)
        out.append(
            f"<tr><td><code>{e(item.id)}</code></td><td>{e(item.task_id)}</td>"
            f"<td>{e(item.tool or item.kind.value)}</td><td>{e(arguments)}</td>"
            f"<td>{e(item.reason)}</td><td>{e(item.policy)}</td></tr>"
        )
    out.append("</tbody></table>")
    return out


def answered_html(report: Report) -> list[str]:
    """A person's answers the run used (`Report.answered_approvals`), as a table."""
    if not report.answered_approvals:
        return []
    e = html.escape
    out = [
        '<h2>Answered approvals</h2><table id="answered"><thead><tr><th>id</th><th>task</th>'
        "<th>answer</th><th>asked about</th><th>made as</th><th>why asked</th>"
        "<th>reason given</th></tr></thead><tbody>"
    ]
    for item in report.answered_approvals:
        if item.tool is None:  # an escalated task: its query, maybe edited
            asked, made = item.query, item.edited_query or ""
        else:
            asked = _call(item.tool, item.arguments)
            after = item.edited_arguments or item.arguments
            made = "" if item.answer == "reject" else _call(item.tool, after)
        out.append(
            f"<tr><td><code>{e(item.id)}</code></td><td>{e(item.task_id)}</td>"
            f"<td>{e(item.answer)}</td><td>{e(asked)}</td><td>{e(made)}</td>"
            f"<td>{e(item.reason)} (policy {e(item.policy)})</td>"
            f"<td>{e(item.answer_reason or '')}</td></tr>"
        )
    out.append("</tbody></table>")
    return out


def _call(tool: str, arguments: dict[str, Any] | None) -> str:
    return f"{tool}({json.dumps(arguments or {}, default=str)})"


def _usage_html(report: Report, info: RunInfo) -> list[str]:
    usage = run_usage(report, info)
    if usage is None:
        return []
    e = html.escape
    rows = [
        f"<tr><td>{e(line.model)}</td><td>{line.model_calls}</td><td>{line.input_tokens}</td>"
        f"<td>{line.output_tokens}</td><td>{_cost(line.cost_usd)}</td></tr>"
        for line in usage.by_model
    ]
    failovers = [f"<li>{e(line)}</li>" for line in failover_lines(usage)]
    return [
        '<h2>Usage</h2><table id="usage"><thead><tr><th>model</th><th>calls</th>'
        "<th>input</th><th>output</th><th>cost</th></tr></thead><tbody>",
        *rows,
        f"</tbody></table><p>{e(usage_line(report, info) or '')}</p>",
        *(['<ul id="failovers">', *failovers, "</ul>"] if failovers else []),
    ]


def _summary_html(summary: str) -> str:
    items = [html.escape(line.removeprefix("- ")) for line in summary.splitlines() if line.strip()]
    # The offline summary marks topics in **bold**; keep that, nothing else of Markdown.
    items = [re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", item) for item in items]
    return "".join(f"<p>{item}</p>" for item in items)
