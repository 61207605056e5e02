"""The console that was given the application's coordinator resumes runs itself.

Once a person's answer leaves a run with no question unanswered, the run goes on in
the console's process (`coordinator.resume(run_id)`, with the answers the store holds).
Which console resumes is claimed in the store (compare-and-set, keyed by the run's
answered questions), so of several consoles on one store exactly one resumes a run for
the same answers; a resume that fails is logged, and the run stays answered for the
application to resume.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Final

from agentmesh._engine._ledger import digest
from agentmesh._logging import get_logger
from agentmesh.checkpoints import CheckpointStore
from agentmesh.console._runs import RunStatus, load_run

if TYPE_CHECKING:
    from agentmesh.coordinator import Coordinator

__all__ = ["Resumer"]

# Where the consoles claim a resume: beside the run's own checkpoints, under their own stage.
_STAGE: Final = "agentmesh.console"


class Resumer:
    """Resumes the runs of `coordinator` once they are answered, in the background."""

    def __init__(self, coordinator: Coordinator, store: CheckpointStore) -> None:
        self.coordinator = coordinator
        self.store = store
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def soon(self, run_id: str) -> None:
        """Resume `run_id` in the background if nothing of it waits for a person."""
        task = asyncio.get_running_loop().create_task(self._go_on(run_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait(self) -> None:
        """Let the resumes under way finish (at shutdown)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _go_on(self, run_id: str) -> None:
        lock = self._locks.setdefault(run_id, asyncio.Lock())
        try:
            async with lock:
                await self._resume_once(run_id)
        finally:
            if not lock.locked():
                self._locks.pop(run_id, None)

    async def _resume_once(self, run_id: str) -> None:
        view = await load_run(self.store, run_id)
        if view is None or view.summary.status is not RunStatus.ANSWERED:
            return  # still waiting for a person, or resumed already
        answered = sorted(state.pending.id for state in view.approvals)
        key = f"resume/{digest(answered)}"
        if await self.store.claim(run_id, _STAGE, key, {"at": time.time()}) is not None:
            return  # another console resumes the run for these answers
        try:
            report = await self.coordinator.resume(run_id)
        except Exception:
            get_logger(component="console").exception("console_resume_failed", run_id=run_id)
            return
        get_logger(component="console").info(
            "console_resumed", run_id=run_id, pending=len(report.pending_approvals)
        )
