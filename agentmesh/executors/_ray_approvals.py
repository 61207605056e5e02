"""A person's approvals on Ray: a worker's task asks, and the driver's run keeps the question.

Locally a task asks through the run's `DecisionBook`, which reads the answers claimed
in the store and saves a new question there. On Ray the book stays on the driver (the
run has one, and it reports the questions still waiting), and a worker's task gets a
`WorkerBook`: the answers given to that task so far (`answers_for`), shipped with the
dispatch, and a list of the questions it asks, handed back with its outcome. The driver
saves those in the run's book (`keep_asked`) before the coordinator records the task, so
a question is durable before the run reports it, as locally.

A resumed run sends each task the answers claimed for it: the approved call is made on a
worker, claimed first in the store's ledger (the store travels as its connection string),
so a worker killed right after the call does not make it again when the task runs anew;
its recorded result is replayed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from agentmesh._engine._human import DecisionBook
from agentmesh.approvals import Approval, PendingApproval
from agentmesh.checkpoints import CheckpointStore
from agentmesh.scope import RunScope

__all__ = ["WorkerBook", "answers_for", "asked_by", "keep_asked", "worker_book"]


def answers_for(scope: RunScope, task_id: str) -> dict[str, Approval] | None:
    """What a worker's task needs of the run's book: the answers given to it (None: the
    run has no book, so an ask is refused on the worker as it is locally)."""
    book = scope.decisions
    if book is None:
        return None
    return {pending.id: answer for pending, answer in book.given(task_id)}


class WorkerBook(DecisionBook):
    """A worker's view of the run's book: one task's answers, and the questions it asks.

    A question is kept in `asked`, not written: the driver's book saves it (one write,
    in the run's own book, which reports it), before the task's record is saved.
    """

    __slots__ = ("_answers", "asked")

    def __init__(
        self, store: CheckpointStore, run_id: str, answers: Mapping[str, Approval]
    ) -> None:
        super().__init__(store, run_id)
        self._answers = dict(answers)
        self.asked: list[PendingApproval] = []

    def answer(self, decision_id: str) -> Approval | None:
        return self._answers.get(decision_id)

    async def pend(self, pending: PendingApproval) -> None:
        if all(asked.id != pending.id for asked in self.asked):
            self.asked.append(pending)


def worker_book(
    store: CheckpointStore | None, run_id: str, answers: Mapping[str, Approval] | None
) -> WorkerBook | None:
    """The worker's book of a dispatch (None when the run has none, or no store)."""
    if answers is None or store is None:
        return None
    return WorkerBook(store, run_id, answers)


def asked_by(book: DecisionBook | None) -> tuple[PendingApproval, ...]:
    """The questions a worker's task asked (none without a book)."""
    return tuple(book.asked) if isinstance(book, WorkerBook) else ()


async def keep_asked(scope: RunScope, asked: Iterable[PendingApproval]) -> None:
    """Save the questions a worker's task asked in the run's book (and so its store)."""
    book = scope.decisions
    if book is None:
        return
    for pending in asked:
        await book.pend(pending)
