"""What `--resume RUN_ID` needs besides the searches' own checkpoints: the run's spec.

The `Coordinator` hands its checkpoint store to every search subagent, and each one
(declared with `checkpoint=True`) saves its progress there under the run id as it goes.
A rerun with the same run id and the same tasks continues from that progress. The tasks
come from the plan and the sources, so the run saves those too (its `RunSpec`), under
the same run id: the run id alone is then enough to rerun it.
"""

from __future__ import annotations

import uuid

from agentmesh.checkpoints import CheckpointStore

from .options import RunSpec

__all__ = ["load_spec", "new_run_id", "save_spec"]

# Beside the subagents' own stages ("<source>/<task id>") in the run's checkpoints.
STAGE = "research_agent"
KEY = "spec"


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


async def save_spec(store: CheckpointStore, run_id: str, spec: RunSpec) -> None:
    await store.put(run_id, STAGE, KEY, spec)


async def load_spec(store: CheckpointStore, run_id: str) -> RunSpec | None:
    """The spec run `run_id` was started with, or None when the store has no such run."""
    return await store.get(run_id, STAGE, KEY, model=RunSpec)
