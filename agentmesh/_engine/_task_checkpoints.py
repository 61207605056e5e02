"""A task's checkpoints: its side-effect ledger, and its progress saved and restored."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentmesh._engine._ledger import ToolLedger
from agentmesh._engine._partials import PartialRecorder
from agentmesh._engine._progress import ProgressSaver
from agentmesh._engine._saved_progress import namespace
from agentmesh.checkpoints import CheckpointStore

if TYPE_CHECKING:
    from agentmesh.scope import RunScope

__all__ = ["open_ledger", "open_progress", "restore_partials"]


def open_ledger(
    store: CheckpointStore, run_id: str, subagent: str, task_id: str, log: Any
) -> ToolLedger:
    """The task's side-effect ledger in `store`."""
    return ToolLedger(store, run_id, namespace(subagent, task_id), log)


def open_progress(
    store: CheckpointStore | None, scope: RunScope, subagent: str, task_id: str, log: Any
) -> ProgressSaver | None:
    """The task's progress saver in `store` (None without a store)."""
    if store is None:
        return None
    # What the run knows of its saved progress holds for the run's own store only.
    known = scope.saved_progress if store is scope.store else None
    return ProgressSaver(store, scope.run_id, namespace(subagent, task_id), log, known)


async def restore_partials(saver: ProgressSaver, partials: PartialRecorder, log: Any) -> bool:
    """Load into `partials` the progress a previous run saved; True when there was some.

    A store that cannot be read is logged and the task starts over: redoing work is
    safe, the ledger still refuses to repeat a side effect it cannot rule out.
    """
    if not saver.may_hold():
        return False  # the run listed its saved progress: this task has none
    try:
        saved = await saver.load()
    except Exception as exc:
        log.warning("partials_not_restored", error=f"{type(exc).__name__}: {exc}")
        return False
    if saved is None:
        return False
    partials.record(saved.findings, completed=saved.completed, pending=saved.pending)
    log.info("partials_restored", completed=saved.completed, pending=saved.pending)
    return True
