"""The live run page: a run's events as server-sent events, and the script that shows them.

`GET /runs/{id}/events?after=N` streams the run's event log from position N (or the
browser's `Last-Event-ID` on a reconnect): one `run` message per event, as JSON with
one line of text and, for a task's start and end, the grid cell it changes; an `end`
message after `RunFinished` (with the run's status then: finished, or waiting for a
person); a comment every `KEEPALIVE` seconds while nothing comes.
PostgreSQL notifies the stream of each event; SQLite is looked at four times a second.

Everything from the store is text: the JSON is built server-side and the script sets
`textContent` (never HTML), and a cell's class only from the known statuses.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse

from agentmesh.checkpoints import CheckpointStore, event_table_of
from agentmesh.console._html import e, run_url
from agentmesh.console._runs import RunStatus, RunView
from agentmesh.events import (
    ApprovalApplied,
    AttemptFailed,
    EscalationPending,
    LoggedEvent,
    PartialRecorded,
    PolicyRuling,
    Routed,
    RunFinished,
    RunStarted,
    TaskFinished,
    TaskStarted,
    UsageUpdated,
    read_events,
)

__all__ = ["KEEPALIVE", "event_line", "recent_events", "stream_events"]

KEEPALIVE: Final = 15.0
PAGE: Final = 200
RECENT: Final = 30

SCRIPT: Final = """
(function () {
  const log = document.getElementById("events");
  const grid = document.getElementById("grid");
  const known = new Set(["covered", "empty", "partial", "gap", "escalated", "running"]);
  const source = new EventSource(log.dataset.src);
  source.addEventListener("run", function (message) {
    const item = JSON.parse(message.data);
    const line = document.createElement("li");
    line.textContent = item.line;
    log.appendChild(line);
    if (item.cell) {
      for (const cell of grid.querySelectorAll("td[data-topic]")) {
        if (cell.dataset.topic === item.cell.topic && cell.dataset.source === item.cell.source) {
          const mark = document.createElement("span");
          mark.className = known.has(item.cell.status) ? item.cell.status : "";
          mark.textContent = item.cell.status;
          cell.replaceChildren(mark);
        }
      }
    }
  });
  source.addEventListener("end", function (message) {
    source.close();
    document.getElementById("status").textContent = JSON.parse(message.data).status;
  });
})();
"""


async def recent_events(store: CheckpointStore, view: RunView) -> list[str]:
    """The event log's panel of the run page: its latest `RECENT` events and, while the
    run goes on, the script that appends the ones to come and updates the grid; nothing
    for a run without an event log."""
    run_id = view.summary.run_id
    if event_table_of(store) is None:
        return []
    head = await read_events(store, run_id, limit=0)
    if head.last_event_at is None:
        return []
    after = max(0, head.last_position - RECENT)
    page = await read_events(store, run_id, after=after, limit=RECENT)
    lines = "".join(f"<li>{e(event_line(logged))}</li>" for logged in page.events)
    source = run_url(run_id, f"/events?after={page.position}")
    out = ["<h2>Events</h2>"]
    if page.dropped:
        out.append(f"<p>{page.dropped} earlier events were dropped to keep the log's size.</p>")
    out.append(f'<ol id="events" data-src="{e(source)}">{lines}</ol>')
    if view.summary.status in (RunStatus.RUNNING, RunStatus.ANSWERED):
        out.append(f"<script>{SCRIPT}</script>")
    return out


async def stream_events(store: CheckpointStore, run_id: str, request: Request) -> Response:
    """The run's events from `after=` (or `Last-Event-ID`) on, as server-sent events; 404
    for a store that keeps no event log or a run with none (a stream open for ever)."""
    if event_table_of(store) is None:
        return PlainTextResponse("this store keeps no event log", status_code=404)
    if (await read_events(store, run_id, limit=0)).last_event_at is None:
        return PlainTextResponse(f"no events for run {run_id!r}", status_code=404)
    try:
        after = int(request.headers.get("last-event-id") or request.query_params.get("after", "0"))
    except ValueError:
        after = 0
    headers = {"cache-control": "no-store", "x-accel-buffering": "no"}
    return StreamingResponse(
        _messages(store, run_id, max(0, after)), media_type="text/event-stream", headers=headers
    )


async def _messages(store: CheckpointStore, run_id: str, after: int) -> AsyncIterator[str]:
    # Starlette cancels this generator when the browser goes away.
    while True:
        page = await read_events(store, run_id, after=after, limit=PAGE, wait=KEEPALIVE)
        if not page.events:
            yield ": still here\n\n"
        for logged in page.events:
            data = json.dumps(_item(logged), separators=(",", ":"))
            yield f"id: {logged.position}\nevent: run\ndata: {data}\n\n"
            if isinstance(logged.event, RunFinished):
                waits = logged.event.report.pending_approvals
                status = RunStatus.WAITING if waits else RunStatus.FINISHED
                yield f"event: end\ndata: {json.dumps({'status': str(status)})}\n\n"
                return
        after = page.position


def _item(logged: LoggedEvent) -> dict[str, Any]:
    event = logged.event
    cell = None
    if isinstance(event, TaskStarted):
        cell = {"topic": event.task.label, "source": event.subagent, "status": "running"}
    elif isinstance(event, TaskFinished):
        entry = event.entry
        cell = {"topic": entry.topic, "source": entry.source, "status": str(entry.status)}
    return {
        "position": logged.position,
        "kind": type(event).__name__,
        "taskId": event.task_id,
        "line": event_line(logged),
        "cell": cell,
    }


def event_line(logged: LoggedEvent) -> str:
    """One line of text a person reads for an event, stamped with its time."""
    return f"{logged.saved_at:%H:%M:%S} {_said(logged.event)}"


def _said(event: Any) -> str:
    match event:
        case RunStarted(tasks=tasks):
            return f"run started: {tasks} tasks"
        case TaskStarted(task=task, subagent=subagent):
            return f"{task.label} × {subagent}: started"
        case AttemptFailed(source=source, attempt=attempt, envelope=envelope, retry_in=delay):
            then = "" if delay is None else f", retrying in {delay:.2f}s"
            return f"{source}: attempt {attempt} failed ({envelope.error_type}){then}"
        case PolicyRuling(ruling=ruling):
            return f"policy {ruling.policy}: {ruling.action} on {ruling.tool}"
        case Routed(task=task, subagent=subagent, decision=decision, reason=reason):
            why = f": {reason}" if reason else ""
            return f"{task.label} × {subagent}: route {type(decision).__name__}{why}"
        case PartialRecorded(subagent=subagent, completed=completed):
            return f"{subagent}: progress recorded ({len(completed)} completed)"
        case EscalationPending(reason=reason):
            return f"waiting for a person: {reason}"
        case ApprovalApplied(approval=approval):
            return f"answer used: {approval.answer} ({approval.id})"
        case UsageUpdated(model=model, usage=usage):
            return f"{model}: call settled ({usage.input_tokens} in, {usage.output_tokens} out)"
        case TaskFinished(entry=entry):
            return f"{entry.topic} × {entry.source}: {entry.status}"
        case RunFinished(report=report):
            return f"run finished: {report.coverage_ratio:.0%} covered"
    return type(event).__name__
