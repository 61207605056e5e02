"""`CheckpointError`: the checkpoint store cannot be used as it is."""

from __future__ import annotations

from pathlib import Path

from agentmesh.errors import AgentmeshError

__all__ = ["CheckpointError", "damaged"]


class CheckpointError(AgentmeshError):
    """A checkpoint store or record cannot be used: a foreign or corrupt file, a schema
    version this agentmesh does not read, a record that no longer fits its type, or a
    failed read or write.

    A runtime failure, not misuse of the API (that is `UsageError`): the code may be
    right and the file on disk wrong. `path` names the file when there is one; it is
    never overwritten. For one damaged record, `store` (its repr), `run_id`, `stage`
    and `key` say which.
    """

    def __init__(
        self,
        message: str,
        *,
        path: Path | None = None,
        store: str | None = None,
        run_id: str | None = None,
        stage: str | None = None,
        key: str | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.store = store
        self.run_id = run_id
        self.stage = stage
        self.key = key


def damaged(store: object, run_id: str, stage: str, key: str, why: str) -> CheckpointError:
    """The error for one stored record that cannot be read: which store, run and key, and why."""
    where = repr(store)
    path = getattr(store, "path", None)
    return CheckpointError(
        f"checkpoint {run_id}/{stage}/{key} in {where} cannot be read: {why}",
        path=path if isinstance(path, Path) else None,
        store=where,
        run_id=run_id,
        stage=stage,
        key=key,
    )
