"""A remote agent's question (`input-required`) answered by a person through a coordinator:
a pending approval, and on resume the answer sent to the same remote task, once."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from agentmesh import Coordinator
from agentmesh._engine._human import DecisionBook
from agentmesh.a2a import A2AAgent
from agentmesh.approvals import ApprovalKind, Approve, Edit, Reject
from agentmesh.checkpoints import CheckpointStore, MemoryStore, SQLiteStore
from agentmesh.report import CoverageStatus, Report
from agentmesh.retry import RetryPolicy
from tests.a2a.conftest import Remote

# Over the stream and over the blocking send, where the answer travels either way.
both_ways = pytest.mark.parametrize("path", ["stream", "block"])


def desk(remote: str, path: str, store: CheckpointStore, timeout: float = 60) -> Coordinator:
    agent = A2AAgent(
        f"{remote}/{path}",
        name="remote",
        retry=RetryPolicy(max_attempts=1),
        poll_interval=0.05,
        timeout=timeout,
    )
    return Coordinator([agent], store=store)


def answers_since(before: dict[str, list[str]]) -> list[list[str]]:
    """The answers each remote task got since `before` was taken (a copy)."""
    return [given for task_id, given in Remote.answers.items() if task_id not in before]


async def asked(coordinator: Coordinator, run_id: str, query: str = "input") -> Report:
    report = await coordinator.run([query], run_id=run_id)
    [entry] = report.coverage
    assert entry.status is CoverageStatus.ESCALATED
    return report


@both_ways
async def test_the_question_pends_and_the_answer_goes_to_the_same_task(
    remote: str, path: str
) -> None:
    runs, before = Remote.runs["input"], dict(Remote.answers)
    coordinator = desk(remote, path, MemoryStore())
    first = await asked(coordinator, f"year-{path}")
    [pending] = first.pending_approvals
    assert pending.kind is ApprovalKind.ESCALATION
    assert "which year?" in pending.reason
    assert "sk-remote" not in pending.reason  # the remote's question, secrets masked
    report = await coordinator.resume(f"year-{path}", approvals={pending.id: Edit(query="1999")})
    [entry] = report.coverage
    assert entry.status is CoverageStatus.COVERED
    assert report.findings[0].content == "answered: 1999"
    assert Remote.runs["input"] == runs + 1  # the task was sent once
    assert answers_since(before) == [["1999"]]  # the answer, once, to that task


@both_ways
async def test_a_second_question_pends_again_on_the_same_task(remote: str, path: str) -> None:
    before = dict(Remote.answers)
    coordinator = desk(remote, path, MemoryStore())
    run_id = f"twice-{path}"
    first = await asked(coordinator, run_id, "input-twice")
    second = await coordinator.resume(
        run_id, approvals={first.pending_approvals[0].id: Edit(query="1999")}
    )
    [pending] = second.pending_approvals
    assert "which month?" in pending.reason
    report = await coordinator.resume(run_id, approvals={pending.id: Edit(query="May")})
    assert report.findings[0].content == "answered: 1999, May"
    assert answers_since(before) == [["1999", "May"]]


async def test_a_rejected_question_is_a_gap_and_sends_nothing(remote: str) -> None:
    path, runs, before = "block", Remote.runs["input"], dict(Remote.answers)
    coordinator = desk(remote, path, MemoryStore())
    first = await asked(coordinator, f"no-{path}")
    pending = first.pending_approvals[0]
    report = await coordinator.resume(
        f"no-{path}", approvals={pending.id: Reject("not ours to say")}
    )
    [entry] = report.coverage
    assert entry.status is CoverageStatus.GAP
    assert entry.reason == "rejected by a person: not ours to say"
    assert Remote.runs["input"] == runs + 1
    assert answers_since(before) == []


async def test_an_approved_question_is_accepted_unanswered(remote: str) -> None:
    path, before = "block", dict(Remote.answers)
    coordinator = desk(remote, path, MemoryStore())
    first = await asked(coordinator, f"yes-{path}")
    approval = {first.pending_approvals[0].id: Approve()}
    report = await coordinator.resume(f"yes-{path}", approvals=approval)
    [entry] = report.coverage
    assert entry.status is CoverageStatus.GAP
    assert entry.reason.startswith("failure accepted by a person")
    assert answers_since(before) == []


@both_ways
async def test_an_answer_claimed_elsewhere_is_never_sent_here(remote: str, path: str) -> None:
    """Another process claimed the sending and has not sent yet: this one waits for the
    remote task to move past the question (here, to its timeout), sends nothing, and
    does not ask the person again."""
    before, store, run_id = dict(Remote.answers), MemoryStore(), f"elsewhere-{path}"
    first = await asked(desk(remote, path, store), run_id)
    pending = first.pending_approvals[0]
    book = await DecisionBook.load(store, run_id)
    await book.give({pending.id: Edit(query="2002")})
    key = f"remote/{pending.task_id}/answer/{pending.id}"
    assert await store.claim(run_id, "agentmesh.a2a", key, {"by": "another process"}) is None
    report = await desk(remote, path, store, timeout=0.3).resume(run_id)
    [entry] = report.coverage
    assert entry.status is CoverageStatus.GAP
    assert "timeout" in entry.reason
    assert report.pending_approvals == ()
    assert answers_since(before) == []


@both_ways
def test_two_processes_resuming_at_once_send_the_answer_once(
    remote: str, path: str, tmp_path: Path
) -> None:
    """Two coordinators, each on its own connection to one SQLite store and its own event
    loop, resume at a barrier after one answer: one sends it, the other follows the
    remote task by its id; both report the answered task."""
    before, where, run_id = dict(Remote.answers), tmp_path / "runs.db", f"crowd-{path}"

    async def ask_and_answer() -> None:
        store = SQLiteStore(where)
        first = await asked(desk(remote, path, store), run_id)
        book = await DecisionBook.load(store, run_id)  # answered as the console does
        await book.give({first.pending_approvals[0].id: Edit(query="2001")})
        await store.close()

    asyncio.run(ask_and_answer())
    barrier, found = threading.Barrier(2), []

    async def resume() -> None:
        store = SQLiteStore(where)
        coordinator = desk(remote, path, store)
        barrier.wait()
        report = await coordinator.resume(run_id)
        found.append(report.findings[0].content)
        await store.close()

    both = [threading.Thread(target=asyncio.run, args=(resume(),)) for _ in range(2)]
    for thread in both:
        thread.start()
    for thread in both:
        thread.join(30)
    assert found == ["answered: 2001"] * 2
    assert answers_since(before) == [["2001"]]
