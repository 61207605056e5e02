"""A task's saved progress: `ctx.record_partial` persisted, so a re-run continues from
its pending sources.

Two ways to save, by who makes the progress durable:

* **its own run** (a subagent run alone, a Ray worker's task, `ctx.save_partials()`):
  each snapshot is written as it is recorded, and the subagent run returns only once
  the newest is committed;
* **the coordinator's run** (the run's own store, which the coordinator flushes before it
  reports): the newest snapshot is written behind, at the event loop's next turn, and
  the subagent run does not wait for it. A task that succeeds before that turn (most
  quick tasks) has its progress carried by its record instead (`SavedProgress.superseded`):
  one row, committed with the record, and read back with any row when the run is run
  again under its id.

Snapshots are written with secrets masked, as in logs and envelopes: a store outlives
the run, and resumed progress carries the masked text.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentmesh._engine._partials import PartialRecorder, merge_partials
from agentmesh._engine._saved_progress import PARTIALS_KEY, SavedProgress
from agentmesh._engine._writes import writes_behind
from agentmesh._redaction import redact_data
from agentmesh.checkpoints import CheckpointStore
from agentmesh.envelope import PartialResults

__all__ = ["ProgressSaver"]


class ProgressSaver:
    """Persists a task's partial results in the background as they are recorded.

    `record_partial` is synchronous, so saving is scheduled, not awaited: writes happen in
    order, only the newest snapshot is written when several queue up, and `flush` waits
    for the last one. A store with group commit takes each snapshot into its next batch
    (no task of our own to drain them).
    """

    __slots__ = (
        "_behind",
        "_due",
        "_known",
        "_latest",
        "_partials",
        "_queued",
        "_task",
        "log",
        "run_id",
        "stage",
        "store",
    )

    def __init__(
        self,
        store: CheckpointStore,
        run_id: str,
        stage: str,
        log: Any,
        known: SavedProgress | None = None,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.stage = stage
        self.log = log
        # The run's `SavedProgress` in this store (None: unknown): whether to read at all,
        # and whether the run commits what its tasks queue (`run_commits`).
        self._known = known
        self._latest: dict[str, Any] | None = None  # JSON data, secrets masked
        self._task: asyncio.Task[None] | None = None
        self._queued: asyncio.Future[None] | None = None
        # Written behind when the run commits what its tasks queue: the progress to
        # snapshot at the loop's next turn, and that turn.
        self._behind = known is not None and known.run_commits and writes_behind(store) is not None
        self._partials: PartialRecorder | None = None
        self._due = False

    def may_hold(self) -> bool:
        """Whether the store may hold this task's progress (False: known not to)."""
        known = self._known
        return known is None or self.stage in known

    async def load(self) -> PartialResults | None:
        """The progress saved so far: its own row, and what the task's record holds (a
        record written before the progress was, `SavedProgress.superseded`), merged."""
        known = self._known
        if known is None:
            return await self.store.get(self.run_id, self.stage, PARTIALS_KEY, model=PartialResults)
        earlier = known.pending(self.stage)
        if earlier is not None and earlier is not self:
            await earlier.flush()  # an earlier dispatch of the task in this run: committed first
        row = None
        if known.has_row(self.stage):
            row = await self.store.get(self.run_id, self.stage, PARTIALS_KEY, model=PartialResults)
        folded = known.folded(self.stage)
        if folded is None:
            return row
        carried = {key: value for key, value in folded.items() if key != "subagent"}
        return merge_partials(row, PartialResults.model_validate(carried))

    def schedule(self, partials: PartialRecorder) -> None:
        """Save the task's progress so far (its newest snapshot), without waiting."""
        known = self._known
        if self._behind and known is not None:
            known.note_stage(self.stage)
            self._partials = partials
            if not self._due:
                # Several records in one step make one snapshot, and a task that succeeds
                # by the next turn makes none: its record carries it (`take`).
                self._due = True
                known.waiting(self.stage, self)
            return
        snapshot = self._snapshot(partials)
        if snapshot is None:
            return
        if known is not None:
            known.note_stage(self.stage)
        self._write(snapshot)

    def take(self) -> dict[str, Any] | None:
        """The newest progress not queued yet, now; it is then never queued (the task's
        record carries it). None: nothing waits."""
        if not self._due:
            return None
        self._due = False
        partials, self._partials = self._partials, None
        # Masked with the record that carries it.
        return None if partials is None else self._at_rest(partials)

    def _at_rest(self, partials: PartialRecorder) -> dict[str, Any] | None:
        """The progress as JSON data; None: nothing to save."""
        try:
            return partials.at_rest()
        except Exception as exc:  # a finding that is not JSON: the task goes on unsaved
            self.log.warning("partials_not_saved", error=f"{type(exc).__name__}: {exc}")
            return None

    def _snapshot(self, partials: PartialRecorder) -> dict[str, Any] | None:
        """The progress as JSON data with secrets masked; None: nothing to save."""
        snapshot = self._at_rest(partials)
        return None if snapshot is None else redact_data(snapshot)

    def write_behind(self) -> None:
        """The loop's turn after a record: queue the newest snapshot for the next batch."""
        if not self._due:
            return  # taken by the task's record
        self._due = False
        partials, self._partials = self._partials, None
        snapshot = None if partials is None else self._snapshot(partials)
        if snapshot is None:
            self._committed()
        else:
            self._write(snapshot)

    def _write(self, snapshot: dict[str, Any]) -> None:
        """Queue `snapshot` for the store's next batch, or put it in our own task."""
        if self._task is None and self._queue(snapshot):
            return
        self._latest = snapshot
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain())

    def _queue(self, snapshot: dict[str, Any]) -> bool:
        """Hand `snapshot` to the store's next batch; False when the store has none."""
        behind = writes_behind(self.store)
        if behind is None:
            return False
        try:
            queued = behind.put_queued(self.run_id, self.stage, PARTIALS_KEY, snapshot)
        except Exception as exc:
            self.log.warning("partials_not_saved", error=f"{type(exc).__name__}: {exc}")
            return True
        if queued is None:
            return False
        self._queued = queued
        if self._behind:
            # Nobody may await it (the subagent run returned): it logs its own failure.
            queued.add_done_callback(self._saved)
        return True

    def _saved(self, queued: asyncio.Future[None]) -> None:
        if not queued.cancelled():
            exc = queued.exception()
            if exc is not None:
                self.log.warning("partials_not_saved", error=f"{type(exc).__name__}: {exc}")
        if self._queued is queued:
            self._committed()

    def _committed(self) -> None:
        """Nothing of the task's progress waits now, unless a newer save does."""
        idle = not self._due and (self._task is None or self._task.done())
        if idle and self._known is not None:
            self._known.written(self.stage, self)

    async def flush(self, *, durable: bool = True) -> None:
        """Wait until the newest snapshot is saved.

        `durable=False` (the end of a subagent run): progress written behind is left to
        the coordinator's run, which commits it before it reports.
        """
        if self._behind and not durable:
            return
        self.write_behind()
        if self._task is not None:
            await self._task
        queued = self._queued
        if queued is None:
            return
        try:
            await queued  # the newest snapshot: the batches commit in order
        except Exception as exc:
            if not self._behind:  # written behind, it logs its own failure (`_saved`)
                self.log.warning("partials_not_saved", error=f"{type(exc).__name__}: {exc}")
        else:
            self.log.debug("checkpoint_saved", key=PARTIALS_KEY)
        if self._queued is queued:
            self._queued = None

    async def _drain(self) -> None:
        while self._latest is not None:
            snapshot, self._latest = self._latest, None
            try:
                await self.store.put(self.run_id, self.stage, PARTIALS_KEY, snapshot)
            except Exception as exc:
                self.log.warning("partials_not_saved", error=f"{type(exc).__name__}: {exc}")
            else:
                self.log.debug(
                    "checkpoint_saved",
                    key=PARTIALS_KEY,
                    completed=len(snapshot["completed"]),
                    pending=len(snapshot["pending"]),
                )
        if self._behind and not self._due and self._known is not None:
            self._known.written(self.stage, self)
