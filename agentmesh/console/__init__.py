"""The run console: runs, reports and a person's approvals in the browser, from the store.

    python -m agentmesh.console .agentmesh/checkpoints.sqlite
    python -m agentmesh.console postgresql://user@db/agentmesh --port 8400 --read-only

It reads only the checkpoint store a `Coordinator(store=...)` writes (a SQLite path or
a PostgreSQL connection string) and shows, newest first, every run with its status
(running, waiting for a person, answered and waiting to resume, finished, stopped),
coverage and cost; a run's coverage grid, findings with numbered citations, gaps,
partial completion, usage and cost by subagent and model, routes, failovers, and its
report to download as Markdown, JSON or HTML; and every pending approval, to Approve,
Reject with a reason, or Edit (arguments checked against the tool's JSON schema).

An answer is claimed atomically in the store, as `coordinator.resume(run_id,
approvals=...)` claims one: of two people answering at once exactly one wins, and the
other sees whose answer stands and when. The application that owns the coordinator
then goes on with `await coordinator.resume(run_id)`, which takes the answers from the
store; or the console, started with it (`--coordinator app.module:coordinator`, or
`create_app(store, coordinator=...)`), resumes the run itself once it is answered.

The console binds 127.0.0.1 by default. Answering needs the bearer token or the
one-time login link it prints at start. Needs the `console` extra
(`pip install 'agentmesh-failwell[console]'`); `import agentmesh` imports none of it.
"""

from agentmesh.console._access import Access
from agentmesh.console._answer import AnswerTaken, answer_approval
from agentmesh.console._app import create_app
from agentmesh.console._runs import (
    ApprovalState,
    PlannedTask,
    RunStatus,
    RunSummary,
    RunView,
    list_runs,
    load_run,
)

__all__ = [
    "Access",
    "AnswerTaken",
    "ApprovalState",
    "PlannedTask",
    "RunStatus",
    "RunSummary",
    "RunView",
    "answer_approval",
    "create_app",
    "list_runs",
    "load_run",
]
