"""What a run knows of the progress its tasks saved: listed once, not read per task."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol

from agentmesh.checkpoints import CheckpointStore

__all__ = ["FOLDED_KEY", "PARTIALS_KEY", "Pending", "SavedProgress", "namespace"]

PARTIALS_KEY: Final = "partials"
"""The key of a task's saved progress, in the task's namespace."""

FOLDED_KEY: Final = "progress"
"""The key of a task record's own copy of its task's progress (`SavedProgress.superseded`)."""


class Pending(Protocol):
    """A task's progress written behind, not committed yet (`ProgressSaver`)."""

    def take(self) -> dict[str, Any] | None:
        """The progress not queued yet, now (then never queued): JSON data, or None."""
        ...

    def write_behind(self) -> None:
        """Queue the progress not queued yet (nothing if it was taken)."""
        ...

    async def flush(self, *, durable: bool = True) -> None:
        """Wait until the newest progress is committed."""
        ...


def namespace(subagent: str, task_id: str) -> str:
    """Where a task's checkpoints live in its run: the stage `<subagent>/<task id>`."""
    return f"{subagent}/{task_id}"


class SavedProgress:
    """Which tasks of a run hold saved progress in the run's store.

    Listed once when the run starts (`listed`), then noted as its tasks save more: a
    task not among them starts fresh without reading the store, so a new run of 10,000
    checkpointing tasks makes one listing rather than 10,000 reads. A task is noted when
    its first save is scheduled, before it commits: at worst one read too many.

    `run_commits`: the run commits what its tasks queue before it reports (a
    coordinator's run, which flushes its store), so a task's progress is written behind
    at the loop's next turn rather than awaited; a task whose record is queued first
    folds its progress into the record instead (`superseded`), one row rather than two.
    """

    __slots__ = ("_due", "_folded", "_stages", "_waiting", "run_commits")

    def __init__(
        self,
        stages: Iterable[str] = (),
        *,
        run_commits: bool = False,
        folded: Mapping[str, dict[str, Any]] | None = None,
    ) -> None:
        self._stages = set(stages)  # the tasks whose progress has a row of its own
        self.run_commits = run_commits
        # Progress an earlier run folded into its tasks' records, by task namespace.
        self._folded = {} if folded is None else dict(folded)
        # The tasks whose newest progress is written behind and not committed yet, and
        # those of them to queue at the loop's next turn (one turn for all of them).
        self._waiting: dict[str, Pending] = {}
        self._due: list[Pending] = []

    @classmethod
    async def listed(cls, store: CheckpointStore, run_id: str, records: str) -> SavedProgress:
        """What `store` holds of `run_id`'s progress now: one listing of the run (by its
        coordinator, which commits what its tasks queue before it reports). `records`:
        the stage of the run's task records, which may hold their task's progress."""
        stages: list[str] = []
        folded: dict[str, dict[str, Any]] = {}
        for entry in await store.list(run_id):
            if entry.key == PARTIALS_KEY:
                stages.append(entry.stage)
            elif entry.stage == records and isinstance(entry.value, dict):
                progress = entry.value.get(FOLDED_KEY)
                subagent = progress.get("subagent") if isinstance(progress, dict) else None
                if isinstance(progress, dict) and isinstance(subagent, str):
                    folded[namespace(subagent, entry.key.removeprefix("record/"))] = progress
        return cls(stages, run_commits=True, folded=folded)

    @classmethod
    def of_task(cls, subagent: str, task_id: str, holds: bool | None) -> SavedProgress | None:
        """What the run knows of one task (what a Ray worker is told): that it may hold
        saved progress, that it holds none, or (None) nothing."""
        if holds is None:
            return None
        return cls([namespace(subagent, task_id)] if holds else ())

    def holds(self, subagent: str, task_id: str) -> bool:
        """Whether the task may hold saved progress (then its run reads it)."""
        return namespace(subagent, task_id) in self

    def note(self, subagent: str, task_id: str) -> None:
        """The task saves progress from now on: a later run of it in this run reads it."""
        self._stages.add(namespace(subagent, task_id))

    def __contains__(self, stage: object) -> bool:
        return stage in self._stages or stage in self._folded

    def has_row(self, stage: str) -> bool:
        """Whether the task's progress may have a row of its own (else: read nothing)."""
        return stage in self._stages

    def note_stage(self, stage: str) -> None:
        """Progress is saved under `stage` (a task's namespace) from now on."""
        self._stages.add(stage)

    def folded(self, stage: str) -> dict[str, Any] | None:
        """The progress an earlier run's record of the task holds (taken: read once)."""
        return self._folded.pop(stage, None)

    def waiting(self, stage: str, pending: Pending) -> None:
        """A task's progress is to be written behind, at the loop's next turn."""
        self._waiting[stage] = pending
        self._due.append(pending)
        if len(self._due) == 1:
            asyncio.get_running_loop().call_soon(self._write_due)

    def _write_due(self) -> None:
        due, self._due = self._due, []
        for pending in due:
            pending.write_behind()

    def written(self, stage: str, pending: Pending) -> None:
        """`pending` is committed (unless a later save of the task waits)."""
        if self._waiting.get(stage) is pending:
            del self._waiting[stage]

    async def committed(self) -> None:
        """Wait until every task's progress written behind is committed (the run's own
        writes where the store could not queue them too)."""
        waiting, self._waiting = self._waiting, {}
        for pending in waiting.values():
            await pending.flush()

    def pending(self, stage: str) -> Pending | None:
        """The task's progress written behind and not committed yet: what a later
        dispatch of the task in this run waits for before it reads it."""
        return self._waiting.get(stage)

    def superseded(self, subagent: str, task_id: str) -> dict[str, Any] | None:
        """The task's record is about to be queued: its progress not queued yet, for the
        record to carry (then never queued on its own), or None.

        Read back by `listed` when the run is run again under its id.
        """
        stage = namespace(subagent, task_id)
        pending = self._waiting.pop(stage, None)
        # The task is done in this run: nothing will read its progress again here (a run
        # of 100,000 tasks would keep every name).
        self._stages.discard(stage)
        progress = None if pending is None else pending.take()
        return None if progress is None else {"subagent": subagent, **progress}
