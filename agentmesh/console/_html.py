"""The console's pages as HTML strings: every value from the store escaped, no scripts
but a few lines of vanilla JS, no build step.

Values in a store are untrusted (a finding is whatever a source returned): each goes
through `e()` before it reaches a page, also inside attributes.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Final
from urllib.parse import quote

from agentmesh._engine._answer_checks import describe
from agentmesh.console._runs import ApprovalState, RunStatus, RunSummary

__all__ = [
    "approval_html",
    "e",
    "money",
    "page",
    "run_url",
    "runs_html",
    "table",
    "when",
]

STYLE: Final = """
body{font-family:system-ui,sans-serif;margin:1.5rem;max-width:72rem;color:#222}
nav a{margin-right:1rem} table{border-collapse:collapse;margin:.5rem 0 1rem}
td,th{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;vertical-align:top}
.covered{background:#2e7d32;color:#fff}.empty{background:#1565c0;color:#fff}
.partial{background:#f9a825}.gap{background:#c62828;color:#fff}
.escalated{background:#8e24aa;color:#fff}.unfinished{background:#eee}
.status{font-weight:600} .notice{padding:.5rem;border:1px solid #c62828}
.approval{border:1px solid #999;padding:.5rem 1rem;margin:1rem 0}
pre{white-space:pre-wrap;margin:0} textarea{width:28rem;height:6rem}
"""


def e(value: object) -> str:
    """`value` as text that HTML shows as written, in element text and attributes."""
    return html.escape(str(value), quote=True)


def when(moment: datetime | None) -> str:
    return "" if moment is None else f"{moment:%Y-%m-%d %H:%M:%S} UTC"


def money(cost: float | None) -> str:
    return "unknown" if cost is None else f"${cost:.4f}"


def run_url(run_id: str, tail: str = "") -> str:
    return f"/runs/{quote(run_id, safe='')}{tail}"


def page(title: str, body: Iterable[str], *, notice: str | None = None) -> str:
    """A whole page: its title, the navigation, maybe a notice, and the body."""
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(title)} · agentmesh console</title><style>{STYLE}</style></head><body>",
        '<nav><a href="/">Runs</a><a href="/approvals">Approvals</a></nav>',
        f"<h1>{e(title)}</h1>",
    ]
    if notice:
        parts.append(f'<p class="notice" role="alert">{e(notice)}</p>')
    parts += body
    parts.append("</body></html>")
    return "\n".join(parts)


def table(head: Sequence[str], rows: Iterable[Sequence[str]], *, id: str = "") -> str:
    """A table whose cells are HTML already (escape values with `e` first)."""
    label = f' id="{e(id)}"' if id else ""
    out = [f"<table{label}><thead><tr>"]
    out += [f"<th>{e(cell)}</th>" for cell in head]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def runs_html(runs: Sequence[RunSummary], page_number: int, more: bool) -> list[str]:
    """The runs page's body: one row a run, newest first, and the pages around."""
    rows = [
        (
            f'<a href="{e(run_url(run.run_id))}">{e(run.run_id)}</a>',
            e(when(run.started)),
            f'<span class="status">{e(run.status)}</span>'
            + (f" ({run.waiting} to answer)" if run.status is RunStatus.WAITING else ""),
            e(_coverage(run)),
            e(money(run.cost_usd)),
        )
        for run in runs
    ]
    out = [table(("run", "started", "status", "coverage", "cost"), rows, id="runs")]
    if not runs:
        out.append("<p>No runs on this page.</p>")
    links = []
    if page_number > 1:
        links.append(f'<a rel="prev" href="/?page={page_number - 1}">newer</a>')
    if more:
        links.append(f'<a rel="next" href="/?page={page_number + 1}">older</a>')
    out.append(f"<p>{' '.join(links)}</p>")
    return out


def _coverage(run: RunSummary) -> str:
    ratio = run.coverage
    shown = "n/a" if ratio is None else f"{ratio:.0%}"
    return f"{shown} ({run.covered}/{run.tasks} tasks; {run.finished} finished)"


def approval_html(run_id: str, state: ApprovalState, *, can_answer: bool) -> str:
    """One question: what is asked and why, and its answer or the forms to give one."""
    pending = state.pending
    what = (
        f"call <code>{e(pending.tool)}</code> with<pre>{e(_json(pending.arguments))}</pre>"
        if pending.tool is not None
        else f"escalated task, query <q>{e(pending.query)}</q>"
    )
    out = [
        f'<div class="approval" id="approval-{e(pending.id)}">',
        f"<p><strong>{e(pending.id)}</strong> · run {e(run_id)} · task {e(pending.task_id)} "
        f"({e(pending.topic)}, subagent {e(pending.subagent)})</p>",
        f"<p>{what}</p>",
        f"<p>policy <code>{e(pending.policy)}</code>: {e(pending.reason)}</p>",
    ]
    if state.answer is not None:
        by = f" by {e(state.answered_by)}" if state.answered_by else ""
        used = "used by the run" if state.applied else "the run goes on when resumed"
        out.append(
            f'<p class="answered">Answered {e(_answer_text(state))}{by} at '
            f"{e(when(state.answered_at))} ({used}).</p>"
        )
    elif can_answer:
        out.append(_forms(run_id, state))
    else:
        out.append("<p>Log in with the console's link to answer.</p>")
    out.append("</div>")
    return "\n".join(out)


def _forms(run_id: str, state: ApprovalState) -> str:
    """One form, three buttons: the one pressed is the answer (`action`)."""
    pending = state.pending
    target = e(run_url(run_id, f"/approvals/{quote(pending.id, safe='')}"))
    edit = (
        f'<textarea name="arguments" aria-label="arguments">{e(_json(pending.arguments))}'
        "</textarea>"
        if pending.tool is not None
        else f'<input name="query" aria-label="query" value="{e(pending.query)}">'
    )
    return (
        f'<form method="post" action="{target}" class="answer">'
        '<p><label>your name <input name="by" required maxlength="80"></label> '
        '<button name="action" value="approve">Approve</button></p>'
        '<p><input name="reason" placeholder="why (to reject)" aria-label="reason"> '
        '<button name="action" value="reject">Reject</button></p>'
        f'<p>{edit} <button name="action" value="edit">Edit</button></p></form>'
    )


def _answer_text(state: ApprovalState) -> str:
    return "" if state.answer is None else describe(state.answer)


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)
