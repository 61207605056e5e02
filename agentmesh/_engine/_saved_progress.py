"""What a run knows of the progress its tasks saved: listed once, not read per task."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from agentmesh.checkpoints import CheckpointStore

__all__ = ["PARTIALS_KEY", "SavedProgress", "namespace"]

PARTIALS_KEY: Final = "partials"
"""The key of a task's saved progress, in the task's namespace."""


def namespace(subagent: str, task_id: str) -> str:
    """Where a task's checkpoints live in its run: the stage `<subagent>/<task id>`."""
    return f"{subagent}/{task_id}"


class SavedProgress:
    """Which tasks of a run hold saved progress in the run's store.

    Listed once when the run starts (`listed`), then noted as its tasks save more: a
    task not among them starts fresh without reading the store, so a new run of 10,000
    checkpointing tasks makes one listing rather than 10,000 reads. A task is noted when
    its first save is scheduled, before it commits: at worst one read too many.
    """

    __slots__ = ("_stages",)

    def __init__(self, stages: Iterable[str] = ()) -> None:
        self._stages = set(stages)

    @classmethod
    async def listed(cls, store: CheckpointStore, run_id: str) -> SavedProgress:
        """What `store` holds of `run_id`'s progress now: one listing of the run."""
        saved = await store.list(run_id)
        return cls(entry.stage for entry in saved if entry.key == PARTIALS_KEY)

    @classmethod
    def of_task(cls, subagent: str, task_id: str, holds: bool | None) -> SavedProgress | None:
        """What the run knows of one task (what a Ray worker is told): that it may hold
        saved progress, that it holds none, or (None) nothing."""
        if holds is None:
            return None
        return cls([namespace(subagent, task_id)] if holds else ())

    def holds(self, subagent: str, task_id: str) -> bool:
        """Whether the task may hold saved progress (then its run reads it)."""
        return namespace(subagent, task_id) in self._stages

    def note(self, subagent: str, task_id: str) -> None:
        """The task saves progress from now on: a later run of it in this run reads it."""
        self._stages.add(namespace(subagent, task_id))

    def __contains__(self, stage: object) -> bool:
        return stage in self._stages

    def note_stage(self, stage: str) -> None:
        """Progress is saved under `stage` (a task's namespace) from now on."""
        self._stages.add(stage)
