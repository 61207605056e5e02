"""A person's answer over A2A is claimed, never checked then done: two servers on one
SQLite store, in two threads at a barrier, take the same answer; exactly one goes on."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from agentmesh._engine._human import DecisionBook
from agentmesh.a2a._server_answers import Answered, Given, take_answer
from agentmesh.checkpoints import SQLiteStore
from agentmesh.envelope import ErrorEnvelope
from agentmesh.scope import RunScope
from agentmesh.task import Task
from tests.a2a.served import message, refund_limit, refunds

RUN = "a2a-claims"


async def pend(store: SQLiteStore) -> str:
    """A refund over the limit, run as the server runs it: its question waits in `store`."""
    book = await DecisionBook.load(store, RUN)
    scope = RunScope(RUN, store=store, decisions=book, policies=(refund_limit,))
    task = Task(query="refund", metadata={"order": "G-7", "amount": 500})
    outcome = await refunds.run(task, scope=scope, task_id="a2a")
    assert isinstance(outcome, ErrorEnvelope)
    [pending] = book.unanswered()
    return pending.id


class TestClaims:
    def test_of_two_servers_answering_at_once_exactly_one_resumes(self, tmp_path: Path) -> None:
        """Both answers are read, one is claimed; the other says whose answer stands."""
        path = tmp_path / "store.sqlite"
        asyncio.run(pend(SQLiteStore(path)))
        barrier = threading.Barrier(2)
        results: dict[str, Given] = {}

        def answer(who: str) -> None:
            store = SQLiteStore(path)  # a server of its own on the same file
            barrier.wait()
            results[who] = asyncio.run(take_answer(store, RUN, message("approve", by=who)))

        threads = [threading.Thread(target=answer, args=(who,)) for who in ("ann", "bob")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        nexts = sorted(given.next.value for given in results.values())
        assert nexts == [Answered.ELSEWHERE.value, Answered.RESUME.value]
        [lost] = [given for given in results.values() if given.next is Answered.ELSEWHERE]
        winner = next(who for who, given in results.items() if given.next is Answered.RESUME)
        assert "already answered" in lost.note or "goes on with the answer" in lost.note
        book = asyncio.run(DecisionBook.load(SQLiteStore(path), RUN))
        [entry] = book.entries()
        assert entry.answered_by in ("ann", "bob")
        assert winner in ("ann", "bob")

    def test_two_people_answering_a_run_s_two_questions_at_once_resume_it_once(
        self, tmp_path: Path
    ) -> None:
        """Two questions of one run, each answered by another person through another
        server at once, both having read the run before either claimed: whoever claims
        last sees both answered, so the run resumes, once (before: both said "waiting")."""
        path = tmp_path / "store.sqlite"

        async def pend_two() -> list[str]:
            async with SQLiteStore(path) as store:
                first = await pend(store)
                book = await DecisionBook.load(store, RUN)
                scope = RunScope(RUN, store=store, decisions=book, policies=(refund_limit,))
                task = Task(query="refund", metadata={"order": "H-8", "amount": 700})
                await refunds.run(task, scope=scope, task_id="a2a-2")
                return [first, *(p.id for p in book.unanswered() if p.id != first)]

        ids = asyncio.run(pend_two())
        assert len(ids) == 2
        barrier = threading.Barrier(2)
        results: dict[str, Given] = {}

        def answer(who: str, approval_id: str) -> None:
            store = SQLiteStore(path)
            said = message("approve", by=who)
            said.parts.add().data.struct_value.update(
                {"approvalId": approval_id, "action": "approve"}
            )
            barrier.wait()
            results[who] = asyncio.run(take_answer(store, RUN, said))

        threads = [
            threading.Thread(target=answer, args=(who, approval_id))
            for who, approval_id in zip(("ann", "bob"), ids, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        nexts = [given.next for given in results.values()]
        assert nexts.count(Answered.RESUME) == 1
        assert Answered.WAITING not in nexts or nexts.count(Answered.WAITING) == 1
        book = asyncio.run(DecisionBook.load(SQLiteStore(path), RUN))
        assert not book.unanswered()
