"""A checkpointed pipeline whose side effect happens exactly once, across a crash and a resume.

Save it as `checkpointed_pipeline.py` and run `python checkpointed_pipeline.py` (in a clone
of the repository: `python -m examples.howto.checkpointed_pipeline`). Offline: SQLite in
a temp dir.

The pipeline has three stages: an expensive retrieval, a summary, and a notification that
emails the summary (the side effect: a line appended to an outbox file). The program
runs the pipeline twice under one run id:

1. in a child process that is killed (`os._exit`, no clean-up) right after the email left;
2. again in this process: the same run id resumes. Retrieval and summary are read back
   from their checkpoints, and the email is replayed from the side-effect ledger, not sent
   a second time.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from agentmesh import Context, Outcome, Pipeline, Success, Task, subagent, tool
from agentmesh.checkpoints import SQLiteStore

RUN_ID = "weekly-digest-2026-12"
# Only the child process crashes; the flag lives outside the task, so both runs send the
# same task (and so resume the same task's ledger).
CRASH_AFTER_SENDING = "--crash" in sys.argv


async def retrieval(topic: str) -> list[str]:
    """The expensive stage (in real life: minutes of searching); checkpointed once done."""
    print(f"  retrieval: searching three sources for {topic!r} (expensive)")
    return [f"{topic}: finding {n}" for n in (1, 2, 3)]


async def summary(findings: list[str]) -> str:
    print(f"  summary: condensing {len(findings)} findings")
    return f"{len(findings)} findings this week; first: {findings[0]}"


def _append(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as file:
        file.write(line)


@tool()  # not idempotent, so every completed call is recorded in the ledger
async def send_email(outbox: str, to: str, body: str) -> str:
    # A thread, so the event loop is not blocked by the disk.
    await asyncio.to_thread(_append, Path(outbox), f"To: {to} | {body}\n")
    print(f"  notify: email sent to {to}")
    return f"sent to {to}"


@subagent(name="mailer")
async def mailer(task: Task, ctx: Context) -> str:
    receipt = await ctx.call(
        send_email, outbox=task.metadata["outbox"], to="team@example.com", body=task.query
    )
    if CRASH_AFTER_SENDING:
        # The worst moment: the email is out, nothing after it has been checkpointed.
        print("  ** the process dies here **", flush=True)
        os._exit(1)
    return receipt


def build(store: SQLiteStore, outbox: Path) -> Pipeline:
    async def notify(text: str) -> Outcome:
        # The mailer shares the pipeline's store and run id, so its ledger resumes too.
        task = Task(query=text, metadata={"outbox": str(outbox)})
        return await mailer.run(task, run_id=RUN_ID, store=store)

    return Pipeline(
        [("retrieval", retrieval), ("summary", summary), ("notify", notify)], store=store
    )


async def run_once(workdir: Path) -> Outcome:
    async with SQLiteStore(workdir / "checkpoints.sqlite") as store:
        return await build(store, workdir / "outbox.txt").run("asyncio", run_id=RUN_ID)


def main() -> None:
    if CRASH_AFTER_SENDING:  # we are the child: run until the crash
        asyncio.run(run_once(Path(sys.argv[-1])))
        return
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        print("== run 1: a child process, killed right after sending the email")
        # The same program again, started as this one was: `python -m ...` or `python file.py`.
        program = ["-m", __spec__.name] if __spec__ is not None else [__file__]
        child = subprocess.run([sys.executable, *program, "--crash", tmp], check=False)
        print(f"  (exit code {child.returncode})")

        print("== run 2: the same run id again, in this process")
        outcome = asyncio.run(run_once(workdir))
        assert isinstance(outcome, Success), outcome
        # Nothing above printed "retrieval", "summary" or "email sent": all three were read back.
        print(f"  result: {outcome.data}")

        emails = (workdir / "outbox.txt").read_text(encoding="utf-8").splitlines()
        print(f"\nemails in the outbox: {len(emails)}")
        for line in emails:
            print(f"  {line}")


if __name__ == "__main__":
    main()
