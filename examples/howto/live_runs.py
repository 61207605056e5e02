"""A run watched as it happens, paused for a person's approval, and resumed with an Approve.

Save it as `live_runs.py` and run `python live_runs.py` (in a clone of the repository:
`python -m examples.howto.live_runs`). Offline: SQLite in a temp dir.

A release agent runs the tests (which time out once), deploys to staging, and asks to
deploy to production. A policy leaves production deploys to a person: the task stops
before the call, and the run ends with a pending approval. The program prints each event
as a progress line, then answers it with `Approve()` and resumes the run, which
makes the deploy exactly once. (`examples/support_desk` does the same across processes,
from the command line.)
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from agentmesh import Context, Coordinator, RetryPolicy, Task, TransientError, subagent, tool
from agentmesh.approvals import Approve
from agentmesh.checkpoints import SQLiteStore
from agentmesh.events import (
    AttemptFailed,
    EscalationPending,
    Event,
    RunFinished,
    RunStream,
    TaskFinished,
    TaskStarted,
)
from agentmesh.policies import Ruling, ToolCallEvent, pre_tool_use
from agentmesh.testing import FailTimes, RecordingSleep

test_runner_hiccup = FailTimes(
    1, lambda: TransientError("CI runner timed out", error_type="timeout")
)
deploys: list[str] = []


@tool(idempotent=True)
async def run_tests(suite: str) -> str:
    test_runner_hiccup()
    return f"{suite}: 412 passed"


@tool(impact="safety")  # not idempotent: the ledger makes an approved deploy happen once
async def deploy(environment: str) -> str:
    deploys.append(environment)
    return f"deployed to {environment}"


@pre_tool_use(tool=deploy, asks=True)  # asks=True: the coordinator insists on a store
def production_needs_a_person(event: ToolCallEvent) -> Ruling | None:
    if event.arguments["environment"] == "production":
        return Ruling.ask("production deploys need a release manager")
    return None


@subagent(name="release", checkpoint=True, retry=RetryPolicy(sleep=RecordingSleep()))
async def release(task: Task, ctx: Context) -> str:
    if task.topic == "tests":
        return await ctx.call(run_tests, suite=task.query)
    return await ctx.call(deploy, environment=task.query)


PLAN = [
    Task(query="unit", topic="tests"),
    Task(query="staging", topic="staging"),
    Task(query="production", topic="production"),
]


def progress(event: Event) -> str | None:
    """One line per event a person watching the run cares about; None for the rest."""
    match event:
        case TaskStarted(task=task):
            return f"started   {task.topic}"
        case AttemptFailed(source=source, envelope=envelope, retry_in=delay) if delay is not None:
            return f"retrying  {source}: {envelope.error_type}, again in {delay:.2f}s"
        case EscalationPending(task=task, approval_id=approval_id):
            return f"waiting   {task.topic}: approval {approval_id}"
        case TaskFinished(entry=entry):
            return f"finished  {entry.topic}: {entry.status.value}"
    return None


async def watch(stream: RunStream) -> RunFinished:
    """Print the run's progress; the last event always carries the report."""
    async with stream as events:
        async for event in events:
            if (line := progress(event)) is not None:
                print(f"  #{event.seq:<3} {line}")
            if isinstance(event, RunFinished):
                return event
    raise AssertionError("a stream always ends with RunFinished")


async def main(directory: Path) -> None:
    async with SQLiteStore(directory / "runs.sqlite") as store:
        coordinator = Coordinator([release], policies=[production_needs_a_person], store=store)
        print("== the run")
        first = await watch(coordinator.stream(PLAN, run_id="release-7"))
        pending = first.report.pending_approvals[0]
        print(f"pending: {pending.id} on {pending.tool}({pending.arguments}): {pending.reason}")

        print("\n== a person approves; the run goes on")
        done = await watch(
            coordinator.resume_stream("release-7", approvals={pending.id: Approve()})
        )
        for entry in done.report.coverage:
            print(f"{entry.topic:<11} {entry.status.value:<8} {entry.reason or ''}")
        print(f"\ndeploys made: {deploys}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(Path(tmp)))
