"""The run page: the same content as the HTML report, rebuilt from the store.

Coverage grid (topic x source), findings with numbered citations, gaps, partial
completion, usage and cost by subagent and model, the routes each task took, model
failovers, and the questions for a person. `report_html` is the same page without
forms, as a file to download.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from agentmesh.console._html import approval_html, e, money, page, run_url, table, when
from agentmesh.console._runs import RunView
from agentmesh.envelope import ErrorEnvelope
from agentmesh.report import Report
from agentmesh.usage import ModelUsage, UsageSummary

__all__ = ["report_html", "run_html"]

_GRID_END: Final = "<!-- coverage -->"


def run_html(
    view: RunView, *, can_answer: bool, notice: str | None = None, live: Sequence[str] = ()
) -> str:
    """The run page, with forms to answer its open questions when `can_answer`, and the
    event log's panel `live` (`_live.recent_events`) after the grid."""
    body = _body(view, can_answer)
    at = body.index(_GRID_END) + 1
    return page(f"Run {view.summary.run_id}", [*body[:at], *live, *body[at:]], notice=notice)


def report_html(view: RunView) -> str:
    """The run's report as a standalone HTML file: the run page without forms."""
    return page(f"Run {view.summary.run_id}", _body(view, False, downloads=False))


def _body(view: RunView, can_answer: bool, *, downloads: bool = True) -> list[str]:
    summary, report = view.summary, view.report
    out = [
        f'<p>status <span class="status" id="status">{e(summary.status)}</span> · started '
        f"{e(when(summary.started))} · last saved {e(when(summary.updated))} · "
        f"{summary.finished} of {summary.tasks} tasks finished · cost {e(money(summary.cost_usd))}"
        "</p>"
    ]
    if downloads:
        links = " ".join(
            f'<a download href="{e(run_url(summary.run_id, "/report." + kind))}">{label}</a>'
            for kind, label in (("md", "Markdown"), ("json", "JSON"), ("html", "HTML"))
        )
        out.append(f"<p>Report: {links}</p>")
    if view.approvals:
        out.append('<h2 id="approvals">Approvals</h2>')
        out += [approval_html(summary.run_id, s, can_answer=can_answer) for s in view.approvals]
    out += _grid(view)
    out += _findings(report)
    out += _gaps(report)
    out += _usage(report)
    out += _routes(report)
    return out


def _grid(view: RunView) -> list[str]:
    report = view.report
    sources = sorted({entry.source for entry in report.coverage} | {t.subagent for t in view.plan})
    cells: dict[tuple[str, str], str] = {}
    for entry in report.coverage:
        cells[entry.topic, entry.source] = (
            f'<span class="{e(entry.status)}">{e(entry.status)}</span>'
        )
    for task in view.unfinished:
        cells[task.task.label, task.subagent] = '<span class="unfinished">not finished</span>'
    topics = list(dict.fromkeys(task.task.label for task in view.plan))
    # Each cell names its topic and source, for the live page to find it by (as text).
    rows = "".join(
        f"<tr><td>{e(topic)}</td>"
        + "".join(
            f'<td data-topic="{e(topic)}" data-source="{e(s)}">{cells.get((topic, s), "")}</td>'
            for s in sources
        )
        + "</tr>"
        for topic in topics
    )
    grid = (
        '<table id="grid"><thead><tr>'
        + "".join(f"<th>{e(cell)}</th>" for cell in ("topic", *sources))
        + f"</tr></thead><tbody>{rows}</tbody></table>"
    )
    entries = [
        (
            e(entry.topic),
            e(entry.source),
            f'<span class="{e(entry.status)}">{e(entry.status)}</span>',
            e(entry.reason or ""),
            "yes" if entry.is_retryable else "no",
        )
        for entry in report.coverage
    ]
    return [
        "<h2>Coverage</h2>",
        grid,
        table(("topic", "source", "status", "reason", "retry could help"), entries, id="coverage"),
        _GRID_END,
    ]


def _findings(report: Report) -> list[str]:
    out = ["<h2>Findings</h2>"]
    if not report.findings:
        return [*out, "<p>None.</p>"]
    out.append('<ol id="findings">')
    for number, finding in enumerate(report.findings, 1):
        early = " (preliminary)" if finding.preliminary else ""
        out.append(
            f'<li id="finding-{number}"><pre>{e(_text(finding.content))}</pre>'
            f"<small>[{number}] {e(finding.topic)} · {e(finding.source)} · "
            f"asked {e(_text(finding.attempted_query))}{early}</small></li>"
        )
    out.append("</ol>")
    return out


def _gaps(report: Report) -> list[str]:
    out = ["<h2>Gaps and partial completion</h2>"]
    if report.usage_stop is not None:
        out.append(f"<p>{e(report.usage_stop.headline())}</p>")
    if report.synthesis_note:
        out.append(f"<p>{e(report.synthesis_note)}</p>")
    rows = []
    for entry in report.gaps:
        partial = entry.partial
        done = "" if partial is None else ", ".join(partial.completed)
        left = "" if partial is None else ", ".join(partial.pending)
        kept = 0 if partial is None else len(partial.findings)
        rows.append(
            (
                e(entry.topic),
                e(entry.source),
                e(entry.status),
                e(entry.reason or ""),
                e(done),
                e(left),
                str(kept),
            )
        )
    if not rows:
        return [*out, "<p>None.</p>"]
    head = ("topic", "source", "status", "reason", "completed", "pending", "findings kept")
    return [*out, table(head, rows, id="gaps")]


def _usage(report: Report) -> list[str]:
    out = ["<h2>Usage and cost</h2>"]
    usage = report.usage
    if usage is None:
        return [*out, "<p>No model calls recorded.</p>"]
    head = ("", "calls", "input tokens", "output tokens", "cost")
    by_subagent = [_usage_row(name, u) for name, u in report.usage_by_subagent.items()]
    by_model = [_usage_row(name, u) for name, u in report.usage_by_model.items()]
    out += ["<h3>By subagent</h3>", table(head, by_subagent, id="usage-subagent")]
    out += ["<h3>By model</h3>", table(head, by_model, id="usage-model")]
    out.append("<h3>Failovers</h3>")
    failovers = [
        (e(f.model), e(f.error_type), str(f.attempts), e(f.fallback)) for f in usage.failovers
    ]
    if failovers:
        out.append(table(("model", "error", "attempts", "fell back to"), failovers))
    else:
        out.append("<p>None.</p>")
    return out


def _usage_row(name: str, usage: UsageSummary | ModelUsage) -> tuple[str, ...]:
    return (
        e(name),
        str(usage.model_calls),
        str(usage.input_tokens),
        str(usage.output_tokens),
        e(money(usage.cost_usd)),
    )


def _routes(report: Report) -> list[str]:
    out = ["<h2>Routes</h2>"]
    for record in report.records:
        rows = []
        for number, step in enumerate(record.steps, 1):
            outcome = step.outcome
            result = (
                f"{outcome.error_category}/{outcome.error_type}: {outcome.message}"
                if isinstance(outcome, ErrorEnvelope)
                else ("empty" if outcome.is_empty else "success")
            )
            rows.append(
                (
                    str(number),
                    e(step.subagent),
                    e(step.query),
                    e(result),
                    e(step.decision),
                    e(step.reason or ""),
                )
            )
        out.append(f"<h3>{e(record.task_id)} · {e(record.task.label)} → {e(record.status)}</h3>")
        out.append(table(("step", "subagent", "query", "outcome", "route", "why"), rows))
    return out


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
