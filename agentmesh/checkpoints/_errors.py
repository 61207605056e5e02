"""`CheckpointError`: the checkpoint store cannot be used as it is."""

from __future__ import annotations

from pathlib import Path

__all__ = ["CheckpointError"]


class CheckpointError(Exception):
    """A checkpoint store or record cannot be used: a foreign or corrupt file, a schema
    version this agentmesh does not read, a record that no longer fits its type, or a
    failed read or write.

    A runtime failure, not misuse of the API (that is `UsageError`): the code may be
    right and the file on disk wrong. `path` names the file when there is one; it is
    never overwritten.
    """

    def __init__(self, message: str, *, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path
